"""The mine stage on real package source and on broken or hostile code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
import torch

from curate.mine import run
from curate.mine.closure import Resolver
from curate.mine.sources import ManifestError, load_manifest, resolve
from curate.mine.synthesize import synthesis_version
from curate.table import read_problems, read_rejected, read_stats


def test_torch_nn_modules_are_mined_with_provenance(mined_run: Path):
    stats = read_stats(mined_run / "mine")
    kept = read_problems(mined_run / "mine")
    rejected = read_rejected(mined_run / "mine")
    assert stats["kept"] + stats["rejected"] == stats["in"]
    assert kept.height == stats["kept"] and rejected.height == stats["rejected"]
    assert kept.height >= 25  # activation.py alone defines ~30 modules with a forward
    names = set(kept["name"])
    assert {"torch.ReLU", "torch.Linear", "torch.GELU", "torch.PixelShuffle"} <= names
    src = kept.filter(pl.col("name") == "torch.Linear")["source"][0]
    assert src["version"] == torch.__version__
    assert src["path"] == "torch/nn/modules/linear.py" and src["class_name"] == "Linear"
    assert src["kind"] == "package"
    assert kept["problem_id"].n_unique() == kept.height
    assert set(rejected["reject_reason"]) <= {"no_forward", "constructor_failed", "no_runnable_inputs",
                                              "abstract", "load_error", "timeout", "memory", "crash",
                                              "error", "final_check_failed", "unserialisable_args",
                                              "not_a_module"}


def test_mined_linear_uses_a_realistic_shape(mined_run: Path):
    kept = read_problems(mined_run / "mine")
    import json

    spec = json.loads(kept.filter(pl.col("name") == "torch.Linear")["input_spec"][0])
    assert spec[0]["kind"] == "tensor"
    assert spec[0]["shape"][-1] >= 16 and spec[0]["shape"][0] >= 2  # not a 4x4 toy


def test_mined_code_runs_alone_in_a_fresh_interpreter(mined_run: Path):
    kept = read_problems(mined_run / "mine").sort("problem_id").head(4)
    for code in kept["code"]:
        prog = code + "\nm = Model(*get_init_inputs())\nout = m(*get_inputs())\nprint('OK')\n"
        p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and p.stdout.strip().endswith("OK"), p.stderr[-800:]


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_hostile_and_broken_code_ends_as_rejected_rows(tmp_path: Path):
    src = tmp_path / "repo"
    _write(src, "pkg/__init__.py", "")
    _write(src, "pkg/helpers.py", """
        import torch
        SCALE = 2.0
        def double(x):
            return x * SCALE
    """)
    _write(src, "pkg/good.py", """
        import torch
        from torch import nn
        from .helpers import double

        class Doubler(nn.Module):
            def __init__(self, features: int):
                super().__init__()
                self.proj = nn.Linear(features, features)
            def forward(self, x):
                return double(self.proj(x))
    """)
    _write(src, "pkg/hostile.py", """
        import sys, os
        import torch
        from torch import nn

        class Hangs(nn.Module):
            def __init__(self):
                super().__init__()
                while True:
                    pass
            def forward(self, x):
                return x

        class Exits(nn.Module):
            def __init__(self):
                super().__init__()
                sys.exit(3)
            def forward(self, x):
                return x

        class Huge(nn.Module):
            def forward(self, x):
                return torch.empty(10**12) + 1

        class Crashes(nn.Module):
            def forward(self, x):
                os._exit(7)
    """)
    _write(src, "pkg/missing.py", """
        import not_a_real_package_xyz
        from torch import nn
        class NeedsMissing(nn.Module):
            def forward(self, x):
                return not_a_real_package_xyz.f(x)
    """)
    _write(src, "pkg/broken.py", "class Broken(nn.Module:\n    pass\n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"sources:\n  - {{kind: dir, name: repo, path: {src}}}\n")
    out = tmp_path / "out"
    stats = run(manifest=manifest, out=out, workers=2, timeout_s=8, mem_mb=2048)
    kept = read_problems(out / "mine")
    rej = read_rejected(out / "mine")
    reasons = {r["name"]: r["reject_reason"] for r in rej.iter_rows(named=True)}
    assert stats["in"] == stats["kept"] + stats["rejected"] == 7
    assert kept["name"].to_list() == ["repo.Doubler"]
    # the helper from the sibling file travelled with the class
    assert "def double" in kept["code"][0] and "SCALE = 2.0" in kept["code"][0]
    assert reasons["repo.Hangs"] == "timeout"
    assert reasons["repo.Exits"] == "constructor_failed"  # SystemExit is caught like any error
    assert reasons["repo.Huge"] in ("no_runnable_inputs", "memory")
    assert "allocate" in rej.filter(pl.col("name") == "repo.Huge")["reject_detail"][0]
    assert reasons["repo.Crashes"] == "crash"
    assert reasons["repo.NeedsMissing"] == "import_missing"
    assert reasons["repo:pkg/broken.py"] == "syntax_error"


def test_pypi_source_inlines_helpers_from_sibling_files(tmp_path: Path):
    """timm's published wheel: classes in timm/layers import helpers from other files."""
    source = resolve({"kind": "pypi", "name": "timm", "version": "1.0.31",
                      "include": ["timm/layers/mlp.py"]}, tmp_path / "cache")
    assert source.version == "1.0.31" and source.licence
    resolver = Resolver(source.root, {}, source.importable)
    closure = resolver.closure("timm.layers.mlp", "Mlp")
    assert "def _ntuple" in closure.source  # defined in timm/layers/helpers.py
    assert "import timm" not in closure.source and "from timm" not in closure.source
    ns: dict = {}
    exec(compile(closure.source, "<mlp>", "exec"), ns)
    mlp = ns["Mlp"](64)
    assert mlp(torch.randn(2, 5, 64)).shape == (2, 5, 64)


