"""A small torch-only implementation of einops' tensor API, inlined into mined problems.

Mined modules stay self-contained and runnable with torch alone (KernelBench's format), yet
many libraries call einops (github.com/arogozhnikov/einops). The miner resolves
``from einops import rearrange`` (and ``einops.layers.torch``) to the definitions in this
file and copies the ones a module uses into its problem file. Our own code, written from
einops' documented pattern language: space-separated axis names, ``(a b)`` groups,
``...`` for the remaining axes, ``1``/``()`` for unit axes, numbers for anonymous sizes,
axis lengths as keyword arguments. Errors raise ``ValueError`` (einops raises
``EinopsError``, a ``ValueError`` subclass).

Covered: ``rearrange``, ``repeat``, ``reduce`` (``mean``, ``sum``, ``max``, ``min``,
``prod``, ``any``, ``all`` or a callable), ``pack``, ``unpack``, ``einsum``,
``parse_shape``, and the layers ``Rearrange`` and ``Reduce``. Only reshape, permute, expand
and reductions are used, so the calls trace under ``torch.compile``.
"""

import math

import torch
from torch import nn


def _einops_parse(side):
    """Groups of one side of a pattern: a list of lists of axis tokens; a bracketed group
    is a list, a lone axis a tuple (``(...)`` merges axes, ``...`` keeps them apart)."""
    groups, current = [], None
    for tok in side.replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
            if current is not None:
                raise ValueError(f"nested brackets in einops pattern {side!r}")
            current = []
        elif tok == ")":
            if current is None:
                raise ValueError(f"unbalanced brackets in einops pattern {side!r}")
            groups.append(current)
            current = None
        elif current is not None:
            current.append(tok)
        else:
            groups.append((tok,))
    if current is not None:
        raise ValueError(f"unbalanced brackets in einops pattern {side!r}")
    return groups


def _einops_expand_ellipsis(groups, n):
    """Replace ``...`` by ``n`` names ``...0``, ``...1``, ... (inside a group, or as groups)."""
    out = []
    for g in groups:
        if g == ("...",):
            out.extend([(f"...{i}",) for i in range(n)])
        elif "..." in g:
            i = g.index("...")
            out.append(g[:i] + [f"...{j}" for j in range(n)] + g[i + 1:])
        else:
            out.append(g)
    return out


def _einops_name_units(groups, side):
    """Give every numeric token a unique name (``1`` on the left is a squeezed axis)."""
    out, sizes = [], {}
    for gi, g in enumerate(groups):
        new = []
        for ai, tok in enumerate(g):
            if tok.isdigit():
                name = f"#{side}{gi}.{ai}"
                sizes[name] = int(tok)
                new.append(name)
            else:
                new.append(tok)
        out.append(new)
    return out, sizes


def _einops_plan(shape, pattern, sizes):
    """Decompose the left side of ``pattern`` against ``shape``.

    Returns (left axes, right groups, axis lengths) with ellipses and numbers named.
    """
    if "->" not in pattern:
        raise ValueError(f"einops pattern {pattern!r} has no '->'")
    left_s, right_s = pattern.split("->")
    left, right = _einops_parse(left_s), _einops_parse(right_s)
    has_ellipsis = any("..." in g for g in left)
    n_ell = len(shape) - (len(left) - 1) if has_ellipsis else 0
    if (has_ellipsis and n_ell < 0) or (not has_ellipsis and len(left) != len(shape)):
        raise ValueError(f"einops pattern {pattern!r} does not match a tensor of shape {tuple(shape)}")
    left = _einops_expand_ellipsis(left, n_ell)
    right = _einops_expand_ellipsis(right, n_ell)
    left, lsizes = _einops_name_units(left, "l")
    right, rsizes = _einops_name_units(right, "r")
    lengths = {**sizes, **lsizes, **rsizes}
    for g, dim in zip(left, shape):
        unknown = [a for a in g if a not in lengths]
        known = math.prod(lengths[a] for a in g if a in lengths)
        if len(unknown) > 1:
            raise ValueError(f"einops: cannot infer the sizes of {unknown} in {pattern!r}")
        if unknown:
            if known == 0 or dim % known:
                raise ValueError(f"einops: dimension {dim} is not divisible by {known} in {pattern!r}")
            lengths[unknown[0]] = dim // known
        elif known != dim:
            raise ValueError(f"einops: axis group {g} has length {dim}, expected {known} in {pattern!r}")
    return [a for g in left for a in g], right, lengths


