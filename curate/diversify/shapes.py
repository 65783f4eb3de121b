"""The axes a problem's inputs can grow along, and shapes scaled along them (pure Python).

A problem's forward inputs are described by an *input spec* (see :mod:`curate.problem`).
Other shapes for the same problem come from scaling *axes*: sets of ``(input index, dim)``
positions that are scaled together. Which axes are free (batch, sequence length, spatial
sizes) and which are tied to constructor arguments (channels, features) cannot be read off
the spec; the axes are therefore listed in order of likelihood and each is tried by running
the model on the ``meta`` device (:mod:`curate.diversify.plan`).

Axes, in the order they are tried:

1. ``batch``: dim 0 of every shaped input whose dim 0 equals the first shaped input's
   (the batch is usually shared by all inputs).
2. per-position axes over the remaining dims, grouped across inputs by ``(dim, size)``
   (so the sequence length of q, k and v moves together). In inputs of rank >= 4 the
   trailing dims (``H``/``W``, ``D``/``H``/``W``) of equal size form one ``spatial``
   axis. Likely-tied dims (dim 1 of rank >= 4 inputs: channels; the last dim of rank-2
   inputs: features) come last.
3. ``size=<n>``: every dim of size ``n`` anywhere, for problems like a square matmul
   ``A(N, N) @ B(N, N)`` where only scaling all equal sizes at once keeps the shapes
   compatible.

Axes are grouped into scaling *families* (:func:`family`), which :func:`apply_family` grows
by one scale ``s``; the held-out verification shape makes the grown sizes odd.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

SHAPED_KINDS = ("tensor", "index", "mask")


@dataclass(frozen=True)
class Axis:
    """A set of input positions scaled together.

    Attributes:
        name: ``batch``, ``spatial``, ``dim<d>`` or ``size=<n>``.
        positions: ``(input index, dim)`` pairs, in input order.
        size: the positions' common size in the original spec (elements).
        tied_guess: True when the axis is probably tied to a constructor argument (tried last).
    """

    name: str
    positions: tuple[tuple[int, int], ...]
    size: int
    tied_guess: bool = False


def _shaped(input_spec: list[dict]) -> list[tuple[int, list[int]]]:
    return [(i, list(s["shape"])) for i, s in enumerate(input_spec)
            if s.get("kind") in SHAPED_KINDS and s.get("shape")]


def axes(input_spec: list[dict]) -> list[Axis]:
    """The scalable axes of ``input_spec``, in the order candidates should try them.

    Dims of size 1 are left out (usually broadcast or singleton dims).
    """
    shaped = _shaped(input_spec)
    if not shaped:
        return []
    out: list[Axis] = []
    b = shaped[0][1][0]
    batch = tuple((i, 0) for i, shape in shaped if shape[0] == b)
    used = set(batch) if b > 1 else set()
    if b > 1:
        out.append(Axis("batch", batch, b))

    groups: dict[tuple, list[tuple[int, int]]] = {}
    tied: dict[tuple, bool] = {}
    for i, shape in shaped:
        nd = len(shape)
        for d, size in enumerate(shape):
            if (i, d) in used or size <= 1:
                continue
            if nd >= 4 and d >= 2:
                key = ("spatial", size)
            else:
                key = (f"dim{d}", size)
            groups.setdefault(key, []).append((i, d))
            is_tied = (nd >= 4 and d == 1) or (nd == 2 and d == 1)
            tied[key] = tied.get(key, False) or is_tied
    per_position = [Axis(key[0], tuple(pos), key[1], tied[key]) for key, pos in groups.items()]
    # stable sort: free-looking axes first, first-appearance order otherwise
    per_position.sort(key=lambda a: a.tied_guess)
    out.extend(per_position)

    known = {frozenset(a.positions) for a in out}
    by_size: dict[int, list[tuple[int, int]]] = {}
    for i, shape in shaped:
        for d, size in enumerate(shape):
            if size > 1:
                by_size.setdefault(size, []).append((i, d))
    for size, pos in by_size.items():
        if len(pos) > 1 and frozenset(pos) not in known:
            out.append(Axis(f"size={size}", tuple(pos), size, tied_guess=True))
    return out


# ---- scaling families: how diversify grows a problem towards a runtime band ----

def nice_size(x: float) -> int:
    """A size near ``x`` (>= 1): a multiple of 8 from 32 up (kernel-friendly sizes, as real
    workloads use), the nearest integer below."""
    if x >= 32:
        return max(32, int(round(x / 8.0)) * 8)
    return max(1, int(round(x)))


def odd_size(n: int) -> int:
    """An odd size near ``n`` that is not a power of two (``n - 1`` for even ``n``; 2 -> 3).

    Sizes 1 stay 1 (a singleton axis is not a size a kernel could hard-code wrongly)."""
    if n <= 1:
        return n
    if n == 2:
        return 3
    return n if n % 2 else n - 1


def init_paths(init_args: list, value: int) -> list[list[int]]:
    """Index paths of the ints equal to ``value`` in ``init_args`` (nested lists/tuples
    included, bools excluded): the constructor arguments tied to an input axis of that size."""
    out: list[list[int]] = []

    def walk(x, path):
        if isinstance(x, bool):
            return
        if isinstance(x, int) and x == value:
            out.append(path)
        elif isinstance(x, (list, tuple)):
            for k, y in enumerate(x):
                walk(y, path + [k])

    walk(init_args, [])
    return out


def _set_path(x: list, path: list[int], value: int) -> None:
    for k in path[:-1]:
        x = x[k]
    x[path[-1]] = value


def family(name: str, members: list[Axis], widths: dict[str, list[list[int]]] | None = None) -> dict:
    """A scaling family as a JSON-able dict: axes grown together by one scale ``s`` (each
    axis by ``s ** (1 / len(axes))``), with the constructor arguments tied to each (width
    axes: ``init`` paths, scaled with the axis)."""
    widths = widths or {}
    return {"name": name, "axes": [{"name": a.name, "positions": [list(p) for p in a.positions],
                                    "size": a.size, "init": widths.get(_axis_key(a), [])}
                                   for a in members]}


def _axis_key(a: Axis) -> str:
    return f"{a.name}:{a.size}:{a.positions}"


def apply_family(input_spec: list[dict], init_args: list, fam: dict, s: float,
                 odd: bool = False) -> tuple[list[dict], list]:
    """``(spec, init_args)`` with every axis of ``fam`` scaled by ``s`` (see :func:`family`).

    Args:
        s: the family's scale (1.0: the mined sizes; sizes are rounded by :func:`nice_size`).
        odd: make each scaled axis without tied constructor arguments odd and not a power
            of two (:func:`odd_size`): the held-out verification shape.
    """
    spec = copy.deepcopy(input_spec)
    init = copy.deepcopy(list(init_args))
    axes_ = fam["axes"]
    per_axis = s ** (1.0 / max(1, len(axes_)))
    for ax in axes_:
        new = nice_size(ax["size"] * per_axis) if s != 1.0 else ax["size"]
        if odd and not ax["init"]:
            new = odd_size(new)
        for i, d in ax["positions"]:
            spec[i]["shape"][d] = new
        for path in ax["init"]:
            _set_path(init, path, new)
    return spec, init
