"""Per-source yield of a `curate mine` run: runnable problems / `nn.Module` subclasses found.

    python benchmarks/mine_report.py RUN [--markdown]

RUN is the run folder given to `curate mine --out`. A finished run is read from
`RUN/mine/stats.json` and its rejected rows; a running or stopped one from the stage's plan
(`_plan.json`: the classes found and closures refused per source, the synthesis tasks) and its
journal (`_journal.jsonl`: the synthesis outcomes so far). For a partial run the yield of a
source is extrapolated: (tasks / classes) x (kept / synthesized so far), with the 95% Wilson
interval of the synthesized share.

    python benchmarks/mine_report.py RUN --retry constructor_failed,no_runnable_inputs --since N

reports a run resumed with ``curate mine --retry``: journal entries before line N (the
journal's length when the resumed run started) are earlier runs'; their rejections for the
retried reasons are pending again, not outcomes. Each source's pending items are synthesized
in a seeded random order, so the ones done since line N are a random sample of them: a
source's estimate is its earlier kept items plus its pending items times the kept share of
that sample.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from curate.bench.stats import wilson
from curate.journal import read_done, read_entries


def _journal(path: Path, since: int) -> tuple[dict, dict]:
    """(latest value per key from entries before line ``since``, the same from ``since`` on)."""
    old: dict = {}
    new: dict = {}
    for n, key, value in read_entries(path):
        (new if n >= since else old)[key] = value
    return old, new


def partial(stage: Path, retry: frozenset[str] = frozenset(), since: int = 0) -> tuple[dict, dict]:
    plan = json.loads((stage / "_plan.json").read_text())
    old, new = _journal(stage / "_journal.jsonl", since) if retry else ({}, read_done(stage / "_journal.jsonl"))
    per: dict[str, dict] = {}
    for name, src in plan["sources"].items():
        per[name] = {"classes": src["module_classes"], "tasks": 0, "synthesized": 0, "kept": 0,
                     "settled": 0, "settled_kept": 0,
                     "reasons": collections.Counter(src.get("closure_rejected", {}))}
    for key, name in plan["tasks"].items():
        row = per[name]
        row["tasks"] += 1
        v = new.get(key)
        if v is None and key in old and (old[key]["ok"] or ("all" not in retry and old[key]["reason"] not in retry)):
            row["settled"] += 1  # an earlier run's outcome this run keeps
            row["settled_kept"] += bool(old[key]["ok"])
            v = old[key]
        elif v is not None:
            row["synthesized"] += 1
        if v is None:
            continue
        if v["ok"]:
            row["kept"] += 1
        else:
            row["reasons"][v["reason"]] += 1
    return per, {"synthesized": sum(r["synthesized"] + r["settled"] for r in per.values()),
                 "tasks": len(plan["tasks"])}


def finished(stage: Path) -> tuple[dict, dict]:
    import polars as pl

    stats = json.loads((stage / "stats.json").read_text())
    rej = pl.concat([pl.read_parquet(p) for p in sorted((stage / "rejected").glob("*.parquet"))])
    reasons = collections.defaultdict(collections.Counter)
    for name, reason in zip(rej["source"].struct.field("name"), rej["reject_reason"]):
        reasons[name][reason] += 1
    per = {name: {"classes": s["module_classes"], "tasks": None, "synthesized": None,
                  "kept": s["kept"], "reasons": reasons[name]} for name, s in stats["sources"].items()}
    return per, {"seconds": stats.get("seconds"), "kept": stats["kept"], "in": stats["in"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--retry", default="", help="the reasons the resumed run was given with --retry")
    ap.add_argument("--since", type=int, default=0, help="journal line where the resumed run started")
    args = ap.parse_args()
    stage = args.run / "mine"
    done = (stage / "stats.json").exists()
    retry = frozenset(r for r in args.retry.split(",") if r)
    per, info = finished(stage) if done else partial(stage, retry, args.since)
    print(("finished run: " if done else "partial run: ") + json.dumps(info))
    print(f"| source | nn.Module classes | synthesized | kept | yield | top reject reasons |")
    print("|---|---:|---:|---:|---:|---|")
    tot_classes = tot_est = 0.0
    for name, r in sorted(per.items(), key=lambda kv: -kv[1]["classes"]):
        top = ", ".join(f"{k} {v}" for k, v in r["reasons"].most_common(3))
        if done:
            y = r["kept"] / r["classes"] if r["classes"] else 0.0
            cell, syn = f"{y:.0%}", "all"
        elif r["synthesized"] or r["settled"]:
            # settled items as they are; the pending ones at the kept share of those done so far
            pending = r["tasks"] - r["settled"]
            done_kept = r["kept"] - r["settled_kept"]
            rate = done_kept / r["synthesized"] if r["synthesized"] else 0.0
            lo, hi = wilson(done_kept, r["synthesized"]) if r["synthesized"] else (0.0, 0.0)
            y, lo, hi = ((r["settled_kept"] + pending * f) / r["classes"] for f in (rate, lo, hi))
            cell = f"{y:.0%} ({lo:.0%}-{hi:.0%})"
            syn = f"{r['synthesized'] + r['settled']}/{r['tasks']}"
        else:
            y, cell, syn = 0.0, "-", f"0/{r['tasks']}"
        tot_classes += r["classes"]
        tot_est += y * r["classes"]
        print(f"| {name} | {r['classes']:,} | {syn} | {r['kept']:,} | {cell} | {top} |")
    print(f"\noverall: {tot_classes:,.0f} nn.Module classes, "
          f"{'kept' if done else 'estimated runnable'} {tot_est:,.0f}, yield {tot_est / max(tot_classes, 1):.1%}")


if __name__ == "__main__":
    main()
