"""Poisoned memory: a candidate's output elements it never wrote must fail the comparison.

A candidate that allocates its output with ``torch.empty`` and writes only part of it
(skips the zeros of a ReLU, drops a tail block) passes when the memory it got happens to
hold the right values: zeros from fresh pages, or the reference's own output, freed a
moment earlier by the harness. So the verifier makes every such leftover wrong:

- host memory: glibc's ``M_PERTURB`` (``mallopt``) fills every new allocation with the
  byte ``0x7F`` (float32 3.4e38, float16 NaN, int64 9.2e18), large ``mmap``-backed blocks
  included: CPU tensors from ``torch.empty`` start poisoned. Blocks handed back from glibc's
  per-thread cache (tcache) skip the fill, and from glibc 2.38 on the aligned allocations
  torch makes come from it too, so worker processes start with the cache turned off
  (:func:`curate.sandbox.tcache_off_env`; the sandbox's fork server starts so);
- reference outputs: overwritten with NaN (integers: their maximum) once copied, before
  the harness lets them go, unless they share memory with the model's own parameters;
- the CUDA caching allocator: before each candidate forward, the free blocks are returned
  to the driver and one large block (and a few of each output's size, for the small-block
  pool) is allocated, filled with ``0xFF`` bytes (NaN in every float format) and freed, so
  the candidate's allocations are carved from poisoned memory.

Imports only torch and the standard library.
"""

from __future__ import annotations

import ctypes
from typing import Any, Iterable

import torch

_M_PERTURB = -6  # glibc's mallopt parameter number
HOST_BYTE = 0x80  # glibc fills new blocks with this byte XOR 0xFF: 0x7F
#: Bytes of poisoned device memory prepared before each candidate forward, at least.
DEVICE_MIN_BYTES = 64 * 2**20


def poison_host_allocations() -> bool:
    """Make glibc fill every new allocation with ``0x7F`` bytes; False where unavailable."""
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(_M_PERTURB, HOST_BYTE))
    except (OSError, AttributeError):
        return False


def _leaves(obj: Any) -> Iterable[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _leaves(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _leaves(o)


def poison_outputs(out: Any, keep: Iterable[torch.Tensor] = ()) -> int:
    """Overwrite the tensors of ``out`` (NaN; integer maxima; True), except those sharing
    memory with ``keep`` (a model's parameters and buffers). Returns how many were poisoned."""
    kept = {t.untyped_storage().data_ptr() for t in keep if isinstance(t, torch.Tensor)}
    n = 0
    for t in _leaves(out):
        if t.numel() == 0 or t.untyped_storage().data_ptr() in kept or t.is_inference():
            continue
        with torch.no_grad():
            if t.is_floating_point() or t.is_complex():
                t.fill_(float("nan"))
            elif t.dtype == torch.bool:
                t.fill_(True)
            else:
                t.fill_(torch.iinfo(t.dtype).max)
        n += 1
    return n


def poison_device_cache(device: str | torch.device, out_bytes: Iterable[int] = ()) -> int:
    """Fill what the CUDA caching allocator will hand out next with ``0xFF`` bytes.

    Args:
        device: a CUDA device (no-op elsewhere).
        out_bytes: byte sizes of the reference's output tensors; blocks of those sizes are
            poisoned too (allocations under 1 MB come from a separate small-block pool).
    Returns:
        Bytes poisoned (0 off CUDA).
    """
    dev = torch.device(device)
    if dev.type != "cuda":
        return 0
    sizes = [int(b) for b in out_bytes if b]
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(dev)
    big = min(max(DEVICE_MIN_BYTES, 4 * sum(sizes)), free // 2)
    blocks = [torch.empty(big, dtype=torch.uint8, device=dev)] if big > 0 else []
    blocks += [torch.empty(b, dtype=torch.uint8, device=dev) for b in sizes if b < 2**20 for _ in range(8)]
    for b in blocks:
        b.fill_(0xFF)
    torch.cuda.synchronize(dev)
    total = sum(b.numel() for b in blocks)
    del blocks
    return total
