"""Write the rows of the first N base problems of a diversify table as a diversify stage
folder (``OUT/problems/part-00000.parquet``), for measure runs on a fixed sample.

    python benchmarks/gpu/take_rows.py ROWS.parquet N OUT [--skip K]
"""
import sys
from pathlib import Path


def take_rows(src: str, n: int, out: Path, skip: int = 0) -> int:
    """Rows of base problems ``skip`` to ``skip + n`` (table order) into ``out``; their count."""
    import polars as pl

    df = pl.read_parquet(src)
    bases = df["base_problem_id"].unique(maintain_order=True).to_list()[skip:skip + n]
    part = df.filter(pl.col("base_problem_id").is_in(bases))
    (out / "problems").mkdir(parents=True, exist_ok=True)
    part.write_parquet(out / "problems" / "part-00000.parquet")
    return part.height


if __name__ == "__main__":
    args = sys.argv[1:]
    skip = 0
    if "--skip" in args:
        i = args.index("--skip")
        skip = int(args[i + 1])
        del args[i:i + 2]
    rows = take_rows(args[0], int(args[1]), Path(args[2]), skip)
    print(f"{rows} rows of the base problems {skip}-{skip + int(args[1])} -> {args[2]}")
