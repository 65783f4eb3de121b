"""Level and category of KernelBench's own 250 problems (the packaged copy) against their
real levels: the sanity figure of :mod:`curate.structure`.

    python benchmarks/structure_kernelbench.py [--json OUT.json]

Prints the confusion (real level x our level), the agreement, rows per category by real
level, and the difficulty buckets :mod:`curate.rank.difficulty` gives KernelBench's problems
from the packaged H100 baseline times (``inductor_speedup`` = eager / compile) with the
trace's roofline share of matmul/conv/attention standing in for the profiler's library share.

KernelBench's files are the project's packaged evaluation data, traced in-process on
the ``meta`` device (about 25 s on one CPU core).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from curate.data import KERNELBENCH_PROBLEMS
from curate.rank.difficulty import bucket, measured_score
from curate.structure import structure_task


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    rows = [json.loads(x) for x in open(KERNELBENCH_PROBLEMS) if x.strip()]
    t0 = time.monotonic()
    got = [(r, structure_task(r["code"])) for r in rows]
    conf = Counter((r["level"], s.get("level")) for r, s in got)
    cats = Counter((r["level"], s.get("category")) for r, s in got)
    agree = sum(v for (a, b), v in conf.items() if a == b)
    print(f"{len(rows)} problems traced in {time.monotonic() - t0:.1f} s; "
          f"level agreement {agree}/{len(rows)} = {agree / len(rows):.1%}")
    print("real \\ ours " + " ".join(f"{c!s:>5}" for c in (1, 2, 3, None)))
    for lv in (1, 2, 3):
        print(f"{lv:>11} " + " ".join(f"{conf[(lv, c)]:>5}" for c in (1, 2, 3, None)))
    print("disagreements:", [(r["name"], r["level"], s.get("level")) for r, s in got
                             if r["level"] != s.get("level")])
    for lv in (1, 2, 3):
        print(f"level {lv} categories:", dict(sorted(((c, n) for (l2, c), n in cats.items() if l2 == lv),
                                                      key=lambda kv: -kv[1])))
    times = json.loads((Path(KERNELBENCH_PROBLEMS).parent / "baseline_times_h100.json").read_text())
    buckets = Counter()
    for r, s in got:
        t = times.get(f"level{r['level']}", {}).get(r["name"])
        if s.get("ok") and t and t.get("compile_ms"):
            score, _ = measured_score(t["eager_ms"] / t["compile_ms"], s["library_share"], s["kernels"])
            buckets[(r["level"], bucket(score))] += 1
    for lv in (1, 2, 3):
        print(f"level {lv} difficulty (H100 baseline times):",
              {b: buckets[(lv, b)] for b in ("easy", "medium", "hard")})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"agreement": agree / len(rows), "n": len(rows),
                       "confusion": {f"{a}->{b}": n for (a, b), n in conf.items()},
                       "categories": {f"{a}:{b}": n for (a, b), n in cats.items()},
                       "difficulty": {f"{a}:{b}": n for (a, b), n in buckets.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
