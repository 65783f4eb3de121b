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

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Callable, NamedTuple, Sequence

import numpy as np
from numba import njit

from curate.cpus import cpu_count
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
def _layout(offsets, rows):
    """Where each document ``rows[k]`` goes in :func:`_fill_sets`'s buffers: ``(vstarts,
    tstarts)``, ``(len(rows) + 1,)`` ``int64`` each: room for all its values, and a
    table of a power-of-two size >= 16 and >= twice its values."""
    vstarts = np.zeros(len(rows) + 1, np.int64)
    tstarts = np.zeros(len(rows) + 1, np.int64)
    for k in range(len(rows)):
        m = offsets[rows[k] + 1] - offsets[rows[k]]
        size = 16
        while size < 2 * m:
            size *= 2
        vstarts[k + 1] = vstarts[k] + m
        tstarts[k + 1] = tstarts[k] + size
    return vstarts, tstarts


@njit(nogil=True, cache=True)
def _fill_sets(values, offsets, rows, vstarts, tstarts, vals, counts, table, used, lo, hi):
    """For documents ``k`` in ``[lo, hi)``: the distinct values of ``rows[k]`` (first
    occurrences, in order) to ``vals[vstarts[k]:vstarts[k] + counts[k]]``, and an
    open-addressing table of them (``table``/``used`` from ``tstarts[k]``; ``used``
    all False there before)."""
    for k in range(lo, hi):
        r = rows[k]
        t0 = tstarts[k]
        mask = tstarts[k + 1] - t0 - 1
        q = vstarts[k]
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
        counts[k] = q - vstarts[k]


@njit(nogil=True, cache=True)
def _pair_jaccard(vals, vstarts, counts, table, used, tstarts, pi, pj, floor, has_floor,
                  out, lo, hi):
    """``out[k]`` for ``k`` in ``[lo, hi)``: Jaccard of the distinct sets ``pi[k]`` and
    ``pj[k]`` (:func:`_fill_sets`' documents), the smaller set's values looked up in the
    larger's table; with ``has_floor``, the bound ``min / max`` of a pair whose sizes put
    it below ``floor``."""
    for k in range(lo, hi):
        x, y = pi[k], pj[k]
        nx, ny = counts[x], counts[y]
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
        for p in range(vstarts[x], vstarts[x] + nx):
            v = vals[p]
            i = _slot(v, mask)
            while used[t0 + i]:
                if table[t0 + i] == v:
                    inter += 1
                    break
                i = (i + 1) & mask
        out[k] = inter / (nx + ny - inter)


THREAD_MIN = 1 << 16
"""Shingles (of the documents to compare) from which :func:`pair_jaccard_exact` splits
its work over threads: below it, starting them costs about as much as it saves."""


def _split(cum: np.ndarray, parts: int) -> list[int]:
    """``parts + 1`` bounds that cut ``range(len(cum) - 1)`` into pieces of about equal
    weight, ``cum`` being the ``(n + 1,)`` cumulative weights."""
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], parts + 1)[1:-1])
    return [0, *np.clip(cuts, 0, len(cum) - 1).tolist(), len(cum) - 1]


def _run(pool: ThreadPoolExecutor | None, fn, args: tuple, bounds: list[int]) -> None:
    """``fn(*args, lo, hi)`` for each piece of ``bounds``: the first here, the others on
    ``pool`` (compiled code that releases the GIL), all done on return."""
    pieces = list(zip(bounds[:-1], bounds[1:]))
    futures = [pool.submit(fn, *args, lo, hi) for lo, hi in pieces[1:]] if pool else []
    fn(*args, *pieces[0])
    for f in futures:
        f.result()


def pair_jaccard_exact(codes: Sequence[str] | None, i: np.ndarray, j: np.ndarray,
                       batch: int = 256, shingles: ShingleSource | FlatShingles | None = None,
                       floor: float | None = None) -> np.ndarray:
    """Exact Jaccard of the shingle sets (:mod:`.tokens`) of documents ``i[k]`` and
    ``j[k]``, ``(len(i),)`` float64: from ``shingles`` when given (a function of the
    document, or :class:`FlatShingles`), else from ``codes``, normalizing only the
    documents named in ``i`` and ``j``.

    With ``floor``, a pair whose set sizes alone put its Jaccard below ``floor``
    (``min / max < floor``) gets that upper bound, ``min / max``, instead.

    Compiled; from :data:`THREAD_MIN` shingles on, on one thread per core (the sets
    split by shingles, the pairs by count)."""
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
    vstarts, tstarts = _layout(offsets, rows)
    vals = np.empty(vstarts[-1], np.uint64)
    counts = np.empty(len(rows), np.int64)
    table = np.empty(tstarts[-1], np.uint64)
    used = np.zeros(tstarts[-1], np.bool_)
    out = np.empty(len(i), np.float64)
    pi, pj = np.searchsorted(docs, i), np.searchsorted(docs, j)
    threads = min(cpu_count(), 1 + int(vstarts[-1] // THREAD_MIN))
    with ThreadPoolExecutor(threads - 1) if threads > 1 else nullcontext() as pool:
        _run(pool, _fill_sets, (values, offsets, rows, vstarts, tstarts, vals, counts, table, used),
             _split(vstarts, threads))
        _run(pool, _pair_jaccard, (vals, vstarts, counts, table, used, tstarts, pi, pj,
                                   0.0 if floor is None else float(floor), floor is not None, out),
             _split(np.arange(len(i) + 1), threads))
    return out


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
