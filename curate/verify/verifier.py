"""The verifier's public entry points: :func:`verify` and :func:`verify_many`.

Every candidate runs in a :class:`curate.sandbox.Sandbox` process (time and memory
limits, a private working directory); see :mod:`curate.verify.worker` for the steps and
``docs/verifier.md`` for the rules. This module imports only the standard library (and
torch lazily, to resolve ``device="auto"``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Iterator

from curate.sandbox import CRASH, ERROR, MEMORY, OK, TIMEOUT, Sandbox

#: Speedups above this (x eager) are re-timed on fresh inputs and the slower timing kept
#: (an outsized speedup that does not survive a re-time is a measurement artefact or a cheat).
SUSPICIOUS_SPEEDUP = 10.0


@dataclass
class VerifyResult:
    """What the verifier found about one candidate.

    Attributes:
        compiled: the candidate executed, ``ModelNew`` was built and its first forward ran
            (its kernels compiled and launched) without raising.
        correct: every input set (and held-out shape) matched the reference, each forward
            launched a custom kernel, and no guard tripped.
        speedup_vs_eager: ``eager_ms / candidate_ms`` (None when not timed).
        speedup_vs_inductor: ``inductor_ms / candidate_ms`` (None when Inductor was not timed).
        eager_ms, inductor_ms, candidate_ms: median forward times (milliseconds).
        reason: ``"correct"`` or why not.
        reference_error: the *reference* failed (a broken problem, not the candidate's fault).
        details: device, launches, errors per input set, ATen ops, timings, ...
    """

    compiled: bool
    correct: bool
    speedup_vs_eager: float | None = None
    speedup_vs_inductor: float | None = None
    eager_ms: float | None = None
    inductor_ms: float | None = None
    candidate_ms: float | None = None
    reason: str = ""
    reference_error: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_device(device: str = "auto") -> str:
    """``"cuda"`` when ``device`` is ``"auto"`` and a GPU is visible, else ``device``/``"cpu"``.

    Raises:
        ValueError: ``device`` is not auto, cpu or cuda[:N].
    """
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    if device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    return device


def _json(value: Any) -> Any:
    if isinstance(value, str):
        return json.loads(value) if value.strip() else None
    return value


def normalize_variants(shape_variants: Any) -> tuple[list[dict[str, Any]], int]:
    """Held-out shapes as ``[{"input_spec": [...], "init_args": [...] | None}]``.

    Accepts a JSON string or a list whose items are input specs (lists of spec dicts, see
    :mod:`curate.problem`) or dicts with ``input_spec`` (and optionally ``init_args``).
    Returns the usable variants and how many items were not in either form.
    """
    items = _json(shape_variants) or []
    out, skipped = [], 0
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("input_spec"), (list, str)):
            out.append({"input_spec": _json(item["input_spec"]),
                        "init_args": _json(item.get("init_args"))})
        elif isinstance(item, list) and all(isinstance(s, dict) and "kind" in s for s in item):
            out.append({"input_spec": item, "init_args": None})
        else:
            skipped += 1
    if not isinstance(items, list):
        skipped += 1
    return out, skipped


#: Input sets compared per verification (KernelBench and CUDA-Agent use 5).
N_TRIALS = 5
#: Timed calls of a candidate whose outputs are checked, at trial positions drawn afresh for
#: every timed run (the candidate cannot tell them from the others); one more check follows
#: the timing, on inputs it has never seen. Each needs a probe set the reference runs first.
TIMED_CHECKS = 3


def fresh_seed() -> int:
    """A seed drawn from the operating system: inputs no candidate could have seen."""
    import os

    return int.from_bytes(os.urandom(4), "little") % 2**31


#: Names :func:`make_config` accepts for ``dtype`` and the torch dtype each stands for.
DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float16": "float16", "fp16": "float16", "half": "float16"}


def dtype_name(dtype: Any) -> str | None:
    """The canonical torch dtype name (``"float32"``, ``"bfloat16"``, ``"float16"``) of
    ``dtype`` (a name such as ``"bf16"``, or a ``torch.dtype``); None for None or "".

    Raises:
        ValueError: a dtype the verifier does not run problems in.
    """
    if dtype is None or dtype == "":
        return None
    key = str(dtype).removeprefix("torch.")
    if key not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(set(DTYPES))}, got {dtype!r}")
    return DTYPES[key]


def make_config(*, init_args: Any = None, input_spec: Any = None, shape_variants: Any = None,
                device: str = "auto", n_trials: int = N_TRIALS, seed: int | None = None,
                dtype: Any = None,
                atol: float | None = None,
                rtol: float | None = None, rel_l2: float | None = None, time_it: bool = True,
                inductor: bool | None = None, allow_compile: bool = False,
                warmup: int | None = None, trials: int | None = None,
                suspicious_speedup: float = SUSPICIOUS_SPEEDUP) -> dict[str, Any]:
    """The worker configuration (a plain dict); arguments as in :func:`verify`."""
    if n_trials < 1:
        raise ValueError("n_trials must be >= 1")
    device = resolve_device(device)
    cuda = device.startswith("cuda")
    variants, skipped = normalize_variants(shape_variants)
    tolerance = None
    if atol is not None or rtol is not None or rel_l2 is not None:
        from curate.verify.correctness import FP32
        tolerance = [FP32.atol if atol is None else atol, FP32.rtol if rtol is None else rtol,
                     FP32.rel_l2 if rel_l2 is None else rel_l2]
    return {
        "device": device, "seed": fresh_seed() if seed is None else int(seed),
        "n_trials": int(n_trials), "dtype": dtype_name(dtype),
        "init_args": _json(init_args), "input_spec": _json(input_spec),
        "shape_variants": variants, "shape_variants_skipped": skipped, "tolerance": tolerance,
        "time_it": bool(time_it), "inductor": cuda if inductor is None else bool(inductor),
        "allow_compile": bool(allow_compile),
        "warmup": (3 if cuda else 1) if warmup is None else int(warmup),
        "trials": (100 if cuda else 5) if trials is None else int(trials),
        "suspicious_speedup": float(suspicious_speedup),
    }


def _from_outcome(outcome, cfg: dict[str, Any]) -> VerifyResult:
    if outcome.status == OK:
        v = dict(outcome.value)
        v["details"]["seconds"] = round(outcome.seconds, 3)
        if cfg.get("shape_variants_skipped"):
            v["details"]["shape_variants_skipped"] = cfg["shape_variants_skipped"]
        return VerifyResult(**v)
    reason = {
        TIMEOUT: outcome.error,
        MEMORY: f"out of memory: {outcome.error}",
        CRASH: f"worker crashed: {outcome.error}",
        ERROR: f"worker error: {outcome.error.splitlines()[0] if outcome.error else ''}",
    }.get(outcome.status, outcome.error)
    return VerifyResult(compiled=False, correct=False, reason=reason[:1000],
                        details={"device": cfg["device"], "status": outcome.status,
                                 "error": outcome.error[-2000:], "seconds": round(outcome.seconds, 3)})


def _mem_mb(cfg: dict[str, Any], mem_mb: int | None | str) -> int | None:
    if mem_mb == "auto":
        # the CUDA driver reserves far more address space than it uses: no RLIMIT_AS there
        return None if cfg["device"].startswith("cuda") else 8192
    return mem_mb  # type: ignore[return-value]


def _sandbox(cfg: dict[str, Any], workers: int, timeout_s: float, mem_mb: int | None | str) -> Sandbox:
    return Sandbox(workers=workers, timeout_s=timeout_s, mem_mb=_mem_mb(cfg, mem_mb))


def verify(reference_code: str, candidate_code: str, *, init_args: Any = None,
           input_spec: Any = None, shape_variants: Any = None, device: str = "auto",
           n_trials: int = N_TRIALS, seed: int | None = None, dtype: Any = None,
           timeout_s: float = 300.0,
           mem_mb: int | None | str = "auto", atol: float | None = None,
           rtol: float | None = None, rel_l2: float | None = None, time_it: bool = True,
           inductor: bool | None = None, allow_compile: bool = False,
           warmup: int | None = None, trials: int | None = None,
           suspicious_speedup: float = SUSPICIOUS_SPEEDUP) -> VerifyResult:
    """Check that ``candidate_code``'s ``ModelNew`` computes what ``reference_code``'s ``Model``
    does, with kernels of its own, and time both.

    Args:
        reference_code: KernelBench-format source (``Model``, ``get_inputs``, ``get_init_inputs``).
        candidate_code: Python source defining ``ModelNew`` (same constructor as ``Model``),
            with Triton (``@triton.jit``) or ``torch.utils.cpp_extension.load_inline`` kernels.
        init_args: constructor arguments (list or JSON string); default ``get_init_inputs()``.
        input_spec: forward-input spec (list or JSON, see :mod:`curate.problem`); inputs are
            then built on the device by ``build_inputs``; default: ``get_inputs()``.
        shape_variants: held-out shapes the candidate must also be correct on (see
            :func:`normalize_variants`).
        device: ``"auto"`` (CUDA when present), ``"cuda"`` or ``"cpu"``. On the CPU Triton
            kernels run under ``TRITON_INTERPRET=1`` on CPU tensors.
        n_trials: input sets compared (seeds ``seed .. seed + n_trials - 1``), 5 by default.
        seed: ``torch.manual_seed`` before building ``Model`` and again before ``ModelNew``
            (so equal parameter layouts get equal weights, as in KernelBench), and the base
            of the input seeds. None (the default): a fresh seed from the operating system
            on every call, so the inputs are new each time (``details["seed"]`` says which,
            to reproduce a result).
        dtype: run the problem in this precision (``"bfloat16"``/``"bf16"``,
            ``"float16"``/``"fp16"``, ``"float32"``), as KernelBench's harness does for its
            precision setting: both models' floating-point parameters and buffers and every
            floating-point input are cast to it (integer inputs are kept); the tolerance then
            follows the outputs' dtype (:mod:`.correctness`). None: as the problem defines.
        timeout_s: wall-clock limit for the whole verification (seconds).
        mem_mb: address-space budget of the worker (MiB); ``"auto"``: 8192 on CPU, none on CUDA.
        atol, rtol, rel_l2: override the float tolerances (see :mod:`.correctness`).
        time_it: time reference and candidate when the candidate is correct.
        inductor: also time ``torch.compile(Model)``; default: on CUDA yes, on CPU no (a cold
            Inductor compile costs ~20 s on a 2-core CPU).
        allow_compile: accept a forward that runs through ``torch.compile`` instead of a
            launched custom kernel (only for the offline Inductor baseline solver).
        warmup, trials: timing calls; default 3/100 on CUDA (KernelBench), 1/5 on CPU; the
            trials are cut to about 0.25 s on CUDA (1 s on the CPU), never below 10 (3).
        suspicious_speedup: re-time the candidate when faster than this (x eager).
    Returns:
        A :class:`VerifyResult`; failures of the candidate (and of the sandbox: timeout,
        memory, crash) are reported in it, never raised.
    Raises:
        ValueError: bad ``device`` or ``n_trials``; ``json.JSONDecodeError``: malformed
            ``init_args``/``input_spec`` strings.
    """
    cfg = make_config(init_args=init_args, input_spec=input_spec, shape_variants=shape_variants,
                      device=device, n_trials=n_trials, seed=seed, dtype=dtype, atol=atol, rtol=rtol,
                      rel_l2=rel_l2, time_it=time_it, inductor=inductor,
                      allow_compile=allow_compile, warmup=warmup, trials=trials,
                      suspicious_speedup=suspicious_speedup)
    from curate.verify.worker import verify_task

    outcome = _sandbox(cfg, 1, timeout_s, mem_mb).run(verify_task, reference_code, candidate_code, cfg)
    return _from_outcome(outcome, cfg)


def out_of_memory(result: VerifyResult) -> bool:
    """The verification ran out of memory (its process, the candidate or the reference): a
    ``memory`` outcome or a verdict naming it (CUDA's "CUDA out of memory", torch's
    ``OutOfMemoryError``)."""
    reason = (result.reason or "").lower()
    return "out of memory" in reason or "outofmemoryerror" in reason


def verify_many(jobs: Iterable[tuple[str, str, dict[str, Any]]], *, workers: int = 1,
                timeout_s: float = 300.0, mem_mb: int | None | str = "auto",
                executor: Any = None, memory_alone: bool | None = None,
                **common: Any) -> Iterator[tuple[int, VerifyResult]]:
    """Verify many candidates, ``workers`` sandboxes at a time.

    A job that runs out of memory beside others (``memory_alone``; default: local sandboxes on
    CUDA with more than one worker, which share the GPU) is verified again, alone, after the
    rest; its result carries ``details["memory_retried_alone"]`` with the first verdict.

    Args:
        jobs: ``(reference_code, candidate_code, options)`` where ``options`` are
            :func:`verify` keywords for this job (``init_args``, ``input_spec``, ...).
        workers: concurrent sandboxes (keep 1 when timings matter on one GPU).
        executor: a :class:`curate.executor.Executor` whose sandboxed tasks run the jobs
            (Ray: one sandbox per task on the node it lands on); None: local sandboxes.
        common: :func:`verify` keywords shared by every job (per-job options win).
    Yields:
        ``(job index, VerifyResult)`` in completion order.
    """
    from curate.verify.worker import verify_task

    cfgs, calls = [], []
    for ref, cand, opts in jobs:
        cfg = make_config(**{**common, **opts})
        cfgs.append(cfg)
        calls.append(((ref, cand, cfg), {}))
    if not calls:
        return
    if memory_alone is None:
        memory_alone = executor is None and workers > 1 and str(cfgs[0]["device"]).startswith("cuda")
    if executor is None:
        stream = _sandbox(cfgs[0], workers, timeout_s, mem_mb).map(verify_task, calls)
    else:
        stream = executor.sandboxed(verify_task, calls, timeout_s=timeout_s,
                                    mem_mb=_mem_mb(cfgs[0], mem_mb))
    again: list[tuple[int, str]] = []
    for i, outcome in stream:
        result = _from_outcome(outcome, cfgs[i])
        if memory_alone and out_of_memory(result):
            again.append((i, result.reason))
            continue
        yield i, result
    for i, first in again:  # one at a time, nothing else running
        for _, outcome in _sandbox(cfgs[i], 1, timeout_s, mem_mb).map(verify_task, [calls[i]]):
            result = _from_outcome(outcome, cfgs[i])
            result.details["memory_retried_alone"] = {"first_reason": first}
            yield i, result
