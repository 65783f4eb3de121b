"""Shapes aimed at the band, on a GPU: diversify (calibrated) and measure, in two device calls.

Run from the repository root on the GPU machine after ``source benchmarks/gpu/env.sh``, with
``.carry/<set>/dedup`` holding a dedup stage folder per problem set (carried from the CPU
machine). Each phase fits one device call and leaves its results in ``$OUT`` as flat files
(at most eight come back):

    python3 benchmarks/gpu/band.py diversify default pypi
        diversify --device cuda per set, the sets in parallel (planning on the CPU cores,
        calibration on the GPU): $OUT/<set>-div.parquet (rows without their code; the code is
        the dedup row's with the shape's inputs), $OUT/<set>-div-rejected.parquet, stats
    python3 benchmarks/gpu/band.py measure default pypi
        (with the diversify outputs carried to .carry/gpu/) measure eager-only on the GPU:
        $OUT/<set>-measure.parquet (no code), $OUT/<set>-measure-stats.json

``benchmarks/band_report.py`` turns the files into the report's figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

OUT = Path(os.environ.get("OUT", "out-gpu"))
CARRY = Path(".carry")
WORK = Path("/tmp/band")


def _slim(df: pl.DataFrame) -> pl.DataFrame:
    return df.drop([c for c in ("code",) if c in df.columns])


def diversify_one(name: str, workers: int) -> None:
    from curate.diversify import run

    out = WORK / name
    t = time.monotonic()
    stats = run(out, source=CARRY / name / "dedup", device="cuda", workers=workers, timeout_s=60)
    stats["wall_seconds"] = time.monotonic() - t
    d = out / "diversify"
    pl.read_parquet(d / "problems" / "*.parquet").pipe(_slim).write_parquet(OUT / f"{name}-div.parquet")
    rej = list((d / "rejected").glob("*.parquet"))
    if rej:
        pl.read_parquet(rej).pipe(_slim).write_parquet(OUT / f"{name}-div-rejected.parquet")
    (OUT / f"{name}-div-stats.json").write_text(json.dumps(stats, indent=1, default=str))


def rebuild(name: str) -> Path:
    """The diversify stage folder of a set, its code rebuilt from the dedup rows."""
    from curate.problem import replace_inputs
    from curate.table import read_problems, write_stage

    dedup = read_problems(CARRY / name / "dedup").select("problem_id", "code")
    code = dict(zip(dedup["problem_id"], dedup["code"]))
    # the diversify output of an earlier call (carried), or of this call's diversify phase
    src = Path(os.environ.get("BAND_DIV_DIR", CARRY / "gpu"))
    div = pl.read_parquet(src / f"{name}-div.parquet")
    div = div.with_columns(pl.Series("code", [
        replace_inputs(code[b], json.loads(s), json.loads(i))
        for b, s, i in zip(div["base_problem_id"], div["input_spec"], div["init_args"])]))
    out = WORK / name
    write_stage(out, "diversify", div, div.clear().with_columns(
        pl.lit("").alias("reject_stage"), pl.lit("").alias("reject_reason"),
        pl.lit("").alias("reject_detail")), div.height, 0.0)
    return out


def measure(names: list[str]) -> None:
    from curate.measure import run

    for name in names:
        out = rebuild(name)
        t = time.monotonic()
        stats = run(out, device="cuda", inductor=False, profile=False, trials=30, budget_s=0.15,
                    timeout_s=120, compile_workers=0)
        stats["wall_seconds"] = time.monotonic() - t
        d = out / "measure"
        frames = [pl.read_parquet(p) for p in (d / "problems").glob("*.parquet")]
        frames += [pl.read_parquet(p) for p in (d / "rejected").glob("*.parquet")]
        both = pl.concat([_slim(f) for f in frames], how="diagonal_relaxed")
        both.write_parquet(OUT / f"{name}-measure.parquet")
        (OUT / f"{name}-measure-stats.json").write_text(json.dumps(stats, indent=1, default=str))
        print(name, json.dumps({k: stats.get(k) for k in ("in", "kept", "rejected", "rejected_by_reason",
                                                         "share_in_band", "wall_seconds")}), flush=True)


def main() -> None:
    phase, names = sys.argv[1], sys.argv[2:]
    OUT.mkdir(parents=True, exist_ok=True)
    if phase == "diversify":
        if len(names) > 1:  # one process per set: planning shares the cores, calibration the GPU
            procs = [subprocess.Popen([sys.executable, __file__, "diversify", n]) for n in names]
            sys.exit(max(p.wait() for p in procs))
        diversify_one(names[0], workers=int(os.environ.get("BAND_WORKERS", max(2, (os.cpu_count() or 2) - 2))))
        s = json.loads((OUT / f"{names[0]}-div-stats.json").read_text())
        print(names[0], json.dumps({k: s.get(k) for k in ("in", "kept", "rejected", "rows_out",
                                                          "rejected_by_reason", "wall_seconds")}), flush=True)
    elif phase == "measure":
        measure(names)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
