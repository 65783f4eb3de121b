"""Compiled token pass over one stripped document: hash, rename, chunk, shingle.

The steps after :mod:`curate.dedup.textscan` (the rules are :mod:`curate.dedup.tokens`'
module docstring), as loops over the document's tokens in numba, no GIL held:

1. bracket balance and "no code" (the ``error`` of :class:`curate.dedup.tokens.TokenBatch`);
2. context of each token in the full stream: after a dot (``attr``), after ``<name>.``
   with no space before the dot (``plain``), bound by ``=`` (``bound``); then the tokens
   that leave: delimiters ``()[]{},:;."'`` and backquote, ``->``, the stars of ``*args``
   and ``**kw``, a unary minus, a string prefix glued to its quote (``rb"``);
3. each kept token's hash (:func:`hash_span`, equal to :func:`curate.dedup.tokens.hash_tokens`),
   in the same loop as step 2;
4. chunks (cut before ``def``, ``class`` and ``@``), attributes of ``self`` or of the
   method's first parameter, and renaming: a token keeps its hash if it is not an
   identifier, or a vocabulary name (not after a dot, not defined or ``=``-bound by the
   document), or a vocabulary attribute after a dot that does not follow ``self``;
   otherwise it becomes the placeholder's hash; its op id where it names an op;
5. per chunk, the sum of ``mix64(position in chunk * K3 + renamed hash)`` (the norm hash
   is taken over the sorted sums); 5-gram shingle hashes.

Hash arithmetic is on ``uint64`` and wraps.
"""

from __future__ import annotations

import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from curate.dedup import jit  # noqa: F401  (sets numba's cache folder before the decorations below)

from curate.dedup.textscan import is_word

if sys.byteorder != "little":  # _load reads native words; the hashes are defined little-endian
    raise ImportError("curate.dedup.tokenpass needs a little-endian machine")

K1 = np.uint64(0x9E3779B97F4A7C15)
K2 = np.uint64(0xBF58476D1CE4E5B9)
K3 = np.uint64(0x94D049BB133111EB)
POS = np.array([0xA0761D6478BD642F, 0xE7037ED1A0B428DB, 0x8EBC6AF09C88C6E3,
                0x589965CC75374CC3, 0x1D8E4E27C47D124F], dtype=np.uint64)
"""One odd multiplier per position in a shingle."""
SHINGLE = 5
NAME, ATTR = 1, 2
"""Vocabulary flags: kept as a bare name, kept as an attribute after a dot."""
# indices into the ``special`` array of token hashes
S_PLACEHOLDER, S_SELF, S_CLASS, S_DEF, S_AT = 0, 1, 2, 3, 4

_U0 = np.uint64(0)
_U29, _U32 = np.uint64(29), np.uint64(32)
_U56 = np.uint64(56)


@njit(nogil=True, cache=True)
def mix64(x):
    """splitmix64's finalizer on a ``uint64``."""
    x = x ^ (x >> _U32)
    x = x * K2
    x = x ^ (x >> _U29)
    x = x * K3
    return x ^ (x >> _U32)


@intrinsic
def _load_u64(typingctx, arr, i):
    """The 8 bytes at ``arr[i]`` (a ``uint8`` array) as one unaligned native ``uint64``
    load: numba has no such load, and its 8 byte loads, shifted and or-ed, stay 8."""
    sig = types.uint64(arr, types.intp)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        ptr = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(ptr, align=1)

    return sig, codegen


@njit(nogil=True, cache=True)
def _load(text, s, m):
    """``m`` (1-8) bytes at ``text[s]`` as a little-endian ``uint64``; reads 8 bytes, so
    ``text`` must hold 8 bytes past the token."""
    w = _load_u64(text, s)
    if m < 8:
        w &= (np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)
    return w


