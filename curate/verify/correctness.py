"""Output comparison with dtype-aware tolerances.

Tolerances (per output tensor, chosen by the *reference* output's dtype):

=====================  =======  =======  ========
dtype                  atol     rtol     rel_l2
=====================  =======  =======  ========
float32, float64       1e-4     1e-4     1e-3
float16, bfloat16      1e-2     1e-2     2e-2
integer, bool          exact    exact    exact
=====================  =======  =======  ========

``atol``/``rtol`` are KernelBench's elementwise tolerances (ScalingIntelligence/KernelBench
``eval.py``: 1e-4 for fp32 and 1e-2 for fp16/bf16; ``|out - ref| <= atol + rtol * |ref|``).
The elementwise test alone lets a near-zero reference be matched by zeros (KernelBench
issue 165: returning zeros passes 4 of 60 level-1 problems), so a second, relative test is
applied whenever the reference is not exactly zero: ``||out - ref||_2 / ||ref||_2 <= rel_l2``.
Zeros score a relative error of 1.0 there. ``rel_l2`` for fp32 (1e-3) also rejects
computing in bf16 (unit roundoff 3.9e-3), which the design notes list as a way to cheat;
a Triton ``tl.dot`` left at its default TF32 precision on the GPU can fail the fp32
elementwise test: candidates are expected to ask for ``input_precision="ieee"``.
NaN never passes (in either output); infinities must match in position and sign.

This module imports only torch and the standard library (it runs in GPU workers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

import torch


@dataclass(frozen=True)
class Tolerance:
    """Elementwise ``atol``/``rtol`` and the relative L2 bound (all unitless)."""

    atol: float
    rtol: float
    rel_l2: float


FP32 = Tolerance(atol=1e-4, rtol=1e-4, rel_l2=1e-3)
HALF = Tolerance(atol=1e-2, rtol=1e-2, rel_l2=2e-2)
EXACT = Tolerance(atol=0.0, rtol=0.0, rel_l2=0.0)


def tolerance_for(dtype: torch.dtype, override: Tolerance | None = None) -> Tolerance:
    """The tolerance used for outputs of ``dtype`` (``override`` replaces it for float dtypes)."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return EXACT
    if override is not None:
        return override
    if dtype in (torch.float16, torch.bfloat16) or dtype.itemsize == 1:
        return HALF
    return FP32


def flatten(obj: Any, prefix: str = "out") -> list[tuple[str, Any]]:
    """Leaves of a nested output (tensors, tuples, lists, dicts, scalars) with their paths."""
    if isinstance(obj, (tuple, list)):
        leaves = [(f"{prefix}:len", len(obj))]
        for i, o in enumerate(obj):
            leaves += flatten(o, f"{prefix}[{i}]")
        return leaves
    if isinstance(obj, dict):
        leaves = [(f"{prefix}:keys", tuple(sorted(map(str, obj))))]
        for k in sorted(obj, key=str):
            leaves += flatten(obj[k], f"{prefix}[{k!r}]")
        return leaves
    return [(prefix, obj)]


@dataclass
class Comparison:
    """Result of comparing one candidate output with the reference output.

    Attributes:
        ok: every leaf matched.
        reason: why not (empty when ok).
        max_abs_err: largest elementwise absolute error over float leaves.
        rel_l2: largest relative L2 error over float leaves.
    """

    ok: bool
    reason: str = ""
    max_abs_err: float = 0.0
    rel_l2: float = 0.0


def compare(ref: Any, out: Any, override: Tolerance | None = None) -> Comparison:
    """Compare a candidate's output ``out`` with the reference's ``ref`` (same nesting).

    Tensors must agree in shape, dtype and device type; see the module docstring for the
    numeric test. Python numbers are compared with the fp32 tolerance, other leaves by ``==``.
    """
    ref_leaves, out_leaves = flatten(ref), flatten(out)
    if [p for p, _ in ref_leaves] != [p for p, _ in out_leaves]:
        return Comparison(False, f"output structure differs: expected {_describe(ref)}, got {_describe(out)}")
    worst_abs = worst_rel = 0.0
    for (path, r), (_, o) in zip(ref_leaves, out_leaves):
        if isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                return Comparison(False, f"{path}: expected a tensor, got {type(o).__name__}")
            c = _compare_tensor(path, r, o, override)
            if not c.ok:
                return c
            worst_abs, worst_rel = max(worst_abs, c.max_abs_err), max(worst_rel, c.rel_l2)
        elif isinstance(r, (int, float)) and not isinstance(r, bool):
            if isinstance(o, torch.Tensor) or not isinstance(o, (int, float)):
                return Comparison(False, f"{path}: expected a number, got {type(o).__name__}")
            tol = override or FP32
            if math.isnan(r) or math.isnan(o) or not math.isclose(o, r, rel_tol=tol.rtol, abs_tol=tol.atol):
                return Comparison(False, f"{path}: {o!r} != {r!r}")
        elif r != o:
            return Comparison(False, f"{path}: {o!r} != {r!r}")
    return Comparison(True, "", worst_abs, worst_rel)


