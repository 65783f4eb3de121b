"""MinHash signatures, LSH candidate pairs and clusters.

Signatures are a plain ``numpy`` array (rows = documents, ``uint32``); everything after
signing works on that array, whichever backend made it.

Method: MinHash (Broder 1997) estimates the Jaccard similarity of two shingle sets as the
share of equal signature slots; LSH banding (Indyk and Motwani 1998) proposes candidate
pairs, and a pair is kept only when its estimated Jaccard reaches the threshold. BigCode
(The Stack) and text-dedup use the same recipe (5-gram shingles, threshold 0.7-0.8).

Backends (figures: ``benchmarks/cpu-dedup.md``, 2-core CI machine, 128 permutations):

- ``"rminhash"`` (default): R-MinHash (rensa 0.5's definition) over the 64-bit shingle
  hashes, computed by :mod:`curate.dedup.rminhash` (numba, GIL released; the same values
  as ``rensa.RMinHash.digest_matrix_from_flat_token_hashes``, which the tests check; 3x
  faster than rensa on one thread on the benchmark corpus, 8x on two, where rensa holds
  the GIL and its row lists must become an array: ``benchmarks/cpu-dedup.md``). Its
  signatures are its own: they compare with each other, not with datasketch's. Banding
  here (:func:`band_pairs`) instead of ``MinHashLSH`` (390,000 against 9,000-16,000 docs/s).
- ``"datasketch"``: datasketch's ``MinHash`` with ``hashfunc`` = the low 32 bits of each
  shingle hash, and datasketch's ``MinHashLSH``. A signature equals
  ``MinHash(num_perm, seed=1, hashfunc=low32)`` updated with the same shingle hashes,
  so it interchanges with other datasketch tools.

Against a small reference set (:func:`query_pairs`) every pair is compared instead:
banding misses pairs near the threshold (on torch's own source at 0.6, 10 of 13 with
datasketch's band choice).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
from numba import njit

from curate.dedup import jit  # noqa: F401  (sets numba's cache folder before the decorations below)

from curate.dedup.tokenpass import mix64 as _mix64

SEED = 1
"""datasketch's default seed; R-MinHash gets it too."""
BACKENDS = ("rminhash", "datasketch")
EMPTY = np.uint32(0xFFFFFFFF)
"""Every slot of an empty document's signature (datasketch's and R-MinHash's alike)."""
LSH_RECALL = 0.995
"""Least probability that banding proposes a pair whose Jaccard equals the threshold."""
MAX_BUCKET = 64
"""Buckets larger than this get a chain and a star of pairs instead of all pairs."""


def low32(h: int) -> int:
    """The ``hashfunc`` of the datasketch backend: a shingle hash's low 32 bits."""
    return int(h) & 0xFFFFFFFF


def sign(shingles: np.ndarray, offsets: np.ndarray, num_perm: int = 128,
         backend: str = "rminhash", seed: int = SEED) -> np.ndarray:
    """MinHash signatures of documents given as flat shingle hashes.

    Args:
        shingles: ``uint64`` shingle hashes of all documents, concatenated (repeats ok).
        offsets: ``(n + 1,)`` int; document ``i`` is ``shingles[offsets[i]:offsets[i + 1]]``.
        num_perm: signature length.
        backend: ``"rminhash"`` or ``"datasketch"`` (module docstring).
    Returns:
        ``uint32`` array ``(n, num_perm)``; an empty document's row is all :data:`EMPTY`.
    Raises:
        ValueError: unknown backend.
    """
    n = len(offsets) - 1
    if backend == "rminhash":
        from curate.dedup import rminhash

        return rminhash.sign(shingles, offsets, num_perm, seed)
    if backend == "datasketch":
        from datasketch import MinHash

        out = np.full((n, num_perm), EMPTY, dtype=np.uint32)
        for i in range(n):
            part = shingles[offsets[i]:offsets[i + 1]]
            if len(part):
                m = MinHash(num_perm=num_perm, seed=seed, hashfunc=low32, scheme="affine32")
                m.update_batch(part.tolist())
                out[i] = m.hashvalues
        return out
    raise ValueError(f"unknown MinHash backend {backend!r}; choose one of {BACKENDS}")


