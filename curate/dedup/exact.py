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

from typing import Callable, Sequence

import numpy as np

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


def pair_jaccard_exact(codes: Sequence[str] | None, i: np.ndarray, j: np.ndarray,
                       batch: int = 256, shingles: ShingleSource | None = None,
                       floor: float | None = None) -> np.ndarray:
    """Exact Jaccard of the shingle sets (:mod:`.tokens`) of documents ``i[k]`` and
    ``j[k]``, ``(len(i),)`` float64: from ``shingles`` when given, else from ``codes``,
    normalizing only the documents named in ``i`` and ``j``.

    With ``floor``, a pair whose set sizes alone put its Jaccard below ``floor``
    (``min / max < floor``) gets that upper bound, ``min / max``, instead."""
    docs = np.unique(np.concatenate([i, j])).tolist() if len(i) else []
    if shingles is not None:
        sets = {d: sorted_set(shingles(d)) for d in docs}
    else:
        sets = _sets_from_codes(codes, docs, batch)
    out = np.empty(len(i), dtype=np.float64)
    for k, (a, b) in enumerate(zip(i.tolist(), j.tolist())):
        x, y = sets[a], sets[b]
        if len(x) > len(y):
            x, y = y, x
        if not len(y):
            out[k] = 1.0
            continue
        if floor is not None and len(x) < floor * len(y):
            out[k] = len(x) / len(y)
            continue
        # x's values found in y: both sorted and distinct
        pos = np.searchsorted(y, x)
        pos[pos == len(y)] = 0
        inter = int(np.count_nonzero(y[pos] == x))
        out[k] = inter / (len(x) + len(y) - inter)
    return out


def settle(codes: Sequence[str] | None, i: np.ndarray, j: np.ndarray, sim: np.ndarray,
           threshold: float, margin: float = MARGIN, shingles: ShingleSource | None = None
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