def _describe(obj: Any) -> str:
    if isinstance(obj, torch.Tensor):
        return f"Tensor{tuple(obj.shape)}"
    if isinstance(obj, (tuple, list)):
        return f"{type(obj).__name__} of {len(obj)}"
    return type(obj).__name__


#: Elements compared per step. The comparison widens to float64, so comparing a multi-GB
#: output in one piece would need several times its size again (a 6.4 GB fp32 output ran an
#: 80 GB H100 out of memory); per step the extra memory stays near 0.5 GB.
CHUNK = 1 << 24


def _tensor_stats(ref: torch.Tensor, out: torch.Tensor, tol: Tolerance) -> dict[str, Any]:
    """Elementwise and relative-L2 figures of ``out`` against ``ref`` (same shape, dtype and
    device type; float or complex), chunked so that large outputs never widen in one piece.

    Returns ``{"nan": "candidate"|"reference"|None, "inf_differ": bool, "n_bad",
    "max_abs", "rel" (relative L2, 0 for an all-zero reference matched exactly, inf when
    not), "ref_norm", "excess"}``; ``excess`` is the largest ratio of an element's error to
    its allowance ``atol + rtol * |ref|``, the quantity the elementwise test bounds by 1.
    """
    wide = torch.complex128 if ref.is_complex() else torch.float64
    r_all, o_all = ref.detach().reshape(-1), out.detach().reshape(-1)
    n_bad, max_abs, excess, sum_d2, sum_r2 = 0, 0.0, 0.0, 0.0, 0.0
    stats: dict[str, Any] = {"nan": None, "inf_differ": False}
    for start in range(0, r_all.numel(), CHUNK):
        r = r_all[start:start + CHUNK].to(wide)
        o = o_all[start:start + CHUNK].to(wide)
        # every figure of the chunk is reduced on the device and read back in one transfer:
        # each read is a synchronization, which costs a scheduling round where other
        # processes share the GPU
        r_inf, o_inf = torch.isinf(r), torch.isinf(o)
        finite = ~r_inf
        diff = torch.where(finite, o - r, 0).abs()
        allowance = tol.atol + tol.rtol * torch.where(finite, r, 0).abs()
        figures = torch.stack([
            torch.isnan(o).any(), torch.isnan(r).any(),
            (r_inf != o_inf).any() | (r_inf & (r != o)).any(),
            ((diff > allowance) & finite).sum(), diff.max() if diff.numel() else diff.new_zeros(()),
            (diff / allowance.clamp_min(1e-300)).max() if diff.numel() else diff.new_zeros(()),
            (diff * diff).sum(), torch.where(finite, r, 0).abs().square().sum(),
        ]).to(torch.float64).tolist()
        nan_o, nan_r, inf_differ, bad, c_max, c_excess, d2, r2 = figures
        if nan_o or nan_r:
            stats["nan"] = "candidate" if nan_o else "reference"
            return stats
        if inf_differ:
            stats["inf_differ"] = True
            return stats
        max_abs = max(max_abs, c_max)
        n_bad += int(bad)
        if tol.atol > 0 or tol.rtol > 0:
            excess = max(excess, c_excess)
        sum_d2 += d2
        sum_r2 += r2
    ref_norm = math.sqrt(sum_r2)
    rel = math.sqrt(sum_d2) / ref_norm if ref_norm > 0 else (0.0 if max_abs == 0 else math.inf)
    stats.update(n_bad=n_bad, max_abs=max_abs, rel=rel, ref_norm=ref_norm, excess=excess)
    return stats