def test_pypi_sources_resolved_at_once_each_get_their_own_archive(tmp_path: Path):
    """Downloads into one cache folder at the same time (a thread per source) must not take
    each other's archives; a second resolve finds the archive already there."""
    from concurrent.futures import ThreadPoolExecutor

    wanted = [("axial-positional-embedding", "0.3.12"), ("product-key-memory", "0.3.0"),
              ("g-mlp-pytorch", "0.1.5"), ("res-mlp-pytorch", "0.0.6")]

    def one(nv):
        return resolve({"kind": "pypi", "name": nv[0], "version": nv[1]}, tmp_path / "cache")

    with ThreadPoolExecutor(len(wanted)) as pool:
        got = list(pool.map(one, wanted))
    for (name, version), source in zip(wanted, got):
        assert source.version == version
        assert (source.root / name.replace("-", "_")).is_dir(), sorted(p.name for p in source.root.iterdir())
    assert one(wanted[0]).root == got[0].root


def test_manifest_errors_are_clear(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("sources:\n  - {kind: dir, name: x}\n")
    with pytest.raises(ManifestError, match="path"):
        load_manifest(bad)
    bad.write_text("sources:\n  - {kind: ftp, name: x}\n")
    with pytest.raises(ManifestError, match="kind"):
        load_manifest(bad)


def test_a_run_killed_with_sigkill_resumes_to_the_same_table(mined_run: Path, tmp_path: Path):
    """Kill mine mid-synthesis (the whole process group), start it again: same table as the
    uninterrupted run of the fixture, with the journaled classes not synthesized again."""
    import os
    import signal
    import time

    manifest = tmp_path / "manifest.yaml"
    manifest.write_text((mined_run / "manifest.yaml").read_text())
    out = tmp_path / "out"
    journal = out / "mine" / "_journal.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "curate.cli", "mine", str(manifest), "--out", str(out),
                             "--workers", "2", "--timeout-s", "30"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) > 6:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "mine finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "mine" / "stats.json").exists()

    stats = run(manifest=manifest, out=out, workers=2, timeout_s=30)
    assert stats["resumed"] >= 6
    assert not journal.exists()  # kept as the finished run's outcomes once the table is written
    cols = ["problem_id", "name", "code", "init_args", "input_spec"]
    assert read_problems(out / "mine").select(cols).equals(read_problems(mined_run / "mine").select(cols))
    rej = ["problem_id", "reject_reason"]
    assert read_rejected(out / "mine").select(rej).equals(read_rejected(mined_run / "mine").select(rej))
    # a later run (a source added to the manifest, say) synthesizes nothing it has done before
    assert (out / "mine" / "_synthesized.jsonl").exists()
    again = run(manifest=manifest, out=out, workers=2, timeout_s=30)
    assert again["resumed"] == sum(again["sources"][s]["module_classes"] for s in again["sources"]) - sum(
        sum(again["sources"][s]["closure_rejected"].values()) for s in again["sources"])
    assert read_problems(out / "mine").select(cols).equals(read_problems(mined_run / "mine").select(cols))


