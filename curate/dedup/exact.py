"""Exact Jaccard similarity of document pairs, for the estimates MinHash leaves unsure.

A MinHash estimate from 128 slots has a standard deviation of about 0.035 at Jaccard
0.8 (sqrt(J (1 - J) / 128)), so pairs estimated near the threshold fall on the wrong side
often enough to cost several points of precision and recall against exact Jaccard
(``python -m curate.bench.dedup`` prints the figures). Dedup re-reads only the documents
of pairs estimated within :data:`MARGIN` of the threshold and compares their shingle
sets exactly (:func:`settle`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from curate.dedup.tokens import normalize_batch

MARGIN = 0.1
"""About three standard deviations of a 128-slot estimate near Jaccard 0.8."""


def pair_jaccard_exact(codes: Sequence[str], i: np.ndarray, j: np.ndarray,
                       batch: int = 256) -> np.ndarray:
    """Exact Jaccard of the shingle sets (:mod:`.tokens`) of documents ``codes[i[k]]`` and
    ``codes[j[k]]``, ``(len(i),)`` float64. Only the documents named in ``i`` and ``j`` are
    normalized."""
    docs = np.unique(np.concatenate([i, j])) if len(i) else np.zeros(0, np.int64)
    sets: dict[int, set[int]] = {}  # Python sets: a pair's intersection in a few us
    for s in range(0, len(docs), batch):
        part = docs[s:s + batch].tolist()
        tb = normalize_batch([codes[d] for d in part])
        for k, d in enumerate(part):
            sets[d] = set(tb.shingles[tb.shingle_offsets[k]:tb.shingle_offsets[k + 1]].tolist())
    out = np.empty(len(i), dtype=np.float64)
    for k, (a, b) in enumerate(zip(i.tolist(), j.tolist())):
        x, y = sets[a], sets[b]
        inter = len(x & y)
        union = len(x) + len(y) - inter
        out[k] = inter / union if union else 1.0
    return out


def settle(codes: Sequence[str], i: np.ndarray, j: np.ndarray, sim: np.ndarray, threshold: float,
           margin: float = MARGIN) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Pairs ``(i, j, jaccard)`` at or above ``threshold``, given estimates ``sim`` of
    candidates estimated at >= ``threshold - margin``: estimates within ``margin`` of the
    threshold are replaced by the exact Jaccard.

    Returns:
        ``(i, j, jaccard, checked)``: the kept pairs and how many were checked exactly.
    """
    unsure = np.flatnonzero(sim < threshold + margin)
    sim = sim.copy()
    if len(unsure):
        sim[unsure] = pair_jaccard_exact(codes, i[unsure], j[unsure])
    keep = sim >= threshold
    return i[keep], j[keep], sim[keep], len(unsure)