def _compare_tensor(path: str, ref: torch.Tensor, out: torch.Tensor,
                    override: Tolerance | None) -> Comparison:
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(False, f"{path}: shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Comparison(False, f"{path}: dtype {out.dtype} != expected {ref.dtype}")
    if out.device.type != ref.device.type:
        return Comparison(False, f"{path}: device {out.device.type} != expected {ref.device.type}")
    tol = tolerance_for(ref.dtype, override)
    if tol is EXACT:
        if not torch.equal(out, ref):
            n = int((out != ref).sum())
            return Comparison(False, f"{path}: {n} of {ref.numel()} elements differ (exact match required)")
        return Comparison(True)
    st = _tensor_stats(ref, out, tol)
    if st["nan"]:
        return Comparison(False, f"{path}: NaN in the {st['nan']} output")
    if st["inf_differ"]:
        return Comparison(False, f"{path}: infinities differ")
    max_abs, rel, ref_norm = st["max_abs"], st["rel"], st["ref_norm"]
    if st["n_bad"]:
        return Comparison(False, f"{path}: {st['n_bad']} of {ref.numel()} elements outside atol={tol.atol:g} "
                                 f"rtol={tol.rtol:g} (max abs err {max_abs:.3g})", max_abs, rel)
    if ref_norm > 0 and rel > tol.rel_l2:
        return Comparison(False, f"{path}: relative L2 error {rel:.3g} > {tol.rel_l2:g}", max_abs, rel)
    return Comparison(True, "", max_abs, rel if ref_norm > 0 else 0.0)


def excess(ref: Any, out: Any, override: Tolerance | None = None) -> float:
    """How far ``out`` is from passing :func:`compare` against ``ref``, as a ratio.

    The largest, over float leaves, of the elementwise error over its allowance
    (``|out - ref| / (atol + rtol * |ref|)``) and the relative L2 error over ``rel_l2``;
    :func:`compare` passes exactly when this is at most 1 (and every non-float leaf is
    equal). Returns ``math.inf`` when the structure, a shape, a dtype or an exact leaf
    differs, or a NaN or infinity does not match.
    """
    if not compare_structure(ref, out):
        return math.inf
    worst = 0.0
    for (_, r), (_, o) in zip(flatten(ref), flatten(out)):
        if isinstance(r, torch.Tensor):
            tol = tolerance_for(r.dtype, override)
            if tol is EXACT:
                if not torch.equal(o, r):
                    return math.inf
                continue
            st = _tensor_stats(r, o, tol)
            if st["nan"] or st["inf_differ"]:
                return math.inf
            worst = max(worst, st["excess"])
            if st["ref_norm"] > 0:
                worst = max(worst, st["rel"] / tol.rel_l2)
            elif st["max_abs"] > 0 and tol.atol == 0:
                return math.inf
        elif isinstance(r, (int, float)) and not isinstance(r, bool):
            tol = override or FP32
            if math.isnan(r) or math.isnan(o):
                return math.inf
            worst = max(worst, abs(o - r) / (tol.atol + tol.rtol * abs(r)))
        elif r != o:
            return math.inf
    return worst


def compare_structure(ref: Any, out: Any) -> bool:
    """True when ``out`` has ``ref``'s nesting, and each tensor leaf its shape, dtype and
    device type (the checks :func:`compare` makes before any value)."""
    ref_leaves, out_leaves = flatten(ref), flatten(out)
    if [p for p, _ in ref_leaves] != [p for p, _ in out_leaves]:
        return False
    for (_, r), (_, o) in zip(ref_leaves, out_leaves):
        if isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor) or tuple(o.shape) != tuple(r.shape) \
                    or o.dtype != r.dtype or o.device.type != r.device.type:
                return False
        elif isinstance(r, (int, float)) and not isinstance(r, bool):
            if isinstance(o, torch.Tensor) or not isinstance(o, (int, float)):
                return False
    return True


