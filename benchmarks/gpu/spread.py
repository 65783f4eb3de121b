"""Run-to-run spread of measure's medians: the same rows measured twice on one GPU, one run
after the other, each with a new, empty Inductor cache (issue 21's acceptance asks for it).

    python3 benchmarks/gpu/spread.py ROWS.parquet --out DIR [--runs 2]

``ROWS.parquet`` is a diversify table (the rows measure reads). Each run measures it with the
stage's CUDA defaults in a run folder of its own. Writes ``DIR/spread.json``: per run, rows
kept, seconds, rows an hour; over the rows both runs kept, the quantiles of run 2 / run 1 for
the eager and the Inductor medians (`compile_ms`) and how many are within 5%. Needs polars (carried as a wheel
to the GPU machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path


def _quantiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    if not xs:
        return {}
    return {q: round(xs[min(len(xs) - 1, int(p * len(xs)))], 4)
            for q, p in (("p10", 0.1), ("p25", 0.25), ("median", 0.5), ("p75", 0.75), ("p90", 0.9))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--limit", type=int, default=None, help="first N rows only")
    args = ap.parse_args()
    import polars as pl

    from curate.measure import run as measure
    from curate.table import Rejections, write_stage

    rows = pl.read_parquet(args.rows)
    if args.limit:
        rows = rows.head(args.limit)
    runs = []
    for k in range(args.runs):
        run = Path(tempfile.mkdtemp(prefix=f"curate-spread-{k}-"))
        write_stage(run, "diversify", rows, Rejections("diversify").frame(like=rows), rows.height, 0.0)
        cache = tempfile.mkdtemp(prefix="curate-spread-cache-")
        t0 = time.monotonic()
        stats = measure(run, device=args.device, inductor_cache=cache)
        seconds = time.monotonic() - t0
        kept = pl.concat([pl.read_parquet(p) for p in sorted((run / "measure" / "problems").glob("*.parquet"))],
                         how="diagonal_relaxed")
        runs.append({"kept": kept.select("problem_id", "eager_ms", "compile_ms", "gpu"),
                     "summary": {"in": stats.get("in"), "kept": stats.get("kept"), "seconds": round(seconds, 1),
                                 "rows_per_hour": round(3600 * rows.height / seconds)}})
        shutil.rmtree(cache, ignore_errors=True)
    a, b = runs[0]["kept"], runs[1]["kept"]
    both = a.join(b, on="problem_id", suffix="_2")
    out: dict = {"runs": [r["summary"] for r in runs], "common_rows": both.height,
                 "gpus": sorted({g for g in both["gpu"].to_list() + both["gpu_2"].to_list() if g})}
    for col in ("eager_ms", "compile_ms"):
        pair = both.filter(pl.col(col).is_not_null() & pl.col(f"{col}_2").is_not_null() & (pl.col(col) > 0))
        ratios = (pair[f"{col}_2"] / pair[col]).to_list()
        out[col] = {"rows": len(ratios), **_quantiles(ratios),
                    "within_5pct": sum(abs(r - 1) <= 0.05 for r in ratios)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "spread.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
