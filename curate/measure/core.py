"""Measure one problem: load it, check its output, time eager and TorchInductor runs.

:func:`measure_problem` runs inside an isolated process: a :class:`curate.sandbox.Sandbox`
child on the CPU, the persistent worker of :mod:`curate.measure.worker` on a GPU. It never
raises for a bad problem; it returns a plain dict whose ``reason`` names what was wrong.

Order of work (a failing step stops the rest when ``stop_on_reject``):

1. load the code, build ``Model(*init_args)`` and the inputs on the target device (from the
   input spec with :func:`curate.problem.build_inputs`, or, without a spec, the problem's own
   ``get_inputs()`` called under ``torch.device(device)`` so its tensors are created there);
2. one forward (peak memory is read here);
3. checks: tensors in the output (``no_output``), finite (``non_finite_output``), the same output
   for a second call on the same inputs without reseeding (``non_deterministic``: dropout in
   training mode, random ops), a different output for other weights and inputs
   (``input_insensitive``: a constant answer, another draw's output or the mean of the
   draws, passes the verifier's own correctness check on as many fresh draws of weights and
   inputs as a verifier call compares; ``constant_margin`` in the result says by how much
   the best constant misses, see :func:`curate.checks.constant_answer`);
4. eager timing (see :mod:`curate.measure.timing`), then the runtime band
   (``too_fast``/``too_slow``);
5. TorchInductor: ``torch.compile(model)`` (default mode), the first call timed as
   ``compile_s``, then the same timing protocol. A failure is ``compile_error``.

Forwards run under ``torch.no_grad()`` (inference, like KernelBench's evaluation).
With ``conform``, step 0 runs the problem as a KernelBench-style harness does
(:mod:`curate.conform`), and its reasons reject the problem.
Other reasons: ``load_error`` (code, constructor or inputs fail), ``forward_fails`` (the
forward raises), ``memory`` (out of memory, on the GPU past the worker's memory limit too),
``cuda_error`` (an illegal address, a device-side assert: the context is unusable, ``fatal``
is then True and the worker must be replaced). The worker adds ``crash`` (the process died)
and ``timeout``.

Besides reasons, a result carries ``notes``: labels that reject nothing (``retimed``: a
timing's coefficient of variation was high and it was timed again;
``suspicious_speedup``: Inductor came out over 10x faster than eager and both were timed
again; ``graph_capture_failed``).

Imports only torch, the standard library and curate's torch-only modules.
"""

from __future__ import annotations

import gc
import math
import time
import traceback
from typing import Any

import torch

from curate.conform import check as conformance_check
from curate import checks
from curate.measure.gpu_lock import held
from curate.measure.profile import library_share
from curate.measure.timing import (L2Flush, plan_trials, summarize, synchronize, time_calls,
                                   time_cuda_graph)
from curate.problem import ProblemLoadError, build_inputs, cast_floating, load_problem
from curate.verify.verifier import N_TRIALS as CONSTANT_DRAWS
from curate.verify.correctness import near_zero, noise_tolerance

_FLUSH: dict[str, L2Flush] = {}
_MEMORY_MARKERS = ("out of memory", "can't allocate memory", "std::bad_alloc", "MemoryError")


class _Stop(Exception):
    def __init__(self, reason: str, detail: str = "", fatal: bool = False):
        super().__init__(reason)
        self.reason, self.detail, self.fatal = reason, detail, fatal


def _flush_for(dev: torch.device) -> L2Flush | None:
    if dev.type != "cuda":
        return None
    key = str(dev)
    if key not in _FLUSH:
        _FLUSH[key] = L2Flush(dev)
    return _FLUSH[key]


