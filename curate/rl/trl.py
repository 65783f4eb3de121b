"""TRL's reward function: ``GRPOTrainer(reward_funcs=kernel_reward, ...)``.

TRL's ``GRPOTrainer`` calls each reward function once per generation batch as
``f(prompts=..., completions=..., completion_ids=..., **columns)``, where ``columns`` are
the training dataset's other columns, one list item per completion, and wants one float per
completion. :func:`kernel_reward` reads the reference and the problem's inputs from the
columns of either export:

- ``verl/*.parquet`` (``load_dataset("parquet", data_files=...)``): ``reward_model``
  (``{"ground_truth": <reference>}``), ``extra_info`` (``init_args``, ``input_spec``,
  ``shape_variants``, ``dtype``, ``eager_ms``, ``device``/``gpu``) and ``data_source``;
- ``hf/`` and ``parquet/``: ``code`` (the reference) and, when present, the top-level
  ``init_args``, ``input_spec``, ``shape_variants``, ``dtype``, ``eager_ms``, ``device``, ``gpu``.

Completions may be strings (standard prompts) or message lists (conversational prompts:
the last message's ``content`` is the reply). The replies of a batch are verified
concurrently (:func:`curate.rl.score.compute_score_batch`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from curate.rl.score import RewardConfig, compute_score_batch

#: Columns of the problem table that stand in for ``extra_info`` fields.
INFO_COLUMNS = ("init_args", "input_spec", "shape_variants", "dtype", "eager_ms", "device", "gpu",
                "timeout_s")

def _text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, (list, tuple)) and completion:
        return _text(completion[-1])
    return ""


def _reference(i: int, columns: dict[str, Any]) -> str:
    rm = columns.get("reward_model")
    if rm is not None and isinstance(rm[i], dict) and rm[i].get("ground_truth"):
        return rm[i]["ground_truth"]
    for name in ("reference", "code"):
        if columns.get(name) is not None and columns[name][i]:
            return columns[name][i]
    raise ValueError("no reference program among the dataset columns: expected reward_model "
                     "(verl export), code (problem table) or reference; got "
                     + ", ".join(sorted(columns)))


def _extra(i: int, columns: dict[str, Any]) -> dict[str, Any]:
    info = columns.get("extra_info")
    out = dict(info[i]) if info is not None and isinstance(info[i], dict) else {}
    for name in INFO_COLUMNS:
        if name not in out and columns.get(name) is not None:
            out[name] = columns[name][i]
    return out


def make_kernel_reward(config: RewardConfig | None = None, **overrides: Any) -> Callable[..., list[float]]:
    """A TRL reward function with its own :class:`RewardConfig` (weights, ``workers``, ...).

    The function is named ``kernel_reward`` (TRL logs rewards under the function's name).
    """

    def kernel_reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                      completion_ids: Sequence[Any] | None = None, **columns: Any) -> list[float]:
        """One reward in [0, 1] per completion (see :mod:`curate.rl.trl`).

        Raises:
            ValueError: the dataset has no column holding the reference program.
        """
        n = len(completions)
        refs = [_reference(i, columns) for i in range(n)]
        sources = columns.get("data_source") or ["curate"] * n
        scores = compute_score_batch(list(sources), [_text(c) for c in completions], refs,
                                     [_extra(i, columns) for i in range(n)], config, **overrides)
        log_metric = columns.get("log_metric")
        if callable(log_metric) and n:  # TRL >= 1.0 hands reward functions its metric logger
            log_metric("kernel/compiled", sum(s["compiled"] for s in scores) / n)
            log_metric("kernel/correct", sum(s["correct"] for s in scores) / n)
        log_extra = columns.get("log_extra")
        if callable(log_extra):
            log_extra("kernel_reason", [s["reason"][:200] for s in scores])
        return [float(s["score"]) for s in scores]

    return kernel_reward


#: The default reward function for ``GRPOTrainer(reward_funcs=kernel_reward)``.
kernel_reward = make_kernel_reward()
