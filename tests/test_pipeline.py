"""The CLI and the pipeline YAML runner."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from curate.cli import app
from curate.pipeline import PipelineError, load_pipeline

runner = CliRunner()


def test_every_command_has_help():
    for cmd in ("mine", "dedup", "diversify", "measure", "rank", "export", "run"):
        result = runner.invoke(app, [cmd, "--help"])
        assert result.exit_code == 0 and "--out" in result.output, cmd


def test_bad_input_is_one_clear_line(tmp_path: Path):
    result = runner.invoke(app, ["dedup", "--out", str(tmp_path), "--kernelbench", "none"])
    assert result.exit_code == 2
    assert "error: dedup: no stage output under" in result.output
    bad = tmp_path / "m.yaml"
    bad.write_text("sources:\n  - {kind: ftp, name: x}\n")
    result = runner.invoke(app, ["mine", str(bad), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "error:" in result.output and "kind must be one of" in result.output


def test_pipeline_yaml_is_checked(tmp_path: Path):
    p = tmp_path / "p.yaml"
    p.write_text("mine: {manifest: m.yaml}\nmeasur: {}\n")
    with pytest.raises(PipelineError, match="unknown stages"):
        load_pipeline(p)
    p.write_text("export: {name: x}\nmine: {manifest: m.yaml}\ndedup:\n")
    assert list(load_pipeline(p)) == ["mine", "dedup", "export"]  # pipeline order, not file order
    p.write_text("dedup: {}\n")
    result = runner.invoke(app, ["run", str(p), "--out", str(tmp_path / "o"), "--start", "rank"])
    assert result.exit_code == 2 and "is not in" in result.output


def test_default_pipeline_names_real_stages():
    repo = Path(__file__).resolve().parents[1]
    stages = load_pipeline(repo / "pipelines" / "default.yaml")
    assert list(stages) == ["mine", "dedup", "diversify", "measure", "rank", "export"]
    assert (repo / stages["mine"]["manifest"]).is_file()


def test_whole_pipeline_on_torch_source(tmp_path: Path):
    """`curate run` over real torch source, every stage, accountability in every stats.json."""
    import json

    import datasets

    manifest = tmp_path / "m.yaml"
    manifest.write_text("sources:\n  - kind: package\n    name: torch\n"
                        "    include: [torch/nn/modules/pixelshuffle.py, torch/nn/modules/flatten.py,\n"
                        "              torch/nn/modules/channelshuffle.py]\n")
    pipe = tmp_path / "p.yaml"
    pipe.write_text(f"mine: {{manifest: {manifest}, timeout_s: 30}}\n"
                    "dedup: {kernelbench: none}\n"
                    "diversify: {variants: 3}\n"
                    "measure: {trials: 5, budget_s: 0.05, workers: 2}\n"
                    "rank: {solver: inductor, max_problems: 0}\n"
                    "export: {name: tiny}\n")
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(pipe), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for stage in ("mine", "dedup", "diversify", "measure", "rank", "export"):
        stats = json.loads((out / stage / "stats.json").read_text())
        assert stats["kept"] + stats["rejected"] == stats["in"], stage
    assert json.loads((out / "mine" / "stats.json").read_text())["kept"] >= 4
    dd = datasets.load_from_disk(str(out / "export" / "hf"))
    assert sum(dd[s].num_rows for s in dd) == json.loads((out / "export" / "stats.json").read_text())["kept"]
    assert json.loads((out / "pipeline.json").read_text())["stages"][0]["stage"] == "mine"
    # the run ends by saying where the export is and what it holds
    rows = {s: dd[s].num_rows for s in dd}
    assert f"export: {(out / 'export').resolve()}" in result.output
    assert "rows per split: " + ", ".join(f"{s}: {rows[s]}" for s in ("train", "validation", "test")) in result.output
    assert "rows per KernelBench level: " in result.output
    first = next(dd[s][0] for s in ("train", "validation", "test") if dd[s].num_rows)
    assert f"first example: {first['name']} (prompt {first['prompt_tokens']} tokens, {len(first['prompt'])} characters)" \
        in result.output
