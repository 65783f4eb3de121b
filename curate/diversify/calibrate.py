"""Confirm planned shapes on the GPU: time them, and move each into the band.

:func:`calibrate_problem` runs in a persistent GPU worker (:mod:`curate.measure.worker`,
role ``calibrate``): the estimates of :mod:`curate.diversify.plan` come from a roofline and
err both ways, so each planned shape is timed for real (CUDA events around each trial, the
L2 cache flushed before it, the median of a few trials after warm-up: the timing method of
:mod:`curate.measure.timing`, with fewer trials) and, while it misses its wanted time by
more than :data:`MISS` or leaves the band, its family scale is corrected by a secant step on
log time over log scale (at most ``max_probes`` timings per shape). A shape that runs out of
GPU memory, or needs more than the memory budget, is shrunk. The held-out shape follows the
final primary one (the same axes made odd). ``curate measure`` times the kept rows again
with its full method.

On the CPU (``device="cpu"``) the same logic runs with host timers and no memory peak: a
check of the correction on small bands, not a measurement of a GPU.

Imports only torch, the standard library and curate's torch-only modules.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from curate.diversify.shapes import apply_family, odd_size
from curate.measure.gpu_lock import held
from curate.measure.timing import L2Flush, summarize, time_cpu, time_cuda, warm_up
from curate.problem import build_inputs, cast_floating, load_problem

#: A shape more than this factor from its wanted time is corrected (when probes are left).
MISS = 2.0

_FLUSH: dict[str, L2Flush] = {}
#: The GPU lock shared with other calibrate workers on this GPU (None: this worker is alone);
#: set by the worker process (:func:`set_gpu_lock`).
_LOCK: Any = None


def set_gpu_lock(lock: Any) -> None:
    """Time every probe holding ``lock.exclusive()`` and build models and inputs holding
    ``lock.shared()`` (:class:`curate.measure.gpu_lock.GpuLock`; None: no lock)."""
    global _LOCK
    _LOCK = lock


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def _time_spec(ns: dict, init: list, spec: list[dict], dev: torch.device, models: dict,
               trials: int, warmup: int, dtype: str | None = None) -> tuple[float, float]:
    """Median eager ms and peak MiB (above what was allocated before) of one forward (the
    model and floating-point inputs cast to ``dtype`` when given)."""
    key = repr(init)
    cuda = dev.type == "cuda"
    with held(_LOCK, "shared"):
        if key not in models:
            models.clear()
            torch.manual_seed(0)
            with torch.device(dev):
                models[key] = ns["Model"](*init).to(dev)
            if dtype:
                models[key] = models[key].to(getattr(torch, dtype))
        model = models[key]
        if cuda:
            flush = _FLUSH.setdefault(str(dev), L2Flush(dev))
            torch.cuda.synchronize(dev)
            base = torch.cuda.memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        xs = cast_floating(build_inputs(spec, str(dev), seed=0), dtype)
        if cuda:
            torch.cuda.synchronize(dev)

    def fn():
        return model(*xs)

    with torch.no_grad(), held(_LOCK, "exclusive"):  # the probe alone on the GPU
        warm_up(fn, warmup, dev)
        times = time_cuda(fn, trials, flush, dev) if cuda else time_cpu(fn, trials)
    peak = (torch.cuda.max_memory_allocated(dev) - base) / 2**20 if cuda else None
    del xs
    return summarize(times)["median_ms"], peak


def calibrate_problem(code: str, init_args: list, input_spec: list[dict], shapes: list[dict],
                      band: tuple[float, float], mem_budget_mb: float, device: str = "cuda",
                      trials: int = 10, warmup: int = 2, max_probes: int = 4,
                      deadline_s: float = 120.0, dtype: str | None = None) -> dict[str, Any]:
    """Time the planned ``shapes`` of a problem on ``device`` and correct their scales.

    Args:
        code, init_args, input_spec: the problem and its mined constructor arguments and inputs.
        shapes: :func:`curate.diversify.plan.plan_task`'s ``shapes`` (``role``, ``family``,
            ``s``, ``spec``, ``init``, ``want_ms``).
        band: ``(lo, hi)`` eager ms wanted.
        mem_budget_mb: most MiB a shape may allocate above the model (inputs, outputs,
            activations), by the CUDA allocator's peak.
        trials, warmup: timed and untimed forwards per probe.
        max_probes: timings per shape.
        dtype: the precision the problem runs in (model and floating-point inputs cast to it,
            :func:`curate.measure.core.measure_problem`'s ``dtype``); None: as defined.
    Returns:
        ``{"ok": True, "shapes": [...], "mined", "gpu", "torch_version", "seconds"}``
        (``mined``: the mined shape's ``ms`` and ``peak_mb``, timed the same way) with each shape
        given ``ms`` (median eager ms, None when it did not run), ``peak_mb``, ``probes``,
        ``in_band`` and ``error``; or ``{"ok": False, "detail"}`` when the problem does not
        load or build on the device.
    """
    t0 = time.monotonic()
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", 0)
    lo, hi = band
    torch.set_grad_enabled(False)
    try:
        ns = load_problem(code)
    except Exception as exc:
        return {"ok": False, "detail": _short(exc)}
    models: dict[str, torch.nn.Module] = {}
    out: list[dict[str, Any]] = []
    primary_final = None
    mined = {"ms": None, "peak_mb": None, "error": None}
    try:  # the mined shape, timed the same way: the "before" of the runtime distribution
        mined["ms"], mined["peak_mb"] = _time_spec(ns, list(init_args), input_spec, dev, models, trials, warmup,
                                                   dtype)
    except Exception as exc:
        mined["error"] = _short(exc)
    for shape in shapes:
        if shape["role"] == "heldout":
            continue
        res = dict(shape)
        s = shape["s"]
        want = shape.get("want_ms") or math.sqrt(lo * hi)
        points: list[tuple[float, float]] = []
        res.update(ms=None, peak_mb=None, probes=0, in_band=False, error=None)
        while res["probes"] < max_probes and time.monotonic() - t0 < deadline_s:
            spec, init = apply_family(input_spec, init_args, shape["family"], s)
            res["probes"] += 1
            try:
                ms, peak = _time_spec(ns, init, spec, dev, models, trials, warmup, dtype)
            except torch.cuda.OutOfMemoryError as exc:
                models.clear()
                torch.cuda.empty_cache()  # only raised on CUDA
                res["error"] = _short(exc)
                s /= 4
                continue
            except Exception as exc:  # untrusted code: the shape does not run here
                res["error"] = _short(exc)
                break
            over = peak is not None and peak > mem_budget_mb
            inside = lo <= ms <= hi and not over
            if inside or res["ms"] is None or not (lo <= res["ms"] <= hi):
                res.update(spec=spec, init=init, s=s, ms=ms, peak_mb=peak, in_band=inside, error=None)
            points.append((s, ms))
            if inside and abs(math.log(ms / want)) <= math.log(MISS):
                break
            slope = 1.0
            if len(points) >= 2 and points[-1][0] != points[-2][0]:
                (s1, m1), (s2, m2) = points[-2], points[-1]
                slope = max(0.2, math.log(m2 / m1) / math.log(s2 / s1)) if m1 > 0 and m2 > 0 else 1.0
            step = (want / ms) ** (1.0 / slope)
            if over:
                step = min(step, 0.5 * mem_budget_mb / peak)  # type: ignore[operator]
            s *= min(64.0, max(1 / 64.0, step))
        out.append(res)
        if shape["role"] == "primary":
            primary_final = res
    held = next((x for x in shapes if x["role"] == "heldout"), None)
    if held is not None and primary_final is not None and primary_final["ms"] is not None:
        out.append(_heldout(ns, dev, models, held, shapes[0], primary_final, trials, warmup, dtype))
    models.clear()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return {"ok": True, "shapes": out, "mined": mined,
            "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "torch_version": torch.__version__, "seconds": time.monotonic() - t0}


def _heldout(ns, dev, models, held: dict, planned: dict, final: dict, trials: int, warmup: int,
             dtype: str | None = None) -> dict:
    """The planned held-out shape moved to the final primary: the positions the plan made
    odd are made odd again at the primary's final sizes; it must run (no band)."""
    spec = [dict(x, shape=list(x["shape"])) if "shape" in x else dict(x) for x in final["spec"]]
    for i, (h, p) in enumerate(zip(held["spec"], planned["spec"])):
        for d, (a, b) in enumerate(zip(h.get("shape") or [], p.get("shape") or [])):
            if a != b:
                spec[i]["shape"][d] = odd_size(spec[i]["shape"][d])
    res = dict(held, spec=spec, init=final["init"], s=final["s"], ms=None, peak_mb=None, probes=1,
               in_band=False, error=None)
    try:
        res["ms"], res["peak_mb"] = _time_spec(ns, final["init"], spec, dev, models, max(3, trials // 2), 1,
                                               dtype)
    except Exception as exc:
        res["error"] = _short(exc)
    return res