@njit(nogil=True, cache=True)
def hash_span(text, s, n):
    """Hash of the ``n`` bytes at ``text[s]`` (``text`` holding 8 bytes more): 64-bit
    little-endian words xor-ed in and multiplied (as FxHash does), the length folded in
    first."""
    h = (_load(text, s, min(n, 8)) ^ (np.uint64(n) << _U56)) * K1
    off = 8
    while off < n:
        h = ((h ^ (h >> _U29)) ^ _load(text, s + off, min(n - off, 8))) * K1
        off += 8
    return h


def vocabulary_table(hashes: np.ndarray, flags: np.ndarray, ops: np.ndarray):
    """Open-addressing table of token hashes for :func:`lookup`.

    Args:
        hashes: ``uint64`` distinct token hashes; flags: ``uint8`` (:data:`NAME`,
            :data:`ATTR`); ops: ``int32`` op ids (-1: none).
    Returns:
        ``(keys uint64, used bool, flags uint8, ops int32)``, each of a power-of-two
        length at least twice the entries.
    """
    size = 1 << max(4, int(2 * len(hashes) - 1).bit_length())
    keys = np.zeros(size, np.uint64)
    used = np.zeros(size, np.bool_)
    tflags = np.zeros(size, np.uint8)
    tops = np.full(size, -1, np.int32)
    _fill(hashes, flags, ops, keys, used, tflags, tops)
    return keys, used, tflags, tops


@njit(nogil=True, cache=True)
def _fill(hashes, flags, ops, keys, used, tflags, tops):
    size = len(keys)
    shift = np.uint64(64 - _log2(size))
    for k in range(len(hashes)):
        h = hashes[k]
        i = np.int64((h * K3) >> shift)
        while used[i] and keys[i] != h:
            i = (i + 1) & (size - 1)
        keys[i], used[i], tflags[i], tops[i] = h, True, flags[k], ops[k]


@njit(nogil=True, cache=True)
def _log2(size):
    b = 0
    while (1 << b) < size:
        b += 1
    return b


@njit(nogil=True, cache=True)
def lookup(h, keys, used, tflags, tops, shift):
    """``(flags, op)`` of token hash ``h`` (``0, -1`` when absent); ``shift`` is
    ``64 - log2(len(keys))``."""
    size = len(keys)
    i = np.int64((h * K3) >> shift)
    while used[i]:
        if keys[i] == h:
            return tflags[i], tops[i]
        i = (i + 1) & (size - 1)
    return np.uint8(0), np.int32(-1)


@njit(nogil=True, cache=True)
def lookup_slot(h, keys, used, shift):
    """Index of token hash ``h`` in the table (:func:`vocabulary_table`), or -1."""
    mask = len(keys) - 1
    i = np.int64((h * K3) >> shift)
    while True:
        k = keys[i]
        # an empty slot's key is 0, so ``used`` is read only for a key of 0
        if k == h and (k != _U0 or used[i]):
            return i
        if k == _U0 and not used[i]:
            return np.int64(-1)
        i = (i + 1) & mask


@njit(nogil=True, cache=True)
def byte_tokens(keys, used):
    """``(hashes uint64 (256,), slots int64 (256,))``: the hash (:func:`hash_span`) and
    vocabulary slot (:func:`lookup_slot`) of each one-byte token, looked up once instead
    of per token."""
    shift = np.uint64(64 - _log2(len(keys)))
    hashes = np.empty(256, np.uint64)
    slots = np.empty(256, np.int64)
    one = np.zeros(9, np.uint8)
    for c in range(256):
        one[0] = c
        hashes[c] = hash_span(one, 0, 1)
        slots[c] = lookup_slot(hashes[c], keys, used, shift)
    return hashes, slots


@njit(nogil=True, cache=True)
def _is_ident(c) -> bool:
    return ((c | 32) - 97) & 0xFF < 26 or c == 95 or c >= 128


@njit(nogil=True, cache=True)
def _opener(c) -> bool:  # what precedes a unary operator: ( , = [ : {
    return c == 40 or c == 44 or c == 61 or c == 91 or c == 58 or c == 123


