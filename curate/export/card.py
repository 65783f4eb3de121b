"""The dataset card (``README.md``): Hugging Face YAML metadata, then the run's figures.

The YAML header follows the Hugging Face dataset card metadata fields (``license``,
``task_categories``, ``tags``, ``size_categories``, ``configs`` with ``data_files``,
``dataset_info`` with per-split ``num_examples``); the body reports what the run did,
read from each stage's ``stats.json``, and how to load and train on the result.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Sequence

import polars as pl
import yaml

from curate.export.hf import CONFIG_DIRS

# Hugging Face licence identifiers we map SPDX ids onto (lower case); anything else is "other".
HF_LICENSES = {
    "apache-2.0", "mit", "bsd", "bsd-2-clause", "bsd-3-clause", "bsd-3-clause-clear",
    "gpl-2.0", "gpl-3.0", "lgpl-2.1", "lgpl-3.0", "agpl-3.0", "mpl-2.0", "cc0-1.0",
    "cc-by-4.0", "cc-by-sa-4.0", "unlicense", "artistic-2.0", "wtfpl", "bsl-1.0",
}
_ALIASES = {
    "mit license": "mit", "apache 2.0": "apache-2.0", "apache license 2.0": "apache-2.0",
    "apache software license": "apache-2.0", "apache-2": "apache-2.0",
    "bsd license": "bsd", "new bsd license": "bsd-3-clause", "bsd 3-clause": "bsd-3-clause",
}
TAGS = ["code", "gpu-kernels", "triton", "cuda", "pytorch", "kernelbench",
        "reinforcement-learning", "verl"]


def licence_id(licence: str | None) -> str | None:
    """Hugging Face licence id for one source licence string, or None if it is not a known one.

    ``"MIT"`` -> ``"mit"``, ``"BSD-3-Clause"`` -> ``"bsd-3-clause"``; compound SPDX
    expressions (``"MIT AND BSD-3-Clause"``) and free text give None.
    """
    if not licence:
        return None
    key = licence.strip().lower()
    key = _ALIASES.get(key, key)
    return key if key in HF_LICENSES else None


def dataset_license(licences: Iterable[str | None]) -> str:
    """The card's ``license``: the one licence all sources share, else ``"other"``.

    Unknown licences (None, free text, compound expressions) count as ``"other"``.
    """
    ids = {licence_id(x) for x in licences}
    if len(ids) == 1 and None not in ids:
        return ids.pop()
    return "other"


def size_category(n: int) -> str:
    """Hugging Face ``size_categories`` bucket for ``n`` rows."""
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                         (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if n < bound:
            return label
    return "10M<n<100M"


def card_metadata(name: str, splits: dict[str, pl.DataFrame], licences: Sequence[str | None],
                  verl_counts: dict[str, int], sizes: dict[str, dict[str, int]] | None = None
                  ) -> dict[str, Any]:
    """The YAML header as a dict (``yaml.safe_dump``-able).

    Args:
        sizes: config -> split -> Arrow bytes (``num_bytes``); configs missing here get
            ``estimated_size`` of the rows (``default``) or no ``num_bytes``.
    """
    license_ = dataset_license(licences)
    meta: dict[str, Any] = {"pretty_name": name, "license": license_}
    if license_ == "other":
        # the per-source licences are listed in the card body and kept per row in source.licence
        meta["license_name"] = "mixed-source-licences"
    total = sum(df.height for df in splits.values())
    sizes = dict(sizes or {})
    sizes.setdefault("default", {s: int(df.estimated_size()) for s, df in splits.items()})
    rows = {c: {s: df.height for s, df in splits.items()} for c in ("default", "measurements")}
    rows["verl"] = dict(verl_counts)
    configs = [c for c in CONFIG_DIRS if c in sizes or c == "verl"]
    meta.update({
        "task_categories": ["text-generation"],
        "language": ["en"],
        "tags": TAGS,
        "size_categories": [size_category(total)],
        "configs": [
            dict({"config_name": c}, **({"default": True} if c == "default" else {}),
                 data_files=[{"split": s, "path": f"{CONFIG_DIRS[c]}/{s}.parquet"} for s in rows[c]])
            for c in configs],
        "dataset_info": [_info(c, rows[c], sizes.get(c)) for c in configs],
    })
    return meta


def _info(config: str, rows: dict[str, int], sizes: dict[str, int] | None) -> dict[str, Any]:
    splits = []
    for s, n in rows.items():
        entry: dict[str, Any] = {"name": s, "num_bytes": int((sizes or {}).get(s, 0)), "num_examples": n}
        splits.append(entry)
    return {"config_name": config, "splits": splits,
            "download_size": 0, "dataset_size": int(sum((sizes or {}).values()))}


# ---------------------------------------------------------------- figures

def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 1e4 else f"{x:,.0f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x).replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def stage_table(stage_stats: Sequence[dict[str, Any]]) -> str:
    rows = [(s.get("stage"), s.get("in"), s.get("kept"), s.get("rejected"),
             s.get("rows_out", s.get("kept")), s.get("seconds")) for s in stage_stats]
    return md_table(["stage", "rows in", "kept", "rejected", "rows out", "seconds"], rows)


def rejection_table(stage_stats: Sequence[dict[str, Any]]) -> str:
    rows = [(s["stage"], reason, n) for s in stage_stats
            for reason, n in (s.get("rejected_by_reason") or {}).items()]
    if not rows:
        return "No rows were rejected."
    return md_table(["stage", "reason", "rows"], rows)


def split_table(splits: dict[str, pl.DataFrame]) -> str:
    rows = [(s, df.height, df["base_problem_id"].n_unique() if df.height else 0,
             df["dedup_cluster"].n_unique() if df.height else 0) for s, df in splits.items()]
    return md_table(["split", "rows", "base problems", "dedup clusters"], rows)


def source_table(table: pl.DataFrame) -> str:
    if table.height == 0:
        return "No rows."
    df = (table.select(pl.col("source").struct.unnest(), "base_problem_id")
          .group_by("name", "kind", "version", "licence")
          .agg(pl.len().alias("rows"), pl.col("base_problem_id").n_unique().alias("problems"))
          .sort("rows", "name", descending=[True, False]))
    return md_table(["source", "kind", "version", "licence", "rows", "base problems"],
                    df.select("name", "kind", "version", "licence", "rows", "problems").rows())


#: How the card explains the two difficulty columns (see curate.rank.predict, curate.rank.difficulty).
DIFFICULTY_NOTE = (
    "`difficulty_score` (0 easy .. 1 hard) is the estimated probability that a baseline "
    "language model's kernel for the problem is wrong: `1 - pass_rate` where an LLM solver's "
    "candidates were verified (`pass_rate`), else `1 - predicted_pass_rate`, a blend of a "
    "logistic model and gradient-boosted trees over the problem's traced operators and code, "
    "fitted to public per-problem results of language models on KernelBench (the logistic "
    "part orders level-2 chains within their level by the structural score: library share "
    "and kernel count of the trace) "
    "(`predicted`; `predicted_code` from the code alone where "
    "the trace failed); `easy`/`medium`/`hard` cut the predicted pass rate at its quartiles "
    "over KernelBench's problems (`hard` the lowest quarter, `easy` the highest). "
    "`speedup_headroom` (0 .. 1) is a second axis: how hard the problem is to make faster "
    "than TorchInductor and the vendor libraries (compiler headroom "
    "over eager, share of GPU time in cuBLAS/cuDNN kernels, kernel count; from the GPU "
    "figures, or `static` from the meta-device trace), which tracks whether a correct kernel "
    "is also faster, not whether it is correct.")


def predictor_note() -> str:
    """How far the predicted `difficulty_score` can be trusted, from the shipped predictor's own
    cross-validated figures (``curate/rank/difficulty_model.json``); "" where the file is absent."""
    try:
        from curate.rank.predict import load_model

        model = load_model()
        cv, base = model["cross_validated"]["full"], model["baselines"]
        one_shot, line_one_shot = cv["one_shot_spearman"], base["line_count_one_shot"]
    except (OSError, KeyError, ValueError):
        return ""
    return (f" How far to trust the predicted score: on KernelBench problems held out of its fit, its "
            f"Spearman correlation with the pooled pass rate of public model results is "
            f"{cv['spearman']:.2f} (95% CI {cv['ci95'][0]:.2f}-{cv['ci95'][1]:.2f}; the reference's "
            f"line count gives {base['line_count']:.2f}), with one-shot models' results alone "
            f"{one_shot:.2f} (the line count {line_one_shot:.2f}), and the problems it calls `easy` pass "
            f"{cv['easy_over_hard']:.1f}x as often as those it calls `hard`. It orders problems for a "
            f"curriculum; one model's outcome on one problem stays hard to foresee.")


DIFFICULTY_ORDER = ["trivial", "easy", "medium", "hard", "unsolved", "unranked"]
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def runtime_section(table: pl.DataFrame) -> str:
    timed = table.filter(pl.col("eager_ms").is_not_null())
    if timed.height == 0:
        return "No runtimes: the `measure` stage did not run (or timed nothing)."
    parts = []
    by = (timed.group_by(pl.col("gpu").fill_null("-"), pl.col("device").fill_null("-"),
                         pl.col("torch_version").fill_null("-"))
          .agg([pl.len().alias("rows")]
               + [pl.col("eager_ms").quantile(q, "linear").alias(f"q{q}") for q in QUANTILES]
               + [pl.col("inductor_speedup").filter(pl.col("inductor_speedup") > 0).log().mean()
                  .exp().alias("geomean")])
          .sort("rows", descending=True))
    headers = ["gpu", "device", "torch", "rows"] + [
        {0.0: "min", 1.0: "max"}.get(q, f"p{int(q * 100)}") for q in QUANTILES] + [
        "eager/Inductor geomean"]
    parts.append("Eager runtime (ms) by GPU:\n\n" + md_table(headers, by.rows()))
    parts.append("Eager runtime by GPU, rows per bin (log-spaced, ms):\n\n" + runtime_histogram(timed))
    if {"band_lo_ms", "band_hi_ms"} <= set(timed.columns):
        # only times taken on the GPU kind the band is for say anything about the band
        banded = timed.filter(pl.col("band_lo_ms").is_not_null() & pl.col("gpu").is_not_null()
                              & pl.col("gpu").str.to_lowercase().str.replace_all(" ", "")
                              .str.contains(pl.col("target_gpu").fill_null("").str.to_lowercase(), literal=True))
        if banded.height:
            inside = banded.filter(pl.col("eager_ms").is_between(pl.col("band_lo_ms"), pl.col("band_hi_ms")))
            lo, hi = banded["band_lo_ms"].min(), banded["band_hi_ms"].max()
            parts.append(f"Rows timed inside the band diversify aimed them at ({lo:g}-{hi:g} ms on "
                         f"{', '.join(sorted(set(banded['target_gpu'].drop_nulls())))}): "
                         f"{inside.height:,} of {banded.height:,}.")
    if "est_ms" in table.columns and "shape_source" in table.columns:
        est = table.filter(pl.col("shape_source") == "estimated")
        if est.height:
            q = [est["est_ms"].quantile(x, "linear") for x in (0.1, 0.5, 0.9)]
            parts.append(f"{est.height:,} rows have shapes set from roofline estimates only (no GPU ran "
                         f"them; timed on the CPU at their mined inputs): estimated eager ms on the "
                         f"target GPU p10 / median / p90 = {q[0]:.3g} / {q[1]:.3g} / {q[2]:.3g}.")
    compiled = timed.filter(pl.col("compile_ms").is_not_null())
    parts.append(f"Rows with a runtime: {timed.height:,} of {table.height:,}; with a TorchInductor "
                 f"runtime: {compiled.height:,}.")
    return "\n\n".join(parts)


#: Bin edges (ms) of the runtime histogram: launch-bound below 0.1 ms, KernelBench's level-1
#: range 0.5-10 ms.
RUNTIME_BINS = (0.0, 0.03, 0.1, 0.3, 0.5, 1.0, 3.0, 10.0, 30.0, 100.0)


def runtime_histogram(timed: pl.DataFrame) -> str:
    """A Markdown table: rows per log-spaced eager-time bin (ms), one line per GPU (or device)."""
    labels = [f"{a:g}-{b:g}" for a, b in zip(RUNTIME_BINS, RUNTIME_BINS[1:])] + [f">{RUNTIME_BINS[-1]:g}"]
    out = []
    for (gpu,), part in sorted(timed.group_by(pl.col("gpu").fill_null(pl.col("device")).fill_null("-")),
                               key=lambda kv: str(kv[0])):
        e = part["eager_ms"].to_list()
        counts = [sum(1 for x in e if a <= x < b) for a, b in zip(RUNTIME_BINS, RUNTIME_BINS[1:])]
        counts.append(sum(1 for x in e if x >= RUNTIME_BINS[-1]))
        out.append([gpu] + counts)
    return md_table(["gpu"] + labels, out)


#: KernelBench's problems per level (levels 1-3: 100, 100, 50).
KERNELBENCH_LEVELS = {1: 100, 2: 100, 3: 50}


def structure_section(table: pl.DataFrame) -> str:
    """Rows and base problems per KernelBench ``level`` beside KernelBench's own counts,
    then rows per operator ``category`` (see :mod:`curate.structure`)."""
    if not table.height or "level" not in table.columns:
        return "No structure columns (the rank stage did not run)."
    base = table.unique("base_problem_id", keep="first") if "base_problem_id" in table.columns else table
    rows = []
    for level in (1, 2, 3, None):
        n = table.filter(pl.col("level").is_null() if level is None else pl.col("level") == level).height
        b = base.filter(pl.col("level").is_null() if level is None else pl.col("level") == level).height
        if level is None and not n:
            continue
        rows.append([level if level is not None else "unknown", n, b, KERNELBENCH_LEVELS.get(level, "-")])
    parts = ["Level in KernelBench's sense (1: one operator, 2: a short fusable chain such as "
             "conv + bias + activation, 3: a block or a whole model), read from each problem's "
             "ATen operators traced on the `meta` device:",
             md_table(["level", "rows", "base problems", "KernelBench"], rows)]
    if "category" in table.columns:
        counts = table.group_by(pl.col("category").fill_null("unknown")).len().sort("len", descending=True)
        parts.append("Category: where the forward spends its time (each ATen operator priced on an "
                     "H100 roofline, elementwise epilogues counted with the operator they follow):")
        parts.append(md_table(["category", "rows"], counts.iter_rows()))
    return "\n\n".join(parts)


def precision_section(table: pl.DataFrame) -> str:
    """Rows and base problems per ``dtype`` (the precision a row runs in, ``curate diversify
    --dtypes``), with the median eager time of each, and how the reward compares outputs in
    each."""
    if not table.height:
        return "No rows."
    dtype = pl.col("dtype").fill_null("float32 (not recorded)") if "dtype" in table.columns \
        else pl.lit("float32 (not recorded)")
    per = (table.with_columns(dtype.alias("_dtype"))
           .group_by("_dtype").agg(pl.len().alias("rows"), pl.col("base_problem_id").n_unique().alias("bases"),
                                   pl.col("eager_ms").median().alias("eager"))
           .sort("rows", descending=True))
    rows = [[d, n, b, e] for d, n, b, e in per.iter_rows()]
    return ("Each row runs in one precision (`dtype`): the reward casts the reference and the candidate "
            "(floating parameters and buffers) and every floating-point input to it, as KernelBench's "
            "harness does, and compares outputs with that precision's tolerances (1e-4 for float32, "
            "1e-2 for float16 and bfloat16, plus a relative-L2 bound). A base problem's precisions are "
            "in one split.\n\n"
            + md_table(["dtype", "rows", "base problems", "median eager ms"], rows))


def difficulty_section(splits: dict[str, pl.DataFrame]) -> str:
    frames = [df.select(pl.col("difficulty").fill_null("unranked"), "split", "pass_rate", "solver")
              for df in splits.values() if df.height]
    if not frames:
        return "No rows."
    df = pl.concat(frames)
    counts = df.group_by("difficulty", "split").len()
    levels = sorted(counts["difficulty"].unique().to_list(),
                    key=lambda x: (DIFFICULTY_ORDER.index(x) if x in DIFFICULTY_ORDER else 99, x))
    rows = []
    for level in levels:
        sub = counts.filter(pl.col("difficulty") == level)
        per = {s: n for _, s, n in sub.iter_rows()}
        rows.append([level] + [per.get(s, 0) for s in splits] + [sum(per.values())])
    solvers = sorted(x for x in df["solver"].unique().to_list() if x and x != "none")
    mean = df["pass_rate"].mean()
    tail = (f"\n\nBaseline solver: {', '.join(solvers) if solvers else '-'}; mean pass rate "
            f"{_fmt(mean)}.")
    both = [d for d in splits.values() if d.height and {"difficulty_score", "speedup_headroom"} <= set(d.columns)]
    if both:
        scores = pl.concat([d.select(pl.col("difficulty_score").cast(pl.Float64),
                                     pl.col("speedup_headroom").cast(pl.Float64)) for d in both])
        tail += (f"\n\nRows with a `difficulty_score`: {scores['difficulty_score'].is_not_null().sum():,} "
                 f"of {scores.height:,} (mean {_fmt(scores['difficulty_score'].mean())}); with a "
                 f"`speedup_headroom`: {scores['speedup_headroom'].is_not_null().sum():,} "
                 f"(mean {_fmt(scores['speedup_headroom'].mean())}).")
    signals = pl.concat([d.select(pl.col("difficulty_signal").cast(pl.String)) for d in splits.values()
                         if d.height and "difficulty_signal" in d.columns]) if any(
        d.height and "difficulty_signal" in d.columns for d in splits.values()) else None
    if signals is not None and signals.height:
        per = signals.group_by(pl.col("difficulty_signal").fill_null("none")).len().sort("len", descending=True)
        tail += ("\n\nWhat set each bucket (`difficulty_signal`): "
                 + ", ".join(f"`{sig}` {n:,}" for sig, n in per.iter_rows()) + ". "
                 + DIFFICULTY_NOTE)
        if any(str(sig).startswith("predicted") for sig, _ in per.iter_rows()):
            tail += predictor_note()
    return md_table(["difficulty", *splits, "all"], rows) + tail


# ---------------------------------------------------------------- usage text

def prompt_section(token_stats: dict[str, Any] | None, prune_stats: dict[str, Any] | None) -> str:
    """Prompt lengths in tokens (median, p90, max) and what pruning did."""
    t = token_stats or {}
    if "median" not in t:
        return "No prompts."
    lines = [f"Prompt length (the user message: instruction and reference program) in tokens, "
             f"counted with {t['tokenizer']}: median {t['median']:,}, 90th percentile "
             f"{t['p90']:,}, max {t['max']:,}; {t['share_le_1024']:.0%} of rows at most 1,024 "
             f"and {t['share_le_2048']:.0%} at most 2,048 tokens (column `prompt_tokens`). "
             "Set verl's `data.max_prompt_length` (counted in the policy's tokenizer, chat "
             "template included) with some margin, or export with `--max-prompt-tokens N`."]
    p = prune_stats or {}
    if p.get("enabled") and p.get("bodies"):
        kept = ", ".join(f"{k} {v:,}" for k, v in sorted((p.get("kept_by_reason") or {}).items()))
        lines.append(
            f"Reference programs are pruned to what `Model`, `get_inputs` and `get_init_inputs` "
            f"reach (unreachable definitions, docstrings and comments removed, entries of "
            f"lookup tables such as timm's activation table that no run of the program used, "
            f"constructor-time branches decided by constructor arguments that no run, over "
            f"every row's inputs and shape variant, entered (replaced by "
            f"`raise NotImplementedError`), and methods that never ran and nothing names); "
            f"each pruned program was run against its original with the same seed and replaced "
            f"it only when outputs and parameters were identical (and every variant built and "
            f"ran with the same shapes on the meta device). Pruned: {p['pruned']:,} of "
            f"{p['bodies']:,} distinct programs, {p.get('by_usage', 0):,} of them with unused "
            f"table entries removed, {p.get('by_coverage', 0):,} with unreached branches or "
            f"unused methods removed ({p['rows_pruned']:,} rows; column `pruned` in "
            f"the `measurements` config); left as they were: {kept or 'none'}. Characters "
            f"over all rows: {p['chars_before']:,} before, {p['chars_after']:,} after.")
    return "\n\n".join(lines) + "\n"


def usage_section(data_source: str) -> str:
    return f"""\
