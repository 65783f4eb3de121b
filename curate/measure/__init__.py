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
- :mod:`.stage`: the stage itself (polars), imported only when :func:`run` is called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["run"]


def run(out: Path | str, source: Path | str | None = None, device: str = "auto",
        inductor: bool | None = None, min_ms: float = 0.0, max_ms: float = 10_000.0,
        trials: int = 100, warmup: int = 3, timeout_s: float = 300.0, workers: int | None = None,
        **kwargs: Any) -> dict[str, Any]:
    """Run the measure stage; see :func:`curate.measure.stage.run` for the arguments."""
    from curate.measure.stage import run as _run

    return _run(out=out, source=source, device=device, inductor=inductor, min_ms=min_ms,
                max_ms=max_ms, trials=trials, warmup=warmup, timeout_s=timeout_s,
                workers=workers, **kwargs)
