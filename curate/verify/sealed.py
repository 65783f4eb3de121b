"""Reference outputs kept in a form a candidate cannot find or forge.

The verifier holds the reference's outputs in the process that then runs the candidate. A
candidate can walk the garbage collector's objects (``gc.get_objects()``), find a tensor of
the expected shape and dtype, and copy it into its own output, or overwrite it with what it
returns (zeros, say). So the outputs are sealed as soon as they are taken: each tensor's bits
are viewed as an integer tensor of the same width and XORed with a mask drawn from a
generator whose seed lives only in this module's closure, and a checksum of the sealed bits
is kept beside them. A sealed output has the wrong dtype to be found by its shape and dtype,
copying it gives noise, and writing into it breaks the checksum (:func:`unseal` raises).
Imports only torch and the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

#: Integer dtypes of each width a tensor's bits are viewed as.
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class Tampered(Exception):
    """A sealed output was written to between :func:`seal` and :func:`unseal`."""


class _Sealed:
    __slots__ = ("bits", "dtype", "check", "index", "device")

    def __init__(self, bits: torch.Tensor, dtype: torch.dtype, check: int, index: int,
                 device: torch.device) -> None:
        self.bits, self.dtype, self.check, self.index, self.device = bits, dtype, check, index, device


def _mask(like: torch.Tensor, key: int, index: int) -> torch.Tensor:
    gen = torch.Generator(device=like.device)
    gen.manual_seed((key + 7919 * index) % 2**63)
    info = torch.iinfo(like.dtype)
    return torch.randint(info.min, info.max, like.shape, dtype=like.dtype, device=like.device, generator=gen)


#: Elements summed per step by :func:`_checksum`: a narrower integer is widened to int64 to be
#: summed, and widening a multi-GB output in one piece needed twice its size again.
CHECKSUM_CHUNK = 1 << 24


def _checksum(bits: torch.Tensor) -> torch.Tensor:
    # kept on the tensor's device: reading it back would synchronize the device once per
    # sealed output (costly while other processes share the GPU); compared at unseal
    flat = bits.reshape(-1)
    if flat.dtype == torch.int64:
        return flat.sum()
    return torch.stack([part.sum(dtype=torch.int64) for part in flat.split(CHECKSUM_CHUNK)]).sum()


class Sealer:
    """Seals and unseals one verification's outputs (a fresh secret per instance)."""

    def __init__(self) -> None:
        secret = int.from_bytes(os.urandom(8), "little") % 2**62
        counter = [0]

        def seal_tensor(t: torch.Tensor, host: bool) -> Any:
            width = _BITS.get(t.element_size())
            if width is None or t.is_sparse or t.device.type == "meta":
                return t  # no integer of that width (complex128): kept as it is
            counter[0] += 1
            plain = t.detach().contiguous().view(width)
            bits = _mask(plain, secret, counter[0])
            bits ^= plain  # in place: the mask's memory becomes the sealed copy
            # summed where the output lives: a multi-GB sum on the host took seconds per
            # output, on both sides of every transfer
            check = _checksum(bits)
            if host and bits.device.type != "cpu":
                bits = bits.cpu()
            return _Sealed(bits, t.dtype, check, counter[0], t.device)

        def unseal_tensor(s: _Sealed) -> torch.Tensor:
            bits = s.bits.to(s.device)
            if not torch.equal(_checksum(bits), s.check):
                raise Tampered("a sealed reference output was overwritten")
            plain = _mask(bits, secret, s.index)
            plain ^= bits
            return plain.view(s.dtype)

        self._seal_tensor, self._unseal_tensor = seal_tensor, unseal_tensor

    def seal(self, obj: Any, host_over_bytes: int | None = None) -> Any:
        """``obj`` (a tensor or a nest of tuples, lists and dicts) with every tensor sealed;
        the tensors' bits are copied, so later writes to ``obj`` do not reach the seal.

        Args:
            host_over_bytes: tensors larger than this (bytes) are kept in host memory while
                sealed (and moved back by :meth:`unseal`); None: where they are.
        """
        if isinstance(obj, torch.Tensor):
            host = host_over_bytes is not None and obj.numel() * obj.element_size() > host_over_bytes
            return self._seal_tensor(obj, host)
        if isinstance(obj, (tuple, list)):
            items = [self.seal(o, host_over_bytes) for o in obj]
            return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
        if isinstance(obj, dict):
            return {k: self.seal(v, host_over_bytes) for k, v in obj.items()}
        return obj

    def opened(self, items: Sequence[Any]) -> Sequence[Any]:
        """A read-only sequence of ``items`` (:meth:`seal` results) that unseals an item each
        time it is indexed: a fresh copy per access, none kept, so a caller that reads them
        one at a time holds one unsealed output at a time."""
        return _Opened(self, items)

    def unseal(self, obj: Any) -> Any:
        """The original of a :meth:`seal` result (fresh tensors).

        Raises:
            Tampered: a sealed tensor's bits changed since it was sealed.
        """
        if isinstance(obj, _Sealed):
            return self._unseal_tensor(obj)
        if isinstance(obj, (tuple, list)):
            items = [self.unseal(o) for o in obj]
            return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
        if isinstance(obj, dict):
            return {k: self.unseal(v) for k, v in obj.items()}
        return obj


class _Opened(Sequence):
    """See :meth:`Sealer.opened`."""

    def __init__(self, sealer: Sealer, items: Sequence[Any]) -> None:
        self._sealer, self._items = sealer, list(items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._sealer.unseal(x) for x in self._items[i]]
        return self._sealer.unseal(self._items[i])