@njit(nogil=True, cache=True)
def _delimiter(c) -> bool:  # ()[]{},:;."'`
    return (c == 40 or c == 41 or c == 91 or c == 93 or c == 123 or c == 125 or c == 44
            or c == 58 or c == 59 or c == 46 or c == 34 or c == 39 or c == 96)


@njit(nogil=True, cache=True)
def _prefix_byte(c) -> bool:  # rRbBuUfF
    c = c | 32
    return c == 114 or c == 98 or c == 117 or c == 102


@njit(nogil=True, cache=True)
def brackets(first, t, counts):
    """Opened minus closed ``()``, ``[]``, ``{}`` over the first bytes of ``t`` tokens,
    into ``counts`` (3 ``int64``); returns whether all balance."""
    counts[:] = 0
    for k in range(t):
        c = first[k]
        if c == 40:
            counts[0] += 1
        elif c == 41:
            counts[0] -= 1
        elif c == 91:
            counts[1] += 1
        elif c == 93:
            counts[1] -= 1
        elif c == 123:
            counts[2] += 1
        elif c == 125:
            counts[2] -= 1
    return counts[0] == 0 and counts[1] == 0 and counts[2] == 0


@njit(nogil=True, cache=True)
def keep_tokens(text, starts, lens, first, t, ctx, kept, byte_hash, h):
    """Steps 2 and 3: context bits of each of the ``t`` tokens into ``ctx`` (``uint8``: 1
    attr, 2 plain, 4 bound), the indices of the kept tokens into ``kept`` and their
    hashes into ``h`` (``uint64``; ``byte_hash``: :func:`byte_tokens`' hashes, for
    one-byte tokens), in the same loop; returns how many are kept."""
    m = 0
    unpack_prev = False  # the previous token is an unpacking star (before the pair rule)
    arrow_prev = False
    prev = np.uint8(0)
    for k in range(t):
        c = first[k]
        nxt = first[k + 1] if k + 1 < t else np.uint8(0)
        adjacent_next = k + 1 < t and starts[k] + lens[k] == starts[k + 1]
        bits = 0
        if prev == 46:
            bits = 1
            if k >= 2 and starts[k - 2] + lens[k - 2] == starts[k - 1] and is_word(first[k - 2]):
                bits = 3
        elif nxt == 61 and is_word(c) and not (k + 2 < t and first[k + 2] == 61):
            bits = 4
        ctx[k] = bits
        adjacent = k >= 1 and starts[k - 1] + lens[k - 1] == starts[k]
        keep = not _delimiter(c)
        unpack1 = c == 42 and _opener(prev)
        unpack = unpack1 or (c == 42 and unpack_prev and adjacent)
        arrow = c == 45 and nxt == 62 and adjacent_next
        if unpack or arrow or (c == 45 and _opener(prev)):
            keep = False
        if c == 62 and arrow_prev:
            keep = False
        if (keep and lens[k] <= 2 and (nxt == 34 or nxt == 39) and adjacent_next
                and _prefix_byte(c) and (lens[k] == 1 or _prefix_byte(text[starts[k] + 1]))):
            keep = False
        unpack_prev = unpack1
        arrow_prev = arrow
        prev = c
        if keep:
            kept[m] = k
            n = lens[k]
            h[m] = byte_hash[c] if n == 1 else hash_span(text, starts[k], n)
            m += 1
    return m