def test_module_alias_reads_are_inlined(tmp_path: Path):
    """torchvision's detection heads read `misc_nn_ops.Conv2dNormActivation` through a module
    alias (`from ...ops import misc as misc_nn_ops`): the class is copied and the alias bound
    to a namespace of what is read through it."""
    source = resolve({"kind": "pypi", "name": "torchvision", "version": "0.29.1",
                      "include": ["torchvision/models/detection/faster_rcnn.py"]}, tmp_path / "cache")
    closure = Resolver(source.root, {}, source.importable).closure(
        "torchvision.models.detection.faster_rcnn", "FastRCNNConvFCHead")
    assert "misc_nn_ops = types.SimpleNamespace(Conv2dNormActivation=Conv2dNormActivation)" in closure.source
    assert "class Conv2dNormActivation" in closure.source and "torchvision" not in closure.source.split("class ")[0]
    ns: dict = {}
    exec(compile(closure.source, "<head>", "exec"), ns)
    head = ns["FastRCNNConvFCHead"]((64, 7, 7), [64, 64], [128])
    assert head(torch.randn(2, 64, 7, 7)).shape == (2, 128)


def test_synthesis_order_takes_sources_in_turn():
    from curate.mine.stage import interleave

    rows = [("transformers", 0), ("transformers", 1), ("transformers", 2), ("timm", 3), ("torch", 4), ("timm", 5)]
    order = interleave(list(range(len(rows))), lambda i: rows[i][0], seed=None)
    assert order == [0, 3, 4, 1, 5, 2] and sorted(order) == list(range(6))
    # seeded: sources still alternate, each one's classes in a random, repeatable order
    many = [("transformers", i) for i in range(50)] + [("timm", 50 + i) for i in range(50)]
    order = interleave(list(range(100)), lambda i: many[i][0])
    assert order == interleave(list(range(100)), lambda i: many[i][0]) and sorted(order) == list(range(100))
    assert [many[i][0] for i in order[:4]] == ["transformers", "timm", "transformers", "timm"]
    assert [i for i in order if i < 50] != list(range(50))


def test_a_namespace_comes_after_the_definitions_it_binds_in_an_import_cycle():
    # torch_geometric: the package __init__ re-exports is_compiling from _compile, which the
    # package's own modules import back; first-seen order bound the namespace before `def`
    from curate.mine.closure_emit import _namespaces_last
    from curate.mine.closure_types import _NS

    order = [_NS + "pkg", "pkg._compile", "pkg.nn.conv"]
    deps = {_NS + "pkg": {"pkg._compile"}, "pkg._compile": {_NS + "pkg"}, "pkg.nn.conv": {_NS + "pkg"}}
    assert _namespaces_last(order, deps) == ["pkg._compile", _NS + "pkg", "pkg.nn.conv"]


