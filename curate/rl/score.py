"""Scoring replies: the reward formula, the cheap checks, time limits and verl's entry points.

See :mod:`curate.reward` for the hookups. The score is the seed reward of the Stanford GRPO
study::

    score = a * compiled + b * correct + c * min(speedup, r_max) * correct

with ``speedup = t_eager / t_candidate`` (reference PyTorch eager over candidate, medians).
Defaults ``a = 0.1``, ``b = 0.3``, ``c = 0.2``, ``r_max = 3``, so a score lies in [0, 1].

Order of work for one reply: the program is pulled out of the reply, parsed and checked
for a ``ModelNew`` *in this process* (no worker, microseconds: a reply with a syntax error
costs nothing); only then does a persistent verification worker
(:class:`curate.verify.pool.VerifierPool`) run the reference and the candidate. The
candidate's module code is executed only after the reference's outputs are taken (the
verifier's order of defence), never in this process.
"""

from __future__ import annotations

import ast
import hashlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any, Sequence

from curate.verify import VerifyResult, extract_code, make_config, resolve_device
from curate.verify.verifier import TIMED_CHECKS


@dataclass(frozen=True)
class RewardConfig:
    """Weights of the reward and how candidates are verified.

    Attributes:
        compiled_weight: ``a``, paid when the candidate builds and its forward runs.
        correct_weight: ``b``, paid when it matches the reference on every input set.
        speedup_weight: ``c``, times the capped speedup, paid only when correct.
        max_speedup: ``r_max``, the cap on the speedup (3 in the Stanford GRPO study).
        baseline: ``"eager"`` (default) or ``"inductor"``: which time the speedup divides.
            ``"inductor"`` compiles the reference once per worker and problem.
        n_trials: input sets compared (see :func:`curate.verify.verify`).
        timeout_s: seconds allowed for one verification; None (default): derived from the
            problem (:func:`default_timeout_s`); ``extra_info["timeout_s"]`` wins over both.
        time_it: time correct candidates (off: no speedup term, much faster on a CPU).
        device: ``"auto"``, ``"cuda"`` or ``"cpu"``.
        seed: seed of weights and inputs; None (default): fresh inputs on every call.
        workers: persistent verification workers (default: ``CURATE_REWARD_WORKERS``, else
            8 on CUDA, the CPU count up to 8 on the CPU); also the batch's concurrency.
        persistent: verify in persistent workers (default); False: a fresh sandbox process
            per candidate (slower; nothing survives between calls).
        executor: ``"local"`` (default: this host's GPUs, one worker pinned to each GPU in
            turn) or ``"ray"`` (one verifier actor per GPU of a Ray cluster,
            :mod:`curate.verify.cluster`; ``workers`` then counts per GPU).
        ray_address: the Ray cluster (``"auto"``...); None: the running Ray instance, else a
            local one.
    """

    compiled_weight: float = 0.1
    correct_weight: float = 0.3
    speedup_weight: float = 0.2
    max_speedup: float = 3.0
    baseline: str = "eager"
    n_trials: int = 5
    timeout_s: float | None = None
    time_it: bool = True
    device: str = "auto"
    seed: int | None = None
    workers: int | None = None
    persistent: bool = True
    executor: str = "local"
    ray_address: str | None = None


class Score(dict):
    """The reward of one reply: a dict (``score`` and its parts) that also reads as its score.

    verl's naive and batch managers take the dict (``score`` is the reward, the other keys
    are logged); its prime manager reads a non-float result as ``float(result[0])``, so
    ``result[0]`` is the score too, as is ``float(result)``.
    """

    def __getitem__(self, key: Any) -> Any:
        if key == 0 and not isinstance(key, bool):
            return dict.__getitem__(self, "score")
        return dict.__getitem__(self, key)

    def __float__(self) -> float:
        return float(dict.__getitem__(self, "score"))


def score_result(result: VerifyResult, config: RewardConfig = RewardConfig()) -> Score:
    """Turn a :class:`~curate.verify.VerifyResult` into the reward.

    Returns:
        A :class:`Score`: ``{"score": float, "compiled": bool, "correct": bool,
        "speedup_vs_eager": float, "speedup_vs_inductor": float, "reason": str}``; a speedup
        that was not measured is reported as 0.0 (verl turns each key into one array across
        the batch, so every value stays a number).
    """
    speedup = result.speedup_vs_inductor if config.baseline == "inductor" else result.speedup_vs_eager
    score = config.compiled_weight * result.compiled + config.correct_weight * result.correct
    if result.correct and speedup:
        score += config.speedup_weight * min(float(speedup), config.max_speedup)
    return Score({
        "score": float(score),
        "compiled": bool(result.compiled),
        "correct": bool(result.correct),
        "speedup_vs_eager": float(result.speedup_vs_eager or 0.0),
        "speedup_vs_inductor": float(result.speedup_vs_inductor or 0.0),
        "reason": result.reason,
    })


