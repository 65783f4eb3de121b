"""Rows an hour of `curate measure` on a fixed sample, with a hard time limit, resumable.

    python benchmarks/gpu/throughput.py ROWS.parquet --bases 340 --limit-s 300 --out DIR \
        [--code PATH] [-- MEASURE OPTIONS AS JSON]

Writes the rows of the first ``--bases`` base problems of ``ROWS.parquet`` (a diversify table
with ``code``) as ``DIR/run/diversify``, then runs the measure stage on them in a process group
of its own with a fresh Inductor/Triton cache (``DIR/cache``, unless it exists: a rerun resumes
from the stage journal with the caches it built). After ``--limit-s`` seconds the whole group is
killed (SIGKILL: the stage's pool threads do not end on an interrupt). The journal is copied
every second, so a killed run still gives its figures: ``DIR/split.json`` from
``benchmarks/measure_split.py`` (rows, rows/hour over the wall time, step seconds).
``--code PATH`` puts another checkout's ``curate`` first on the path (a "before" tree,
e.g. from ``git archive REV curate | tar -x -C PATH``). Needs polars (the stage's tables).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGE = """import json, sys
from curate.measure import run
if __name__ == "__main__":
    s = run(sys.argv[1], source=sys.argv[1] + "/diversify", inductor_cache=sys.argv[2],
            **json.loads(sys.argv[3]))
    print(json.dumps({k: s.get(k) for k in ("in", "kept", "seconds", "rejected_by_reason",
                                            "workers", "compile_workers", "compile_ahead")}))
"""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows")
    ap.add_argument("--bases", type=int, required=True)
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--limit-s", type=float, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--code", type=Path, default=None)
    ap.add_argument("--options", default='{"device": "cuda"}', help="measure options, JSON")
    args = ap.parse_args(argv)
    from take_rows import take_rows  # this script's own folder is first on sys.path

    run_dir = args.out / "run"
    take_rows(args.rows, args.bases, run_dir / "diversify", args.skip)
    script = args.out / "stage.py"
    script.write_text(STAGE)
    env = dict(os.environ)
    if args.code:
        env["PYTHONPATH"] = os.pathsep.join([str(args.code.resolve()), env.get("PYTHONPATH", "")])
    journal = run_dir / "measure" / "_journal.jsonl"
    copy = args.out / "journal.jsonl"
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(script), str(run_dir), str(args.out / "cache"),
                             args.options], env=env, start_new_session=True,
                            stdout=open(args.out / "stage.log", "w"), stderr=subprocess.STDOUT)
    while proc.poll() is None and time.monotonic() - t0 < args.limit_s:
        if journal.exists():
            shutil.copyfile(journal, copy)
        time.sleep(1.0)
    wall = time.monotonic() - t0
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    print(f"stage {'finished' if proc.returncode == 0 else 'stopped'} after {wall:.0f} s", flush=True)
    if not journal.exists() and (run_dir / "measure" / "stats.json").exists():
        stats = json.loads((run_dir / "measure" / "stats.json").read_text())
        print(json.dumps({k: stats.get(k) for k in ("in", "kept", "seconds", "rejected_by_reason")}))
    if copy.exists():
        subprocess.run([sys.executable, str(HERE.parent / "measure_split.py"), str(copy),
                        "--wall-s", str(wall), "--json", str(args.out / "split.json")], check=False)


if __name__ == "__main__":
    main()
