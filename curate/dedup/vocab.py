"""The names token-level normalization keeps, and the names that are ops.

:mod:`curate.dedup.tokens` renames every identifier to one placeholder except the
names listed here: Python's keywords and builtins, the usual module aliases, and the
public names of ``torch``, ``torch.nn``, ``torch.nn.functional``, ``torch.Tensor`` and
friends. So ``F.relu(self.fc1(x))`` and ``F.relu(self.dense(hidden))`` read the same,
while ``F.relu`` and ``F.gelu`` do not.

The lists are generated from an installed torch into ``vocab.json`` beside this module
(``python -m curate.dedup.vocab`` rewrites it; package data, read once by :func:`load`),
so that dedup workers never import torch (a second or more per process on the CI
machine). Names a newer torch adds are simply renamed like user names until the file
is regenerated.

Op names use :func:`curate.dedup.ops.canonical_op` (``Conv2d`` -> ``conv2d``,
``relu_`` -> ``relu``, ``bmm`` -> ``matmul``), the spelling of the op sequences that
:mod:`curate.dedup.ops` reads from the parsed tree.
"""

from __future__ import annotations

import builtins
import functools
import json
import keyword
import sys
from pathlib import Path

from curate.dedup.ops import _CONTAINERS, _NON_OPS, _SHAPE_CALLS, _TENSOR_METHOD_OPS, canonical_op

DATA = Path(__file__).with_name("vocab.json")

#: Builtins that code often shadows with a local (``def forward(self, input)``): renamed.
SHADOWED_BUILTINS = frozenset({
    "input", "type", "id", "filter", "format", "hash", "dir", "vars", "iter", "next", "map",
    "slice", "object", "bin", "compile", "exec", "open", "help", "license", "credits",
    "copyright", "quit", "exit", "ascii", "oct", "hex",
})
#: Conventional module names and aliases (``import torch.nn.functional as F``).
MODULE_NAMES = frozenset({
    "torch", "nn", "F", "np", "numpy", "math", "einops", "Tensor", "Parameter", "Module",
    "Optional", "List", "Tuple", "Dict", "Union", "Callable", "Any", "Sequence", "Iterable",
    "Type", "Final", "Literal",
})
#: Names that compute nothing on tensor values: creation, dtypes, shapes, bookkeeping.
_NOT_OPS = _NON_OPS | _SHAPE_CALLS | _CONTAINERS | frozenset({
    "zeroslike", "oneslike", "emptylike", "fulllike", "randlike", "randnlike", "randint",
    "randintlike", "randperm", "linspace", "logspace", "eye", "tensor", "fromnumpy", "module",
    "parameter", "buffer", "to", "cpu", "cuda", "type", "float", "double", "half", "bfloat16",
    "int", "long", "bool", "detach", "clone", "copy", "contiguous", "item", "tolist", "numpy",
    "requiresgrad", "registerbuffer", "registerparameter", "apply", "train", "eval",
    "children", "modules", "parameters", "namedparameters", "buffers", "statedict",
    "loadstatedict", "zero", "fill", "normal", "uniform", "data", "grad", "shape", "ndim",
    "dim", "isnan", "isinf", "isfinite", "equal", "allclose", "set", "get", "check",
    "container", "dataparallel", "booleandispatch", "handletorchfunction", "assertintorpair",
})


def _public(obj: object) -> list[str]:
    return [n for n in dir(obj) if not n.startswith("_") or n.startswith("__")]


def build() -> dict[str, object]:
    """The vocabulary of the installed torch.

    Returns:
        ``{"torch_version": str, "names": sorted list of bare names kept,
        "attrs": sorted list of attribute names kept, "ops": {name: canonical op}}``.
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    kw = set(keyword.kwlist) | set(keyword.softkwlist)
    kw.discard("_")
    names = kw | (set(dir(builtins)) - SHADOWED_BUILTINS) | set(MODULE_NAMES)
    layers = [n for n in dir(nn) if isinstance(getattr(nn, n), type)]
    names |= set(layers)
    namespaces = [torch, nn, F, nn.init, torch.Tensor, nn.Module, torch.linalg, torch.fft,
                  torch.special, __import__("math"), list, dict, str, tuple, set, object]
    attrs = set()
    for ns in namespaces:
        attrs.update(_public(ns))
    attrs.discard("self")
    ops: dict[str, str] = {}
    candidates = ([n for n in layers if issubclass(getattr(nn, n), nn.Module)]
                  + [n for n in dir(F) if not n.startswith("_") and callable(getattr(F, n))
                     and not isinstance(getattr(F, n), type)
                     and getattr(getattr(F, n), "__module__", "").startswith("torch")]
                  + [n for n in dir(torch) if not n.startswith("_") and callable(getattr(torch, n))
                     and not isinstance(getattr(torch, n), type)
                     and (hasattr(torch.Tensor, n) or hasattr(F, n))]
                  + list(_TENSOR_METHOD_OPS))
    for n in candidates:
        op = canonical_op(n)
        if op and op not in _NOT_OPS and not op.startswith(("is", "set", "get", "has")):
            ops[n] = op
    return {"torch_version": torch.__version__.split("+")[0], "names": sorted(names),
            "attrs": sorted(attrs), "ops": dict(sorted(ops.items()))}


def write(path: Path = DATA) -> Path:
    """Regenerate ``vocab.json`` (the :func:`build` dictionary, one entry a line) from the
    installed torch."""
    path.write_text(json.dumps(build(), indent=1) + "\n")
    return path


@functools.lru_cache(maxsize=None)
def load(path: Path = DATA) -> dict[str, object]:
    """The shipped vocabulary, read once per process.

    Returns:
        ``{"torch_version": str, "names": frozenset, "attrs": frozenset, "ops": {name: op}}``.
    Raises:
        RuntimeError: the data file is missing or not the vocabulary (an install without
            the package data); dedup cannot normalize without it.
    """
    try:
        raw = json.loads(path.read_text())
        return {"torch_version": raw["torch_version"], "names": frozenset(raw["names"]),
                "attrs": frozenset(raw["attrs"]), "ops": dict(raw["ops"])}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"dedup vocabulary {path} unreadable ({exc}); reinstall curate or "
                           "regenerate it with python -m curate.dedup.vocab") from None


if __name__ == "__main__":
    print(write(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA))
