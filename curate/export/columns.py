"""The columns the export expects from earlier stages, and typed nulls for skipped ones.

Any stage between ``mine`` and ``rank`` may be skipped (a pipeline YAML that leaves
``measure`` out, a run made on a machine without a GPU ...). The export still writes one
schema: every column listed here exists, typed, and is null where its stage did not run,
so a ``DatasetDict`` built from two different runs has the same features.
"""

from __future__ import annotations

import polars as pl

from curate.table import SOURCE_FIELDS

SOURCE_DTYPE = pl.Struct({f: pl.String for f in SOURCE_FIELDS})

# column -> (stage that writes it, dtype used when the column is missing or all-null)
EXPECTED: dict[str, tuple[str, pl.DataType]] = {
    "problem_id": ("mine", pl.String()),
    "name": ("mine", pl.String()),
    "code": ("mine", pl.String()),
    "init_args": ("mine", pl.String()),
    "input_spec": ("mine", pl.String()),
    "source": ("mine", SOURCE_DTYPE),
    "input_dtypes": ("mine", pl.String()),
    "all_float_inputs": ("mine", pl.Boolean()),
    "checked_torch": ("measure", pl.String()),
    "dedup_cluster": ("dedup", pl.String()),
    "is_representative": ("dedup", pl.Boolean()),
    "contaminated_by": ("dedup", pl.String()),
    "variant": ("diversify", pl.String()),
    "base_problem_id": ("diversify", pl.String()),
    "est_flops": ("diversify", pl.Float64()),
    "est_bytes": ("diversify", pl.Int64()),
    "shape_variants": ("diversify", pl.String()),
    "eager_ms": ("measure", pl.Float64()),
    "compile_ms": ("measure", pl.Float64()),
    "inductor_speedup": ("measure", pl.Float64()),
    "gpu": ("measure", pl.String()),
    "device": ("measure", pl.String()),
    "torch_version": ("measure", pl.String()),
    "peak_mem_mb": ("measure", pl.Float64()),
    "pass_rate": ("rank", pl.Float64()),
    "pass_at_k": ("rank", pl.Float64()),
    "n_candidates": ("rank", pl.Int64()),
    "n_correct": ("rank", pl.Int64()),
    "best_speedup": ("rank", pl.Float64()),
    "difficulty": ("rank", pl.String()),
    "solver": ("rank", pl.String()),
}


def normalize(df: pl.DataFrame) -> pl.DataFrame:
    """Return ``df`` with every :data:`EXPECTED` column present and typed.

    Columns a stage wrote keep their dtype (a later helper may store ``variant`` as an
    int); missing columns, and columns that are entirely null (polars' ``Null`` dtype,
    which Hugging Face ``datasets`` cannot type), get the default dtype. Two fallbacks
    keep the cluster split sound when ``dedup`` or ``diversify`` were skipped:
    ``base_problem_id`` defaults to ``problem_id`` and ``dedup_cluster`` to
    ``base_problem_id`` (each base problem its own cluster). ``dedup_cluster`` is cast to
    ``String`` so clusters from different runs compare equal.

    Raises:
        ValueError: ``problem_id`` is missing (the input is not a curate problem table).
    """
    if "problem_id" not in df.columns:
        raise ValueError(f"not a curate problem table: no problem_id column (columns: {df.columns})")
    exprs = []
    for col, (_, dtype) in EXPECTED.items():
        if col not in df.columns or df.schema[col] == pl.Null:
            exprs.append(pl.lit(None, dtype=dtype).alias(col))
    df = df.with_columns(exprs) if exprs else df
    if df.schema["source"] != SOURCE_DTYPE and isinstance(df.schema["source"], pl.Struct):
        df = df.with_columns(_source_struct(df))
    df = df.with_columns(
        pl.col("base_problem_id").cast(pl.String).fill_null(pl.col("problem_id")))
    return df.with_columns(
        pl.col("dedup_cluster").cast(pl.String).fill_null(pl.col("base_problem_id")),
        pl.col("is_representative").fill_null(True) if df.schema["is_representative"] == pl.Boolean
        else pl.col("is_representative"),
    )


def _source_struct(df: pl.DataFrame) -> pl.Expr:
    """Rebuild ``source`` with all :data:`SOURCE_FIELDS` as strings (absent ones null)."""
    present = {f.name for f in df.schema["source"].fields}
    return pl.struct([
        (pl.col("source").struct.field(f).cast(pl.String) if f in present
         else pl.lit(None, dtype=pl.String)).alias(f)
        for f in SOURCE_FIELDS
    ]).alias("source")
