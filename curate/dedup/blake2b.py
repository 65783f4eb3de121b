"""BLAKE2b (RFC 7693), unkeyed, compiled with numba (no GIL held): the norm hash of
:mod:`curate.dedup.tokens` inside the threads' compiled pass, where ``hashlib``'s took
about 2 us per document of Python holding the GIL. Equal to
``hashlib.blake2b(data, digest_size=...)`` (the tests check it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from curate.dedup import jit  # noqa: F401  (sets numba's cache folder before the decorations below)

IV = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
               0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179],
              dtype=np.uint64)
SIGMA = np.array([
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
], dtype=np.int64)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(nogil=True, cache=True)
def _rotr(x, k):
    return (x >> np.uint64(k)) | (x << np.uint64(64 - k))


@njit(nogil=True, cache=True)
def _g(v, a, b, c, d, x, y):
    v[a] = v[a] + v[b] + x
    v[d] = _rotr(v[d] ^ v[a], 32)
    v[c] = v[c] + v[d]
    v[b] = _rotr(v[b] ^ v[c], 24)
    v[a] = v[a] + v[b] + y
    v[d] = _rotr(v[d] ^ v[a], 16)
    v[c] = v[c] + v[d]
    v[b] = _rotr(v[b] ^ v[c], 63)


@njit(nogil=True, cache=True)
def _compress(h, m, t, last, v):
    """RFC 7693's F on state ``h`` (8 ``uint64``) with block ``m`` (16 ``uint64``),
    ``t`` bytes hashed so far (this block included; under 2**64), ``v`` scratch."""
    v[:8] = h
    v[8:] = IV
    v[12] ^= np.uint64(t)
    if last:
        v[14] ^= _ALL
    for r in range(12):
        s = SIGMA[r % 10]
        _g(v, 0, 4, 8, 12, m[s[0]], m[s[1]])
        _g(v, 1, 5, 9, 13, m[s[2]], m[s[3]])
        _g(v, 2, 6, 10, 14, m[s[4]], m[s[5]])
        _g(v, 3, 7, 11, 15, m[s[6]], m[s[7]])
        _g(v, 0, 5, 10, 15, m[s[8]], m[s[9]])
        _g(v, 1, 6, 11, 12, m[s[10]], m[s[11]])
        _g(v, 2, 7, 8, 13, m[s[12]], m[s[13]])
        _g(v, 3, 4, 9, 14, m[s[14]], m[s[15]])
    for i in range(8):
        h[i] ^= v[i] ^ v[i + 8]


@njit(nogil=True, cache=True)
def digest_words(words, out, h, m, v):
    """BLAKE2b of the little-endian bytes of ``words`` (``uint64``; so 8 bytes each) with
    a digest of ``8 * len(out)`` bytes (at most 64), into ``out`` (``uint64``, the digest's
    bytes as little-endian words). ``h`` (8), ``m`` (16) and ``v`` (16) are ``uint64``
    scratch arrays."""
    h[:] = IV
    h[0] ^= np.uint64(0x01010000 | 8 * len(out))
    n = len(words)
    done = 0  # words compressed
    while True:
        k = min(16, n - done)
        m[:k] = words[done:done + k]
        m[k:] = 0
        done += k
        last = done == n
        _compress(h, m, 8 * done, last, v)
        if last:
            break
    out[:] = h[:len(out)]
