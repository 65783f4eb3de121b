"""The ``measure`` stage: eager and TorchInductor runtimes, output checks, a runtime band.

Modules (all but :mod:`.stage` import only torch and the standard library, so the GPU
machine can run them without curate's CPU-side dependencies):

- :mod:`.timing`: CUDA-event timing with an L2 flush, CUDA-graph replay, CPU timing, summaries;
- :mod:`.checks`: finiteness, determinism and input-sensitivity comparisons;
- :mod:`.profile`: the share of a forward's GPU time in library kernels (profiler);
- :mod:`.core`: :func:`~curate.measure.core.measure_problem`, one problem end to end;
- :mod:`.compile_ahead`: TorchInductor compiles run ahead on spare cores;
- :mod:`.gpu_lock`: keeps timed trials alone on the GPU;
- :mod:`.worker`: persistent worker processes (measure and compile-ahead) and their pool;
- :mod:`.stats`: rank statistics for benchmarks;
- :mod:`.options`: the stage's options;
- :mod:`.stage`: the stage itself (polars), imported only when :func:`run` is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run"]


def __getattr__(name: str) -> Any:
    if name == "run":  # see curate.measure.stage.run
        from curate.measure.stage import run

        return run
    raise AttributeError(f"module 'curate.measure' has no attribute {name!r}")
