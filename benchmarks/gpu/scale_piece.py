"""Diversify and measure one piece of a large sample on a GPU, in device calls of limited
length, resumable from call to call (issue 21's 2,000-problem run).

    python3 benchmarks/gpu/scale_piece.py PIECE.parquet --out DIR --limit-s 540 \
        [--state PREVIOUS_OUT] [--device cuda]

``PIECE.parquet`` is a dedup table (rows with ``code``); it may be absent once ``--state``
holds a finished diversify. The run folder is rebuilt each call:
the piece as its ``dedup`` stage; a finished diversify from ``--state`` (its tables), else
diversify's journal from there; measure's journal from there. Diversify (the default
pipeline's options: 3 in-band shapes and a held-out one, band 0.5-10 ms, H100) and measure
(the stage's CUDA defaults) run in a process group of their own, killed at ``--limit-s``. What
comes back, in ``--out`` (at most 8 files, as a device call returns them): each stage's journal
(xz) while it is unfinished, a finished stage's kept and rejected tables, and ``state.json``
(stage stats, rows journaled, seconds). Pass that folder as ``--state`` to the next call.

A journal holds results by content key, so a call that stops mid-stage loses only the rows in
flight. The stage tables need polars (carried as a wheel to the GPU machine).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

STAGES = """import sys
from pathlib import Path
if __name__ == "__main__":
    run, device = sys.argv[1], sys.argv[2]
    from curate.diversify import run as diversify
    from curate.measure import run as measure
    if not (Path(run) / "diversify" / "stats.json").exists():
        diversify(run, variants=3, band_ms=[0.5, 10.0], target_gpu="h100", mem_budget_mb=4096,
                  device=device)
    measure(run, device=device)
"""


def _journal_lines(path: Path) -> int:
    try:
        with open(path) as f:
            return max(0, sum(1 for _ in f) - 1)
    except OSError:
        return 0


def _restore(state: Path | None, run: Path) -> None:
    """Put the previous call's results into the run folder."""
    if state is None:
        return
    for stage in ("diversify", "measure"):
        kept, rejected = state / f"{stage}-kept.parquet", state / f"{stage}-rejected.parquet"
        if kept.exists() and rejected.exists():
            for name, src in (("problems", kept), ("rejected", rejected)):
                (run / stage / name).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, run / stage / name / "part-00000.parquet")
            stats = json.loads((state / "state.json").read_text())["stats"][stage]
            (run / stage / "stats.json").write_text(json.dumps(stats))
            continue
        journal = state / f"{stage}-journal.jsonl.xz"
        if journal.exists():
            (run / stage).mkdir(parents=True, exist_ok=True)
            with lzma.open(journal, "rb") as src, open(run / stage / "_journal.jsonl", "wb") as dst:
                shutil.copyfileobj(src, dst)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("piece", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--limit-s", type=float, required=True)
    ap.add_argument("--state", type=Path, default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--run", type=Path, default=Path("/tmp/curate-scale-run"))
    args = ap.parse_args(argv)
    import polars as pl

    from curate.table import Rejections, write_stage

    shutil.rmtree(args.run, ignore_errors=True)
    if args.piece.exists():
        piece = pl.read_parquet(args.piece)
    elif args.state is not None and (args.state / "diversify-kept.parquet").exists():
        # diversify finished in an earlier call: measure reads its tables, so the piece need not
        # travel again (a device call carries 64 MiB in all); an empty table of the same columns
        # stands for it
        piece = pl.read_parquet(args.state / "diversify-kept.parquet").head(0)
    else:
        raise SystemExit(f"error: {args.piece} not found, and no finished diversify in --state")
    write_stage(args.run, "dedup", piece, Rejections("dedup").frame(like=piece), piece.height, 0.0)
    _restore(args.state, args.run)
    args.out.mkdir(parents=True, exist_ok=True)
    script = args.run / "stages.py"
    script.write_text(STAGES)
    t0 = time.monotonic()
    log = open(args.out / "stages.log", "w")
    proc = subprocess.Popen([sys.executable, str(script), str(args.run), args.device],
                            start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    copies = {s: args.run / f"{s}-journal.copy" for s in ("diversify", "measure")}
    while proc.poll() is None and time.monotonic() - t0 < args.limit_s:
        for stage, copy in copies.items():
            journal = args.run / stage / "_journal.jsonl"
            if journal.exists():
                shutil.copyfile(journal, copy)  # a stage removes its journal when it finishes
        time.sleep(2.0)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    seconds = time.monotonic() - t0
    state: dict = {"seconds": round(seconds, 1), "finished": proc.returncode == 0, "stats": {},
                   "journaled": {}}
    for stage, copy in copies.items():
        folder = args.run / stage
        if (folder / "stats.json").exists():
            state["stats"][stage] = json.loads((folder / "stats.json").read_text())
            for name, dst in (("problems", "kept"), ("rejected", "rejected")):
                parts = sorted((folder / name).glob("*.parquet"))
                pl.concat([pl.read_parquet(p) for p in parts], how="diagonal_relaxed").write_parquet(
                    args.out / f"{stage}-{dst}.parquet", compression="zstd")
        elif copy.exists():
            state["journaled"][stage] = _journal_lines(copy)
            with open(copy, "rb") as src, lzma.open(args.out / f"{stage}-journal.jsonl.xz", "wb") as dst:
                shutil.copyfileobj(src, dst)
    (args.out / "state.json").write_text(json.dumps(state, indent=1) + "\n")
    print(json.dumps({"seconds": state["seconds"], "finished": state["finished"],
                      "journaled": state["journaled"],
                      "stages_done": {s: {k: v.get(k) for k in ("in", "kept", "rejected")}
                                      for s, v in state["stats"].items()}}))


if __name__ == "__main__":
    main()
