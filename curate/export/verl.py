"""The RL view: one row per problem in verl's RLHF dataset schema.

verl's data preprocess examples (volcengine/verl ``examples/data_preprocess/gsm8k.py``)
write parquet rows with ``data_source`` (str, selects the reward function),
``prompt`` (a list of chat messages ``{"role", "content"}``), ``ability`` (str),
``reward_model`` (``{"style": "rule", "ground_truth": ...}``) and ``extra_info`` (a dict
passed through to the reward function). Here ``ground_truth`` is the reference program
and ``extra_info`` carries what :func:`curate.reward.compute_score` needs to verify and
time a candidate (constructor arguments, input spec, shape variants, the precision the
problem runs in, ``dtype``, and baseline runtimes).
TRL's ``GRPOTrainer`` reads the same file: it takes ``prompt`` as a conversational
prompt and passes the other columns to reward functions as keyword arguments.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from curate.export.prompt import build_prompt

ABILITY = "gpu_kernel"

# extra_info fields, in order; all come from the normalized problem table
EXTRA_FIELDS = (
    "split", "index", "problem_id", "name", "base_problem_id", "variant", "dedup_cluster",
    "init_args", "input_spec", "shape_variants", "dtype", "eager_ms", "compile_ms", "inductor_speedup",
    "gpu", "device", "torch_version", "peak_mem_mb", "difficulty", "difficulty_score", "speedup_headroom",
    "pass_rate", "prompt_tokens",
)


def verl_frame(split_df: pl.DataFrame, data_source: str) -> pl.DataFrame:
    """verl rows for the problems of one split, in the order given.

    Args:
        split_df: normalized problem rows (see :mod:`.columns`) with a ``split`` column and
            non-empty ``code``; the user message is their ``prompt`` column (the same text the
            ``default`` config holds) or, without one, :func:`build_prompt` of ``code``.
        data_source: the ``data_source`` value, ``"curate/<dataset name>"``.
    Returns:
        A frame with columns ``data_source`` (str), ``prompt`` (list of struct{role, content}),
        ``ability`` (str), ``reward_model`` (struct{style, ground_truth}) and ``extra_info``
        (struct of :data:`EXTRA_FIELDS` plus ``source_name`` and ``licence``); ``index`` is
        the row's position within its split (int64).
    """
    df = split_df.with_row_index("index").with_columns(pl.col("index").cast(pl.Int64))
    if "prompt" not in df.columns:
        dtypes = df["dtype"].to_list() if "dtype" in df.columns else [None] * df.height
        df = df.with_columns(pl.Series("prompt", [build_prompt(c, d) for c, d in zip(df["code"].to_list(), dtypes)],
                                       dtype=pl.String))
    if "prompt_tokens" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.Int64).alias("prompt_tokens"))
    prompt_text = pl.col("prompt")
    message = pl.struct(pl.lit("user").alias("role"), prompt_text.alias("content"))
    extra = [pl.col(f) for f in EXTRA_FIELDS] + [
        pl.col("source").struct.field("name").alias("source_name"),
        pl.col("source").struct.field("licence").alias("licence"),
    ]
    return df.select(
        pl.lit(data_source, dtype=pl.String).alias("data_source"),
        pl.concat_list([message]).alias("prompt"),
        pl.lit(ABILITY, dtype=pl.String).alias("ability"),
        pl.struct(pl.lit("rule", dtype=pl.String).alias("style"),
                  pl.col("code").alias("ground_truth")).alias("reward_model"),
        pl.struct(extra).alias("extra_info"),
    )


def write_verl(splits: dict[str, pl.DataFrame], directory: Path, data_source: str
               ) -> tuple[dict[str, int], dict[str, int]]:
    """Write ``directory/<split>.parquet`` for each split.

    Returns:
        ``(rows, num_bytes)`` per split (``num_bytes``: the split's Arrow size, the card's
        ``dataset_info``).
    """
    directory.mkdir(parents=True, exist_ok=True)
    counts, sizes = {}, {}
    for split, df in splits.items():
        frame = verl_frame(df, data_source)
        frame.write_parquet(directory / f"{split}.parquet")
        counts[split] = frame.height
        sizes[split] = int(frame.to_arrow().nbytes)
    return counts, sizes