def _reset_peak_rss() -> int:
    """Reset the kernel's resident-set high-water mark (Linux ``clear_refs`` 5) and return
    the current resident bytes, the base the peak is measured from."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _status_kb("VmRSS") * 1024


def _peak_rss_bytes() -> int:
    return _status_kb("VmHWM") * 1024


def _status_kb(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _describe(exc: BaseException) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-2)
    return (f"{type(exc).__name__}: {exc}"[:1500] + "\n" + "".join(tb)[-1000:]).strip()


#: Messages of CUDA errors that poison the context (every later CUDA call fails too).
_CUDA_ERROR_MARKERS = ("illegal memory access", "illegal address", "device-side assert",
                       "misaligned address", "illegal instruction", "unspecified launch failure",
                       "CUDA error", "cudaError", "CUBLAS_STATUS_EXECUTION_FAILED")


def _failure(exc: BaseException, default: str, dev: torch.device) -> _Stop:
    """Map an exception raised by problem code to a reject reason.

    On CUDA a CUDA error (an illegal address, a device-side assert ...) is ``cuda_error``
    and ``fatal``: the context is unusable, so the worker must be replaced. A failing
    synchronize after any other error means the same.
    """
    if isinstance(exc, _Stop):
        return exc
    msg = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError) or isinstance(exc, getattr(torch, "OutOfMemoryError", ())) \
            or any(m in msg for m in _MEMORY_MARKERS):
        return _Stop("memory", _describe(exc))
    if dev.type == "cuda":
        if isinstance(exc, getattr(torch, "AcceleratorError", ())) or \
                any(m in msg for m in _CUDA_ERROR_MARKERS):
            return _Stop("cuda_error", _describe(exc), fatal=True)
        try:
            torch.cuda.synchronize(dev)
        except Exception as sync_exc:  # the context is broken: only a fresh process recovers
            return _Stop("cuda_error", f"{_describe(exc)}\nthen synchronize: {sync_exc}", fatal=True)
    return _Stop(default, _describe(exc))


def _make_inputs(ns: dict, input_spec: list | None, dev: torch.device, seed: int,
                 dtype: str | None = None) -> list[Any]:
    """The forward's inputs on ``dev`` (floating-point ones cast to ``dtype`` when given)."""
    if input_spec is not None:
        return cast_floating(build_inputs(input_spec, str(dev), seed=seed), dtype)
    torch.manual_seed(seed)
    with torch.device(dev):
        vals = list(ns["get_inputs"]())
    return cast_floating([v.to(dev) if isinstance(v, torch.Tensor) else v for v in vals], dtype)


def _build_model(ns: dict, init_args: list, dev: torch.device, seed: int,
                 dtype: str | None = None) -> torch.nn.Module:
    """``Model(*init_args)`` built on ``dev`` under ``seed`` (cast to ``dtype`` when given:
    floating parameters and buffers, as a harness run in that precision does)."""
    torch.manual_seed(seed)
    with torch.device(dev):
        model = ns["Model"](*init_args)
    model = model.to(dev)
    return model.to(getattr(torch, dtype)) if dtype else model


#: The lock timed trials hold exclusively (see :mod:`curate.measure.gpu_lock`); a worker
#: that shares its GPU with compile-ahead workers sets it with :func:`set_gpu_lock`.
_LOCK: Any = None
#: Inductor faster than eager by more than this is timed again (and noted).
SUSPICIOUS_SPEEDUP = 10.0
#: ``cuda_graph="auto"`` also times CUDA-graph replays when the eager median is below this (ms).
GRAPH_BELOW_MS = 0.1


def set_gpu_lock(lock: Any) -> None:
    """Hold ``lock.exclusive()`` around every timed section from now on (None: no lock)."""
    global _LOCK
    _LOCK = lock


def _exclusive():
    return _LOCK.exclusive if _LOCK is not None else None


def _shared():
    """The GPU lock held shared around untimed GPU work (a no-op without a lock)."""
    return held(_LOCK, "shared")


def locked_inductor(lock: Any):
    """A Dynamo backend: Inductor's ``compile_fx`` (what ``torch.compile``'s default
    ``"inductor"`` backend calls, so the FX-graph cache keys are the same), compiled without
    the GPU lock, the compiled graph's runs under it held shared. Inside a held lock (the
    timed trials) a run is the bare compiled call: no lock, no extra synchronisation."""
    from torch._inductor.compile_fx import compile_fx

    def backend(gm, example_inputs):
        compiled = compile_fx(gm, example_inputs)

        def run(*args):
            if lock.held:
                return compiled(*args)
            with lock.shared():
                out = compiled(*args)
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
            return out

        return run

    return backend


