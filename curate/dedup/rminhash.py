"""rensa 0.5's R-MinHash signatures, compiled with numba (no GIL held).

The same ``uint32`` values as ``rensa.RMinHash.digest_matrix_from_flat_token_hashes``
(rensa 0.5.x, checked on the benchmark corpus and in ``tests/test_dedup.py``), computed
here so that threads can sign batches side by side and the rows land in a numpy array
directly (turning rensa's row lists into an array cost more than rensa's own work).

The sketch, as rensa 0.5 defines it (its "bucket" R-MinHash): permutations ``(a_i, b_i)``
are ``num_perm`` pairs of draws from xoshiro256++ seeded with ``seed`` through splitmix64
(``a_i`` made odd). Each document's value in slot ``i`` is the minimum of

- for each of three rounds ``r`` and each token hash ``x``: with
  ``m = splitmix64(x ^ b_0 ^ BUCKET_DOMAIN ^ r * ROUND_DOMAIN)``, the value
  ``r << 30 | m >> 34`` in slot ``bucket(m)`` (the low 32 bits of ``m`` scaled to
  ``num_perm``, with rejection when ``num_perm`` is not a power of two);
- for every slot and token hash (the fallback, only reached by slots that no round
  filled): ``3 << 30 | ((a_i * f + b_i) >> 34) & (2**30 - 1)`` with
  ``f = splitmix64(x ^ a_0 ^ FALLBACK_DOMAIN)``;

and ``0xFFFFFFFF`` for an empty document.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from curate.dedup import jit  # noqa: F401  (sets numba's cache folder before the decorations below)

BUCKET_DOMAIN = np.uint64(0x6A09E667F3BCC909)
ROUND_DOMAIN = np.uint64(0x3C6EF372FE94F82B)
FALLBACK_DOMAIN = np.uint64(0xBB67AE8584CAA73B)
ROUNDS = 3
FALLBACK = np.uint32(3 << 30)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)
_MASK30 = np.uint64((1 << 30) - 1)
_U17, _U23, _U27, _U30, _U31, _U32, _U34, _U45 = (np.uint64(k) for k in (17, 23, 27, 30, 31, 32, 34, 45))


@njit(nogil=True, cache=True)
def splitmix64(x):
    """The splitmix64 output function of state ``x`` (the golden-ratio step added first)."""
    z = x + _GOLDEN
    z = (z ^ (z >> _U30)) * _C1
    z = (z ^ (z >> _U27)) * _C2
    return z ^ (z >> _U31)


@njit(nogil=True, cache=True)
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(nogil=True, cache=True)
def _permutations(num_perm, seed, a, b):
    s = np.empty(4, np.uint64)
    state = np.uint64(seed)
    for k in range(4):
        state = state + _GOLDEN
        z = state
        z = (z ^ (z >> _U30)) * _C1
        z = (z ^ (z >> _U27)) * _C2
        s[k] = z ^ (z >> _U31)
    for i in range(2 * num_perm):
        out = _rotl(s[0] + s[3], 23) + s[0]
        t = s[1] << _U17
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        if i % 2 == 0:
            a[i // 2] = out | np.uint64(1)
        else:
            b[i // 2] = out


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)``, two ``uint64`` arrays of ``num_perm``: rensa's permutation pairs."""
    a = np.empty(num_perm, np.uint64)
    b = np.empty(num_perm, np.uint64)
    _permutations(num_perm, seed, a, b)
    return a, b


@njit(nogil=True, cache=True)
def _bucket(mixed, count):
    """Slot of a mixed hash among ``count`` (Lemire's multiply, rejection as rensa's)."""
    c = np.uint64(count)
    threshold = ((np.uint64(1) << _U32) % c)
    while True:
        product = (mixed & _LOW32) * c
        if (product & _LOW32) >= threshold:
            return np.int64(product >> _U32)
        mixed = splitmix64(mixed)


@njit(nogil=True, cache=True)
def sign_into(hashes, out, a, b, scratch):
    """R-MinHash of the token hashes ``hashes`` (``uint64``) into the ``uint32`` row
    ``out`` (length ``num_perm``, any prior content is overwritten); ``scratch`` is a
    ``uint64`` array at least as long as ``hashes``.

    The fallback visits only the slots that no round filled, each over all token hashes
    mixed once (the same minima as visiting every slot for every hash)."""
    k = len(out)
    out[:] = np.uint32(0xFFFFFFFF)
    if len(hashes) == 0 or k == 0:
        return
    base = b[0] ^ BUCKET_DOMAIN
    pow2 = (k & (k - 1)) == 0
    shift = np.uint64(32)
    while (np.int64(1) << (32 - np.int64(shift))) < k:
        shift -= np.uint64(1)
    for r in range(ROUNDS):
        seed = base ^ (np.uint64(r) * ROUND_DOMAIN)
        prefix = np.uint32(r << 30)
        if pow2:
            for x in hashes:
                mixed = splitmix64(x ^ seed)
                slot = np.int64((mixed & _LOW32) >> shift)
                rank = prefix | np.uint32(mixed >> _U34)
                if rank < out[slot]:
                    out[slot] = rank
        else:
            for x in hashes:
                mixed = splitmix64(x ^ seed)
                slot = _bucket(mixed, k)
                rank = prefix | np.uint32(mixed >> _U34)
                if rank < out[slot]:
                    out[slot] = rank
        full = np.uint32((r + 1) << 30)
        done = True
        for i in range(k):
            if out[i] >= full:
                done = False
                break
        if done:
            return
    fseed = a[0] ^ FALLBACK_DOMAIN
    n = len(hashes)
    for t in range(n):
        scratch[t] = splitmix64(hashes[t] ^ fseed)
    for i in range(k):
        if out[i] >= FALLBACK:
            ai, bi = a[i], b[i]
            low = _MASK30
            for t in range(n):
                v = ((ai * scratch[t] + bi) >> _U34) & _MASK30
                low = min(low, v)
            rank = FALLBACK | np.uint32(low)
            if rank < out[i]:
                out[i] = rank


@njit(nogil=True, cache=True)
def sign_rows(hashes, offsets, a, b, out):
    """:func:`sign_into` for each document ``hashes[offsets[i]:offsets[i + 1]]`` into
    row ``i`` of ``out`` (``uint32``, ``(n, num_perm)``)."""
    longest = 0
    for d in range(len(offsets) - 1):
        longest = max(longest, offsets[d + 1] - offsets[d])
    scratch = np.empty(longest, np.uint64)
    for d in range(len(offsets) - 1):
        sign_into(hashes[offsets[d]:offsets[d + 1]], out[d], a, b, scratch)


def sign(hashes: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """R-MinHash signatures of documents given as flat token hashes.

    Args:
        hashes: ``uint64`` token (shingle) hashes of all documents, concatenated.
        offsets: ``(n + 1,)`` integer offsets into ``hashes``.
    Returns:
        ``uint32`` ``(n, num_perm)``; an empty document's row is all ``0xFFFFFFFF``.
    """
    a, b = permutations(num_perm, seed)
    out = np.empty((len(offsets) - 1, num_perm), np.uint32)
    sign_rows(np.ascontiguousarray(hashes, dtype=np.uint64),
              np.ascontiguousarray(offsets, dtype=np.int64), a, b, out)
    return out
