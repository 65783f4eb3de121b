"""The ``export`` stage itself: see :mod:`curate.export` for what it writes, and
:class:`curate.export.options.ExportOptions` for its options."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl

from curate.export.card import render_card
from curate.export.columns import config_frames, normalize, structured
from curate.export.hf import CONFIG_DIRS, push_to_hub, write_hf, write_parquet
from curate.export.prompt import build_prompt
from curate.export.tokens import count_tokens, tokenizer_name
from curate.export.split import SPLITS, add_split, assign_splits
from curate.export.prune_table import prune_codes
from curate.export.verl import write_verl
from curate.harness.stage import StageRun, stage
from curate.table import STAGES, Rejections, latest_input, read_problems, read_stats, stage_dir

__all__ = ["run", "default_source"]


def default_source(out: Path | str) -> Path:
    """``OUT/rank``, or the latest earlier stage folder holding problems if rank was skipped.

    Raises:
        FileNotFoundError: no stage before export has written problems under ``out``.
    """
    return latest_input(out, "export")


def _stage_stats(out: Path) -> list[dict[str, Any]]:
    found = []
    for name in STAGES:
        d = stage_dir(out, name)
        if not (d / "stats.json").is_file():
            continue
        try:
            found.append(read_stats(d))
        except ValueError as exc:  # a truncated stats.json should not sink the card
            print(f"export: unreadable {d / 'stats.json'}: {exc}", file=sys.stderr)
    return found


def _order(df: pl.DataFrame) -> pl.DataFrame:
    """Deterministic row order: clusters together, a base problem's variants together."""
    return df.sort("dedup_cluster", "base_problem_id", "variant", "problem_id", nulls_last=True)


