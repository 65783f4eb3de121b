"""The RL reward: verify the ``ModelNew`` in a model's reply and score it.

:func:`compute_score` has the signature verl calls for a custom reward function
(``custom_reward_function.path=<this file>``, ``custom_reward_function.name=compute_score``;
verl's reward managers call ``compute_score(data_source=..., solution_str=...,
ground_truth=..., extra_info=...)`` and accept a float or a dict holding ``"score"``; the
other keys are logged as extra reward information). TRL's ``GRPOTrainer`` can call it from
a small wrapper (see the dataset card written by ``curate export``).

The score is the seed reward of the Stanford GRPO study quoted in DESIGN.md section 3::

    score = a * compiled + b * correct + c * min(speedup, r_max) * correct

with ``speedup = t_eager / t_candidate`` (reference PyTorch eager over candidate, medians).
Defaults ``a = 0.1``, ``b = 0.3``, ``c = 0.2``, ``r_max = 3`` (r_max from that study), so
a score lies in [0, 1]: 0.1 for a candidate that builds and runs but is wrong, 0.6 for a
correct one as fast as eager, 1.0 for a correct one at least 3x faster. The verifier's
guards (no custom kernel launched, decoy kernels, modified inputs, replaced clocks, extra
threads) make a candidate incorrect, so they cost it every term but the first. A correct
candidate that was not timed (``time_it=False`` or timing failed) gets no speedup term.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from typing import Any

from curate.verify import VerifyResult, extract_code, verify


@dataclass(frozen=True)
class RewardConfig:
    """Weights of the reward and how candidates are verified.

    Attributes:
        compiled_weight: ``a``, paid when the candidate builds and its forward runs.
        correct_weight: ``b``, paid when it matches the reference on every input set.
        speedup_weight: ``c``, times the capped speedup, paid only when correct.
        max_speedup: ``r_max``, the cap on the speedup (3 in the Stanford GRPO study).
        baseline: ``"eager"`` (default) or ``"inductor"``: which time the speedup divides.
            ``"inductor"`` costs a ``torch.compile`` of the reference per call.
        n_trials: input sets compared (see :func:`curate.verify.verify`).
        timeout_s: seconds allowed for one verification (``extra_info["timeout_s"]`` wins).
        time_it: time correct candidates (off: no speedup term, much faster on a CPU).
        device: ``"auto"``, ``"cuda"`` or ``"cpu"``.
        seed: seed of weights and inputs; None (default): fresh inputs on every call.
    """

    compiled_weight: float = 0.1
    correct_weight: float = 0.3
    speedup_weight: float = 0.2
    max_speedup: float = 3.0
    baseline: str = "eager"
    n_trials: int = 5
    timeout_s: float = 300.0
    time_it: bool = True
    device: str = "auto"
    seed: int | None = None


def score_result(result: VerifyResult, config: RewardConfig = RewardConfig()) -> dict[str, Any]:
    """Turn a :class:`~curate.verify.VerifyResult` into the reward dict.

    Returns:
        ``{"score": float, "compiled": bool, "correct": bool, "speedup_vs_eager": float,
        "speedup_vs_inductor": float, "reason": str}``; a speedup that was not measured is
        reported as 0.0 (verl turns each key into one array across the batch, so every
        value stays a number).
    """
    speedup = result.speedup_vs_inductor if config.baseline == "inductor" else result.speedup_vs_eager
    score = config.compiled_weight * result.compiled + config.correct_weight * result.correct
    if result.correct and speedup:
        score += config.speedup_weight * min(float(speedup), config.max_speedup)
    return {
        "score": float(score),
        "compiled": bool(result.compiled),
        "correct": bool(result.correct),
        "speedup_vs_eager": float(result.speedup_vs_eager or 0.0),
        "speedup_vs_inductor": float(result.speedup_vs_inductor or 0.0),
        "reason": result.reason,
    }


def _info(extra_info: Any) -> dict[str, Any]:
    if extra_info is None:
        return {}
    if isinstance(extra_info, str):
        return json.loads(extra_info)
    return dict(extra_info)


def _present(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, float) and value != value:  # NaN from a parquet null
        return False
    return not (isinstance(value, str) and not value.strip())


def compute_score(data_source: str, solution_str: str, ground_truth: str,
                  extra_info: dict[str, Any] | None = None, config: RewardConfig | None = None,
                  **overrides: Any) -> dict[str, Any]:
    """Score one reply (verl / TRL custom reward signature).

    Args:
        data_source: the dataset name (``"curate/<name>"``); not used for scoring.
        solution_str: the model's reply; the program is its last fenced ``python`` block
            (the whole text when there is none).
        ground_truth: the reference program (KernelBench format).
        extra_info: optional dict (or JSON) with ``init_args`` and ``input_spec`` (JSON
            strings or lists; default: the reference's ``get_init_inputs()``/``get_inputs()``),
            ``shape_variants`` (held-out shapes the candidate must also pass) and
            ``timeout_s``.
        config: weights and verification settings (default :class:`RewardConfig`).
        overrides: :class:`RewardConfig` fields to change for this call (e.g. verl's
            ``custom_reward_function.reward_kwargs``); other keyword arguments a trainer
            passes along are ignored, so a new trainer version cannot break the reward.
    Returns:
        See :func:`score_result`. Never raises for a bad reply; a malformed ``extra_info``
        or reference scores 0 with the reason.
    """
    known = {f.name for f in fields(RewardConfig)}
    config = replace(config or RewardConfig(), **{k: v for k, v in overrides.items() if k in known})
    code = extract_code(solution_str or "")
    if not code.strip():
        return score_result(VerifyResult(False, False, reason="no code in the reply"), config)
    try:
        info = _info(extra_info)
        result = verify(
            ground_truth, code,
            init_args=info.get("init_args") if _present(info.get("init_args")) else None,
            input_spec=info.get("input_spec") if _present(info.get("input_spec")) else None,
            shape_variants=info.get("shape_variants") if _present(info.get("shape_variants")) else None,
            device=config.device, n_trials=config.n_trials, seed=config.seed,
            timeout_s=float(info.get("timeout_s") or config.timeout_s), time_it=config.time_it,
            inductor=config.baseline == "inductor",
        )
    except (ValueError, TypeError) as exc:  # malformed extra_info (JSON errors are ValueErrors)
        result = VerifyResult(False, False, reason=f"bad extra_info: {exc}")
    return score_result(result, config)