def measure_problem(code: str, input_spec: list | None = None, init_args: list | None = None, *,
                    device: str = "cpu", inductor: bool = False, compile_required: bool | None = None,
                    trials: int = 100, warmup: int = 3, min_ms: float = 0.0, max_ms: float = 10_000.0,
                    budget_s: float | None = None, seed: int = 0, checks_on: bool = True,
                    stop_on_reject: bool = True, name: str = "problem", profile: bool | None = None,
                    cuda_graph: str = "auto", precompile: dict | None = None,
                    suspicious_speedup: float = SUSPICIOUS_SPEEDUP, conform: bool = False,
                    conform_trials: int = 2, dynamic_dims: list | None = None,
                    autotune_ms: float | None = None, dtype: str | None = None) -> dict[str, Any]:
    """Check and time one KernelBench-format problem on ``device``.

    Args:
        code: the problem's source (defines ``Model``, ``get_inputs``, ``get_init_inputs``).
        input_spec: forward inputs (see :mod:`curate.problem`); None: call ``get_inputs()``.
        init_args: constructor arguments; None: call ``get_init_inputs()``.
        device: ``cpu`` or ``cuda[:n]``.
        inductor: also compile with TorchInductor and time the compiled model.
        compile_required: a compile failure rejects the problem (default: on CUDA only, where
            the Inductor baseline is part of the problem's metadata).
        trials, warmup, budget_s: see :func:`curate.measure.timing.time_calls`.
        min_ms, max_ms: runtime band of the eager median (ms).
        seed: model weights use ``seed`` (and ``seed + 2k`` for draw ``k`` of the
            constant-answer check), inputs ``seed + 1`` (and ``seed + 2k + 1``).
        checks_on: run the output checks (step 3).
        stop_on_reject: stop at the first failed check; otherwise keep timing and list every
            failed check in ``flags`` (benchmarks use this to time every problem).
        profile: split one forward's GPU time into library and other kernels
            (:mod:`curate.measure.profile`); default: on CUDA.
        cuda_graph: ``"on"``: also time CUDA-graph replays of the eager and compiled
            forwards; ``"auto"``: only when the eager median is under :data:`GRAPH_BELOW_MS`
            (launch-bound problems); ``"off"``. CUDA only.
        precompile: the compile-ahead outcome for this problem
            (:mod:`curate.measure.compile_ahead`): when its process died or timed out
            compiling, the compile is not tried again here (``compile_error``).
        suspicious_speedup: eager/Inductor ratio above which both are timed again.
        conform: first run the problem as a KernelBench-style harness does, on ``device``
            (:func:`curate.conform.check`, ``conform_trials`` input sets); its failure reason
            (``exec_fails``, ``non_tensor_output``, ``seed_unstable``, ...) rejects the
            problem, and its result is ``conformance``.
        dynamic_dims: ``[[input index, dimension], ...]``: compile with those input
            dimensions marked dynamic (:func:`mark_dynamic`), the ones in which the shape
            variants of one base problem differ, so that they share one compiled graph; a
            graph that fails so is compiled static. The result's ``compile_dynamic`` says
            which one was timed.
        autotune_ms: cap, in ms, on the benchmark of each configuration when TorchInductor
            autotunes a kernel at its first call (:mod:`curate.measure.autotune`); None:
            Inductor's own (25 ms on torch 2.11). The result's ``autotune_ms`` is the cap in
            force.
        dtype: run the problem in this precision (``"bfloat16"``, ``"float16"``,
            ``"float32"``): the model is cast to it (floating parameters and buffers) and so is
            every floating-point input, as KernelBench's harness does for its precision
            setting; the conformance check runs so too. None: as the problem defines.
    Returns:
        dict with ``reason`` (None when the problem passed), ``detail``, ``flags``, ``notes``,
        ``fatal``, ``device``, ``gpu``, ``torch_version``, ``eager`` and ``compile`` (timing
        summaries in ms or None), ``eager_graph``/``compile_graph`` (CUDA-graph replay
        summaries or None), ``compile_s``, ``compile_error``, ``compile_max_abs_diff``,
        ``compile_cache`` (Inductor FX-graph cache hits and misses of this compile),
        ``peak_mem_mb``, ``constant_margin`` (see :func:`curate.checks.constant_answer`;
        None when the checks did not get that far), ``profile`` (see :func:`curate.measure.profile.library_share`, or
        None), ``seconds`` (wall seconds per step: load, checks, eager, profile, compile,
        compile_timing, graph, cleanup), ``inner_s`` (the whole call), ``timed_ms``
        (time inside timed trials, ms), ``lock_wait_s`` and ``shared_wait_s`` (seconds waiting
        for the GPU: for timed trials, for untimed GPU work), ``cpu_s`` (CPU seconds of the
        worker process during the call) and ``compile_split`` (seconds per section of the
        Inductor compile, from ``torch._dynamo.utils.compilation_time_metrics``).
    """
    t_enter = time.perf_counter()
    cpu_enter = time.process_time()
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        # several torch.cuda calls (set_device, ...) need an explicit index
        dev = torch.device("cuda", torch.cuda.current_device())
    if compile_required is None:
        compile_required = dev.type == "cuda"
    if profile is None:
        profile = dev.type == "cuda"
    res: dict[str, Any] = {
        "reason": None, "detail": "", "flags": [], "notes": [], "fatal": False, "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "torch_version": torch.__version__, "eager": None, "compile": None,
        "eager_graph": None, "compile_graph": None, "graph_error": None,
        "compile_s": None, "compile_error": None, "compile_max_abs_diff": None,
        "compile_cache": None, "peak_mem_mb": None, "profile": None, "seconds": {},
        "timed_ms": 0.0, "conformance": None, "constant_margin": None,
    }
    waited0 = _LOCK.waited["exclusive"] if _LOCK is not None else 0.0
    shared0 = _LOCK.waited["shared"] if _LOCK is not None else 0.0
    held0 = _allocated(dev)
    state: dict[str, Any] = {}
    opts = {"inductor": inductor, "compile_required": compile_required, "trials": trials,
            "warmup": warmup, "min_ms": min_ms, "max_ms": max_ms, "budget_s": budget_s,
            "seed": seed, "checks_on": checks_on, "profile": profile and dev.type == "cuda",
            "cuda_graph": cuda_graph if dev.type == "cuda" else "off", "precompile": precompile,
            "suspicious_speedup": suspicious_speedup, "conform": conform, "conform_trials": conform_trials,
            "dynamic_dims": dynamic_dims, "dtype": dtype}
    if inductor:
        from curate.measure.autotune import cap_benchmark_ms

        # applied, or undone, per task: a persistent worker may serve tasks of either setting
        res["autotune_ms"] = autotune_ms if cap_benchmark_ms(autotune_ms) else None

    def flag(reason: str, detail: str) -> None:
        res["flags"].append(reason)
        if res["reason"] is None:
            res["reason"], res["detail"] = reason, detail
        if stop_on_reject:
            raise _Stop(reason, detail)

    try:
        _run(res, state, flag, code, input_spec, init_args, dev, name, opts)
    except BaseException as exc:  # untrusted code: anything it raises is a reject reason
        stop = _failure(exc, state.get("step", "forward_fails"), dev)
        if stop.reason not in res["flags"]:
            res["flags"].append(stop.reason)
        if res["reason"] is None or stop.fatal:
            res["reason"], res["detail"] = stop.reason, stop.detail
        res["fatal"] = stop.fatal
    finally:
        t_clean = time.perf_counter()
        state.clear()
        if inductor:
            try:
                torch._dynamo.reset()
            except Exception:
                pass
        if dev.type == "cuda" and _allocated(dev) > held0:
            # tensors still held (reference cycles): free them before the next problem; a full
            # collection costs ~0.1 s with torch loaded, so only when something is left
            gc.collect()
        if dev.type == "cuda" and not res["fatal"]:
            try:
                torch.cuda.empty_cache()
            except Exception:
                res["fatal"] = True
        res["seconds"]["cleanup"] = time.perf_counter() - t_clean
        res["inner_s"] = time.perf_counter() - t_enter
        res["lock_wait_s"] = (_LOCK.waited["exclusive"] - waited0) if _LOCK is not None else 0.0
        res["shared_wait_s"] = (_LOCK.waited["shared"] - shared0) if _LOCK is not None else 0.0
        res["cpu_s"] = time.process_time() - cpu_enter
    return res


