"""The planner's judgement of whether a problem's output depends on its inputs, at its mined
shape and at the shapes planned for a GPU (:mod:`curate.sensitivity` has the test, the
repairs and the extrapolation; this module applies them to a plan).

:func:`at_mined` runs before pricing: a constant answer that passes at the mined shape is
repaired (size-1 axes grown, a random scale per draw) or the problem is rejected
``input_insensitive``. :func:`at_planned` runs once the shapes are chosen: where the output
aggregates its inputs (it grows less than they do), the margin is measured again at a larger
shape the CPU can run and extrapolated to each planned shape; a predicted margin at most
:data:`curate.sensitivity.REPAIR_BELOW` gets the random scale per draw, and one still at
most 1 rejects the problem (when a probe measured the decay; a problem too slow to probe here
is judged as a mean for the repair and left to measure for the verdict). Both run in the
planner's sandboxed process, on the CPU, before any GPU time is spent on the problem.

Imports only torch, the standard library and curate's torch-only modules.
"""

from __future__ import annotations

import time
from typing import Any

from curate import sensitivity as sens
from curate.diversify.shapes import apply_family
from curate.problem import spec_bytes

#: A mined forward slower than this share of the planning deadline, per draw, is not judged
#: here (five builds and forwards would take the time pricing needs); measure judges it.
SLOW_SHARE = 0.03
#: Shares of the planning deadline the margin at the mined shape (with its repairs) and the
#: probe at a larger shape may take; past them the judgement is left to measure. (Without
#: them, GoogLeNet's slow builds and an LSTM probed at 32 MiB of inputs ran planning past
#: its 60 s limit on a 2-core machine.)
MINED_SHARE, PROBE_SHARE = 0.15, 0.15
#: A probe's forwards are budgeted at this many times the mined forward's seconds per unit of
#: input growth (builds, and time growing faster than the bytes).
PROBE_COST = 2.0


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def at_mined(ns: dict, init: list, spec: list[dict], dtype: str | None, forward_s: float,
             deadline_s: float, repairs: bool = True) -> dict[str, Any]:
    """The margin at the mined shape, repaired where it is at most
    :data:`curate.sensitivity.REPAIR_BELOW`.

    Args:
        forward_s: seconds the mined forward took (a slow one is left to measure).
        deadline_s: the planning deadline, seconds.
        repairs: try the input repairs (False for code whose inputs curate did not write).
    Returns:
        ``{"spec": the spec to plan from, "margin": float | None, "repairs": [names kept],
        "tried": [names tried], "reject": None or the ``input_insensitive`` detail,
        "skipped": None or why no margin was measured}``.
    """
    out: dict[str, Any] = {"spec": spec, "margin": None, "repairs": [], "tried": [], "reject": None,
                           "skipped": None, "forward_s": forward_s}
    if forward_s > SLOW_SHARE * deadline_s:
        out["skipped"] = f"a forward takes {forward_s:.2f} s here"
        return out
    until = time.monotonic() + MINED_SHARE * deadline_s
    try:
        m = sens.margin(ns, init, spec, dtype, deadline=until)
    except Exception as exc:  # untrusted code: seeded rebuilds may fail where seed 0 ran
        out["skipped"] = _short(exc)
        return out
    fixed = sens.repaired(lambda sp: sens.margin(ns, init, sp, dtype, deadline=until), spec, m,
                          names=tuple(n for n, _ in sens.REPAIRS) if repairs else ())
    out.update(spec=fixed["spec"], margin=fixed["margin"], repairs=fixed["repairs"], tried=fixed["tried"])
    if fixed["margin"] <= 1:
        out["reject"] = sens.reject_detail(fixed["margin"], "at the mined shape", fixed["repairs"], fixed["tried"])
    return out


def _predicted(ns: dict, init: list, spec: list[dict], m0: float, chosen: list[dict],
               dtype: str | None, deadline: float, forward_s: float) -> dict[str, Any]:
    """Margins predicted at the ``chosen`` shapes (non-held-out) from ``m0`` at ``spec``.

    Shapes whose output grows with their inputs keep ``m0``. For the others the bound of a
    mean (``alpha`` 1/2) comes first; only where it is at most
    :data:`curate.sensitivity.REPAIR_BELOW` is the decay measured, by a probe along the
    family of the shape the bound puts lowest, its growth held to what ``deadline`` leaves at
    ``forward_s`` seconds a mined forward (no probe: the bound stands).
    """
    b0 = spec_bytes(spec)
    sizes = [spec_bytes(c["spec"]) for c in chosen]
    grows = [sens.aggregates(c["base_in"], c["base_out"], c["in_bytes"], c["out_bytes"]) for c in chosen]
    res: dict[str, Any] = {"margins": [m0] * len(chosen), "alpha": 0.0, "probe_margin": None,
                           "probe_growth": None, "base": m0}
    if not any(grows):
        return res
    bound = [e if g else m0 for e, g in zip(sens.extrapolate(m0, b0, None, sizes)["margins"], grows)]
    res.update(margins=bound, alpha=0.5)
    if min(bound) > sens.REPAIR_BELOW:
        return res  # even an average would keep a margin: nothing to measure
    lowest = chosen[min(range(len(bound)), key=lambda k: bound[k])]
    left = deadline - time.monotonic()
    growth = left / (sens.N_TRIALS * PROBE_COST * max(forward_s, 1e-3))
    probe = sens.probe_spec(lambda s: apply_family(spec, init, lowest["family"], s), spec, lowest["s"],
                            max_growth=growth)
    if probe is None or left <= 0:
        return res
    try:
        measured = (sens.margin(ns, probe[1], probe[0], dtype, deadline=deadline), spec_bytes(probe[0]))
    except Exception:  # noqa: BLE001 - untrusted code, or out of time: the bound stands
        return res
    ext = sens.extrapolate(m0, b0, measured, sizes)
    res.update(alpha=ext["alpha"], margins=[e if g else m0 for e, g in zip(ext["margins"], grows)],
               probe_margin=measured[0], probe_growth=measured[1] / max(1, b0))
    return res


