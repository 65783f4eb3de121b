"""The stage harness: options declared once per stage (a dataclass) make the stage's Python
signature, its CLI command and the pipeline-YAML check; the three cannot drift apart."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from curate.cli import app
from curate.harness.options import STAGE_OPTIONS, OptionError, check_options, default, fields, options_class
from curate.pipeline import PipelineError, load_pipeline

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _click_command(stage: str):
    return typer.main.get_command(app).commands[stage]


@pytest.mark.parametrize("stage", list(STAGE_OPTIONS))
def test_run_signature_is_the_options_dataclass(stage: str):
    run = importlib.import_module(f"curate.{stage}").run
    params = inspect.signature(run).parameters
    for f in fields(options_class(stage)):
        assert f.name in params, (stage, f.name)
        want = inspect.Parameter.empty if default(f) is dataclasses.MISSING else default(f)
        assert params[f.name].default == want, (stage, f.name)
        assert f.metadata.get("help"), (stage, f.name)
    assert "out" in params and ("source" in params) == (stage != "mine")


@pytest.mark.parametrize("stage", list(STAGE_OPTIONS))
def test_cli_command_has_every_option_with_its_default(stage: str):
    cmd = _click_command(stage)
    by_name = {p.name: p for p in cmd.params}
    for f in fields(options_class(stage)):
        if not f.metadata.get("cli", True):
            assert f.name not in by_name
            continue
        p = by_name[f.name]
        if f.metadata.get("sep"):
            assert p.default == ""
        elif not f.metadata.get("argument"):
            d = default(f)
            assert (tuple(p.default) if isinstance(p.default, (list, tuple)) else p.default) == d, (stage, f.name)


def test_cli_offers_the_options_it_had_drifted_from():
    """rank's verifier settings and diversify's planning memory were reachable from Python and
    the pipeline YAML only."""
    rank = {o for p in _click_command("rank").params for o in p.opts}
    assert {"--device", "--workers", "--n-trials", "--seed"} <= rank
    assert "--mem-mb" in {o for p in _click_command("diversify").params for o in p.opts}
    # the CLI's existing names stay: documented flags keep working
    assert "--push-to-hub" in {o for p in _click_command("export").params for o in p.opts}
    assert "--from" in {o for p in _click_command("dedup").params for o in p.opts}
    assert "--token" not in {o for p in _click_command("export").params for o in p.opts}


def test_flags_named_in_readme_and_docs_exist():
    """Every ``curate <stage> ... --flag`` in README.md and docs/ is a flag of that command."""
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    commands = typer.main.get_command(app).commands
    seen = 0
    for path in texts:
        for m in re.finditer(r"curate (mine|dedup|diversify|measure|rank|export|run)\b([^`\n]*)",
                             path.read_text()):
            opts = {o for p in commands[m.group(1)].params for o in p.opts + p.secondary_opts}
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(2)):
                assert flag in opts, f"{path.name}: curate {m.group(1)} {flag}"
                seen += 1
    assert seen >= 5


def test_misspelt_option_names_the_closest_and_all_allowed():
    with pytest.raises(OptionError) as exc:
        check_options("diversify", {"timeout": 30})
    msg = str(exc.value)
    assert "unknown option 'timeout'" in msg and "did you mean 'timeout_s'?" in msg
    assert "diversify takes: variants, band_ms," in msg
    with pytest.raises(OptionError, match="did you mean 'threshold'"):
        check_options("dedup", {"treshold": 0.8})


@pytest.mark.parametrize("stage,values,expect", [
    ("dedup", {"threshold": "high"}, "option 'threshold' must be float, got str 'high'"),
    ("dedup", {"num_perm": 12.5}, "option 'num_perm' must be int"),
    ("dedup", {"parse_check": "yes"}, "option 'parse_check' must be bool"),
    ("measure", {"trials": True}, "option 'trials' must be int"),
    ("diversify", {"band_ms": [0.5]}, "must be a list of 2 (float, float)"),
    ("diversify", {"band_ms": 5}, "must be a list of 2"),
    ("export", {"name": 7}, "option 'name' must be str"),
    ("mine", {"timeout_s": 30}, "missing option manifest"),
])
def test_mistyped_values_are_refused(stage, values, expect):
    with pytest.raises(OptionError) as exc:
        check_options(stage, values)
    assert expect in str(exc.value)


def test_values_pass_through_unchanged():
    """The YAML's values reach the stage as written (an int for a float stays an int, so
    journal fingerprints and stats do not change); a comma-separated list option is split."""
    assert check_options("diversify", {"band_ms": [0.5, 10], "timeout_s": 30, "workers": None}) == \
        {"band_ms": [0.5, 10], "timeout_s": 30, "workers": None}
    assert check_options("mine", {"manifest": "m.yaml", "retry": "constructor_failed, all"})["retry"] == \
        ["constructor_failed", "all"]
    assert check_options("mine", {"manifest": "m.yaml", "retry": ["all"]})["retry"] == ["all"]


def test_pipeline_yaml_with_a_misspelt_option_is_one_error_line(tmp_path: Path):
    p = tmp_path / "p.yaml"
    p.write_text("diversify:\n  timeout: 30\n")
    result = runner.invoke(app, ["run", str(p), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "did you mean 'timeout_s'?" in lines[0] and "mem_mb" in lines[0]
    p.write_text("measure:\n  trials: many\n")
    with pytest.raises(PipelineError, match="option 'trials' must be int, got str 'many'"):
        load_pipeline(p)


def test_default_pipeline_checks():
    stages = load_pipeline(REPO / "pipelines" / "default.yaml")
    assert stages["diversify"]["band_ms"] == [0.5, 10]


def test_python_api_refuses_an_unknown_option_with_a_suggestion(tmp_path: Path):
    from curate.dedup import run

    with pytest.raises(TypeError, match="unknown option 'treshold' \\(did you mean 'threshold'\\?\\)"):
        run(tmp_path, treshold=0.9)


def test_a_stage_work_function_must_take_its_declared_options():
    from curate.harness.stage import stage

    with pytest.raises(TypeError, match="DedupOptions declares"):
        @stage("dedup")
        def run(sr, threshold, num_perm):  # the rest of dedup's options forgotten
            return {}


def _export_shaped(body):
    """A work function with export's option names (``@stage`` checks them) that runs ``body(sr)``."""
    def work(sr, **_):
        return body(sr)

    names = [f.name for f in fields(options_class("export"))]
    P = inspect.Parameter
    work.__signature__ = inspect.Signature([P("sr", P.POSITIONAL_OR_KEYWORD)]
                                           + [P(n, P.KEYWORD_ONLY) for n in names])
    return work