def _mean_output(outputs: Sequence[Any]) -> Any:
    """The elementwise mean of same-structured outputs (float leaves averaged in float64 and
    cast back; other leaves taken from the first). Tensor outputs are read one at a time."""
    first = outputs[0]
    if isinstance(first, torch.Tensor):
        if not (first.is_floating_point() or first.is_complex()):
            return first
        wide = torch.complex128 if first.is_complex() else torch.float64
        acc = torch.zeros(first.shape, dtype=wide, device=first.device)
        acc.add_(first.detach())  # widened element by element, not in a wide copy
        dtype = first.dtype
        del first
        for i in range(1, len(outputs)):
            acc.add_(outputs[i].detach())
        return acc.div_(len(outputs)).to(dtype)
    if isinstance(first, (tuple, list)) and not hasattr(first, "_fields"):
        return type(first)(_mean_output([o[i] for o in outputs]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _mean_output([o[k] for o in outputs]) for k in first}
    if isinstance(first, float):
        return sum(outputs) / len(outputs)
    return first


def constant_answer_margin(outputs: Sequence[Any], override: Tolerance | None = None) -> float:
    """How far the best input-independent answer is from passing the correctness check.

    ``outputs`` are one model's outputs on two or more independently drawn input sets. A
    constant candidate (one that ignores its inputs) can answer with any fixed output; the
    ones tried are each draw's own output and the elementwise mean of all draws. For each,
    the worst :func:`excess` over the draws is taken; the result is the smallest of these.
    A margin at most 1 means a constant answer would pass the verifier on every draw (the
    reference's output does not depend on its inputs, within the verifier's tolerances);
    a margin of 40 means the best constant misses by 40 times the allowance. Outputs whose
    structures differ between draws give ``math.inf``.

    ``outputs`` may be any sequence (``len`` and indexing), one that builds each output
    when it is indexed included: outputs are read by index, two at a time where tensors
    (the verifier keeps its reference outputs sealed and opens them one by one, so a
    multi-GB output is not held once per draw).

    Raises:
        ValueError: fewer than two outputs.
    """
    n = len(outputs)
    if n < 2:
        raise ValueError("constant_answer_margin needs outputs of at least two input sets")
    first = outputs[0]
    if not all(compare_structure(first, outputs[i]) for i in range(1, n)):
        return math.inf
    del first
    mean = _mean_output(outputs)
    best = math.inf
    for a in range(n + 1):  # each draw's output as the constant answer, then the mean
        answer = mean if a == n else outputs[a]
        worst = 0.0
        for j in range(n):
            if j == a:
                continue
            worst = max(worst, excess(outputs[j], answer, override))
            if worst >= best:
                break
        best = min(best, worst)
    return best


def near_zero(out: Any, override: Tolerance | None = None) -> bool:
    """True when ``out`` has a nonzero float tensor leaf and every float tensor leaf lies
    within its ``atol`` of zero: zeros would pass the elementwise test alone, and only the
    relative L2 test (KernelBench issue 165) tells a right answer from zeros."""
    floats = [t for _, t in flatten(out)
              if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())]
    if not floats:
        return False
    biggest = [float(t.detach().abs().max()) if t.numel() else 0.0 for t in floats]
    return max(biggest) > 0 and all(b <= tolerance_for(t.dtype, override).atol
                                    for b, t in zip(biggest, floats))


def in_float64(model: torch.nn.Module, inputs: list[Any]) -> Any:
    """``model``'s output on ``inputs`` computed again in float64: a copy of the model with
    its floating parameters and buffers widened, float tensor inputs widened (the model
    itself is left as it was). Raises whatever the copy or the forward raises (an operator
    without a float64 kernel, out of memory)."""
    import copy

    wide = copy.deepcopy(model).to(torch.float64)
    xs = [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
          for x in inputs]
    with torch.no_grad():
        return wide(*xs)


def noise_tolerance(model: torch.nn.Module, inputs: list[Any], out: Any,
                    override: Tolerance | None = None) -> Tolerance | None:
    """The tolerance for a reference whose output is rounding noise around zero, else None.

    A reference such as ``mean(GroupNorm(x))`` (KernelBench level 2 #23) is zero in exact
    arithmetic; in float32 it returns values near 1e-9 that are rounding error alone. The
    relative L2 test then compares noise with noise, and no kernel, however right, passes
    it. The output counts as noise when it is :func:`near_zero` and its relative L2
    distance from the same computation in float64 (:func:`in_float64` on the same model and
    inputs) exceeds the bound: the reference itself would fail the test against a more
    exact answer. Such a problem is judged by the elementwise test alone (the returned
    tolerance has ``rel_l2 = inf``); zeros then pass it, and the constant-answer test
    (:func:`constant_answer_margin`) finds the reference input-independent, which gives
    correctness credit without speedup (the reward) or an ``input_insensitive`` rejection
    (measure). Outputs of a meaningful small size (KernelBench issue 165's near-zero
    references) agree with float64 to far better than the bound and keep the relative
    test. Returns None too when the float64 run fails (the relative test is kept).

    Args:
        model: the reference module (left unchanged).
        inputs: the forward's inputs for ``out``, as they were before the forward.
        out: the reference's output on ``inputs``.
        override: the tolerance used in place of the dtype's (as :func:`compare`).
    """
    if not near_zero(out, override):
        return None
    try:
        exact = in_float64(model, inputs)
    except Exception:
        return None
    pairs = [(o, e) for (_, o), (_, e) in zip(flatten(out), flatten(exact))
             if isinstance(o, torch.Tensor) and o.is_floating_point() and isinstance(e, torch.Tensor)]
    if not pairs:
        return None
    for o, e in pairs:
        if o.shape != e.shape:
            return None
        o64, e64 = o.detach().double(), e.detach().double()
        e_norm = float(e64.norm())
        rel = float((o64 - e64).norm()) / e_norm if e_norm > 0 else math.inf
        tol = tolerance_for(o.dtype, override)
        if rel > tol.rel_l2:
            return Tolerance(atol=tol.atol, rtol=tol.rtol, rel_l2=math.inf)
    return None
