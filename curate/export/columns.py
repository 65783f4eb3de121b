"""The columns the export expects from earlier stages, and typed nulls for skipped ones.

Any stage between ``mine`` and ``rank`` may be skipped (a pipeline YAML that leaves
``measure`` out, a run made on a machine without a GPU ...). The export still writes one
schema: every column listed here exists, typed, and is null where its stage did not run,
so a ``DatasetDict`` built from two different runs has the same features.
"""

from __future__ import annotations

import json

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
    "dtype": ("diversify", pl.String()),
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
    "difficulty_score": ("rank", pl.Float64()),
    "difficulty_signal": ("rank", pl.String()),
    "predicted_pass_rate": ("rank", pl.Float64()),
    "speedup_headroom": ("rank", pl.Float64()),
    "headroom_signal": ("rank", pl.String()),
    "level": ("rank", pl.Int64()),
    "category": ("rank", pl.String()),
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


# ---------------------------------------------------------------- structured columns and configs

SPEC_DTYPE = pl.List(pl.Struct({"kind": pl.String, "shape": pl.List(pl.Int64), "dtype": pl.String,
                                "low": pl.Int64, "high": pl.Int64, "value_json": pl.String,
                                "extra_json": pl.String}))
VARIANTS_DTYPE = pl.List(pl.Struct({"input_spec": SPEC_DTYPE, "init_args": pl.String, "heldout": pl.Boolean}))

#: Columns of the ``default`` config, in order: what a trainer, a reward function or a reader
#: needs. Columns no stage of curate writes (added by a newer stage or by hand) follow them.
DEFAULT_COLUMNS = (
    "problem_id", "name", "split", "code", "prompt", "prompt_tokens", "input_spec", "init_args",
    "shape_variants", "dtype", "eager_ms", "compile_ms", "inductor_speedup", "gpu", "difficulty",
    "difficulty_score", "speedup_headroom", "level", "category",
    "base_problem_id", "variant", "dedup_cluster", "source", "contaminated_by",
)
#: Columns of the ``measurements`` config (joined to ``default`` on ``problem_id``): how rows
#: were measured, deduplicated and ranked.
MEASUREMENT_COLUMNS = (
    "problem_id", "split", "is_representative", "est_flops", "est_bytes",
    "device", "torch_version", "peak_mem_mb", "pass_rate", "pass_at_k", "n_candidates",
    "n_correct", "best_speedup", "difficulty_signal", "predicted_pass_rate", "headroom_signal", "solver", "pruned", "code_chars_unpruned", "output_shapes",
    "synth_seconds",
)


def _spec_records(value) -> list[dict] | None:
    from curate.problem import plain_input_spec, spec_record

    spec = plain_input_spec(value)
    return None if spec is None else [spec_record(s) for s in spec]


def _variant_records(value) -> list[dict] | None:
    """Shape variants as records; items in no known form are left out, as the verifier
    (``curate.verify.verifier.normalize_variants``) skips them."""
    from curate.problem import dumps, plain_shape_variants

    if value is None:
        return None
    items = json.loads(value) if isinstance(value, str) and value.strip() else value
    out = []
    for item in items if isinstance(items, list) else []:
        try:
            (v,) = plain_shape_variants([item])
            out.append({"input_spec": _spec_records(v["input_spec"]),
                        "init_args": None if v["init_args"] is None else dumps(v["init_args"]),
                        # the shape no prompt shows (diversify's odd-size verification shape)
                        "heldout": bool(item.get("heldout")) if isinstance(item, dict) else False})
        except (ValueError, TypeError, KeyError, json.JSONDecodeError):
            continue
    return out


def structured(df: pl.DataFrame) -> pl.DataFrame:
    """``input_spec`` and ``shape_variants`` as lists of structs (:data:`SPEC_DTYPE`,
    :data:`VARIANTS_DTYPE`) instead of JSON text; already structured columns are kept.

    Raises:
        ValueError: a value that is not an input spec or a list of shape variants.
    """
    exprs = []
    if "input_spec" in df.columns and df.schema["input_spec"] == pl.String:
        exprs.append(pl.Series("input_spec", [_spec_records(v) for v in df["input_spec"].to_list()],
                               dtype=SPEC_DTYPE))
    if "shape_variants" in df.columns and df.schema["shape_variants"] == pl.String:
        exprs.append(pl.Series("shape_variants",
                               [_variant_records(v) for v in df["shape_variants"].to_list()],
                               dtype=VARIANTS_DTYPE))
    return df.with_columns(exprs) if exprs else df


def config_frames(df: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The rows of one split as the ``default`` and ``measurements`` configs.

    ``default`` holds :data:`DEFAULT_COLUMNS` present in ``df`` plus every column neither
    list names (passed through); ``measurements`` holds :data:`MEASUREMENT_COLUMNS` present.
    """
    known = set(DEFAULT_COLUMNS) | set(MEASUREMENT_COLUMNS)
    default = [c for c in DEFAULT_COLUMNS if c in df.columns] + [c for c in df.columns if c not in known]
    measured = [c for c in MEASUREMENT_COLUMNS if c in df.columns]
    return {"default": df.select(default), "measurements": df.select(measured)}
