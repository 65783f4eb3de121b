"""Each stage SIGKILLed mid-run and started again writes what an uninterrupted run writes.

A small real run (three torch.nn source files, the CPU paths of measure and rank) is made
once by the CLI, each stage timed. Then, for each stage, a fresh run folder gets copies of the
earlier stages' folders; the stage is started as `curate <stage>` in a subprocess and its
main process is SIGKILLed once it is part way through (its journal or cache holds a finished
item; without one, half its uninterrupted time after it took its lock). Its children end with
it (``die_with_parent``); the stale lock is taken over. The rerun's kept rows (problem_id,
code, inputs) and rejected rows (problem_id, reason) must equal the uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[1]
STAGES = ("mine", "dedup", "diversify", "measure", "rank", "export")
ARGS = {
    "mine": ["--timeout-s", "30", "--workers", "2"],
    "dedup": ["--kernelbench", "auto", "--workers", "2"],
    "diversify": ["--variants", "3", "--workers", "2", "--device", "cpu"],
    "measure": ["--device", "cpu", "--trials", "5", "--budget-s", "0.05", "--workers", "2"],
    "rank": ["--device", "cpu"],
    "export": ["--name", "tiny", "--workers", "2"],
}
# where a stage records finished work as it goes: the kill lands after the first item
PROGRESS = {"mine": "_journal.jsonl", "diversify": "_journal.jsonl", "measure": "_journal.jsonl",
            "rank": "cache/structure"}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def _cmd(stage: str, out: Path, manifest: Path) -> list[str]:
    head = [sys.executable, "-m", "curate.cli", stage]
    return head + ([str(manifest)] if stage == "mine" else []) + ["--out", str(out)] + ARGS[stage]


def _progressed(out: Path, stage: str) -> bool:
    mark = out / stage / PROGRESS[stage]
    if mark.is_dir():
        return any(mark.iterdir())
    try:
        return len(mark.read_text().splitlines()) >= 2  # the header and one finished item
    except OSError:
        return False


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[Path, Path, dict[str, float]]:
    """The uninterrupted run, and the seconds each stage ran after taking its lock."""
    root = tmp_path_factory.mktemp("kill")
    manifest = root / "m.yaml"
    manifest.write_text("sources:\n  - kind: package\n    name: torch\n"
                        "    include: [torch/nn/modules/pixelshuffle.py, torch/nn/modules/flatten.py,\n"
                        "              torch/nn/modules/channelshuffle.py, torch/nn/modules/fold.py]\n")
    out = root / "base"
    seconds = {}
    for stage in STAGES:
        proc = subprocess.Popen(_cmd(stage, out, manifest), env=_env(), cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while proc.poll() is None and not (out / stage / ".lock").exists():
            time.sleep(0.02)
        t0 = time.monotonic()
        text, _ = proc.communicate(timeout=600)
        seconds[stage] = time.monotonic() - t0
        assert proc.returncode == 0, f"{stage}: {text[-3000:]}"
    return root, manifest, seconds


def _table(out: Path, stage: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    kept = pl.read_parquet(out / stage / "problems" / "*.parquet")
    rej = pl.read_parquet(out / stage / "rejected" / "*.parquet")
    cols = [c for c in ("problem_id", "code", "init_args", "input_spec", "split") if c in kept.columns]
    kept = kept.select(cols).sort(cols[:1] + (["input_spec"] if "input_spec" in cols else []))
    rej = rej.select("problem_id", "reject_reason").sort("problem_id", "reject_reason") if rej.height \
        else pl.DataFrame(schema={"problem_id": pl.String, "reject_reason": pl.String})
    return kept, rej


@pytest.mark.slow
@pytest.mark.parametrize("stage", STAGES)
def test_stage_killed_and_rerun_writes_the_uninterrupted_output(base, tmp_path: Path, stage: str):
    root, manifest, seconds = base
    out = tmp_path / "run"
    out.mkdir()
    for earlier in STAGES[: STAGES.index(stage)]:
        shutil.copytree(root / "base" / earlier, out / earlier)
    # without a progress mark the kill is timed: half the uninterrupted run, then earlier when
    # it landed after the tables were written (the stage's teardown, closing its pools)
    for fraction in (0.5, 0.25, 0.1) if stage not in PROGRESS else (None,):
        shutil.rmtree(out / stage, ignore_errors=True)
        proc = subprocess.Popen(_cmd(stage, out, manifest), env=_env(), cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 600
            if fraction is None:
                while proc.poll() is None and not _progressed(out, stage) and time.monotonic() < deadline:
                    time.sleep(0.02)
            else:
                while proc.poll() is None and not (out / stage / ".lock").exists():
                    time.sleep(0.02)
                time.sleep(seconds[stage] * fraction)
            ended = proc.poll()
            if ended is None:
                os.kill(proc.pid, signal.SIGKILL)
                assert proc.wait(timeout=60) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
        if ended is None and not (out / stage / "stats.json").exists():
            break
    assert ended is None, f"{stage} ended before the kill (rc {ended})"
    assert not (out / stage / "stats.json").exists(), "killed after it finished: nothing tested"

    rerun = subprocess.run(_cmd(stage, out, manifest), env=_env(), cwd=REPO, capture_output=True,
                           text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-3000:]
    want_kept, want_rej = _table(root / "base", stage)
    got_kept, got_rej = _table(out, stage)
    assert got_kept.equals(want_kept), f"{stage}: kept rows differ after the rerun"
    assert got_rej.equals(want_rej), f"{stage}: rejected rows differ after the rerun"
    if stage in ("mine", "diversify", "measure"):
        assert json.loads((out / stage / "stats.json").read_text())["resumed"] >= 1, \
            f"{stage}: the rerun did not resume from its journal"
