"""Whether a problem's output depends on its inputs, judged on the CPU before any GPU time is
spent, and the choices of inputs that make it so.

The test is the verifier's own (:func:`curate.checks.constant_answer`): the problem
runs on as many independent draws of weights and inputs as a verifier call compares
(:data:`curate.verify.verifier.N_TRIALS`), and a constant answer (another draw's output, or
their mean) must miss the verifier's dtype-aware tolerance; the ``margin`` says by how much
(a ratio: at most 1, a constant passes).

Mining (:func:`curate.mine.synthesize.synthesize`) measures it at the inputs it found and
prefers a construction and inputs with a margin over 1. Diversify's planner
(:func:`curate.diversify.plan.plan_task`) measures it at the mined shape, repairs it, and
predicts it at the shapes it plans for a GPU, which cannot run here: where the output grows
more slowly than the inputs (a loss or a norm averaging them), the margin is measured again
at a larger shape the CPU can run (inputs up to :data:`PROBE_BYTES`) and extrapolated as a
power of the input bytes, ``margin ~ bytes ** -alpha``, ``alpha`` clamped to [0, 1/2] (a mean
of ``n`` independent terms spreads as ``n ** -1/2``: a mean-reduced loss over 5e8 elements
moves by about 1e-4 of its value from draw to draw, inside fp32's tolerance, and its bf16
result rounds to one value). An output that grows with the inputs keeps the mined margin.

Repairs, in order, while a margin is at most :data:`REPAIR_BELOW` (with five draws a margin
near 1 is a coin toss):

1. ``singletons`` (:func:`grow_singletons`): input axes of size 1 grown to
   :data:`SINGLETON_SIZE` (a softmax or a norm over a size-1 axis outputs constants);
2. ``targets`` (:func:`signed_targets`): index inputs drawn in {-1, 0, 1}, the signs some
   losses take as targets (``CosineEmbeddingLoss`` counts a target of 5 as neither, and
   is zero on such rows);
3. ``draw_scale`` (:func:`with_draw_scale`): every floating-point input given one random
   factor per draw (:mod:`curate.problem`), so that an average over many elements differs
   from draw to draw, as a training batch's loss does.

A repair is kept when it raises the margin more than :data:`IMPROVES` times; a problem is
rejected ``input_insensitive`` only when its margin stays at most 1 with every repair.

Imports only torch, the standard library and curate's torch-only modules (it runs in
sandboxed processes).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch

from curate.checks import constant_answer
from curate.problem import build_inputs, cast_floating, parse_input_spec, spec_bytes
from curate.verify.verifier import N_TRIALS

#: A margin at most this (measured or predicted) is repaired where a repair applies.
REPAIR_BELOW = 4.0
#: Most input bytes of the larger CPU shape a margin is measured at to extrapolate it.
PROBE_BYTES = 32 * 2**20
#: The least growth of the inputs worth a probe (a smaller one extrapolates too far).
MIN_PROBE_GROWTH = 4.0
#: The size an axis of size 1 is grown to by the ``singletons`` repair.
SINGLETON_SIZE = 8
#: An output growing less than this share of its inputs' growth aggregates them.
AGGREGATE_SHARE = 0.5
#: A repair is kept when it multiplies the margin by more than this (five draws' margins
#: scatter by tens of percent: a repair that changes nothing must not look like one).
IMPROVES = 2.0


class OutOfTime(Exception):
    """The draws of a margin ran past their deadline."""


def margin_of(run: Callable[[int], Any], draws: int = N_TRIALS, deadline: float | None = None) -> float:
    """The constant-answer margin of the outputs ``run(k)`` gives for draws ``k = 0 ..
    draws - 1`` (:func:`curate.checks.constant_answer`).

    Args:
        deadline: ``time.monotonic()`` past which no further draw is started.
    Raises:
        OutOfTime: the deadline passed before the last draw; whatever ``run`` raises.
    """
    outs = []
    for k in range(draws):
        if deadline is not None and k and time.monotonic() > deadline:
            raise OutOfTime(f"{k} of {draws} draws before the deadline")
        outs.append(run(k))
    return constant_answer(outs)[0]


#: A pairwise :func:`curate.verify.correctness.excess` between two draws' outputs above this
#: proves the margin over :data:`REPAIR_BELOW` (:func:`clearly_sensitive`).
PAIR_BOUND = 9.0


def clearly_sensitive(out0: Any, out1: Any) -> bool:
    """Whether two draws' outputs differ too much for any one answer to be within
    :data:`REPAIR_BELOW` tolerances of both: then the margin is over it, and the five-draw
    test need not run.

    An answer ``c`` within ``M`` tolerances of both draws has, per element, ``|d| <= M(a0 +
    a1)`` with ``d = out1 - out0``, ``a = atol + rtol |out|`` and ``a1 <= a0 + rtol |d|``, so
    ``|d| / a0 <= 2M / (1 - M rtol)``; and ``||d|| <= M rel_l2 (||out0|| + ||out1||)``, so
    ``||d|| / ||out0|| / rel_l2 <= 2M / (1 - M rel_l2)``. For ``M = 4`` and the verifier's
    tolerances (rtol 1e-2 and rel_l2 2e-2 at most) both are under 8.7: a pairwise excess over
    :data:`PAIR_BOUND` leaves no such ``c``.
    """
    from curate.verify.correctness import excess

    return excess(out0, out1) > PAIR_BOUND


def margin(ns: dict, init: list, spec: list[dict], dtype: str | None = None, seed: int = 0,
           deadline: float | None = None) -> float:
    """The margin of the problem in namespace ``ns`` (``Model``) built from ``init``, at
    ``spec``, on the CPU: draw ``k`` builds the model under seed ``seed + 2k`` and its inputs
    under ``seed + 2k + 1``, as measure does (the model and floating-point inputs cast to
    ``dtype`` when given).

    Raises:
        OutOfTime: past ``deadline`` (see :func:`margin_of`); whatever building or running
        the problem raises.
    """
    def run(k: int) -> Any:
        torch.manual_seed(seed + 2 * k)
        model = ns["Model"](*init)
        if dtype:
            model = model.to(getattr(torch, dtype))
        with torch.no_grad():
            return model(*cast_floating(build_inputs(spec, "cpu", seed=seed + 2 * k + 1), dtype))

    return margin_of(run, deadline=deadline)


def grow_singletons(spec: list[dict]) -> list[dict] | None:
    """``spec`` with every size-1 axis of its tensor inputs grown to :data:`SINGLETON_SIZE`;
    None when there is none."""
    out, changed = [], False
    for s in spec:
        if s.get("kind") == "tensor" and 1 in (s.get("shape") or []):
            s = {**s, "shape": [SINGLETON_SIZE if n == 1 else n for n in s["shape"]]}
            changed = True
        out.append(s)
    return out if changed else None


def signed_targets(spec: list[dict]) -> list[dict] | None:
    """``spec`` with its index inputs drawn in {-1, 0, 1} (``low`` -1, ``high`` 2): the
    targets of losses that read a sign (``CosineEmbeddingLoss``, ``HingeEmbeddingLoss`` and
    ``MarginRankingLoss`` take 1 and -1, and count any other value as neither); None when it
    has no index input drawn otherwise."""
    out, changed = [], False
    for s in spec:
        if s.get("kind") == "index" and (s.get("low"), s.get("high")) != (-1, 2):
            s = {**s, "low": -1, "high": 2}
            changed = True
        out.append(s)
    return out if changed else None


def with_draw_scale(spec: list[dict]) -> list[dict] | None:
    """``spec`` with ``draw_scale`` (:mod:`curate.problem`) on every floating-point tensor
    input; None when there is none without it."""
    out, changed = [], False
    for s, typed in zip(spec, parse_input_spec(spec)):
        if typed.kind == "tensor" and not typed.draw_scale \
                and (typed.dtype or "float32").startswith(("float", "bfloat")):
            s = {**s, "draw_scale": True}
            changed = True
        out.append(s)
    return out if changed else None


#: The repairs in the order they are tried (name, spec -> repaired spec or None).
REPAIRS: tuple[tuple[str, Callable[[list[dict]], list[dict] | None]], ...] = (
    ("singletons", grow_singletons), ("targets", signed_targets), ("draw_scale", with_draw_scale))


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def repaired(measure: Callable[[list[dict]], float], spec: list[dict], m: float,
             names: tuple[str, ...] = tuple(n for n, _ in REPAIRS)) -> dict[str, Any]:
    """``spec`` repaired while its margin is at most :data:`REPAIR_BELOW`.

    Args:
        measure: ``spec -> margin`` (raises for a spec the problem does not run on, which is
            then no repair).
        m: the margin of ``spec`` as it is.
        names: the repairs to try, of :data:`REPAIRS`, in that order.
    Returns:
        ``{"spec", "margin", "repairs": [names kept], "tried": [names tried]}``: each repair
        that raised the margin more than :data:`IMPROVES` times is kept (and the next applied
        on top of it).
    """
    out: dict[str, Any] = {"spec": spec, "margin": m, "repairs": [], "tried": []}
    for name, repair in REPAIRS:
        if name not in names or out["margin"] > REPAIR_BELOW:
            continue
        new = repair(out["spec"])
        if new is None:
            continue
        out["tried"].append(name)
        try:
            m2 = measure(new)
        except Exception:  # noqa: BLE001 - untrusted code: inputs it rejects are no repair
            continue
        if m2 > IMPROVES * out["margin"]:
            out.update(spec=new, margin=m2, repairs=out["repairs"] + [name])
    return out


def reject_detail(m: float, where: str, repairs: list[str], tried: list[str]) -> str:
    """The ``input_insensitive`` reject detail: the margin, where it was found, and the
    repairs kept or tried."""
    how = (f"; repaired by {', '.join(repairs)}" if repairs else
           f"; no repair raised it ({', '.join(tried)} tried)" if tried else "")
    return (f"a constant answer passes the verifier's correctness check {where}: margin {m:.3g} "
            f"(the best constant's error over the tolerance, {N_TRIALS} draws of weights and "
            f"inputs){how}")


def aggregates(in0: int, out0: int, in1: int, out1: int) -> bool:
    """Whether a forward's output bytes grow by less than :data:`AGGREGATE_SHARE` of its
    input bytes' growth, from ``(in0, out0)`` at the mined shape to ``(in1, out1)`` at a
    larger one (a loss, a norm or a reduction over the grown axes)."""
    gin = in1 / max(1, in0)
    return gin > 1 and out1 / max(1, out0) < AGGREGATE_SHARE * gin


def extrapolate(m0: float, b0: int, probe: tuple[float, int] | None, sizes: list[int]) -> dict[str, Any]:
    """Margins predicted at input sizes ``sizes`` (bytes) from the margin ``m0`` at ``b0``
    bytes and, when given, ``probe = (margin, bytes)`` at a larger shape.

    Returns:
        ``{"alpha", "margins": [one per size]}``: ``alpha`` from the two measured points,
        clamped to [0, 1/2]; 1/2 (the most an average shrinks) without a probe, so that an
        aggregate that could not be probed is judged as a mean.
    """
    alpha = 0.5
    if probe is not None:
        pm, pb = probe
        if pm <= 0:
            alpha = 0.5
        elif m0 > 0 and pb > b0:
            alpha = min(0.5, max(0.0, math.log(m0 / pm) / math.log(pb / b0)))
    return {"alpha": alpha, "margins": [m0 * max(1.0, b / max(1, b0)) ** -alpha for b in sizes]}


def probe_spec(grow: Callable[[float], tuple[list[dict], list]], spec0: list[dict],
               s_max: float, max_growth: float = math.inf) -> tuple[list[dict], list] | None:
    """The largest shape ``grow(s)`` (``s`` halved from ``s_max``) whose inputs fit in
    :data:`PROBE_BYTES`, are at least :data:`MIN_PROBE_GROWTH` and at most ``max_growth``
    times the mined ones (the growth a time budget allows); None when there is none."""
    b0 = max(1, spec_bytes(spec0))
    s = s_max
    while s >= MIN_PROBE_GROWTH:
        spec, init = grow(s)
        b = spec_bytes(spec)
        if b <= PROBE_BYTES and MIN_PROBE_GROWTH <= b / b0 <= max_growth:
            return spec, init
        s /= 2
    return None
