"""Exact Jaccard similarity of document pairs, for the estimates MinHash leaves unsure.

A MinHash estimate from 128 slots has a standard deviation of about 0.035 at Jaccard
0.8 (sqrt(J (1 - J) / 128)), so pairs estimated near the threshold fall on the wrong side
often enough to cost several points of precision and recall against exact Jaccard
(``python -m curate.bench.dedup`` prints the figures). Dedup compares the shingle sets
of pairs estimated within :data:`MARGIN` of the threshold exactly (:func:`settle`): from
the shingles kept from the first pass (:attr:`curate.dedup.features.FeatureTable.shingles`)
when there are, else by normalizing those documents again.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np
from numba import njit

from curate.dedup import jit  # noqa: F401  (sets numba's cache folder before the decorations below)

from curate.dedup.tokens import normalize_batch

MARGIN = 0.1
"""About three standard deviations of a 128-slot estimate near Jaccard 0.8."""

ShingleSource = Callable[[int], np.ndarray]
"""Document index -> its shingle hashes (``uint64``, repeats allowed)."""


def sorted_set(x: np.ndarray) -> np.ndarray:
    """The distinct values of ``x``, sorted (``np.sort`` and a mask: several times faster
    than ``np.unique`` on arrays of a few hundred values)."""
    s = np.sort(x)
    if len(s) > 1:
        keep = np.empty(len(s), dtype=bool)
        keep[0] = True
        np.not_equal(s[1:], s[:-1], out=keep[1:])
        s = s[keep]
    return s


def _sets_from_codes(codes: Sequence[str], docs: list[int], batch: int) -> dict[int, np.ndarray]:
    sets: dict[int, np.ndarray] = {}
    for s in range(0, len(docs), batch):
        part = docs[s:s + batch]
        tb = normalize_batch([codes[d] for d in part])
        for k, d in enumerate(part):
            sets[d] = sorted_set(tb.shingles[tb.shingle_offsets[k]:tb.shingle_offsets[k + 1]])
    return sets


class FlatShingles(NamedTuple):
    """Shingle hashes of many documents in one array (as
    :attr:`curate.dedup.features.FeatureTable.shingles` keeps them): document ``d`` is
    ``values[offsets[rows[d]]:offsets[rows[d] + 1]]``."""

    values: np.ndarray
    offsets: np.ndarray
    rows: np.ndarray


@njit(nogil=True, cache=True)
def _slot(v, mask):
    return np.int64((v ^ (v >> np.uint64(29))) * np.uint64(0x9E3779B97F4A7C15) >> np.uint64(32)) & mask


@njit(nogil=True, cache=True)
def _hashed_sets(values, offsets, rows):
    """The distinct values of each document ``rows[k]`` (first occurrences, in order),
    concatenated, with ``(len(rows) + 1,)`` offsets, and an open-addressing table of each
    (``table``/``used`` from ``tstarts[k]``, a power-of-two size at least twice its
    values)."""
    total = 0
    tsize = 0
    for r in rows:
        m = offsets[r + 1] - offsets[r]
        total += m
        size = 16
        while size < 2 * m:
            size *= 2
        tsize += size
    vals = np.empty(total, np.uint64)
    starts = np.zeros(len(rows) + 1, np.int64)
    table = np.empty(tsize, np.uint64)
    used = np.zeros(tsize, np.bool_)
    tstarts = np.zeros(len(rows) + 1, np.int64)
    q = 0
    for k in range(len(rows)):
        r = rows[k]
        m = offsets[r + 1] - offsets[r]
        size = 16
        while size < 2 * m:
            size *= 2
        t0 = tstarts[k]
        tstarts[k + 1] = t0 + size
        mask = size - 1
        for p in range(offsets[r], offsets[r + 1]):
            v = values[p]
            i = _slot(v, mask)
            while used[t0 + i] and table[t0 + i] != v:
                i = (i + 1) & mask
            if not used[t0 + i]:
                used[t0 + i] = True
                table[t0 + i] = v
                vals[q] = v
                q += 1
        starts[k + 1] = q
    return vals, starts, table, used, tstarts


@njit(nogil=True, cache=True)
def _pair_jaccard(vals, starts, table, used, tstarts, pi, pj, floor, has_floor):
    """Jaccard of the distinct sets ``pi[k]`` and ``pj[k]`` (indices into ``starts``):
    the smaller set's values looked up in the larger's table; with ``has_floor``, the
    bound ``min / max`` of a pair whose sizes put it below ``floor``."""
    out = np.empty(len(pi), np.float64)
    for k in range(len(pi)):
        x, y = pi[k], pj[k]
        nx, ny = starts[x + 1] - starts[x], starts[y + 1] - starts[y]
        if nx > ny:
            x, y, nx, ny = y, x, ny, nx
        if ny == 0:
            out[k] = 1.0
            continue
        if has_floor and nx < floor * ny:
            out[k] = nx / ny
            continue
        t0 = tstarts[y]
        mask = tstarts[y + 1] - t0 - 1
        inter = 0
        for p in range(starts[x], starts[x + 1]):
            v = vals[p]
            i = _slot(v, mask)
            while used[t0 + i]:
                if table[t0 + i] == v:
                    inter += 1
                    break
                i = (i + 1) & mask
        out[k] = inter / (nx + ny - inter)
    return out


def pair_jaccard_exact(codes: Sequence[str] | None, i: np.ndarray, j: np.ndarray,
                       batch: int = 256, shingles: ShingleSource | FlatShingles | None = None,
                       floor: float | None = None) -> np.ndarray:
    """Exact Jaccard of the shingle sets (:mod:`.tokens`) of documents ``i[k]`` and
    ``j[k]``, ``(len(i),)`` float64: from ``shingles`` when given (a function of the
    document, or :class:`FlatShingles`), else from ``codes``, normalizing only the
    documents named in ``i`` and ``j``.

    With ``floor``, a pair whose set sizes alone put its Jaccard below ``floor``
    (``min / max < floor``) gets that upper bound, ``min / max``, instead."""
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    if not len(i):
        return np.empty(0, dtype=np.float64)
    docs = np.unique(np.concatenate([i, j]))
    if isinstance(shingles, FlatShingles):
        values = np.ascontiguousarray(shingles.values, dtype=np.uint64)
        offsets = np.ascontiguousarray(shingles.offsets, dtype=np.int64)
        rows = np.ascontiguousarray(np.asarray(shingles.rows)[docs], dtype=np.int64)
    else:
        if shingles is not None:
            parts = [np.asarray(shingles(d), dtype=np.uint64) for d in docs.tolist()]
        else:
            by_doc = _sets_from_codes(codes, docs.tolist(), batch)
            parts = [by_doc[d] for d in docs.tolist()]
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        values = np.concatenate(parts).astype(np.uint64) if parts else np.zeros(0, np.uint64)
        rows = np.arange(len(parts), dtype=np.int64)
    sets = _hashed_sets(values, offsets, rows)
    return _pair_jaccard(*sets, np.searchsorted(docs, i), np.searchsorted(docs, j),
                         0.0 if floor is None else float(floor), floor is not None)


def settle(codes: Sequence[str] | None, i: np.ndarray, j: np.ndarray, sim: np.ndarray,
           threshold: float, margin: float = MARGIN,
           shingles: ShingleSource | FlatShingles | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Pairs ``(i, j, jaccard)`` at or above ``threshold``, given estimates ``sim`` of
    candidates estimated at >= ``threshold - margin``: estimates within ``margin`` of the
    threshold are replaced by the exact Jaccard (from ``shingles`` when given, else from
    ``codes``: :func:`pair_jaccard_exact`), or dropped when their set sizes alone put
    them below the threshold.

    Returns:
        ``(i, j, jaccard, checked)``: the kept pairs and how many were checked exactly.
    """
    unsure = np.flatnonzero(sim < threshold + margin)
    sim = sim.copy()
    if len(unsure):
        sim[unsure] = pair_jaccard_exact(codes, i[unsure], j[unsure], shingles=shingles,
                                         floor=threshold)
    keep = sim >= threshold
    return i[keep], j[keep], sim[keep], len(unsure)
