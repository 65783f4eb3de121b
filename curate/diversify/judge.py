"""The planner's judgement of whether a problem's output depends on its inputs, at its mined
shape and at the shapes planned for a GPU (:mod:`curate.sensitivity` has the test, the
repairs and the extrapolation; this module applies them to a plan).

:func:`at_mined` runs before pricing: a constant answer that passes at the mined shape is
repaired (size-1 axes grown, a random scale per draw) or the problem is rejected
``input_insensitive``. :func:`at_planned` runs once the shapes are chosen: where the output
aggregates its inputs (it grows less than they do), the margin is measured again at a larger
shape the CPU can run and extrapolated to each planned shape; a predicted margin at most
:data:`curate.sensitivity.REPAIR_BELOW` gets the random scale per draw, and one still at
most 1 rejects the problem. Both run in the planner's sandboxed process, on the CPU, before
any GPU time is spent on the problem.

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
                           "skipped": None}
    if forward_s > SLOW_SHARE * deadline_s:
        out["skipped"] = f"a forward takes {forward_s:.2f} s here"
        return out
    try:
        m = sens.margin(ns, init, spec, dtype)
    except Exception as exc:  # untrusted code: seeded rebuilds may fail where seed 0 ran
        out["skipped"] = _short(exc)
        return out
    fixed = sens.repaired(lambda sp: sens.margin(ns, init, sp, dtype), spec, m,
                          names=tuple(n for n, _ in sens.REPAIRS) if repairs else ())
    out.update(spec=fixed["spec"], margin=fixed["margin"], repairs=fixed["repairs"], tried=fixed["tried"])
    if fixed["margin"] <= 1:
        out["reject"] = sens.reject_detail(fixed["margin"], "at the mined shape", fixed["repairs"], fixed["tried"])
    return out


def _predicted(ns: dict, init: list, spec: list[dict], m0: float, chosen: list[dict],
               dtype: str | None, deadline: float) -> dict[str, Any]:
    """Margins predicted at the ``chosen`` shapes (non-held-out) from ``m0`` at ``spec``."""
    b0 = spec_bytes(spec)
    grows = [sens.aggregates(chosen[0]["base_in"], chosen[0]["base_out"], c["in_bytes"], c["out_bytes"])
             for c in chosen]
    res: dict[str, Any] = {"margins": [m0] * len(chosen), "alpha": 0.0, "probe_margin": None,
                           "probe_growth": None}
    if not any(grows):
        return res
    primary = chosen[0]
    probe = sens.probe_spec(lambda s: apply_family(spec, init, primary["family"], s), spec, primary["s"])
    measured = None
    if probe is not None and time.monotonic() < deadline:
        try:
            measured = (sens.margin(ns, probe[1], probe[0], dtype), spec_bytes(probe[0]))
        except Exception:  # noqa: BLE001 - untrusted code: no probe, judged as a mean
            measured = None
    ext = sens.extrapolate(m0, b0, measured, [spec_bytes(c["spec"]) for c in chosen])
    res.update(alpha=ext["alpha"], margins=[e if g else m0 for e, g in zip(ext["margins"], grows)])
    if measured is not None:
        res.update(probe_margin=measured[0], probe_growth=measured[1] / max(1, b0))
    return res


def at_planned(ns: dict, init: list, spec: list[dict], judged: dict[str, Any], chosen: list[dict],
               dtype: str | None, deadline: float, repairs: bool = True) -> dict[str, Any]:
    """Margins predicted at the planned in-band shapes; the random scale per draw where one is
    at most :data:`curate.sensitivity.REPAIR_BELOW`.

    Args:
        judged: :func:`at_mined`'s result (``spec`` is the one planned from).
        chosen: the planned shapes (``role``, ``family``, ``s``, ``spec``, ``in_bytes``,
            ``out_bytes``, ``base_in``, ``base_out``); held-out ones are left out.
        deadline: ``time.monotonic()`` after which no probe is started.
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
    pred = _predicted(ns, init, spec, m0, inband, dtype, deadline)
    scaled = sens.with_draw_scale(spec) if repairs else None
    if min(pred["margins"]) <= sens.REPAIR_BELOW and scaled is not None and time.monotonic() < deadline:
        try:
            m1 = sens.margin(ns, init, scaled, dtype)
            alt_chosen = [{**c, "spec": sens.with_draw_scale(c["spec"]) or c["spec"]} for c in chosen]
            alt = _predicted(ns, init, scaled, m1, [c for c in alt_chosen if c["role"] != "heldout"], dtype,
                             deadline)
        except Exception:  # noqa: BLE001 - untrusted code: the inputs as they were
            alt = None
        if alt is not None and min(alt["margins"]) > sens.IMPROVES * min(pred["margins"]):
            spec, chosen, pred = scaled, alt_chosen, alt
            out.update(spec=spec, chosen=chosen, repairs=out["repairs"] + ["draw_scale"])
    out.update(predicted=pred["margins"], alpha=pred["alpha"], probe_margin=pred["probe_margin"],
               probe_growth=pred["probe_growth"])
    worst = min(range(len(pred["margins"])), key=lambda k: pred["margins"][k])
    if pred["margins"][worst] <= 1:
        shape = [c for c in chosen if c["role"] != "heldout"][worst]
        probe = (f" and {pred['probe_margin']:.3g} at {pred['probe_growth']:.0f}x its inputs"
                 if pred["probe_margin"] is not None else " (no larger shape measurable here)")
        where = (f"at the planned {shape['role']} shape ({spec_bytes(shape['spec']) / 2**20:.0f} MiB of "
                 f"inputs), predicted from margin {m0:.3g} at the mined shape{probe} "
                 f"(margin ~ input bytes ** -{pred['alpha']:.2f})")
        out["reject"] = sens.reject_detail(pred["margins"][worst], where, out["repairs"],
                                           ["draw_scale"] if scaled is not None else [])
    return out
