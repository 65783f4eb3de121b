"""Plan a problem's shapes for a runtime band on a target GPU, from cost estimates alone.

:func:`plan_task` runs inside a :class:`curate.sandbox.Sandbox` child on the CPU (the code is
untrusted). It

1. runs the problem as a KernelBench-style harness does (:func:`curate.conform.check`: plain
   ``exec``, two seeded builds, one output tensor; skipped where ``curate mine`` did so with this
   torch), then builds ``Model(*init_args)`` (seed 0)
   and runs the mined inputs for real: the problem must run and give a finite output; its
   output must depend on its inputs by the verifier's own test, at the mined shape, or be
   repaired so that it does (:func:`curate.diversify.judge.at_mined`: size-1 axes grown, a
   random scale per draw), else it is rejected ``input_insensitive``;
2. builds the model again on the ``meta`` device, where a forward at any size costs
   milliseconds, and prices forwards with :mod:`curate.cost` (a problem whose code
   cannot run on ``meta``, e.g. one that reads a tensor's values, is priced on real CPU
   tensors at small sizes and extrapolated by a power law);
3. reads which input axes the forward accepts at other sizes (:func:`curate.diversify.shapes.axes`,
   each axis tried at twice its size): the batch first, then sequence / spatial / feature axes,
   then axes tied to constructor arguments (widths: the matching ``init_args`` grow with them);
4. groups them into scaling families (``batch``, ``space``, ``mixed``, ``width``) and, for
   each wanted time, solves for the family scale whose estimate lands there (secant steps on
   log time over log scale), under the memory budget (parameters + inputs + the peak of live
   activations);
5. derives the held-out verification shape from the primary one: every free axis made odd
   and not a power of two (:func:`curate.diversify.shapes.odd_size`);
6. predicts the same test at the planned shapes, where an output that averages its inputs
   (a loss) may stop depending on them (:func:`curate.diversify.judge.at_planned`).

With ``dtype`` (``curate diversify --dtypes``) all of it runs in that precision: the model
and the floating-point inputs cast to it, the operators priced at its sizes and rates.

Wanted times: the primary shape at the band's geometric middle, the others spread across
the band (lower and upper third on a log scale), each from another family when one exists,
so shapes differ in aspect, not only in batch. A problem none of whose families reaches the
band is reported with the reason: ``launch_bound`` (its time stays at the launch floor
whatever the size) or ``over_memory`` (the memory budget is reached first), and the best
estimate reached.

Imports only torch, the standard library and curate's torch-only modules.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch

from curate.conform import check as conformance_check
from curate.cost import ForwardCost, GpuProfile, device_ms, estimate_ms, forward_cost, gpu_profile
from curate.diversify.shapes import Axis, apply_family, axes, family, init_paths
from curate.checks import all_finite, output_bytes
from curate.diversify import judge
from curate.problem import ProblemLoadError, build_inputs, cast_floating, load_problem, spec_bytes

#: Secant steps per solve; scale steps are clamped to this factor either way.
MAX_STEPS = 8
MAX_STEP = 64.0
#: A solve stops when the estimate is within this factor of the wanted time.
TOLERANCE = 1.25
#: Real CPU forwards (the fallback estimator) only below this many input bytes.
REAL_PROBE_BYTES = 64 * 2**20
#: Axes tried per problem (each try is one meta forward).
MAX_AXES = 6
#: Largest size an axis may grow to: past it a shape stops looking like a workload
#: (7 million rows of 64 features) and the problem is better grown along another axis.
MAX_AXIS = 65536


class SizeCap(ValueError):
    """A scale that would grow an axis past :data:`MAX_AXIS`."""


def _capped(spec: list[dict], spec0: list[dict]) -> None:
    for s, s0 in zip(spec, spec0):
        for n, n0 in zip(s.get("shape") or [], s0.get("shape") or []):
            if n > max(MAX_AXIS, n0):
                raise SizeCap(f"an axis would grow to {n} (> {MAX_AXIS})")


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


class Pricer:
    """Prices a forward at a spec: on ``meta`` when the model builds and runs there, else on
    real CPU tensors (small specs only; larger ones extrapolated by the caller)."""

    def __init__(self, ns: dict, init_args: list, spec: list[dict], gpu: GpuProfile,
                 dtype: str | None = None):
        self.ns, self.gpu, self.dtype = ns, gpu, dtype
        self.models: dict[str, torch.nn.Module] = {}
        self.meta = True
        try:
            self.cost(spec, init_args)
        except Exception:
            self.meta = False
            self.models.clear()

    def _model(self, init: list) -> torch.nn.Module:
        key = repr(init)
        if key not in self.models:
            if len(self.models) > 4:
                self.models.clear()
            torch.manual_seed(0)
            if self.meta:
                with torch.device("meta"):
                    self.models[key] = self.ns["Model"](*init)
            else:
                self.models[key] = self.ns["Model"](*init)
            if self.dtype:
                self.models[key] = self.models[key].to(getattr(torch, self.dtype))
        return self.models[key]

    def cost(self, spec: list[dict], init: list) -> ForwardCost:
        """The forward's cost at ``spec`` (Raises: whatever the forward raises; ValueError
        for a real probe too large to run)."""
        if not self.meta and spec_bytes(spec) > REAL_PROBE_BYTES:
            raise ValueError("too large for a real CPU probe")
        model = self._model(init)
        inputs = build_inputs(spec, "meta") if self.meta else build_inputs(spec, "cpu", seed=0)
        return forward_cost(model, cast_floating(inputs, self.dtype))

    def ms(self, cost: ForwardCost) -> float:
        return estimate_ms(cost, self.gpu)


def _classify(pricer: Pricer, spec: list[dict], init: list, found: list[Axis],
              deadline: float) -> tuple[list[Axis], list[Axis], dict[str, list]]:
    """Free axes (the forward accepts them at twice the size) and width axes (it does when
    the constructor arguments of that size grow too)."""
    free: list[Axis] = []
    width: list[Axis] = []
    paths: dict[str, list] = {}
    for a in found[:MAX_AXES]:
        if time.monotonic() > deadline:
            break
        fam = family(a.name, [a])
        try:
            pricer.cost(*apply_family(spec, init, fam, 2.0))
            free.append(a)
            continue
        except Exception:
            pass
        tied = init_paths(init, a.size)
        if tied and a.name != "batch":
            fam = family(a.name, [a], {f"{a.name}:{a.size}:{a.positions}": tied})
            try:
                pricer.cost(*apply_family(spec, init, fam, 2.0))
                width.append(a)
                paths[f"{a.name}:{a.size}:{a.positions}"] = tied
            except Exception:
                pass
    return free, width, paths


def families(free: list[Axis], width: list[Axis], paths: dict[str, list]) -> list[dict]:
    """Scaling families in the order the primary shape tries them: ``batch``, ``mixed``
    (batch and the other free axes), ``space`` (the other free axes), ``width`` (axes tied to
    constructor arguments, with the batch)."""
    batch = [a for a in free if a.name == "batch"]
    rest = [a for a in free if a.name != "batch"]
    out = []
    if batch:
        out.append(family("batch", batch))
    if batch and rest:
        out.append(family("mixed", batch + rest))
    if rest:
        out.append(family("space", rest))
    if width:
        out.append(family("width", batch + width, paths))
    return out


def gpu_of(price: Callable) -> GpuProfile:
    return price.gpu  # type: ignore[attr-defined]


def solve(price: Callable[[float], tuple[float, ForwardCost]], want_ms: float, budget: int,
          deadline: float) -> dict[str, Any]:
    """The scale ``s`` whose estimate is nearest ``want_ms`` within the memory budget.

    Args:
        price: ``s -> (estimated ms, cost)``; raises for a scale the model rejects.
    Returns:
        ``{"status": "ok" | "over_memory" | "launch_bound" | "error", "s", "ms", "cost",
        "detail"}``: ``ok`` when within :data:`TOLERANCE` of ``want_ms``; otherwise the
        nearest point reached and why the search stopped.
    """
    s, best = 1.0, None
    points: list[tuple[float, float]] = []
    ceiling = math.inf  # smallest scale known to be over the memory budget
    status, detail = "launch_bound", ""
    for _ in range(MAX_STEPS):
        if time.monotonic() > deadline:
            detail = "deadline"
            break
        try:
            ms, cost = price(s)
        except Exception as exc:
            if not points:
                return {"status": "error", "s": s, "ms": None, "cost": None, "detail": _short(exc)}
            ceiling = min(ceiling, s)  # a failure at a larger size is a limit, like memory
            s = math.sqrt(max(p[0] for p in points if p[0] < s) * s) if any(p[0] < s for p in points) else s / 2
            status = "launch_bound" if isinstance(exc, SizeCap) else "over_memory"
            detail = _short(exc)
            continue
        if cost.peak_bytes > budget:
            ceiling = min(ceiling, s)
            status = "over_memory"
            lower = [p[0] for p in points if p[0] < s]
            s = math.sqrt(max(lower) * s) if lower else s * max(1 / MAX_STEP, budget / cost.peak_bytes / 1.5)
            continue
        points.append((s, max(device_ms(cost, gpu_of(price), floor=False), 1e-9)))
        if best is None or abs(math.log(ms / want_ms)) < abs(math.log(best["ms"] / want_ms)):
            best = {"s": s, "ms": ms, "cost": cost}
        if abs(math.log(ms / want_ms)) <= math.log(TOLERANCE):
            return {"status": "ok", **best, "detail": ""}
        # slope of log time over log scale from the last two points (1 until there are two)
        slope = 1.0
        if len(points) >= 2:
            (s1, m1), (s2, m2) = points[-2], points[-1]
            if s1 != s2 and m1 > 0 and m2 > 0:
                slope = math.log(m2 / m1) / math.log(s2 / s1)
        if slope < 0.05 and ms < want_ms and len(points) >= 2:
            status, detail = "launch_bound", f"time stays near {ms:.3f} ms as the shape grows"
            break
        # the kernels' time is what grows; below the launch floor, aim it at the wanted time
        step = (want_ms / points[-1][1]) ** (1.0 / max(slope, 0.2))
        step = min(MAX_STEP, max(1 / MAX_STEP, step))
        nxt = s * step
        if nxt >= ceiling:
            nxt = math.sqrt(s * ceiling)
            if abs(math.log(nxt / s)) < 0.01:
                status = "over_memory"
                detail = f"memory budget reached at {ms:.3f} ms"
                break
        if abs(math.log(nxt / s)) < 1e-3:
            break
        s = nxt
    if best is None:
        return {"status": status if status != "launch_bound" else "error", "s": s, "ms": None,
                "cost": None, "detail": detail or "no scale ran within the budget"}
    if status == "launch_bound" and not detail:
        detail = f"best {best['ms']:.3f} ms"
    return {"status": status, **best, "detail": detail or f"best {best['ms']:.3f} ms"}


def targets(band: tuple[float, float], n: int) -> list[float]:
    """Wanted times for ``n`` shapes: the band's geometric middle first, then points spread
    across the band on a log scale, away from its edges (estimates err either way)."""
    lo, hi = band
    mid = math.sqrt(lo * hi)
    span = math.log(hi / lo)
    spread = [math.exp(math.log(lo) + span * f) for f in (0.3, 0.75, 0.15, 0.9)]
    return [mid] + spread[: max(0, n - 1)]


def plan_task(code: str, init_args: list, input_spec: list[dict], band: tuple[float, float],
              gpu: str, mem_budget_bytes: int, shapes: int, deadline_s: float,
              dtype: str | None = None, repair_inputs: bool = True,
              conformed: bool = False) -> dict[str, Any]:
    """Plan ``shapes`` in-band shapes and a held-out one for a problem (see the module docstring).

    Args:
        code: KernelBench-format problem source.
        init_args: constructor arguments; input_spec: the mined forward inputs.
        band: ``(lo, hi)`` eager milliseconds wanted on ``gpu``.
        gpu: a target name :func:`curate.cost.gpu_profile` knows.
        mem_budget_bytes: most bytes a shape may need (parameters, inputs, activations).
        shapes: in-band shapes wanted (the first is the primary).
        deadline_s: seconds after which no further estimate is started.
        dtype: the precision the problem is planned in (``"bfloat16"``, ``"float16"``; the
            model and floating-point inputs cast to it, as :mod:`curate.conform` and the
            verifier do; ``input_spec`` is expected in it already); None: as defined.
        repair_inputs: repair inputs a constant answer would pass on
            (:mod:`curate.diversify.judge`); False for code whose inputs curate did not write.
        conformed: ``code`` already passed :func:`curate.conform.check` on the CPU with this
            torch (``curate mine`` checks every problem it writes): not checked again.
    Returns:
        ``{"ok": False, "detail"}`` when the mined inputs do not run (with ``reason`` when a
        KernelBench-style harness cannot run the problem, see :mod:`curate.conform`); else ``{"ok": True,
        "original": {flops, bytes, seconds, finite, est_ms, peak_bytes}, "shapes": [{role,
        family, s, spec, init, est_ms, flops, bytes, peak_bytes}], "reject": None or
        [reason, detail], "meta": bool, "families": [names], "input_spec": the mined spec
        the shapes grow from (repaired when ``input_repairs`` is not empty), "input_repairs":
        [names], "sensitivity": {margin at the mined shape, predicted margins at the in-band
        shapes, ...}}``; roles are ``primary``, ``spread`` and ``heldout``; ``reject`` is
        ``input_insensitive`` when a constant answer would pass the verifier at the mined
        shape or, predicted, at a planned one.
    """
    t0 = time.monotonic()
    deadline = t0 + deadline_s
    prof = gpu_profile(gpu)
    if not conformed:
        conf = conformance_check(code, "cpu", trials=1, dtype=dtype)
        if conf["reason"]:  # a KernelBench-style harness cannot use it: no shapes for it
            return {"ok": False, "reason": conf["reason"], "detail": conf["detail"]}
    try:
        ns = load_problem(code)
        torch.manual_seed(0)
        model = ns["Model"](*init_args)
        if dtype:
            model = model.to(getattr(torch, dtype))
        inputs = cast_floating(build_inputs(input_spec, "cpu", seed=0), dtype)
        t = time.monotonic()
        with torch.no_grad():
            out = model(*inputs)
        seconds = time.monotonic() - t
    except ProblemLoadError as exc:
        return {"ok": False, "detail": f"load: {exc}"}
    except Exception as exc:  # untrusted code
        return {"ok": False, "detail": _short(exc)}
    original = {"seconds": seconds, "finite": all_finite(out),
                "bytes": spec_bytes(input_spec) + output_bytes(out)}
    del out, inputs, model

    judged = judge.at_mined(ns, init_args, input_spec, dtype, seconds, deadline_s, repair_inputs)
    input_spec = judged["spec"]
    summary = {"input_spec": input_spec, "input_repairs": judged["repairs"],
               "sensitivity": {k: judged[k] for k in ("margin", "tried", "skipped")}}
    if judged["reject"]:
        return {"ok": True, "original": original, "shapes": [], "meta": False, "families": [],
                "reject": ["input_insensitive", judged["reject"]], **summary}

    pricer = Pricer(ns, init_args, input_spec, prof, dtype)
    try:
        base_cost = pricer.cost(input_spec, init_args)
    except Exception as exc:
        return {"ok": True, "original": original, "shapes": [], "meta": False, "families": [],
                "reject": ["no_estimate", _short(exc)], **summary}
    original.update(flops=base_cost.flops, est_ms=pricer.ms(base_cost), peak_bytes=base_cost.peak_bytes)

    free, width, paths = _classify(pricer, input_spec, init_args, axes(input_spec), deadline)
    fams = families(free, width, paths)
    if not fams:
        fams = [family("mined", [])]  # nothing grows: the mined shape is all there is

    # each family's prices, kept across its solves (each starts at the mined shape, already
    # priced): a meta forward of a whole model costs a second on 2 cores
    priced: dict[int, dict[float, Any]] = {}

    def pricing(fam: dict) -> Callable[[float], tuple[float, ForwardCost]]:
        if not pricer.meta:
            return _extrapolated(pricer, input_spec, init_args, fam)
        memo = priced.setdefault(id(fam), {1.0: (pricer.ms(base_cost), base_cost)})

        def price(s: float):
            if s not in memo:
                try:
                    spec, init = apply_family(input_spec, init_args, fam, s)
                    _capped(spec, input_spec)
                    c = pricer.cost(spec, init)
                    memo[s] = (pricer.ms(c), c)
                except Exception as exc:  # a scale the model rejects stays rejected
                    memo[s] = exc
            if isinstance(memo[s], Exception):
                raise memo[s]
            return memo[s]
        price.gpu = prof  # type: ignore[attr-defined]
        return price

    wanted = targets(band, shapes)
    lo, hi = band
    chosen: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    used: dict[str, int] = {}
    for k, want in enumerate(wanted):
        # the primary tries the families in order; other shapes prefer a family not used yet
        order = sorted(fams, key=lambda f: used.get(f["name"], 0)) if k else fams
        for fam in order:
            res = solve(pricing(fam), want, mem_budget_bytes, deadline)
            if res["ms"] is not None and lo <= res["ms"] <= hi:
                spec, init = apply_family(input_spec, init_args, fam, res["s"])
                if any(c["spec"] == spec and c["init"] == init for c in chosen):
                    continue
                c = res["cost"]
                chosen.append({"role": "primary" if k == 0 else "spread", "family": fam, "s": res["s"],
                               "want_ms": want,
                               "spec": spec, "init": init, "est_ms": res["ms"], "flops": c.flops,
                               "bytes": c.input_bytes + c.output_bytes, "peak_bytes": c.peak_bytes,
                               "in_bytes": c.input_bytes, "out_bytes": c.output_bytes,
                               "base_in": base_cost.input_bytes, "base_out": base_cost.output_bytes})
                used[fam["name"]] = used.get(fam["name"], 0) + 1
                break
            failures.append({"family": fam["name"], **{x: res[x] for x in ("status", "ms", "detail")}})
        if k == 0 and not chosen:
            break
    reject = None
    if not chosen:
        reject = _why(failures)
    else:
        held = _heldout(pricer, input_spec, init_args, chosen[0], mem_budget_bytes)
        if held is None:
            reject = ["no_heldout_shape", "no odd-size shape of the primary runs"]
        else:
            chosen.append(held)
    if reject is None:
        # the margin where the GPU will run it, before any GPU time is spent on it
        planned = judge.at_planned(ns, init_args, input_spec, judged, chosen, dtype,
                                   t0 + deadline_s, deadline_s, repair_inputs)
        chosen, input_spec = planned["chosen"], planned["spec"]
        summary.update(input_spec=input_spec, input_repairs=planned["repairs"])
        summary["sensitivity"].update({k: planned[k] for k in ("predicted", "alpha", "probe_margin",
                                                               "probe_growth")})
        if planned["reject"]:
            reject = ["input_insensitive", planned["reject"]]
    return {"ok": True, "original": original, "shapes": chosen, "reject": reject,
            "meta": pricer.meta, "families": [f["name"] for f in fams],
            "failures": failures[:8], "seconds": time.monotonic() - t0, **summary}


def _why(failures: list[dict[str, Any]]) -> list[str]:
    reached = [f for f in failures if f["ms"] is not None]
    best = max(reached, key=lambda f: f["ms"], default=None)
    memory = any(f["status"] == "over_memory" for f in failures)
    if best is None:
        errors = [f["detail"] for f in failures if f["detail"]]
        return ["no_estimate", errors[0] if errors else "no shape could be priced"]
    reason = "over_memory" if memory and best["status"] == "over_memory" else "launch_bound"
    return [reason, f"best estimate {best['ms']:.4g} ms ({best['family']}: {best['detail']})"]


def _heldout(pricer: Pricer, spec0: list[dict], init0: list, primary: dict, budget: int) -> dict | None:
    """The primary shape with its free axes odd (all at once, else one at a time)."""
    fam = primary["family"]
    tries = [fam] + [{"name": fam["name"], "axes": [a]} for a in fam["axes"] if not a["init"]]
    for f in tries:
        spec, init = apply_family(spec0, init0, f, primary["s"] if f is fam else _axis_scale(primary, f),
                                  odd=True)
        spec = _keep_others(primary["spec"], spec, f)
        if spec == primary["spec"]:
            continue
        try:
            c = pricer.cost(spec, primary["init"]) if pricer.meta or spec_bytes(spec) <= REAL_PROBE_BYTES else None
        except Exception:
            continue
        if c is not None and c.peak_bytes > budget:
            continue
        return {"role": "heldout", "family": fam, "s": primary["s"], "spec": spec, "init": primary["init"],
                "want_ms": None,
                "est_ms": pricer.ms(c) if c else primary["est_ms"], "flops": c.flops if c else primary["flops"],
                "bytes": (c.input_bytes + c.output_bytes) if c else primary["bytes"],
                "peak_bytes": c.peak_bytes if c else primary["peak_bytes"]}
    return None


def _axis_scale(primary: dict, fam: dict) -> float:
    # the per-axis factor the primary gave each axis, as the scale of a one-axis family
    n = max(1, len(primary["family"]["axes"]))
    return primary["s"] ** (1.0 / n)


def _keep_others(primary_spec: list[dict], odd_spec: list[dict], fam: dict) -> list[dict]:
    # positions outside ``fam`` keep the primary's sizes (a one-axis try leaves the rest as is)
    moved = {tuple(p) for a in fam["axes"] for p in a["positions"]}
    out = []
    for i, (p, o) in enumerate(zip(primary_spec, odd_spec)):
        if "shape" not in p:
            out.append(p)
            continue
        shape = [o["shape"][d] if (i, d) in moved else p["shape"][d] for d in range(len(p["shape"]))]
        out.append({**p, "shape": shape})
    return out


def _extrapolated(pricer: Pricer, spec0: list[dict], init0: list, fam: dict):
    """Pricing for problems that cannot run on ``meta``: real CPU costs at the mined scale
    and at 2x give a power law in ``s`` for the device time (the launch floor stays)."""
    c1 = pricer.cost(spec0, init0)
    try:
        c2 = pricer.cost(*apply_family(spec0, init0, fam, 2.0))
        p = math.log(max(c2.bytes, 1) / max(c1.bytes, 1)) / math.log(2.0) if fam["axes"] else 0.0
    except Exception:
        c2, p = None, 1.0
    gpu = pricer.gpu

    def price(s: float):
        if s != 1.0 and not fam["axes"]:
            raise ValueError("no axis to grow")
        _capped(apply_family(spec0, init0, fam, s)[0], spec0)
        scale = s ** max(p, 0.0)
        grown = ForwardCost(ops=[type(o)(o.kind, int(o.flops * scale), int(o.bytes * scale), o.half)
                                 for o in c1.ops],
                            flops=int(c1.flops * scale), bytes=int(c1.bytes * scale), kernels=c1.kernels,
                            input_bytes=int(c1.input_bytes * scale), output_bytes=int(c1.output_bytes * scale),
                            param_bytes=c1.param_bytes,
                            peak_bytes=c1.param_bytes + int((c1.peak_bytes - c1.param_bytes) * scale))
        return estimate_ms(grown, gpu), grown
    price.gpu = gpu  # type: ignore[attr-defined]
    return price
