"""Per-source yield of a `curate mine` run: runnable problems / `nn.Module` subclasses found.

    python benchmarks/mine_report.py RUN [--markdown]

RUN is the run folder given to `curate mine --out`. A finished run is read from
`RUN/mine/stats.json` and its rejected rows; a running or stopped one from the stage's plan
(`_plan.json`: the classes found and closures refused per source, the synthesis tasks) and its
journal (`_journal.jsonl`: the synthesis outcomes so far). For a partial run the yield of a
source is extrapolated: (tasks / classes) x (kept / synthesized so far), with the 95% Wilson
interval of the synthesized share.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from curate.bench.stats import wilson
from curate.journal import read_done


def partial(stage: Path) -> tuple[dict, dict]:
    plan = json.loads((stage / "_plan.json").read_text())
    done = read_done(stage / "_journal.jsonl")
    per: dict[str, dict] = {}
    for name, src in plan["sources"].items():
        per[name] = {"classes": src["module_classes"], "tasks": 0, "synthesized": 0, "kept": 0,
                     "reasons": collections.Counter(src.get("closure_rejected", {}))}
    for key, name in plan["tasks"].items():
        row = per[name]
        row["tasks"] += 1
        if key in done:
            row["synthesized"] += 1
            v = done[key]
            if v["ok"]:
                row["kept"] += 1
            else:
                row["reasons"][v["reason"]] += 1
    return per, {"synthesized": len(done), "tasks": len(plan["tasks"])}


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
    args = ap.parse_args()
    stage = args.run / "mine"
    done = (stage / "stats.json").exists()
    per, info = finished(stage) if done else partial(stage)
    print(("finished run: " if done else "partial run: ") + json.dumps(info))
    print(f"| source | nn.Module classes | synthesized | kept | yield | top reject reasons |")
    print("|---|---:|---:|---:|---:|---|")
    tot_classes = tot_est = 0.0
    for name, r in sorted(per.items(), key=lambda kv: -kv[1]["classes"]):
        top = ", ".join(f"{k} {v}" for k, v in r["reasons"].most_common(3))
        if done:
            y = r["kept"] / r["classes"] if r["classes"] else 0.0
            cell, syn = f"{y:.0%}", "all"
        elif r["synthesized"]:
            share = r["tasks"] / r["classes"]
            lo, hi = wilson(r["kept"], r["synthesized"])
            y = share * r["kept"] / r["synthesized"]
            cell, syn = f"{y:.0%} ({share * lo:.0%}-{share * hi:.0%})", f"{r['synthesized']}/{r['tasks']}"
        else:
            y, cell, syn = 0.0, "-", f"0/{r['tasks']}"
        tot_classes += r["classes"]
        tot_est += y * r["classes"]
        print(f"| {name} | {r['classes']:,} | {syn} | {r['kept']:,} | {cell} | {top} |")
    print(f"\noverall: {tot_classes:,.0f} nn.Module classes, "
          f"{'kept' if done else 'estimated runnable'} {tot_est:,.0f}, yield {tot_est / max(tot_classes, 1):.1%}")


if __name__ == "__main__":
    main()