def test_journal_survives_a_failed_run_resumes_and_goes_with_the_tables(tmp_path: Path):
    """The harness's journal: a run that fails part way keeps it, the rerun skips what it
    holds (``resumed`` in stats.json), and it is removed once the tables are written. The
    work is dispatched with ``sr.map`` on the stage's executor (two local processes), which
    the harness closes when the stage ends, failed or not."""
    import json
    import math

    import polars as pl

    from curate.harness.stage import StageRun, stage
    from curate.table import Rejections, read_problems, write_stage

    items = [float(x) for x in range(10)]
    df = pl.DataFrame({"problem_id": [f"p{i}" for i in range(10)], "code": ["x = 1\n"] * 10, "x": items})
    write_stage(tmp_path, "rank", df, Rejections("rank").frame(like=df), df.height, 0.0)
    seen: list[StageRun] = []
    computed: list[float] = []

    def body(sr: StageRun, fail_after: int | None):
        seen.append(sr)
        journal = sr.journal({"fn": "sqrt"})
        rows = read_problems(sr.input).to_dicts()
        todo = [r for r in rows if r["problem_id"] not in journal]
        for n, (r, y) in enumerate(zip(todo, sr.map(math.sqrt, [r["x"] for r in todo]))):
            if fail_after is not None and n == fail_after:
                raise RuntimeError("killed part way")
            journal.add(r["problem_id"], y)
            computed.append(r["x"])
        kept = pl.DataFrame([{**r, "y": journal.get(r["problem_id"])} for r in rows])
        return sr.write(kept, Rejections("export").frame(like=kept), len(rows))

    failing = stage("export")(_export_shaped(lambda sr: body(sr, 4)))
    with pytest.raises(RuntimeError, match="killed part way"):
        failing(tmp_path, workers=2)
    path = tmp_path / "export" / "_journal.jsonl"
    assert path.is_file() and len(path.read_text().splitlines()) == 1 + 4
    assert seen[0]._executor is None  # closed although the stage failed

    stats = stage("export")(_export_shaped(lambda sr: body(sr, None)))(tmp_path, workers=2)
    assert stats["resumed"] == 4 and stats["kept"] == 10
    assert sorted(computed) == items  # each item once over both runs
    assert not path.exists()
    got = read_problems(tmp_path / "export")
    assert got["y"].to_list() == [math.sqrt(x) for x in items]
    assert json.loads((tmp_path / "export" / "stats.json").read_text())["resumed"] == 4


def test_journal_kept_as_a_cache_and_one_per_run(tmp_path: Path):
    """``keep_as``: the finished journal becomes a cache the next run starts from (mine's
    ``_synthesized.jsonl``); a second journal with other settings in one run is refused."""
    import polars as pl

    from curate.harness.stage import StageRun
    from curate.table import Rejections

    empty = pl.DataFrame({"problem_id": ["a"]})
    sr = StageRun("mine", tmp_path)
    j = sr.journal({"v": 1}, keep_as="_done.jsonl")
    assert sr.journal({"v": 1}, keep_as="_done.jsonl") is j
    with pytest.raises(ValueError, match="one journal"):
        sr.journal({"v": 2})
    j.add("a", 1)
    sr.write(empty, Rejections("mine").frame(like=empty), 1)
    assert (tmp_path / "mine" / "_done.jsonl").is_file() and not (tmp_path / "mine" / "_journal.jsonl").exists()
    again = StageRun("mine", tmp_path).journal({"v": 1}, keep_as="_done.jsonl")
    assert again.resumed == 1 and again.get("a") == 1
