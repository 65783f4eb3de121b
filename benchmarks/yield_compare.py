"""Compare two ``benchmarks/mine_yield.py --jsonl`` outputs of the same sample (before/after).

    python benchmarks/yield_compare.py BEFORE.jsonl AFTER.jsonl [--markdown]

Prints the yield of each with its 95% Wilson interval, reject reasons side by side, per-source
kept counts, and the classes whose outcome changed (kept -> rejected and rejected -> kept), so a
change's gains and losses are read off the same classes. Classes present in only one file
(a run stopped early) are left out of the comparison and counted.
"""

from __future__ import annotations

import argparse
import collections
import json

from curate.bench.stats import wilson


def _read(path: str) -> dict[tuple[str, str], dict]:
    with open(path) as f:
        return {(r["source"], r["class"]): r for r in map(json.loads, f)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    before, after = _read(args.before), _read(args.after)
    common = sorted(set(before) & set(after))
    only = len(set(before) ^ set(after))
    n = len(common)
    for label, rows in (("before", before), ("after", after)):
        kept = sum(rows[k]["reason"] == "kept" for k in common)
        lo, hi = wilson(kept, n)
        print(f"{label:6s} kept {kept}/{n} = {kept / max(n, 1):.1%} [{lo:.1%}, {hi:.1%}]")
    if only:
        print(f"({only} classes in one file only, left out)")
    reasons_b = collections.Counter(before[k]["reason"] for k in common)
    reasons_a = collections.Counter(after[k]["reason"] for k in common)
    print("\n| reason | before | after |\n|---|---:|---:|" if args.markdown else "\nreason  before  after")
    for r in sorted(set(reasons_b) | set(reasons_a), key=lambda r: -max(reasons_b[r], reasons_a[r])):
        print(f"| {r} | {reasons_b[r]} | {reasons_a[r]} |" if args.markdown else f"{r:22s} {reasons_b[r]:5d} {reasons_a[r]:5d}")
    per = collections.defaultdict(lambda: [0, 0, 0])
    for k in common:
        per[k[0]][0] += 1
        per[k[0]][1] += before[k]["reason"] == "kept"
        per[k[0]][2] += after[k]["reason"] == "kept"
    print("\n| source | sampled | kept before | kept after |\n|---|---:|---:|---:|" if args.markdown
          else "\nsource  sampled  kept-before  kept-after")
    for s, (m, b, a) in sorted(per.items()):
        print(f"| {s} | {m} | {b} | {a} |" if args.markdown else f"{s:32s} {m:4d} {b:4d} {a:4d}")
    gained = [k for k in common if before[k]["reason"] != "kept" and after[k]["reason"] == "kept"]
    lost = [k for k in common if before[k]["reason"] == "kept" and after[k]["reason"] != "kept"]
    print(f"\nrejected -> kept: {len(gained)}")
    for k in gained:
        print(f"  {k[0]}: {k[1]} (was {before[k]['reason']}: {before[k]['detail'][:120]!r})")
    print(f"kept -> rejected: {len(lost)}")
    for k in lost:
        print(f"  {k[0]}: {k[1]} ({after[k]['reason']}: {after[k]['detail'][:120]!r})")


if __name__ == "__main__":
    main()
