"""A cap on how long TorchInductor benchmarks each configuration when it autotunes a kernel.

In ``torch.compile``'s default mode, Inductor autotunes its pointwise and reduction Triton
kernels at their first call: each candidate configuration (block sizes, warps) is run by
``torch._inductor.runtime.benchmarking.InductorBenchmarker.benchmark_gpu``, which on torch
2.11 spends up to 25 ms of GPU time per configuration (``max_benchmark_duration``) after 100
L2-clearing writes (``memory_warmup_iters``), GPU time that 14 measure workers sharing a GPU
queue behind. :func:`cap_benchmark_ms` lowers both defaults; the configurations benchmarked
and the rule that picks among them are Inductor's own, only the number of benchmark
iterations per configuration falls. Measured on an H100 (``benchmarks/h100-measure-throughput.md``,
the same sample of rows, one sitting): at 5 ms the workers' autotuning time fell from 98.6 to 55.5
worker-seconds in a 170 s run, rows an hour rose 12.5%, and Inductor medians moved a median
0.5%, inside the run-to-run spread of the same code.

Imports only torch and the standard library.
"""

from __future__ import annotations

import inspect
from typing import Any

#: Each configuration's L2-clearing warm-up writes, with a cap (Inductor's own: 100).
CAPPED_WARMUP_ITERS = 10

_ORIGINAL: dict[str, Any] = {}


def cap_benchmark_ms(ms: float | None) -> bool:
    """Cap Inductor's benchmark of each autotuning configuration at ``ms`` milliseconds of
    GPU time (at least one run each); None restores Inductor's defaults.

    Returns:
        whether the cap is in force (False: None was given, or this torch's benchmarker has
        no ``max_benchmark_duration``, and Inductor's defaults apply).
    Raises:
        ValueError: ``ms`` is not positive.
    """
    if ms is not None and not ms > 0:
        raise ValueError(f"autotune benchmark cap must be positive (ms), got {ms}")
    try:
        from torch._inductor.runtime import benchmarking
    except ImportError:
        return False
    cls = type(benchmarking.benchmarker)
    original = _ORIGINAL.setdefault(cls.__qualname__, cls.benchmark_gpu)
    if ms is None:
        cls.benchmark_gpu = original
        return False
    params = inspect.signature(original).parameters
    if "max_benchmark_duration" not in params:
        cls.benchmark_gpu = original
        return False
    warm = "memory_warmup_iters" in params

    def benchmark_gpu(self, *args, **kwargs):
        kwargs.setdefault("max_benchmark_duration", ms)
        if warm:
            kwargs.setdefault("memory_warmup_iters", CAPPED_WARMUP_ITERS)
        return original(self, *args, **kwargs)

    benchmark_gpu.__wrapped__ = original  # type: ignore[attr-defined]
    cls.benchmark_gpu = benchmark_gpu
    return True
