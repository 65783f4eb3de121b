"""Output checks shared by the conformance check, mining, diversify's planning, the measure stage
and its GPU worker (a bottom-floor module: every stage may import it, it imports no stage).

Imports only torch, the standard library and the verifier's torch-only comparison
(:mod:`curate.verify.correctness`): the GPU machine lacks the rest of curate's dependencies.

Tolerances for "the same result" follow KernelBench's correctness check
(ScalingIntelligence/KernelBench eval): 1e-4 absolute and relative for fp32, 1e-2 for
fp16/bf16. Whether a constant answer would pass (:func:`constant_answer`) is the verifier's
own test, with its tolerances.
"""

from __future__ import annotations

import math
from typing import Any

import torch

#: (rtol, atol) by dtype for "the same result" (determinism).
SAME_TOL = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (1e-2, 1e-2)}
DEFAULT_SAME_TOL = (1e-4, 1e-4)


def flatten(out: Any) -> list[Any]:
    """Leaves of a forward's output: tensors and Python numbers, in a fixed order.

    Tuples, lists and dicts (by sorted key) are walked; ``None`` and strings are skipped.
    """
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (bool, int, float)):
        return [out]
    if isinstance(out, dict):
        return [x for k in sorted(out, key=str) for x in flatten(out[k])]
    if isinstance(out, (list, tuple)):
        return [x for v in out for x in flatten(v)]
    return []


def tensors(out: Any) -> list[torch.Tensor]:
    """The tensor leaves of ``out`` (see :func:`flatten`)."""
    return [x for x in flatten(out) if isinstance(x, torch.Tensor)]


def output_bytes(out: Any) -> int:
    """Bytes held by the tensor leaves of ``out`` (views counted at their own size)."""
    return sum(t.numel() * t.element_size() for t in tensors(out))


#: Elements compared at a time: comparisons of multi-GB outputs (KernelBench level 1 has
#: 6 GB tensors) would otherwise need several full-size temporaries on the GPU.
CHUNK = 1 << 24


def _chunks(x: torch.Tensor, y: torch.Tensor | None = None):
    xf = x.reshape(-1)
    yf = y.reshape(-1) if y is not None else None
    for i in range(0, xf.numel(), CHUNK):
        yield xf[i:i + CHUNK], (yf[i:i + CHUNK] if yf is not None else None)


def all_finite(out: Any) -> bool:
    """True when every floating/complex element of every leaf is finite (no NaN/inf)."""
    for x in flatten(out):
        if isinstance(x, torch.Tensor):
            if (x.is_floating_point() or x.is_complex()) and x.numel() and x.device.type != "meta":
                if not all(bool(torch.isfinite(c).all()) for c, _ in _chunks(x)):
                    return False
        elif isinstance(x, float) and not math.isfinite(x):
            return False
    return True


def max_abs_diff(a: Any, b: Any) -> float:
    """Largest absolute element difference between two outputs; ``inf`` when their
    structure, shapes or dtypes differ (NaN when a difference is NaN)."""
    la, lb = flatten(a), flatten(b)
    if len(la) != len(lb):
        return math.inf
    worst = 0.0
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return math.inf
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return math.inf
            for cx, cy in _chunks(x, y):
                if x.dtype == torch.bool:
                    d = float((cx != cy).any())
                else:
                    d = float((cx.double() - cy.double()).abs().max())
                if math.isnan(d):
                    return math.nan
                worst = max(worst, d)
        else:
            worst = max(worst, abs(float(x) - float(y)))
    return worst


def close(a: Any, b: Any, tol: tuple[float, float] | None = None) -> bool:
    """True when outputs ``a`` and ``b`` agree elementwise: ``|a - b| <= atol + rtol * |b|``.

    Args:
        tol: ``(rtol, atol)``; default by dtype from :data:`SAME_TOL`.
    Integer and bool tensors must be equal. NaNs compare equal to NaNs in the same place.
    """
    la, lb = flatten(a), flatten(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if not isinstance(x, torch.Tensor):
            rtol, atol = tol or DEFAULT_SAME_TOL
            if not (abs(float(x) - float(y)) <= atol + rtol * abs(float(y))):
                return False
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        floating = x.is_floating_point() or x.is_complex()
        rtol, atol = tol or SAME_TOL.get(x.dtype, DEFAULT_SAME_TOL)
        for cx, cy in _chunks(x, y):
            same = (torch.allclose(cx, cy, rtol=rtol, atol=atol, equal_nan=True) if floating
                    else torch.equal(cx, cy))
            if not same:
                return False
    return True


#: Elements of one output tensor the constant-answer test compares at most: a larger one is
#: compared on this many evenly strided positions, the same in every draw (the test compares
#: six answers with five draws in float64; on a 4M-element output that took 10 s of a CPU
#: core, against 0.2 s on the sample, whose verdict differs only for an output constant
#: everywhere but between the sampled positions).
CONSTANT_SAMPLE = 2**16


def _sampled(out: Any) -> Any:
    """``out`` with each tensor leaf over :data:`CONSTANT_SAMPLE` elements replaced by an
    evenly strided sample of them (flattened); other leaves and the nesting kept."""
    if isinstance(out, torch.Tensor):
        n = out.numel()
        if n <= CONSTANT_SAMPLE:
            return out
        return out.detach().reshape(-1)[:: -(-n // CONSTANT_SAMPLE)]
    if isinstance(out, (list, tuple)) and not hasattr(out, "_fields"):
        return type(out)(_sampled(o) for o in out)
    if isinstance(out, dict):
        return {k: _sampled(v) for k, v in out.items()}
    return out


def constant_answer(outputs: list[Any], override: Any = None) -> tuple[float, str]:
    """Whether a constant answer would pass the reward's correctness check on these outputs.

    Args:
        outputs: one problem's outputs on independent draws of weights and inputs (as the
            verifier draws them on each call; :data:`curate.verify.verifier.N_TRIALS` of
            them, the input sets a verifier call compares); tensors over
            :data:`CONSTANT_SAMPLE` elements are compared on a strided sample.
        override: a :class:`curate.verify.correctness.Tolerance` in place of the dtype's, as
            the verifier uses for the problem (its
            :func:`curate.verify.correctness.noise_tolerance` where the output is rounding
            noise around zero).
    Returns:
        ``(margin, detail)``: ``margin`` is
        :func:`curate.verify.correctness.constant_answer_margin` (how far the best
        input-independent answer, another draw's output or the draws' mean, is from passing
        the verifier's dtype-aware test, as a ratio to its tolerance); ``detail`` is the
        ``input_insensitive`` reject detail when ``margin <= 1`` (a constant passes), else "".
    Raises:
        ValueError: fewer than two outputs.
    """
    from curate.verify.correctness import constant_answer_margin

    margin = constant_answer_margin([_sampled(o) for o in outputs], override)
    if margin > 1:
        return margin, ""
    noise = ("the output is rounding noise around zero (judged by the elementwise test alone): "
             if override is not None and math.isinf(override.rel_l2) else "")
    return margin, (f"{noise}a constant answer passes the verifier's correctness check on {len(outputs)} "
                    f"draws of weights and inputs (margin {margin:.3g}: the best constant's error "
                    f"is {margin:.3g}x the tolerance)")