def precheck(code: str) -> str | None:
    """Why ``code`` cannot be a candidate, found without running it; None when it may be.

    Checks that it parses and names ``ModelNew`` somewhere (a class statement, an
    assignment, an import alias or a string, so dynamic definitions still reach the
    verifier). Returns the reason in the verifier's words (``"candidate failed to load:
    SyntaxError: ..."``). Never executes anything.
    """
    if not code.strip():
        return "no code in the reply"
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"candidate failed to load: SyntaxError: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return f"candidate failed to load: {type(exc).__name__}: {exc}"
    for node in ast.walk(tree):
        name = (node.id if isinstance(node, ast.Name) else
                node.name if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else
                node.asname or node.name if isinstance(node, ast.alias) else
                node.attr if isinstance(node, ast.Attribute) else
                node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
        if name == "ModelNew":
            return None
    return "candidate failed to load: no class ModelNew defined"


#: Seconds allowed for building a candidate (Triton JIT compiles, autotuning; a
#: ``load_inline`` C++/CUDA compile gets :data:`EXTENSION_ALLOWANCE_S`) and a worker's start.
COMPILE_ALLOWANCE_S = {"cuda": 45.0, "cpu": 60.0}
EXTENSION_ALLOWANCE_S = 150.0
#: How many times slower than the reference a candidate's forward may be before the limit.
SLOWDOWN = {"cuda": 10.0, "cpu": 100.0}
#: Seconds for the forward calls when the reference's time is not known yet (first call on
#: a problem without a measured ``eager_ms``).
UNKNOWN_FORWARD_S = {"cuda": 120.0, "cpu": 240.0}
MAX_TIMEOUT_S = 600.0

_REF_MS: dict[tuple[str, str], float] = {}  # (device, problem key) -> reference ms seen
_REF_LOCK = threading.Lock()


def default_timeout_s(cfg: dict[str, Any], code: str, reference_ms: float | None) -> float:
    """The time limit of one verification, from the problem.

    ``allowance + SLOWDOWN * forwards * reference_ms``, where ``forwards`` counts every
    forward the verifier runs (input sets of the candidate and the reference, warm-up and
    timed trials, a re-time), the allowance is :data:`COMPILE_ALLOWANCE_S` (or
    :data:`EXTENSION_ALLOWANCE_S` when the candidate builds a C++/CUDA extension), and
    ``reference_ms`` is the reference's eager time on this device (None: not known, then
    :data:`UNKNOWN_FORWARD_S` stands for the forwards). Capped at :data:`MAX_TIMEOUT_S`.

    Args:
        cfg: the worker configuration (:func:`curate.verify.make_config`).
        code: the candidate's source.
        reference_ms: milliseconds per reference forward, or None.
    Returns:
        Seconds (float).
    """
    kind = "cuda" if cfg["device"].startswith("cuda") else "cpu"
    allowance = COMPILE_ALLOWANCE_S[kind]
    if "load_inline" in code or "cpp_extension" in code:
        allowance = max(allowance, EXTENSION_ALLOWANCE_S)
    if cfg.get("inductor"):
        allowance += 60.0  # a TorchInductor compile of the reference, once per worker and problem
    if not reference_ms or reference_ms <= 0:
        return min(MAX_TIMEOUT_S, allowance + UNKNOWN_FORWARD_S[kind])
    sets = cfg["n_trials"] * (1 + len(cfg.get("shape_variants") or []))
    if cfg["time_it"]:  # the probe sets checked during and after timing
        sets += TIMED_CHECKS + 1
    timed = 3 * (cfg["warmup"] + cfg["trials"]) if cfg["time_it"] else 0
    return min(MAX_TIMEOUT_S, allowance + SLOWDOWN[kind] * (2 * sets + timed) * reference_ms / 1000.0)


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


def _known_ms(info: dict[str, Any], device: str, key: str) -> float | None:
    """The reference's eager time on ``device``: the export's ``eager_ms`` when it was
    measured on a GPU and we verify on one, else what an earlier call here measured."""
    with _REF_LOCK:
        seen = _REF_MS.get((device, key))
    if seen:
        return seen
    measured_on = str(info.get("device") or ("cuda" if _present(info.get("gpu")) else ""))
    ms = info.get("eager_ms")
    if device.startswith("cuda") and measured_on.startswith("cuda") and _present(ms):
        try:
            return float(ms)
        except (TypeError, ValueError):
            return None
    return None


def _config(config: RewardConfig | None, overrides: dict[str, Any]) -> RewardConfig:
    known = {f.name for f in fields(RewardConfig)}
    return replace(config or RewardConfig(), **{k: v for k, v in overrides.items() if k in known})


def compute_score(data_source: str, solution_str: str, ground_truth: str,
                  extra_info: dict[str, Any] | None = None, config: RewardConfig | None = None,
                  **overrides: Any) -> Score:
    """Score one reply (verl's ``compute_score`` signature; any verl reward manager).

    Args:
        data_source: the dataset name (``"curate/<name>"``); not used for scoring.
        solution_str: the model's reply; the program is its last fenced ``python`` block
            (the whole text when there is none).
        ground_truth: the reference program (KernelBench format).
        extra_info: optional dict (or JSON) with ``init_args`` and ``input_spec`` (JSON
            strings or lists; default: the reference's ``get_init_inputs()``/``get_inputs()``),
            ``shape_variants`` (held-out shapes the candidate must also pass), ``dtype``
            (the precision the problem runs in: ``bfloat16``, ``float16`` or ``float32``;
            see :func:`curate.verify.verify`), ``eager_ms``
            with ``device``/``gpu`` (the measured reference time, for the time limit) and
            ``timeout_s``; other keys (verl adds ``num_turns``...) are ignored.
        config: weights and verification settings (default :class:`RewardConfig`).
        overrides: :class:`RewardConfig` fields to change for this call (e.g. verl's
            ``custom_reward_function.reward_kwargs``); other keyword arguments a trainer
            passes along are ignored, so a new trainer version cannot break the reward.
    Returns:
        A :class:`Score` (see :func:`score_result`). Never raises for a bad reply; a
        malformed ``extra_info`` or reference scores 0 with the reason.
    """
    config = _config(config, overrides)
    code = extract_code(solution_str or "")
    early = precheck(code)
    if early is not None:
        return score_result(VerifyResult(False, False, reason=early), config)
    key = hashlib.sha256((ground_truth or "").encode()).hexdigest()[:32]
    try:
        info = _info(extra_info)
        cfg = make_config(
            init_args=info.get("init_args") if _present(info.get("init_args")) else None,
            input_spec=info.get("input_spec") if _present(info.get("input_spec")) else None,
            shape_variants=info.get("shape_variants") if _present(info.get("shape_variants")) else None,
            dtype=info.get("dtype") if _present(info.get("dtype")) else None,
            device=config.device, n_trials=config.n_trials, seed=config.seed,
            time_it=config.time_it, inductor=config.baseline == "inductor")
    except (ValueError, TypeError) as exc:  # malformed extra_info (JSON errors are ValueErrors)
        return score_result(VerifyResult(False, False, reason=f"bad extra_info: {exc}"), config)
    device = cfg["device"]
    if _present(info.get("timeout_s")):
        timeout_s = float(info["timeout_s"])
    elif config.timeout_s is not None:
        timeout_s = float(config.timeout_s)
    else:
        timeout_s = default_timeout_s(cfg, code, _known_ms(info, device, key))
    mem_mb = None if device.startswith("cuda") else 8192
    if config.persistent:
        result = _pool(config, device, mem_mb).verify(ground_truth, code, cfg, timeout_s, key)
    else:
        from curate.verify.verifier import _from_outcome, _sandbox
        from curate.verify.worker import verify_task

        outcome = _sandbox(cfg, 1, timeout_s, mem_mb).run(verify_task, ground_truth, code, cfg)
        result = _from_outcome(outcome, cfg)
    result.details["timeout_s"] = timeout_s
    if result.eager_ms and not result.reference_error:
        with _REF_LOCK:
            _REF_MS[(device, key)] = float(result.eager_ms)
    return score_result(result, config)


def _pool(config: RewardConfig, device: str, mem_mb: int | None):
    """The persistent verifier pool of this process for ``config`` (local or Ray)."""
    if config.executor == "ray":
        from curate.verify.cluster import shared_ray_pool

        return shared_ray_pool(device, mem_mb, config.workers, config.ray_address)
    if config.executor != "local":
        raise ValueError(f"executor must be 'local' or 'ray', got {config.executor!r}")
    from curate.verify.pool import shared_pool

    return shared_pool(device, mem_mb, config.workers)


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str],
                        ground_truths: Sequence[str], extra_infos: Sequence[Any] | None = None,
                        config: RewardConfig | None = None, **overrides: Any) -> list[Score]:
    """Score many replies concurrently (verl's batch reward manager's signature).

    Args:
        data_sources, solution_strs, ground_truths, extra_infos: one item per reply, as for
            :func:`compute_score` (sequences or numpy object arrays of equal length;
            ``extra_infos`` may be None).
        config, overrides: as for :func:`compute_score`; ``workers`` sets the concurrency.
    Returns:
        One :class:`Score` per reply, in order.
    Raises:
        ValueError: the sequences differ in length.
    """
    n = len(solution_strs)
    infos = [None] * n if extra_infos is None else list(extra_infos)
    if not (len(data_sources) == len(ground_truths) == len(infos) == n):
        raise ValueError(f"batch lengths differ: {len(data_sources)} data sources, {n} solutions, "
                         f"{len(ground_truths)} ground truths, {len(infos)} extra infos")
    if n == 0:
        return []
    config = _config(config, overrides)
    device = resolve_device(config.device)
    width = _pool(config, device, None if device.startswith("cuda") else 8192).workers
    with ThreadPoolExecutor(max_workers=max(1, min(n, width))) as ex:
        return list(ex.map(lambda i: compute_score(data_sources[i], solution_strs[i], ground_truths[i],
                                                   infos[i], config), range(n)))


__all__ = ["RewardConfig", "Score", "compute_score", "compute_score_batch", "score_result",
           "precheck", "default_timeout_s"]
