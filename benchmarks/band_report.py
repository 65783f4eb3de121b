"""Figures for the runtime-band report from the files ``benchmarks/gpu/band.py`` brings back.

    python benchmarks/band_report.py DIR [SET ...]

DIR holds ``<set>-div.parquet``, ``<set>-div-rejected.parquet``, ``<set>-div-stats.json``,
``<set>-measure.parquet`` and ``<set>-measure-stats.json`` per set. Prints, per set and for all
sets together: base problems in, how many built and ran, how many kept a primary shape whose
measured eager median is in the band, rows kept and their eager-time distribution, the
distribution before (the mined shapes, timed by diversify's calibration on the same GPU),
rejections by reason, shapes per kept base problem and peak memory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl


def _q(s: pl.Series) -> str:
    s = s.drop_nulls()
    if not s.len():
        return "-"
    return " / ".join(f"{s.quantile(q):.3g}" for q in (0.1, 0.5, 0.9))


def _share(s: pl.Series, lo: float, hi: float | None = None) -> str:
    s = s.drop_nulls()
    if not s.len():
        return "-"
    n = (s >= lo).sum() if hi is None else ((s >= lo) & (s <= hi)).sum()
    return f"{100 * n / s.len():.0f}%"


#: Rejections about the shapes (the problem runs, but no shape of it was found in the band):
#: they count against the share kept. Every other reason says the problem itself is unfit (a
#: harness cannot run it, its output ignores its input, ...), whatever its size.
SIZE_REASONS = {"launch_bound", "over_memory", "no_estimate", "no_heldout_shape", "too_few_shapes",
                "out_of_band", "calibrate_failed", "timeout", "memory", "crash"}


def figures(d: Path, names: list[str]) -> dict:
    div = pl.concat([pl.read_parquet(d / f"{n}-div.parquet").with_columns(pl.lit(n).alias("set"))
                     for n in names], how="diagonal_relaxed")
    rej = pl.concat([pl.read_parquet(d / f"{n}-div-rejected.parquet").with_columns(pl.lit(n).alias("set"))
                     for n in names if (d / f"{n}-div-rejected.parquet").exists()], how="diagonal_relaxed")
    mea = pl.concat([pl.read_parquet(d / f"{n}-measure.parquet").with_columns(pl.lit(n).alias("set"))
                     for n in names], how="diagonal_relaxed")
    stats = [json.loads((d / f"{n}-div-stats.json").read_text()) for n in names]
    base_in = sum(s["in"] for s in stats)
    kept_rows = mea.filter(pl.col("reject_reason").is_null()) if "reject_reason" in mea.columns else mea
    # measure's rule for base problems left with too few shapes (applied here to runs made
    # before the rule existed; a no-op on later runs)
    from curate.measure.stage import _hold_to_shapes
    from curate.table import Rejections

    lost = Rejections("measure")
    kept_list = _hold_to_shapes(kept_rows.to_dicts(), mea.to_dicts(), lost, 3)
    kept_rows = pl.DataFrame(kept_list, schema=kept_rows.schema) if kept_list else kept_rows.clear()
    mea = pl.concat([mea.filter(~pl.col("problem_id").is_in(kept_rows["problem_id"].implode())
                                & pl.col("reject_reason").is_null())
                     .with_columns(pl.lit("measure").alias("reject_stage"),
                                   pl.lit("too_few_shapes").alias("reject_reason")),
                     mea.filter(pl.col("reject_reason").is_not_null() | pl.col("problem_id").is_in(
                         kept_rows["problem_id"].implode()))], how="diagonal_relaxed")
    primaries = kept_rows.filter(pl.col("variant") == 0)
    in_band = primaries.filter(pl.col("eager_ms").is_between(pl.col("band_lo_ms"), pl.col("band_hi_ms")))
    # base problems that build and run as problems: kept in the band, or lost over their size
    div_size = rej.filter(pl.col("reject_reason").is_in(list(SIZE_REASONS))).height
    mea_primary = mea.filter((pl.col("variant") == 0) & pl.col("reject_reason").is_not_null())
    mea_size = mea_primary.filter(pl.col("reject_reason").is_in(list(SIZE_REASONS))).height
    ran = in_band.height + div_size + mea_size
    per_base = kept_rows.group_by("base_problem_id").len()
    full = per_base.filter(pl.col("len") >= 3).height
    before = div.filter(pl.col("variant") == 0)["mined_calib_ms"]
    reasons = {}
    for frame in (rej, mea.filter(pl.col("reject_reason").is_not_null()) if "reject_reason" in mea.columns
                  else mea.clear()):
        for r, c in frame.group_by("reject_reason").len().iter_rows():
            reasons[f"{frame['reject_stage'][0] if frame.height else ''}:{r}"] = c
    return {
        "gpu": sorted(set(mea["gpu"].drop_nulls())) if "gpu" in mea.columns else None,
        "base problems in": base_in,
        "unfit whatever the size (harness, determinism, input sensitivity)": base_in - ran,
        "build and run as problems (kept, or lost over their size)": ran,
        "kept a primary shape measured in the band": in_band.height,
        "share of those that ran": f"{100 * in_band.height / max(ran, 1):.1f}%",
        "kept base problems with >= 3 in-band shapes": f"{full} of {per_base.height}",
        "rows measured / kept": f"{mea.height} / {kept_rows.height}",
        "kept rows: eager ms p10 / median / p90": _q(kept_rows["eager_ms"]),
        "kept rows under 0.3 ms": int((kept_rows["eager_ms"] < 0.3).sum()),
        "kept rows: peak MiB p10 / median / p90 (max)":
            f"{_q(kept_rows['peak_mem_mb'])} ({kept_rows['peak_mem_mb'].max():.0f})",
        "before (mined shapes, same GPU): eager ms p10 / median / p90": _q(before),
        "before: share under 0.1 ms / in 0.5-10 ms": f"{_share(before, 0, 0.1)} / {_share(before, 0.5, 10)}",
        "after (kept rows): share in 0.5-10 ms / at 1 ms or more":
            f"{_share(kept_rows['eager_ms'], 0.5, 10)} / {_share(kept_rows['eager_ms'], 1.0)}",
        "rejections": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "primary families": dict(primaries.group_by("shape_family").len().iter_rows()),
    }


def main() -> None:
    d = Path(sys.argv[1])
    names = sys.argv[2:] or sorted({p.name.split("-div.")[0] for p in d.glob("*-div.parquet")})
    for group in [[n] for n in names] + ([names] if len(names) > 1 else []):
        print(f"## {' + '.join(group)}")
        for k, v in figures(d, group).items():
            print(f"- {k}: {v}")
        print()


if __name__ == "__main__":
    main()
