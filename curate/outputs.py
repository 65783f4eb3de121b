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


def held_tensors(out: Any, depth: int = 3) -> list[torch.Tensor]:
    """:func:`output_tensors` of ``out``, or, when it finds none, the tensors an object holds
    in its instance attributes (in the order they were set), walked as outputs are, through
    objects nested up to ``depth`` deep: a module returning a value object (pfrl's
    ``DiscreteActionValue(q_values)``) or a ``torch.distributions`` distribution (``Normal``
    holds ``loc`` and ``scale``; ``Independent`` holds its ``base_dist``). Modules, classes and
    functions hold none (their parameters are not an output)."""
    found = output_tensors(out)
    if found or depth <= 0:
        return found
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in held_tensors(o, depth - 1)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in held_tensors(o, depth - 1)]
    attrs = getattr(out, "__dict__", None)
    if not isinstance(attrs, dict) or isinstance(out, (type, torch.nn.Module)) or callable(out):
        return []
    return [t for v in list(attrs.values()) for t in held_tensors(v, depth - 1)]