### Load it

`OUT` is the run folder; this card is `OUT/export/README.md`.

```python
from datasets import load_from_disk, load_dataset

ds = load_dataset("OUT/export")                  # config "default": train / validation / test
ms = load_dataset("OUT/export", "measurements")  # measure / dedup / rank internals, by problem_id
rl = load_dataset("OUT/export", "verl")          # verl's RLHF schema
ds = load_from_disk("OUT/export/hf")             # the default config, saved by datasets
```

`curate export --push-to-hub USER/NAME` uploads the three configs with `datasets`'
`DatasetDict.push_to_hub`; then `load_dataset("USER/NAME")` and `load_dataset("USER/NAME",
"verl")`. The default config holds what a trainer or a reward function reads: `problem_id`,
`code` (the reference program), `prompt`, `prompt_tokens`, `input_spec` and `shape_variants`
(lists of structs; `curate.problem.plain_input_spec` / `plain_shape_variants` turn them back
into the dicts curate's verifier takes), `init_args` (JSON), baseline runtimes, `gpu`,
`difficulty`, `source` (with `licence`) and `split`.

### Train with verl

`verl/*.parquet` is in verl's RLHF dataset schema: `data_source` = `{data_source}`, `prompt`
(one user message), `ability`, `reward_model` = `{{"style": "rule", "ground_truth": <reference
program>}}`, `extra_info` (split, index, problem id, constructor arguments, input spec, shape
variants, baseline runtimes). Point verl's custom reward at `curate.reward.compute_score`,
which compiles, checks and times the `ModelNew` in the response against the reference.

```bash
python -m verl.trainer.main_ppo \\
  data.train_files=OUT/export/verl/train.parquet \\
  data.val_files=OUT/export/verl/validation.parquet \\
  reward.custom_reward_function.path=pkg://curate.reward \\
  reward.custom_reward_function.name=compute_score \\
  ...
```

(In verl before 0.7 the keys are `custom_reward_function.path` / `.name`; `path` may also be
the file, `$(python -c 'import curate.reward as m; print(m.__file__)')`.) The reward-loop and
legacy `naive` managers and `prime` call `compute_score`; the legacy `batch` manager takes
`name=compute_score_batch` (lists in, one result per reply out, verified concurrently).
`compute_score(data_source, solution_str, ground_truth, extra_info)` returns the score and
its parts (compiled, correct, speedup); `result[0]` and `float(result)` are the score.

### Train with TRL

```python
from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer
from curate.reward import kernel_reward

train = load_dataset("parquet", data_files="OUT/export/verl/train.parquet", split="train")
trainer = GRPOTrainer(model=..., reward_funcs=kernel_reward, train_dataset=train, args=GRPOConfig(...))
trainer.train()
```

`kernel_reward(prompts, completions, completion_ids=None, **columns)` returns one float per
completion; it reads `reward_model` and `extra_info` of the verl view (or `code` and the same
fields as columns of the default config). Candidates run in curate's own sandbox server, so a
training script needs no `if __name__ == "__main__":` guard.
"""


def render_card(name: str, table: pl.DataFrame, splits: dict[str, pl.DataFrame],
                stage_stats: Sequence[dict[str, Any]], verl_counts: dict[str, int],
                data_source: str, sizes: dict[str, dict[str, int]] | None = None,
                columns: dict[str, Any] | None = None, token_stats: dict[str, Any] | None = None,
                prune_stats: dict[str, Any] | None = None) -> str:
    """The whole ``README.md``.

    Args:
        name: dataset name.
        table: all exported rows (normalized, with ``split``).
        splits: the same rows by split, in split order.
        stage_stats: the ``stats.json`` dicts of the stages that ran, in pipeline order.
        verl_counts: rows per split of the verl view.
        data_source: the verl ``data_source`` value.
        sizes: config -> split -> Arrow bytes (``dataset_info``'s ``num_bytes``).
        columns: config -> schema of its rows, for the column tables.
        token_stats: ``prompt_tokens`` figures (median, p90, max, shares, tokenizer).
        prune_stats: what pruning did (see :func:`curate.export.prune_table.prune_codes`).
    """
    licences = [s["licence"] for s in table["source"].to_list() if s] if table.height else []
    meta = card_metadata(name, splits, licences, verl_counts, sizes)
    header = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100)
    n_contaminated = _count_contaminated(table)
    n_bases = table["base_problem_id"].n_unique() if table.height else 0
    body = f"""\
# {name}

GPU-kernel generation problems in KernelBench format, mined from real PyTorch code and
curated by `curate` (mine -> dedup -> diversify -> measure -> rank ->
export). Each row is a self-contained PyTorch reference program (`class Model(nn.Module)`,
`get_inputs()`, `get_init_inputs()`) with its input shapes, baseline runtimes, difficulty,
provenance and licence. A policy is asked to write `ModelNew` with custom Triton/CUDA kernels;
the reward compiles, checks and times it.

{table.height:,} rows from {n_bases:,} base problems. Splits are made by dedup cluster: all
near-duplicates of a problem and all shape variants of a base problem are in the same split.

## Splits

{split_table(splits)}

## Precisions

{precision_section(table)}

## Rows per stage

{stage_table(stage_stats)}

### Rejections by reason

{rejection_table(stage_stats)}

## Sources

{source_table(table)}

Rows flagged as close to an evaluation problem (`contaminated_by` set): {n_contaminated:,}.

## Runtimes

{runtime_section(table)}

## Difficulty

{difficulty_section(splits)}

## Structure

{structure_section(table)}

## Prompts

{prompt_section(token_stats, prune_stats)}
## Usage

{usage_section(data_source)}
## Columns

{_columns_section(columns or {"default": table.schema})}
"""
    return f"---\n{header}---\n\n{_squeeze(body)}"


def _count_contaminated(table: pl.DataFrame) -> int:
    """Rows whose ``contaminated_by`` is set (a non-empty string or list)."""
    col = table["contaminated_by"]
    if isinstance(col.dtype, pl.List):
        return int((col.list.len() > 0).sum())
    if col.dtype == pl.String:
        return int((col.str.len_chars() > 0).sum())
    return col.drop_nulls().len()


def _squeeze(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text)


def _columns_section(columns: dict[str, Any]) -> str:
    parts = []
    for config, schema in columns.items():
        parts.append(f"Config `{config}`:\n\n"
                     + md_table(["column", "type"], [(c, str(t)) for c, t in schema.items()]))
    return "\n\n".join(parts)
