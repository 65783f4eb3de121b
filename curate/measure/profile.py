"""Where a forward spends its GPU time: vendor-library kernels or the rest.

One forward runs under the PyTorch profiler (CUDA activity only); each GPU kernel is sorted
by its name into *library* work (cuBLAS, cuBLASLt, cuDNN, CUTLASS, FlashAttention and
friends: matrix products, convolutions, attention, FFTs, where a hand-written kernel has
the least room to win) or *other* (elementwise, reductions, normalisation, copies:
fusion's territory). The share tells an RL curriculum which problems reward fusion and
which demand beating a tuned library.

Imports only torch and the standard library.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import torch

#: Kernel-name patterns of vendor-library work. Inductor's own kernels (``triton_*``) never
#: count, whatever op they implement.
LIBRARY_KERNEL = re.compile(
    r"gemm|gemv|cublas|cutlass|cudnn|xmma|nvjet|wgmma|hmma|implicit_convolve|winograd|"
    r"conv2d_|convolve|dgrad|wgrad|fprop|fmha|flash|cufft|fft_|cusparse|cusolver|"
    r"sm\d\d_|ampere_|hopper_|volta_|turing_|magma|splitk|bmm_", re.IGNORECASE)


def is_library_kernel(name: str) -> bool:
    """True when a GPU kernel's name marks vendor-library work (see :data:`LIBRARY_KERNEL`)."""
    return not name.startswith("triton") and bool(LIBRARY_KERNEL.search(name))


def kernel_times(fn: Callable[[], object]) -> list[tuple[str, float]]:
    """``(kernel name, GPU microseconds)`` of every kernel one call of ``fn`` runs.

    Raises:
        RuntimeError: the profiler could not record CUDA activity.
    """
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = []
    for evt in prof.events():
        if getattr(evt, "device_type", None) == torch.autograd.DeviceType.CUDA:
            dur = getattr(evt, "device_time", None)
            if dur is None:
                dur = getattr(evt, "cuda_time", 0.0)
            out.append((evt.name, float(dur)))
    return out


def library_share(fn: Callable[[], object]) -> dict[str, Any]:
    """Profile one call of ``fn`` and split its GPU time.

    Returns:
        ``{"library_share": float in [0, 1] or None (no kernel ran), "kernels": int,
        "gpu_us": total kernel microseconds, "library_us", "top": [(name, us)] of the
        three longest kernels}``.
    """
    times = kernel_times(fn)
    total = sum(t for _, t in times)
    lib = sum(t for name, t in times if is_library_kernel(name))
    top = sorted(times, key=lambda kv: -kv[1])[:3]
    return {"library_share": (lib / total) if total > 0 else None, "kernels": len(times),
            "gpu_us": total, "library_us": lib, "top": [(n[:120], round(t, 2)) for n, t in top]}