@stage("export")
def run(sr: StageRun, name: str, val_fraction: float, test_fraction: float, seed: int,
        max_prompt_tokens: int | None, prune: bool, workers: int | None, push_to_hub_repo: str | None,
        private: bool, prune_timeout_s: float, token: str | None, executor: str,
        ray_address: str | None) -> dict[str, Any]:
    """Prune, split by dedup cluster and write the dataset, its card and the verl view.

    Options (:class:`curate.export.options.ExportOptions`):
        out: run folder; writes ``out/export/``.
        source: a stage folder or parquet file to read instead of :func:`default_source`.
        name: dataset name (card title; verl ``data_source`` is ``"curate/<name>"``).
        val_fraction, test_fraction: shares of dedup clusters in validation and test.
        seed: seed of the cluster hash (see :mod:`curate.export.split`).
        max_prompt_tokens: reject rows whose prompt has more tokens (``prompt_too_long``);
            None keeps every length.
        prune: prune each program (:mod:`curate.export.prune_table`); False exports the
            code as the input table has it.
        workers: sandbox processes proving pruned programs (default: CPU count); with
            ``executor="ray"`` and no address, the CPUs of the local Ray instance.
        prune_timeout_s: seconds to run one original and its pruned program.
        push_to_hub_repo: also upload every config to this Hugging Face dataset repository
            (``DatasetDict.push_to_hub``), after the local files are written.
        private, token: for the upload.
        executor: ``local`` or ``ray``: where the pruned programs are proven (a sandboxed Ray
            task per program body, :mod:`curate.executor`); the rest runs here.
        ray_address: the Ray cluster to join (``executor="ray"``; None starts a local one).
    Returns:
        The stats dict written to ``out/export/stats.json``, with ``rows_per_split``,
        ``clusters_per_split``, ``base_problems_per_split``, ``prune`` (see
        :func:`curate.export.prune_table.prune_codes`) and ``prompt_tokens`` (median, p90,
        max, tokenizer).
    Raises:
        ValueError: bad fractions or ``max_prompt_tokens``, or the input is not a problem table.
        FileNotFoundError: nothing to read.
        RuntimeError: the upload failed (no network, no token, no access); the local export
            is complete by then.
    """
    assign_splits([], val_fraction, test_fraction, seed)  # validates the fractions up front
    if max_prompt_tokens is not None and max_prompt_tokens <= 0:
        raise ValueError(f"max_prompt_tokens must be positive, got {max_prompt_tokens}")
    out = sr.out
    src = sr.input
    raw = read_problems(src)
    table = normalize(raw)
    d = sr.dir
    d.mkdir(parents=True, exist_ok=True)

    missing = pl.col("code").is_null() | (pl.col("code").str.strip_chars() == "")
    rejections = Rejections("export")
    rejections.add_frame(table.filter(missing), "missing_code", "row has no reference code")
    rows = table.filter(~missing)
    prune_stats: dict[str, Any] = {"enabled": prune}
    if prune and rows.height:
        rows, more = prune_codes(rows, d / "_prune_checks.jsonl", workers, prune_timeout_s,
                                 executor=sr.remote, progress=sr.progress)
        prune_stats.update(more)
    else:
        rows = rows.with_columns(pl.lit(False).alias("pruned"),
                                 pl.col("code").str.len_chars().cast(pl.Int64).alias("code_chars_unpruned"))
    prompts = [build_prompt(c, d) for c, d in zip(rows["code"].to_list(), rows["dtype"].to_list())]
    rows = rows.with_columns(pl.Series("prompt", prompts, dtype=pl.String),
                             pl.Series("prompt_tokens", count_tokens(prompts), dtype=pl.Int64))
    if max_prompt_tokens is not None:
        long = pl.col("prompt_tokens") > max_prompt_tokens
        over = rows.filter(long)
        for r in over.iter_rows(named=True):
            rejections.add({k: r[k] for k in table.columns}, "prompt_too_long",
                           f"{r['prompt_tokens']} prompt tokens > {max_prompt_tokens}")
        rows = rows.filter(~long)
    kept = _order(add_split(rows, val_fraction, test_fraction, seed))
    splits = {s: kept.filter(pl.col("split") == s) for s in SPLITS}

    data_source = f"curate/{name}"
    verl_counts, verl_sizes = write_verl(splits, d / "verl", data_source)
    shaped = {s: config_frames(structured(df)) for s, df in splits.items()}
    configs = {c: {s: shaped[s][c] for s in SPLITS} for c in ("default", "measurements")}
    sizes = {c: write_parquet(configs[c], d / CONFIG_DIRS[c]) for c in configs}
    sizes["verl"] = verl_sizes
    write_hf(configs["default"], d / "hf")

    tokens = kept["prompt_tokens"]
    token_stats = {"tokenizer": tokenizer_name()}
    if kept.height:
        token_stats.update(median=int(tokens.median()), p90=int(tokens.quantile(0.9, "nearest")),
                           max=int(tokens.max()),
                           share_le_1024=round(float((tokens <= 1024).mean()), 4),
                           share_le_2048=round(float((tokens <= 2048).mean()), 4))
    extra = {
        "name": name,
        "data_source": data_source,
        "source": str(src),
        "seed": seed,
        "val_fraction": val_fraction,
        "test_fraction": test_fraction,
        "max_prompt_tokens": max_prompt_tokens,
        "rows_per_split": {s: df.height for s, df in splits.items()},
        "clusters_per_split": {s: df["dedup_cluster"].n_unique() for s, df in splits.items()},
        "base_problems_per_split": {s: df["base_problem_id"].n_unique() for s, df in splits.items()},
        "prune": prune_stats,
        "prompt_tokens": token_stats,
    }
    stats = sr.write(kept, rejections.frame(like=table), raw.height, extra)
    card = render_card(name, kept, splits, _stage_stats(out), verl_counts, data_source,
                       sizes=sizes, columns={c: configs[c]["train"].schema for c in configs},
                       token_stats=token_stats, prune_stats=prune_stats)
    (d / "README.md").write_text(card)
    if push_to_hub_repo:
        verl = {s: pl.read_parquet(d / "verl" / f"{s}.parquet") for s in SPLITS}
        try:
            push_to_hub(d, push_to_hub_repo, {**configs, "verl": verl}, card, private=private,
                        token=token)
        except Exception as exc:  # network, token, permissions: the local export stands
            raise RuntimeError(f"export written to {d}, but the push to {push_to_hub_repo} failed: "
                               f"{type(exc).__name__}: {exc}") from exc
        stats["pushed_to"] = push_to_hub_repo
    return stats