def at_planned(ns: dict, init: list, spec: list[dict], judged: dict[str, Any], chosen: list[dict],
               dtype: str | None, deadline: float, deadline_s: float, repairs: bool = True) -> dict[str, Any]:
    """Margins predicted at the planned in-band shapes; the random scale per draw where one is
    at most :data:`curate.sensitivity.REPAIR_BELOW`.

    Args:
        judged: :func:`at_mined`'s result (``spec`` is the one planned from).
        chosen: the planned shapes (``role``, ``family``, ``s``, ``spec``, ``in_bytes``,
            ``out_bytes``, ``base_in``, ``base_out``); held-out ones are left out.
        deadline: ``time.monotonic()`` of the planning deadline; the probes take at most
            :data:`PROBE_SHARE` of ``deadline_s`` before it.
        deadline_s: the planning deadline's length, seconds.
    Returns:
        ``{"spec": the mined spec (with ``draw_scale`` when it was added), "chosen": the
        shapes (likewise), "predicted": [margin per in-band shape] or None, "alpha",
        "probe_margin", "probe_growth", "repairs", "reject": None or the detail}``.
    """
    inband = [c for c in chosen if c["role"] != "heldout"]
    out: dict[str, Any] = {"spec": spec, "chosen": chosen, "predicted": None, "alpha": None,
                           "probe_margin": None, "probe_growth": None, "repairs": list(judged["repairs"]),
                           "reject": None}
    m0 = judged.get("margin")
    if m0 is None or not inband:
        return out
    until = min(deadline, time.monotonic() + PROBE_SHARE * deadline_s)
    forward_s = judged.get("forward_s") or 0.0
    pred = _predicted(ns, init, spec, m0, inband, dtype, until, forward_s)
    scaled = sens.with_draw_scale(spec) if repairs else None
    if min(pred["margins"]) <= sens.REPAIR_BELOW and scaled is not None:
        until = min(deadline, time.monotonic() + PROBE_SHARE * deadline_s)
        try:
            m1 = sens.margin(ns, init, scaled, dtype, deadline=until)
            alt_chosen = [{**c, "spec": sens.with_draw_scale(c["spec"]) or c["spec"]} for c in chosen]
            alt = _predicted(ns, init, scaled, m1, [c for c in alt_chosen if c["role"] != "heldout"], dtype,
                             until, forward_s)
        except Exception:  # noqa: BLE001 - untrusted code, or out of time: the inputs as they were
            alt = None
        if alt is not None and min(alt["margins"]) > sens.IMPROVES * min(pred["margins"]):
            spec, chosen, pred = scaled, alt_chosen, alt
            out.update(spec=spec, chosen=chosen, repairs=out["repairs"] + ["draw_scale"])
    out.update(predicted=pred["margins"], alpha=pred["alpha"], probe_margin=pred["probe_margin"],
               probe_growth=pred["probe_growth"])
    worst = min(range(len(pred["margins"])), key=lambda k: pred["margins"][k])
    # rejected on a measured decay only: without a probe (too slow here) measure judges it
    if pred["margins"][worst] <= 1 and pred["probe_margin"] is not None:
        shape = [c for c in chosen if c["role"] != "heldout"][worst]
        where = (f"at the planned {shape['role']} shape ({spec_bytes(shape['spec']) / 2**20:.0f} MiB of "
                 f"inputs), predicted from margin {pred['base']:.3g} at the mined shape and "
                 f"{pred['probe_margin']:.3g} at {pred['probe_growth']:.0f}x its inputs "
                 f"(margin ~ input bytes ** -{pred['alpha']:.2f})")
        out["reject"] = sens.reject_detail(pred["margins"][worst], where, out["repairs"],
                                           ["draw_scale"] if scaled is not None else [])
    return out