def _allocated(dev: torch.device) -> int:
    """Bytes held by live tensors on ``dev`` (0 off CUDA or after a CUDA error)."""
    if dev.type != "cuda":
        return 0
    try:
        return torch.cuda.memory_allocated(dev)
    except Exception:
        return 0


def _timed(res: dict, key: str, fn, dev: torch.device, opts: dict, flush, max_ms=None,
           **kw) -> dict[str, Any]:
    """Time ``fn`` with the stage's settings; store the summary under ``res[key]``."""
    summary = time_calls(fn, dev, opts["trials"], opts["warmup"], opts["budget_s"], flush, max_ms,
                         lock=_exclusive(), warm_lock=_shared if _LOCK is not None else None,
                         **kw)
    res[key] = summary
    res["timed_ms"] += summary.get("timed_ms_total", 0.0)
    if summary.get("retimed") and "retimed" not in res["notes"]:
        res["notes"].append("retimed")
    return summary


def _run(res, state, flag, code, input_spec, init_args, dev, name, opts) -> None:
    secs = res["seconds"]
    if opts["conform"]:
        t = time.perf_counter()
        with _shared():
            res["conformance"] = conf = conformance_check(code, str(dev), opts["conform_trials"],
                                                          dtype=opts["dtype"])
        secs["conformance"] = time.perf_counter() - t
        if conf["reason"]:
            if dev.type == "cuda" and any(m in conf["detail"] for m in _CUDA_ERROR_MARKERS):
                raise _Stop("cuda_error", conf["detail"], fatal=True)
            if any(m in conf["detail"] for m in _MEMORY_MARKERS):
                raise _Stop("memory", conf["detail"])
            raise _Stop(conf["reason"], conf["detail"])
    t0 = time.perf_counter()
    state["step"] = "load_error"
    try:
        ns = load_problem(code, name)
    except ProblemLoadError as exc:
        raise _Stop("load_error", str(exc)) from None
    init = list(init_args) if init_args is not None else list(ns["get_init_inputs"]())
    cuda = dev.type == "cuda"
    seed = opts["seed"]
    with _shared():
        if cuda:
            synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            base = torch.cuda.memory_allocated(dev)
        else:
            base = _reset_peak_rss()
        model = _build_model(ns, init, dev, seed, opts["dtype"])
        state["model"] = model
        inputs = _make_inputs(ns, input_spec, dev, seed + 1, opts["dtype"])
        state["inputs"] = inputs
        state["step"] = "forward_fails"
        with torch.no_grad():
            out = model(*inputs)
        synchronize(dev)
        state["out"] = out
    peak = (torch.cuda.max_memory_allocated(dev) - base) if cuda else (_peak_rss_bytes() - base)
    res["peak_mem_mb"] = round(max(0, peak) / 2**20, 3)
    secs["load"] = time.perf_counter() - t0

    if opts["checks_on"]:
        t = time.perf_counter()
        try:
            with _shared():
                _checks(flag, res, ns, model, out, input_spec, init, dev, seed, opts["dtype"])
        finally:
            secs["checks"] = time.perf_counter() - t

    t = time.perf_counter()
    flush = _flush_for(dev)

    def forward():
        with torch.no_grad():
            return model(*inputs)

    eager = _timed(res, "eager", forward, dev, opts, flush, opts["max_ms"])
    secs["eager"] = time.perf_counter() - t
    med = eager["median_ms"]
    if med < opts["min_ms"]:
        flag("too_fast", f"eager median {med:.4f} ms < min_ms {opts['min_ms']}")
    if med > opts["max_ms"]:
        est = " (warm-up estimate)" if eager.get("early_stop") else ""
        flag("too_slow", f"eager median {med:.1f} ms{est} > max_ms {opts['max_ms']}")

    if opts["profile"]:
        t = time.perf_counter()
        try:
            with _shared():
                res["profile"] = library_share(forward)
        except Exception as exc:  # the profiler is a label, not a gate
            res["profile"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        secs["profile"] = time.perf_counter() - t

    graph = opts["cuda_graph"] == "on" or (opts["cuda_graph"] == "auto" and med < GRAPH_BELOW_MS)
    if graph:
        _graph_time(res, "eager_graph", forward, dev, opts, flush)

    if opts["inductor"]:
        _inductor(res, state, flag, model, inputs, out, dev, opts, flush, graph)


def _graph_time(res, key, fn, dev, opts, flush) -> None:
    t = time.perf_counter()
    try:
        with held(_LOCK, "exclusive"):
            times = time_cuda_graph(fn, plan_trials(None, opts["trials"], 0), flush, dev)
        res[key] = summarize(times)
        res["timed_ms"] += sum(times)
    except RuntimeError as exc:
        res["graph_error"] = str(exc)
        # a failed capture leaves the CUDA generator in capture state ("Offset increment
        # outside graph capture" on the next torch.randn, seen on the H100): the result
        # stands, but a fresh worker takes the next problem
        res["fatal"] = True
        if "graph_capture_failed" not in res["notes"]:
            res["notes"].append("graph_capture_failed")
    res["seconds"]["graph"] = res["seconds"].get("graph", 0.0) + time.perf_counter() - t


def _checks(flag, res, ns, model, out, input_spec, init, dev, seed, dtype=None) -> None:
    if not checks.tensors(out):
        flag("no_output", f"forward returned {type(out).__name__} without tensors")
    if not checks.all_finite(out):
        flag("non_finite_output", "NaN or inf in the output")
    with torch.no_grad():
        again = model(*_make_inputs(ns, input_spec, dev, seed + 1, dtype))
    if not checks.close(out, again):
        flag("non_deterministic",
             f"two calls on the same inputs differ by up to {checks.max_abs_diff(out, again):.3g}")
    del again
    # the verifier's test of a constant answer, on as many fresh draws of weights and inputs
    # as a verifier call compares: draw k uses weights seed + 2k and inputs seed + 2k + 1
    outs = [out]
    for k in range(1, CONSTANT_DRAWS):
        other = _build_model(ns, init, dev, seed + 2 * k, dtype)
        with torch.no_grad():
            outs.append(other(*_make_inputs(ns, input_spec, dev, seed + 2 * k + 1, dtype)))
        del other
    # a float32 output that is rounding error around zero (mean(GroupNorm(x))) is judged by
    # the verifier without its relative test, and so here
    noise = None
    if near_zero(out):
        noise = noise_tolerance(model, _make_inputs(ns, input_spec, dev, seed + 1, dtype), out)
    margin, detail = checks.constant_answer(outs, noise)
    res["constant_margin"] = margin if math.isfinite(margin) else None
    del outs
    if detail:
        flag("input_insensitive", detail)


def mark_dynamic(inputs: list[Any], dims: list) -> bool:
    """Mark the given dimensions of the input tensors dynamic for Dynamo, softly
    (``torch._dynamo.maybe_mark_dynamic``: the trace specialises a dimension again where the
    code needs a fixed size). A base problem's shape variants then compile to one graph with
    symbolic sizes, which Inductor's FX-graph cache serves to every variant after the first.

    Args:
        inputs: the forward's inputs (non-tensors are skipped).
        dims: ``[[input index, dimension], ...]``; entries out of range or of size 1 (which
            Dynamo always specialises) are skipped.
    Returns:
        whether anything was marked.
    """
    marked = False
    for i, d in dims or ():
        t = inputs[i] if 0 <= i < len(inputs) else None
        if isinstance(t, torch.Tensor) and 0 <= d < t.dim() and t.shape[d] > 1:
            torch._dynamo.maybe_mark_dynamic(t, d)
            marked = True
    return marked


def unmark_dynamic(inputs: list[Any]) -> None:
    """Undo :func:`mark_dynamic` (the attributes Dynamo reads its marks from)."""
    for t in inputs:
        for attr in ("_dynamo_weak_dynamic_indices", "_has_dynamo_dim_marking"):
            if isinstance(t, torch.Tensor) and hasattr(t, attr):
                delattr(t, attr)


def _compile_and_run(model: torch.nn.Module, inputs: list[Any], dev: torch.device):
    """``torch.compile(model)`` and its first call (the compile happens there). Beside other
    measure workers (a GPU lock is set) the graph is compiled unlocked and run shared."""
    compiled = torch.compile(model) if _LOCK is None else \
        torch.compile(model, backend=locked_inductor(_LOCK))
    with torch.no_grad():
        out_c = compiled(*inputs)
    with _shared():
        synchronize(dev)
    return compiled, out_c


def _cache_counts() -> dict[str, int]:
    from torch._dynamo.utils import counters

    c = counters["inductor"]
    return {"hit": int(c.get("fxgraph_cache_hit", 0)), "miss": int(c.get("fxgraph_cache_miss", 0))}


def _compile_metrics() -> dict[str, float]:
    """Seconds spent so far per timed section of Dynamo and Inductor (trace, lowering, Triton
    compiles, autotuning benchmarks, ...), summed over calls."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return {}
    return {k: float(sum(v)) for k, v in compilation_time_metrics.items()}


def _inductor(res, state, flag, model, inputs, out, dev, opts, flush, graph) -> None:
    import torch._dynamo
    import torch._inductor.config as inductor_config

    secs = res["seconds"]
    pre = opts.get("precompile") or {}
    if pre.get("status") in ("crash", "timeout"):
        # the compile already killed or hung a process: do not risk this one
        detail = f"compile-ahead {pre['status']}: {pre.get('detail', '')}"[:2000]
        res["compile_error"] = detail
        if opts["compile_required"]:
            flag("compile_error", detail)
        return
    if dev.type == "cpu":
        # compile in-process: worker pools misbehave under the sandbox's address-space limit
        inductor_config.compile_threads = 1
    torch._dynamo.reset()
    before = _cache_counts()
    metrics0 = _compile_metrics()
    t = time.perf_counter()
    dynamic = bool(opts.get("dynamic_dims")) and mark_dynamic(inputs, opts["dynamic_dims"])
    try:
        try:
            compiled, out_c = _compile_and_run(model, inputs, dev)
        except Exception:
            if not dynamic:
                raise
            # a graph Inductor cannot build with a symbolic batch: the static compile decides
            unmark_dynamic(inputs)
            torch._dynamo.reset()
            dynamic = False
            compiled, out_c = _compile_and_run(model, inputs, dev)
    except Exception as exc:
        stop = _failure(exc, "compile_error", dev)
        if stop.reason != "compile_error":
            raise stop from None
        res["compile_error"] = stop.detail
        secs["compile"] = time.perf_counter() - t
        if opts["compile_required"]:
            flag("compile_error", stop.detail)
        return
    res["compile_s"] = time.perf_counter() - t
    res["compile_dynamic"] = bool(dynamic)
    secs["compile"] = res["compile_s"]
    after = _cache_counts()
    res["compile_cache"] = {k: after[k] - before[k] for k in after}
    # nested sections overlap (a Triton compile inside the lowering): read each on its own
    res["compile_split"] = {k: round(v - metrics0.get(k, 0.0), 4) for k, v in _compile_metrics().items()
                            if v - metrics0.get(k, 0.0) >= 0.01}
    with _shared():
        res["compile_max_abs_diff"] = checks.max_abs_diff(out, out_c)
    del out_c

    def forward():
        with torch.no_grad():
            return compiled(*inputs)

    t = time.perf_counter()
    comp = _timed(res, "compile", forward, dev, opts, flush)
    eager = res["eager"]
    if comp["median_ms"] > 0 and eager["median_ms"] / comp["median_ms"] > opts["suspicious_speedup"]:
        # an outsized speedup must survive a second, full-length timing of both sides
        res["notes"].append("suspicious_speedup")
        full = dict(opts, budget_s=max(opts["budget_s"] or 0.0, 1.0))

        def eager_forward():
            with torch.no_grad():
                return model(*inputs)

        _timed(res, "eager", eager_forward, dev, full, flush, spread_max=None)
        _timed(res, "compile", forward, dev, full, flush, spread_max=None)
    secs["compile_timing"] = time.perf_counter() - t
    if graph:
        _graph_time(res, "compile_graph", forward, dev, opts, flush)
