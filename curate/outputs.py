"""The tensors in a forward's output, whatever structure holds them.

Imports torch and the standard library only: the verifier's sandboxed workers use it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch


def output_tensors(out: Any) -> list[torch.Tensor]:
    """Every tensor of ``out``, depth first in order: ``out`` itself, or the tensors inside a
    tuple, named tuple, list, dict (in its order) or dataclass instance, nested to any
    depth. Anything else (None, numbers, strings, other objects) holds none."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in output_tensors(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in output_tensors(o)]
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        return [t for f in dataclasses.fields(out) for t in output_tensors(getattr(out, f.name, None))]
    return []