@njit(nogil=True, cache=True)
def rename(text, starts, lens, first, ctx, kept, m, special, keys, used, tflags, tops,
           byte_slot, h, mapped, op, chunk, slot, own_gen, gen, ops):
    """Step 4 for the ``m`` kept tokens of hashes ``h`` (:func:`keep_tokens`): renamed
    hashes ``mapped`` and chunk starts ``chunk`` (index of each token's chunk's first
    token), and the op ids of the tokens that name ops, in order, into ``ops``
    (``int32``); returns how many. ``op`` (``int32``) and ``slot`` (``int64``) are
    arrays of at least ``m``. ``byte_slot`` is :func:`byte_tokens`' slots of the table.
    The vocabulary names the document defines or binds are marked in ``own_gen``
    (``int64``, as long as ``keys``) with ``gen``, a number no earlier document of the
    same ``own_gen`` used (so it needs no clearing)."""
    shift = np.uint64(64 - _log2(len(keys)))
    h_def, h_class, h_at, h_self = special[S_DEF], special[S_CLASS], special[S_AT], special[S_SELF]
    # chunks and the first parameter of the chunk's def when indented (a method's),
    # then names the document defines or binds are its own: mark them, then read the marks
    cs = 0
    param = _U0
    for j in range(m):
        k = kept[j]
        hj = h[j]
        if j == 0 or hj == h_def or hj == h_class or hj == h_at:
            cs = j
            param = _U0
            if hj == h_def and j + 2 < m:
                s = starts[k]
                if s > 0 and (text[s - 1] == 32 or text[s - 1] == 9):
                    param = h[j + 2]
        chunk[j] = cs
        bits = ctx[k]
        i = byte_slot[first[k]] if lens[k] == 1 else lookup_slot(hj, keys, used, shift)
        flags = tflags[i] if i >= 0 else np.uint8(0)
        op[j] = tops[i] if i >= 0 else np.int32(-1)
        is_attr = (bits & 1) != 0
        self_attr = False
        if bits & 2 and j >= 1:
            name = h[j - 1]
            self_attr = name == h_self or name == param
        attr_ok = (flags & ATTR) != 0 and is_attr and not self_attr
        name_ok = (flags & NAME) != 0 and not is_attr
        # slot: the table index of a vocabulary name (>= 0), -1 other tokens, -2 attributes kept
        slot[j] = i if name_ok else (-2 if attr_ok else -1)
        if name_ok and ((j >= 1 and h[j - 1] == h_class) or (bits & 4) != 0):
            own_gen[i] = gen
    placeholder = special[S_PLACEHOLDER]
    q = 0
    for j in range(m):
        c = first[kept[j]]
        i = slot[j]
        attr_ok = i == -2
        ok = i >= 0 and own_gen[i] != gen
        ident = _is_ident(c)
        keep = attr_ok or ok or not ident
        mapped[j] = h[j] if keep else placeholder
        upper = (c - 65) & 0xFF < 26
        if op[j] >= 0 and ((ok and upper) or attr_ok or not ident):
            ops[q] = op[j]
            q += 1
    return q


@njit(nogil=True, cache=True)
def chunk_sums(mapped, chunk, m, out) -> int:
    """Step 5's per-chunk sums of ``mapped[:m]``, sorted, into ``out``; returns how many."""
    c = -1
    acc = _U0
    for j in range(m):
        if chunk[j] == j:
            if c >= 0:
                out[c] = acc
            c += 1
            acc = _U0
        acc += mix64(np.uint64(j - chunk[j]) * K3 + mapped[j])
    if c >= 0:
        out[c] = acc
    out[:c + 1].sort()
    return c + 1


@njit(nogil=True, cache=True)
def shingles(mapped, m, out) -> int:
    """5-gram hashes of ``mapped[:m]`` into ``out``: ``m - 4`` of them, or one of all
    tokens when ``0 < m < 5``; returns how many."""
    if m == 0:
        return 0
    if m < SHINGLE:
        acc = _U0
        for j in range(m):
            acc += mapped[j] * POS[j]
        out[0] = mix64(acc)
        return 1
    p0, p1, p2, p3, p4 = POS[0], POS[1], POS[2], POS[3], POS[4]
    for i in range(m - SHINGLE + 1):
        out[i] = mix64(mapped[i] * p0 + mapped[i + 1] * p1 + mapped[i + 2] * p2
                       + mapped[i + 3] * p3 + mapped[i + 4] * p4)
    return m - SHINGLE + 1
