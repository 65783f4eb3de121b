"""One compiled pass over a batch of documents: strip, tokenize, rename, chunk, shingle.

:func:`run` takes the documents as one flat ``uint8`` buffer with offsets and runs
:mod:`curate.dedup.textscan` and :mod:`curate.dedup.tokenpass` over each, in numba with
the GIL released, so that threads can run batches side by side. The Python wrapper
:func:`run_codes` builds the buffer from ``str`` documents.

The compiled functions are cached on disk (``cache=True``): the first process compiles
them (tens of seconds), later processes load them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from curate.dedup import jit  # noqa: F401  (sets numba's cache folder before the decorations below)

from curate.dedup import tokenpass as tp
from curate.dedup.textscan import MARKER, strip_doc, strip_tokenize, tokenize

ERR_NONE, ERR_NO_CODE, ERR_BRACKETS = 0, 1, 2
"""Values of :func:`run`'s ``err``."""


@njit(nogil=True, cache=True)
def _grow(a, need):
    if need <= len(a):
        return a
    out = np.empty(max(need, 2 * len(a)), a.dtype)
    out[:len(a)] = a
    return out


@njit(nogil=True, cache=True)
def run(buf, offsets, marker, special, keys, used, tflags, tops):
    """Features of documents ``buf[offsets[i]:offsets[i + 1]]``.

    Args:
        buf: ``uint8`` UTF-8 bytes of all documents, concatenated (writable).
        offsets: ``(n + 1,)`` ``int64``.
        marker: :data:`curate.dedup.textscan.MARKER`.
        special: ``uint64`` hashes of the placeholder, ``self``, ``class``, ``def``, ``@``
            (:mod:`curate.dedup.tokenpass` ``S_*`` order).
        keys, used, tflags, tops: :func:`curate.dedup.tokenpass.vocabulary_table`.
    Returns:
        ``(err int8 (n,), brackets int64 (n, 3), n_tokens int64 (n,), sums uint64,
        sum_offsets int64 (n + 1,), shingles uint64, shingle_offsets int64 (n + 1,), ops
        int32, op_offsets int64 (n + 1,))``, as :class:`curate.dedup.tokens.TokenBatch`
        has them; ``sums`` holds each document's sorted chunk sums, which the norm hash
        hashes (none where ``err`` is set).
    """
    n = len(offsets) - 1
    longest = 1
    for d in range(n):
        longest = max(longest, offsets[d + 1] - offsets[d])
    text = np.zeros(longest + 8, np.uint8)  # 8 bytes past the end for 8-byte reads
    tmp = np.empty(longest + 8, np.uint8)
    starts = np.empty(longest, np.int64)
    lens = np.empty(longest, np.int64)
    first = np.empty(longest, np.uint8)
    ctx = np.empty(longest, np.uint8)
    kept = np.empty(longest, np.int64)
    h = np.empty(longest, np.uint64)
    mapped = np.empty(longest, np.uint64)
    op = np.empty(longest, np.int32)
    chunk = np.empty(longest, np.int64)
    slot = np.empty(longest, np.int64)
    own_gen = np.zeros(len(keys), np.int64)
    counts = np.zeros(3, np.int64)
    byte_hash, byte_slot = tp.byte_tokens(keys, used)

    err = np.zeros(n, np.int8)
    brackets = np.zeros((n, 3), np.int64)
    n_tokens = np.zeros(n, np.int64)
    total = offsets[n] - offsets[0]
    sums = np.empty(max(16, total // 256), np.uint64)  # chunk sums (a chunk has a token)
    sum_off = np.zeros(n + 1, np.int64)
    shingles = np.empty(max(16, total // 8), np.uint64)
    sh_off = np.zeros(n + 1, np.int64)
    ops = np.empty(max(16, total // 32), np.int32)
    op_off = np.zeros(n + 1, np.int64)
    for d in range(n):
        sh_off[d + 1] = sh_off[d]
        op_off[d + 1] = op_off[d]
        sum_off[d + 1] = sum_off[d]
        t, length = strip_tokenize(marker, buf, offsets[d], offsets[d + 1], text, tmp,
                                   starts, lens, first, counts)
        if t == 0:
            err[d] = ERR_NO_CODE
            continue
        if counts[0] != 0 or counts[1] != 0 or counts[2] != 0:
            err[d] = ERR_BRACKETS
            brackets[d] = counts
            continue
        m = tp.keep_tokens(text, starts, lens, first, t, ctx, kept, byte_hash, h)
        ops = _grow(ops, op_off[d] + m)
        op_off[d + 1] = op_off[d] + tp.rename(
            text, starts, lens, first, ctx, kept, m, special, keys, used, tflags, tops, byte_slot,
            h, mapped, op, chunk, slot, own_gen, d + 1, ops[op_off[d]:])
        n_tokens[d] = m
        sums = _grow(sums, sum_off[d] + m)
        sum_off[d + 1] = sum_off[d] + tp.chunk_sums(mapped, chunk, m, sums[sum_off[d]:])
        shingles = _grow(shingles, sh_off[d] + m)
        sh_off[d + 1] = sh_off[d] + tp.shingles(mapped, m, shingles[sh_off[d]:])
    return (err, brackets, n_tokens, sums[:sum_off[n]].copy(), sum_off, shingles[:sh_off[n]].copy(),
            sh_off, ops[:op_off[n]].copy(), op_off)


@njit(nogil=True, cache=True)
def inspect(buf, marker, special, keys, used, tflags, tops):
    """One document's stripped text and kept tokens, for reading and tests:
    ``(text uint8, starts int64, lens int64, hashes uint64, renamed uint64, err)``
    (``err`` as :data:`ERR_NONE` etc.; no tokens unless ``ERR_NONE``)."""
    n = len(buf)
    text = np.zeros(n + 8, np.uint8)
    tmp = np.empty(n + 8, np.uint8)
    length = strip_doc(marker, buf, 0, n, text, tmp)
    starts = np.empty(max(length, 1), np.int64)
    lens = np.empty(max(length, 1), np.int64)
    first = np.empty(max(length, 1), np.uint8)
    t = tokenize(text, length, starts, lens, first)
    empty = np.zeros(0, np.int64)
    none = np.zeros(0, np.uint64)
    if t == 0:
        return text[:length], empty, empty, none, none, ERR_NO_CODE
    counts = np.zeros(3, np.int64)
    if not tp.brackets(first, t, counts):
        return text[:length], empty, empty, none, none, ERR_BRACKETS
    ctx = np.empty(t, np.uint8)
    kept = np.empty(t, np.int64)
    h = np.empty(t, np.uint64)
    byte_hash, byte_slot = tp.byte_tokens(keys, used)
    m = tp.keep_tokens(text, starts, lens, first, t, ctx, kept, byte_hash, h)
    mapped = np.empty(t, np.uint64)
    op = np.empty(t, np.int32)
    chunk = np.empty(t, np.int64)
    slot = np.empty(t, np.int64)
    own_gen = np.zeros(len(keys), np.int64)
    tp.rename(text, starts, lens, first, ctx, kept, m, special, keys, used, tflags, tops,
              byte_slot, h, mapped, op, chunk, slot, own_gen, 1, np.empty(t, np.int32))
    idx = kept[:m]
    return text[:length], starts[idx], lens[idx], h[:m].copy(), mapped[:m].copy(), ERR_NONE