def test_retry_synthesizes_journaled_rejections_again(mined_run: Path, tmp_path: Path):
    """A run's outcomes may hold rejections an older synthesizer made: ``retry`` redoes
    the items rejected for the named reasons by another version of the synthesis code and
    keeps every other journaled outcome."""
    import json

    manifest = tmp_path / "manifest.yaml"
    manifest.write_text((mined_run / "manifest.yaml").read_text())
    out = tmp_path / "out"
    run(manifest=manifest, out=out, workers=2, timeout_s=30)
    journal = out / "mine" / "_synthesized.jsonl"  # the finished run's outcomes, read by the next run
    lines = journal.read_text().splitlines()
    items = [json.loads(line) for line in lines[1:]]
    ok = [i for i in items if i["value"]["ok"]]
    assert len(ok) >= 3
    assert {i["value"]["synthesis"] for i in items} == {synthesis_version()}
    # two rejections by an older synthesizer, one by this one (a resume with --retry before)
    stale = {ok[0]["key"]: ("constructor_failed", "older"), ok[1]["key"]: ("timeout", "older"),
             ok[2]["key"]: ("constructor_failed", synthesis_version())}
    for item in items:
        if item["key"] in stale:
            reason, version = stale[item["key"]]
            item["value"] = {"ok": False, "reason": reason, "detail": f"synthesizer {version}", "synthesis": version}
    journal.write_text("\n".join([lines[0], *(json.dumps(i) for i in items)]) + "\n")

    stats = run(manifest=manifest, out=out, workers=2, timeout_s=30, retry=["constructor_failed"])
    assert stats["resumed"] == len(items)
    rejected = read_rejected(out / "mine")
    kept = rejected.filter(rejected["reject_detail"].str.starts_with("synthesizer "))
    # not retried, kept as journaled: another reason, and this synthesizer's own rejection
    assert sorted(kept["reject_reason"].to_list()) == ["constructor_failed", "timeout"]
    assert kept.filter(kept["reject_reason"] == "constructor_failed")["reject_detail"].to_list() == [
        f"synthesizer {synthesis_version()}"]
    n_ok = len(read_problems(mined_run / "mine"))
    assert len(read_problems(out / "mine")) == n_ok - 2  # the older constructor_failed one is back


def test_synthesis_offloaded_in_two_calls_merges_into_the_same_problems(mined_run: Path, tmp_path: Path):
    """--export-pending writes the pending syntheses; ``curate.mine.offload`` runs them (here in
    two calls, the first stopped by its deadline, the second skipping what the first did);
    --import-outcomes merges them, and the run then finishes with the problems and rejections
    of a run synthesized in place, synthesizing nothing itself."""
    from curate.mine.offload import main as offload_main
    from curate.mine.offload import read_lines

    manifest = tmp_path / "manifest.yaml"
    manifest.write_text((mined_run / "manifest.yaml").read_text())
    out = tmp_path / "out"
    tasks = tmp_path / "tasks.jsonl.xz"
    got = run(manifest=manifest, out=out, workers=2, timeout_s=30, export_pending=tasks)
    assert got["exported"] == len(list(read_lines(tasks))) > 10
    assert not (out / "mine" / "problems.parquet").exists()

    first, second = tmp_path / "first", tmp_path / "second"
    assert offload_main([str(tasks), "--out", str(first), "--workers", "2", "--deadline-s", "0.5"]) == 0
    assert 0 < len((first / "done.txt").read_text().split()) < got["exported"]  # cut short
    assert offload_main([str(tasks), "--out", str(second), "--workers", "2", "--skip", str(first / "done.txt"),
                         "--shard-mib", "0.002"]) == 0
    done = (first / "done.txt").read_text().split() + (second / "done.txt").read_text().split()
    assert sorted(done) == sorted(t["key"] for t in read_lines(tasks))
    shards = sorted(first.glob("outcomes-*.jsonl.xz")) + sorted(second.glob("outcomes-*.jsonl.xz"))
    assert len(shards) > 2  # the small shard limit split the second call's outcomes

    stats = run(manifest=manifest, out=out, workers=2, timeout_s=30, import_outcomes=shards)
    assert stats["imported_outcomes"] == got["exported"] and stats["phase_seconds"]["synthesize"] < 1.0
    want, have = read_problems(mined_run / "mine"), read_problems(out / "mine")
    assert have["problem_id"].to_list() == want["problem_id"].to_list()
    assert have["code"].to_list() == want["code"].to_list()
    assert sorted(read_rejected(out / "mine")["reject_reason"].to_list()) == \
        sorted(read_rejected(mined_run / "mine")["reject_reason"].to_list())