def _einops_apply(x, pattern, reduction, sizes):
    if isinstance(x, (list, tuple)):
        x = torch.stack(list(x))
    laxes, right, lengths = _einops_plan(x.shape, pattern, sizes)
    raxes = [a for g in right for a in g]
    x = x.reshape([lengths[a] for a in laxes])
    dropped = [a for a in laxes if a not in raxes]
    reduced = [a for a in dropped if not a.startswith("#")]  # left numbers are unit axes
    if reduced and reduction is None:
        raise ValueError(f"einops rearrange: axes {reduced} of {pattern!r} are missing on the right")
    if reduced:
        dims = tuple(laxes.index(a) for a in reduced)
        if callable(reduction):
            x = reduction(x, dims)
        elif reduction in ("mean", "sum", "amax", "amin"):
            x = getattr(torch, reduction)(x, dim=dims)
        elif reduction in ("max", "min"):
            x = getattr(torch, "a" + reduction)(x, dim=dims)
        else:
            x = _einops_reduce_each(x, dims, reduction)
    kept = [a for a in laxes if a in raxes]
    x = x.reshape([lengths[a] for a in kept])  # squeezes left unit axes
    x = x.permute([kept.index(a) for a in raxes if a in kept])
    new = [a for a in raxes if a not in kept]
    if new:
        expand_shape = []
        for a in raxes:
            if a not in lengths:
                raise ValueError(f"einops: the length of new axis {a!r} in {pattern!r} is not given")
            expand_shape.append(lengths[a])
        view = [1 if a in new else lengths[a] for a in raxes]
        x = x.reshape(view).expand(expand_shape)
    return x.reshape([math.prod(lengths[a] for a in g) for g in right])


def _einops_reduce_each(x, dims, reduction):
    """Reduce ``dims`` one at a time with a reduction torch takes a single dim for."""
    if reduction not in ("prod", "any", "all"):
        raise ValueError(f"einops: unknown reduction {reduction!r}")
    for d in sorted(dims, reverse=True):
        x = getattr(torch, reduction)(x, dim=d)
    return x


def rearrange(tensor, pattern, **axes_lengths):
    """Reorder, split and merge axes: ``rearrange(x, 'b c (h p) w -> b (h w) (p c)', p=2)``."""
    return _einops_apply(tensor, pattern, None, axes_lengths)


def repeat(tensor, pattern, **axes_lengths):
    """Like :func:`rearrange`, and new right-side axes are repeated: ``'b d -> b n d', n=4``."""
    return _einops_apply(tensor, pattern, None, axes_lengths)


def reduce(tensor, pattern, reduction, **axes_lengths):
    """Like :func:`rearrange`; left axes absent on the right are reduced with ``reduction``."""
    return _einops_apply(tensor, pattern, reduction, axes_lengths)


def parse_shape(tensor, pattern):
    """``{'b': 8, 'c': 64}`` for ``parse_shape(x, 'b c _ _')`` (``_`` axes are skipped)."""
    names = pattern.split()
    if "..." in names:
        i = names.index("...")
        n = len(tensor.shape) - (len(names) - 1)
        names = names[:i] + ["_"] * n + names[i + 1:]
    if len(names) != len(tensor.shape):
        raise ValueError(f"einops: {pattern!r} does not match shape {tuple(tensor.shape)}")
    return {n: d for n, d in zip(names, tensor.shape) if n != "_"}


def pack(tensors, pattern):
    """Join tensors along the ``*`` axis of ``pattern``; return (packed, shapes of each ``*``)."""
    names = pattern.split()
    star = names.index("*")
    packed, shapes = [], []
    for t in tensors:
        n_star = t.ndim - (len(names) - 1)
        if n_star < 0:
            raise ValueError(f"einops pack: {pattern!r} does not match shape {tuple(t.shape)}")
        shapes.append(tuple(t.shape[star:star + n_star]))
        packed.append(t.reshape(*t.shape[:star], math.prod(t.shape[star:star + n_star]),
                                *t.shape[star + n_star:]))
    return torch.cat(packed, dim=star), shapes


def unpack(tensor, packed_shapes, pattern):
    """Inverse of :func:`pack`: split the ``*`` axis and restore each tensor's shape."""
    names = pattern.split()
    star = names.index("*")
    lens = [math.prod(s) for s in packed_shapes]
    parts = torch.split(tensor, lens, dim=star)
    return [p.reshape(*p.shape[:star], *s, *p.shape[star + 1:]) for p, s in zip(parts, packed_shapes)]


def einsum(*args):
    """``einsum(a, b, 'b i d, b j d -> b i j')`` with multi-letter axis names (pattern last)."""
    *tensors, pattern = args
    letters = {}
    pool = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

    def side(s):
        out = []
        for tok in s.replace("...", " ... ").split():
            if tok != "...":
                if tok not in letters:
                    letters[tok] = next(pool)
                out.append(letters[tok])
            else:
                out.append("...")
        return "".join(out)

    lhs, _, rhs = pattern.partition("->")
    spec = ",".join(side(s) for s in lhs.split(",")) + "->" + side(rhs)
    return torch.einsum(spec, *tensors)
