"""Compile ahead: TorchInductor compiles on spare CPU cores while the GPU times other problems.

A TorchInductor compile is mostly CPU work (Dynamo tracing, lowering, code generation,
Triton's compiler), seconds per problem, while the timed trials need the GPU alone. So the
GPU pool runs, beside each timing worker, a few *compile-ahead* workers: each takes the
next problems, builds them on the GPU and compiles them with exactly the call the timing
worker will make (``torch.compile(model)``, default mode, same shapes and dtypes, same
seed). Inductor's on-disk caches (the FX-graph cache, the Triton kernel cache, autotuning
results), shared by every process that uses the same cache folders, then turn the timing
worker's own compile into a cache hit: a trace and a load instead of a compile.

The two never run GPU work at the same time as a timed trial: compile-ahead workers hold the
GPU lock (:mod:`curate.measure.gpu_lock`) *shared* while they build models and inputs and
while a compiled graph runs (Inductor's autotuning benchmarks run there too), and release it
while they compile; the timing worker holds it *exclusively* around timed trials. Eager code
between two compiled graphs (a graph break) runs unlocked; it is short and rare.

A compile-ahead failure costs nothing but time: out of memory (these workers get a small
share of the GPU), an exception, or a miss in the cache leave the compile to the timing
worker. Only when the compile killed or hung the compile-ahead process does the timing
worker skip it (``precompile`` in :func:`curate.measure.core.measure_problem`), so one
hostile problem cannot take down the process that times.

Imports only torch, the standard library and curate's torch-only modules.
"""

from __future__ import annotations

import gc
import time
import traceback
from typing import Any

import torch

from curate.measure.core import (_CUDA_ERROR_MARKERS, _build_model, _cache_counts, _make_inputs,
                                 locked_inductor, mark_dynamic)
from curate.measure.timing import synchronize
from curate.problem import load_problem

_MEMORY_MARKERS = ("out of memory", "can't allocate memory", "MemoryError")


def precompile(code: str, input_spec: list | None = None, init_args: list | None = None, *,
               device: str = "cuda", seed: int = 0, name: str = "problem", lock: Any = None,
               dynamic_dims: list | None = None, dtype: str | None = None,
               **_ignored: Any) -> dict[str, Any]:
    """Compile one problem as :func:`curate.measure.core.measure_problem` will, so its
    compile becomes a cache hit there.

    Args:
        code, input_spec, init_args, device, seed, name: as in ``measure_problem`` (the
            same values give the same graphs, hence the same cache keys); other task keys
            are ignored, so a measurement task can be passed as it is.
        dynamic_dims: as in ``measure_problem`` (input dimensions marked dynamic).
        dtype: as in ``measure_problem`` (the precision the problem runs in).
        lock: the GPU lock (:class:`curate.measure.gpu_lock.GpuLock`); None: no lock.
    Returns:
        ``{"status": "ok" | "error" | "memory" | "crash", "detail": str, "seconds": float,
        "cache": {"hit": int, "miss": int}, "fatal": bool}``; ``crash`` (a CUDA error left
        the context unusable) comes with ``fatal`` True: the process must be replaced.
        Never raises for a bad problem.
    """
    from curate.measure.gpu_lock import NoLock

    lock = lock or NoLock()
    t0 = time.perf_counter()
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    out: dict[str, Any] = {"status": "ok", "detail": "", "seconds": 0.0, "cache": None}
    state: dict[str, Any] = {}
    try:
        ns = load_problem(code, name)
        init = list(init_args) if init_args is not None else list(ns["get_init_inputs"]())
        with lock.shared():
            state["model"] = _build_model(ns, init, dev, seed, dtype)
            state["inputs"] = _make_inputs(ns, input_spec, dev, seed + 1, dtype)
            synchronize(dev)
        torch._dynamo.reset()
        before = _cache_counts()
        if dynamic_dims:
            mark_dynamic(state["inputs"], dynamic_dims)
        compiled = torch.compile(state["model"], backend=locked_inductor(lock))
        with torch.no_grad():
            compiled(*state["inputs"])
        synchronize(dev)
        after = _cache_counts()
        out["cache"] = {k: after[k] - before[k] for k in after}
    except BaseException as exc:  # untrusted code: SystemExit included
        msg = f"{type(exc).__name__}: {exc}"
        memory = isinstance(exc, (MemoryError, getattr(torch, "OutOfMemoryError", MemoryError))) \
            or any(m in msg for m in _MEMORY_MARKERS)
        broken = dev.type == "cuda" and any(m in msg for m in _CUDA_ERROR_MARKERS)
        out["status"] = "crash" if broken else ("memory" if memory else "error")
        out["detail"] = (msg[:1500] + "\n" + traceback.format_exc(limit=-2)[-800:]).strip()
    finally:
        state.clear()
        try:
            torch._dynamo.reset()
        except Exception:
            pass
        gc.collect()
        if dev.type == "cuda":
            try:
                torch.cuda.empty_cache()  # give the memory back to the timing worker
            except Exception:
                out["status"], out["detail"] = "crash", out["detail"] or "CUDA context lost"
        out["seconds"] = time.perf_counter() - t0
        out["fatal"] = out["status"] == "crash"
    return out