def signatures(shingle_sets: Sequence[Iterable[bytes]], num_perm: int = 128,
               seed: int = SEED) -> np.ndarray:
    """datasketch ``MinHash.bulk`` signatures of shingle sets given as ``bytes``.

    Returns:
        ``uint32`` array of shape ``(len(shingle_sets), num_perm)``; an empty set gives
        all :data:`EMPTY`.
    """
    from datasketch import MinHash

    out = np.empty((len(shingle_sets), num_perm), dtype=np.uint32)
    for i, m in enumerate(MinHash.generator((list(s) for s in shingle_sets),
                                            num_perm=num_perm, seed=seed)):
        out[i] = m.hashvalues
    return out


def jaccard(a: np.ndarray, b: np.ndarray) -> np.ndarray | float:
    """Estimated Jaccard similarity: the share of equal slots.

    ``a`` is one signature ``(num_perm,)``; ``b`` one signature (returns a float) or
    a stack ``(n, num_perm)`` (returns ``(n,)`` float64).
    """
    eq = (b == a)
    return float(eq.mean()) if eq.ndim == 1 else eq.mean(axis=1)


def pair_jaccard(sigs: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Estimated Jaccard of the pairs ``(i[k], j[k])`` of rows of ``sigs``, ``(len(i),)``:
    the share of equal slots."""
    return _pair_jaccard(np.ascontiguousarray(sigs), np.asarray(i, dtype=np.int64),
                         np.asarray(j, dtype=np.int64))


@njit(nogil=True, cache=True)
def _pair_jaccard(sigs, i, j):
    k = sigs.shape[1]
    out = np.empty(len(i), np.float64)
    for p in range(len(i)):
        a, b = sigs[i[p]], sigs[j[p]]
        same = 0
        for s in range(k):
            same += a[s] == b[s]
        out[p] = same / k
    return out


def band_shape(threshold: float, num_perm: int, recall: float = LSH_RECALL) -> tuple[int, int]:
    """``(bands, rows)`` with the most rows per band (fewest false candidates) such that a
    pair of Jaccard ``threshold`` becomes a candidate with probability >= ``recall``:
    ``1 - (1 - t**rows)**bands``, ``bands = num_perm // rows`` (Leskovec, Rajaraman and
    Ullman, *Mining of Massive Datasets*, ch. 3.4). datasketch's own choice for 0.8 and 128
    permutations, 11 x 11, proposes such a pair with probability 0.63 only."""
    best = (num_perm, 1)
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if 1.0 - (1.0 - threshold ** rows) ** bands >= recall:
            best = (bands, rows)
    return best


def _band_keys(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``(bands, n)`` ``uint64`` hash of each band of each signature."""
    from curate.dedup.tokens import mix64

    n = len(sigs)
    keys = np.empty((bands, n), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for b in range(bands):
            h = np.full(n, np.uint64(b) * np.uint64(0x9E3779B97F4A7C15), dtype=np.uint64)
            for r in range(rows):
                h = mix64(h ^ sigs[:, b * rows + r].astype(np.uint64))
            keys[b] = h
    return keys


@njit(nogil=True, cache=True)
def _band_keys_compiled(sigs, bands, rows):
    """:func:`_band_keys` in one compiled loop (the same values)."""
    n = sigs.shape[0]
    keys = np.empty((bands, n), np.uint64)
    for b in range(bands):
        for d in range(n):
            h = np.uint64(b) * np.uint64(0x9E3779B97F4A7C15)
            for r in range(rows):
                h = _mix64(h ^ np.uint64(sigs[d, b * rows + r]))
            keys[b, d] = h
    return keys


@njit(nogil=True, cache=True)
def _bucket_pairs(keys, max_bucket):
    """Pair codes ``lo * n + hi`` of :func:`band_pairs`, sorted and distinct.

    Each band's documents are grouped by key in an open-addressing table (the keys are
    mixed hashes already, so their low bits pick the slot), each bucket a linked list in
    document order; a sort of every band's keys cost several times more. Pairs go
    through a hash set of codes, so that a pair found in many bands (a near-copy shares
    most of them) is sorted once."""
    bands, n = keys.shape
    size = 16
    while size < 2 * n:
        size *= 2
    mask = size - 1
    key = np.empty(size, np.uint64)
    count = np.zeros(size, np.int64)  # 0: an empty slot
    head = np.empty(size, np.int64)
    tail = np.empty(size, np.int64)
    nxt = np.empty(n, np.int64)
    filled = np.empty(n, np.int64)  # the slots in use in this band
    codes = np.full(1024, -1, np.int64)  # a set of pair codes: -1 empty, at most half full
    q = 0
    for b in range(bands):
        used = 0
        for d in range(n):
            h = keys[b, d]
            i = np.int64(h & np.uint64(mask))
            while count[i] != 0 and key[i] != h:
                i = (i + 1) & mask
            nxt[d] = -1
            if count[i] == 0:
                key[i], head[i], count[i] = h, d, 1
                filled[used] = i
                used += 1
            else:
                nxt[tail[i]] = d
                count[i] += 1
            tail[i] = d
        for f in range(used):
            s = filled[f]
            c = count[s]
            count[s] = 0  # empty again for the next band
            if c < 2:
                continue
            new = c * (c - 1) // 2 if c <= max_bucket else 2 * (c - 1)
            if 2 * (q + new) > len(codes):
                codes = _grown_set(codes, q + new)
            u = head[s]
            if c <= max_bucket:
                while u >= 0:
                    v = nxt[u]
                    while v >= 0:
                        q += _add_code(codes, u * n + v)
                        v = nxt[v]
                    u = nxt[u]
            else:  # members in document order: each with the next one and with the first
                first = u
                v = nxt[u]
                while v >= 0:
                    q += _add_code(codes, u * n + v)
                    q += _add_code(codes, first * n + v)
                    u, v = v, nxt[v]
    out = codes[codes >= 0]
    out.sort()
    return out


@njit(nogil=True, cache=True)
def _add_code(codes, c):
    """Put ``c`` (>= 0) in the open-addressing set ``codes``; 1 if it was not there."""
    mask = len(codes) - 1
    i = np.int64((np.uint64(c) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask
    while codes[i] >= 0:
        if codes[i] == c:
            return 0
        i = (i + 1) & mask
    codes[i] = c
    return 1


@njit(nogil=True, cache=True)
def _grown_set(codes, need):
    """The set ``codes`` rehashed into at least ``2 * need`` slots."""
    cap = len(codes)
    while cap < 2 * need:
        cap *= 2
    out = np.full(cap, -1, np.int64)
    for c in codes:
        if c >= 0:
            _add_code(out, c)
    return out


def band_pairs(sigs: np.ndarray, bands: int, rows: int,
               max_bucket: int = MAX_BUCKET) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs: rows of ``sigs`` equal in at least one band.

    Within a bucket of at most ``max_bucket`` documents every pair is proposed; a larger
    bucket (a big family of near-copies) proposes each member with the next one and with
    the bucket's first, which keeps the bucket connected for clustering without
    quadratic work. The buckets are read in a compiled loop (a hash table per band).

    Returns:
        ``(i, j)``: ``int64`` arrays with ``i < j``, each pair once.
    """
    n = len(sigs)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys = _band_keys_compiled(np.ascontiguousarray(sigs), bands, rows)
    code = _bucket_pairs(keys, max_bucket)
    return code // n, code % n


def candidate_pairs(sigs: np.ndarray, threshold: float, backend: str = "rminhash",
                    seed: int = SEED) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, jaccard)`` with ``i < j`` whose estimated Jaccard is >= ``threshold``,
    among the candidates LSH proposes: :func:`band_pairs` with :func:`band_shape`, or for
    ``backend="datasketch"`` datasketch's ``MinHashLSH`` (its own band choice).

    Args:
        sigs: ``(n, num_perm)`` signatures from :func:`sign`.
    """
    i, j, sim = candidate_arrays(sigs, threshold, backend, seed)
    return list(zip(i.tolist(), j.tolist(), sim.tolist()))


def candidate_arrays(sigs: np.ndarray, threshold: float, backend: str = "rminhash",
                     seed: int = SEED, floor: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`candidate_pairs` as three arrays ``(i, j, jaccard)``; with ``floor``, the
    candidates LSH proposes for ``threshold`` whose estimate is >= ``floor`` instead."""
    n, num_perm = sigs.shape
    if backend == "datasketch":
        i, j = _datasketch_pairs(sigs, threshold, seed)
    elif backend == "rminhash":
        i, j = band_pairs(sigs, *band_shape(threshold, num_perm))
    else:
        raise ValueError(f"unknown MinHash backend {backend!r}; choose one of {BACKENDS}")
    sim = pair_jaccard(sigs, i, j)
    keep = sim >= (threshold if floor is None else floor)
    return i[keep], j[keep], sim[keep]


def _datasketch_pairs(sigs: np.ndarray, threshold: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from datasketch import LeanMinHash, MinHashLSH

    n, num_perm = sigs.shape
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # candidates are verified afterwards, so weigh missed pairs above false candidates
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=(0.3, 0.7))
    lean = [LeanMinHash(seed=seed, hashvalues=s, scheme="affine32") for s in sigs]
    with lsh.insertion_session() as session:
        for k, m in enumerate(lean):
            session.insert(k, m, check_duplication=False)
    out_i, out_j = [], []
    for k, m in enumerate(lean):
        others = sorted(j for j in lsh.query(m) if j > k)
        out_i += [k] * len(others)
        out_j += others
    return np.array(out_i, dtype=np.int64), np.array(out_j, dtype=np.int64)


SLOT_CLASSES_MAX_INDEX = 2048
"""Largest index that :func:`query_pairs` compares through :class:`SlotClasses` (its
membership rows take up to ``len(index) ** 2 * num_perm`` bytes); a larger one goes
through an inverted index of ``(slot, value)`` keys."""


class SlotClasses:
    """A small set of signatures (the ``index``: the 250 KernelBench problems), ready to be
    compared with many query signatures.

    Slot by slot, the index rows with equal values form classes; a value shared by many
    rows (the minimum shingle of KernelBench's common template) is one class with one
    ``uint8`` membership row. A query's value is looked up among the slot's class values
    (``np.searchsorted``) and, where found, the class's membership row is added to the
    query's counts of equal slots: the work grows with the (query, slot) pairs that match
    at all, not with how many index rows share the matched value. (Expanding every match
    into one entry per index row, as an inverted index does, made 16 million entries for
    the 5,899-problem benchmark corpus, 3-4x the time.)
    """

    def __init__(self, index: np.ndarray):
        self.m, self.num_perm = index.shape
        self.values: list[np.ndarray] = []
        self.members: list[np.ndarray] = []
        for s in range(self.num_perm):
            uniq, cls = np.unique(index[:, s], return_inverse=True)
            member = np.zeros((len(uniq), self.m), dtype=np.uint8)
            member[cls.ravel(), np.arange(self.m)] = 1
            self.values.append(uniq)
            self.members.append(member)

    def equal_slots(self, queries: np.ndarray) -> np.ndarray:
        """``(len(queries), len(index))`` counts of equal slots."""
        dtype = np.uint8 if self.num_perm < 256 else np.uint16 if self.num_perm < 65536 else np.int64
        equal = np.zeros((len(queries), self.m), dtype=dtype)
        for s in range(self.num_perm):
            q, values = queries[:, s], self.values[s]
            pos = np.searchsorted(values, q)
            pos[pos == len(values)] = 0
            hit = np.flatnonzero(values[pos] == q)
            if len(hit):
                equal[hit] += self.members[s][pos[hit]]
        return equal

    def pairs(self, queries: np.ndarray, threshold: float,
              chunk: int = 4096) -> list[tuple[int, int, float]]:
        """:func:`query_pairs` against this index."""
        out: list[tuple[int, int, float]] = []
        for start in range(0, len(queries), chunk):
            sims = self.equal_slots(queries[start:start + chunk]) / self.num_perm
            for i, j in zip(*np.nonzero(sims >= threshold)):
                out.append((start + int(i), int(j), float(sims[i, j])))
        return out


def query_pairs(queries: np.ndarray, index: np.ndarray, threshold: float,
                chunk: int = 4096, slots: SlotClasses | None = None) -> list[tuple[int, int, float]]:
    """Pairs ``(query row, index row, jaccard)`` with estimated Jaccard >= ``threshold``,
    comparing every query with every index signature; unlike LSH banding it misses
    nothing near the threshold.

    Meant for a small index (the 250 KernelBench problems): up to
    :data:`SLOT_CLASSES_MAX_INDEX` rows through :class:`SlotClasses` (``slots``, when the
    caller keeps one for ``index``, saves building it), above through an inverted index
    of the index's ``(slot, value)`` keys (``np.searchsorted``).
    """
    if len(queries) == 0 or len(index) == 0:
        return []
    if slots is not None or len(index) <= SLOT_CLASSES_MAX_INDEX:
        return (slots or SlotClasses(index)).pairs(queries, threshold, chunk)
    return _inverted_query_pairs(queries, index, threshold, chunk)


def _inverted_query_pairs(queries: np.ndarray, index: np.ndarray, threshold: float,
                          chunk: int) -> list[tuple[int, int, float]]:
    pairs: list[tuple[int, int, float]] = []
    m, num_perm = index.shape
    slot = np.arange(num_perm, dtype=np.uint64) << np.uint64(32)
    keys = (index.astype(np.uint64) | slot[None, :]).ravel()
    order = np.argsort(keys, kind="stable")
    keys_sorted, owner = keys[order], (order // num_perm).astype(np.int64)
    for start in range(0, len(queries), chunk):
        block = queries[start:start + chunk]
        q = (block.astype(np.uint64) | slot[None, :]).ravel()
        lo = np.searchsorted(keys_sorted, q, "left")
        hi = np.searchsorted(keys_sorted, q, "right")
        counts = hi - lo
        hit = np.flatnonzero(counts)
        if not len(hit):
            continue
        reps = counts[hit]
        qrow = np.repeat(hit // num_perm, reps)
        first = np.repeat(lo[hit], reps)
        within = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
        ref = owner[first + within]
        equal = np.bincount(qrow * m + ref, minlength=len(block) * m).reshape(len(block), m)
        sims = equal / num_perm
        for i, j in zip(*np.nonzero(sims >= threshold)):
            pairs.append((start + int(i), int(j), float(sims[i, j])))
    return pairs


def components(n: int, pairs: Iterable[tuple[int, int, float]] | tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Connected components of ``n`` nodes linked by ``pairs``.

    ``pairs`` is an iterable of ``(i, j, ...)`` tuples or a tuple of two index arrays.
    Vectorized: edges hook the larger root under the smaller, then pointer jumping
    flattens the forest, until every edge joins one root (Shiloach and Vishkin 1982).

    Returns:
        ``int64`` array of shape ``(n,)``: each node's component, labelled by its
        smallest member's index.
    """
    if isinstance(pairs, tuple) and len(pairs) == 2 and isinstance(pairs[0], np.ndarray):
        i, j = pairs
    else:
        listed = [(p[0], p[1]) for p in pairs]
        i = np.array([p[0] for p in listed], dtype=np.int64)
        j = np.array([p[1] for p in listed], dtype=np.int64)
    label = np.arange(n, dtype=np.int64)
    if len(i) == 0:
        return label
    while True:
        li, lj = label[i], label[j]
        if np.array_equal(li, lj):
            return label
        low = np.minimum(li, lj)
        np.minimum.at(label, li, low)
        np.minimum.at(label, lj, low)
        while True:
            nxt = label[label]
            if np.array_equal(nxt, label):
                break
            label = nxt
