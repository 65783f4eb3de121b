"""Compiled byte passes over one document: the strip steps and the tokenizer.

What :mod:`curate.dedup.tokens` drops from a document before it reads tokens, as a few
linear scans over its UTF-8 bytes (numba, no GIL held), each pass reading the previous
pass's output the way a regex replace-all reads its haystack:

1. ``strip_comments``: from :data:`curate.problem.INPUTS_MARKER` to the end, every
   comment and every triple-quoted string become one ``"``. One-line string literals are
   read first and kept, so a ``#`` or ``'''`` inside ``"..."`` starts nothing (a
   backslash escapes the next byte; a literal that does not close on its line is not a
   literal, and its quote is an ordinary byte); the brackets inside one become ``,``
   (``( [ {``) and ``;`` (``) ] }``), which the tokenizer treats alike (delimiters; the
   first kind precedes a unary operator) but which the bracket balance does not count:
   ``"(see below"`` is valid Python. A triple-quoted string ends at the first closing
   triple quote after it opens (escapes are not read); an unclosed one is not a string.
2. ``drop_input_funcs`` (only for a file in KernelBench's layout, one whose code outside
   comments and string literals says ``def get_inputs``): a line starting with ``def get_inputs``, ``def get_init_inputs`` or
   ``if __name__``, and the indented or blank lines after it;
3. ``drop_imports``: ``import ...`` and ``from X import ...`` at column 0 (a
   parenthesized name list to its ``)``);
4. ``drop_numeric_assigns``: ``NAME = <numbers, plain names, arithmetic>`` at column 0
   (``batch_size = 16``, ``N = 2048 * 2``; a call or a dotted name keeps the line, and so
   does one whose parentheses do not close on it: ``X = (`` opening a multi-line tuple,
   which the regexes dropped alone, leaving its ``)`` unbalanced).

Steps 2-4 are the regexes the polars implementation used (``_INPUT_FUNCS``, ``_IMPORTS``,
``_NUMERIC_ASSIGN`` in its history), matched the same way; step 1 is its ``_STRIP`` with
the one-line string literal read first (there, a ``#`` inside ``"a#b"`` started a comment).
Regex ``\\w`` is read as ASCII letters, digits, ``_`` and any byte >= 0x80.

:func:`tokenize` then splits the result into tokens: runs of word bytes (ASCII letters,
digits, ``_``, bytes >= 0x80) and single punctuation bytes; bytes <= 32 separate.

Every function takes ``uint8`` arrays and writes into caller-allocated ones: an output
buffer as long as the input suffices for each strip pass (no pass makes text longer).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from curate.dedup import jit  # noqa: F401  (sets numba's cache folder before the decorations below)

from curate.problem import INPUTS_MARKER

MARKER = np.frombuffer(INPUTS_MARKER.encode(), dtype=np.uint8).copy()
""":data:`curate.problem.INPUTS_MARKER` as bytes, the first argument of :func:`strip_doc`."""
GET_INPUTS = np.frombuffer(b"def get_inputs", dtype=np.uint8).copy()
_GET_B = np.frombuffer(b"get_", dtype=np.uint8).copy()
_INIT_INPUTS_B = np.frombuffer(b"init_inputs", dtype=np.uint8).copy()
_INPUTS_B = np.frombuffer(b"inputs", dtype=np.uint8).copy()
_DUNDER_NAME_B = np.frombuffer(b"__name__", dtype=np.uint8).copy()
_FROM_B = np.frombuffer(b"from", dtype=np.uint8).copy()
_IMPORT_B = np.frombuffer(b"import", dtype=np.uint8).copy()

_NL, _SP, _TAB, _HASH, _DQ, _SQ, _BSL, _COMMA, _SEMI = 10, 32, 9, 35, 34, 39, 92, 44, 59


def _byte_classes() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint8)
    letters = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
    for c in letters + b"0123456789":
        table[c] |= WORD
    table[128:] |= WORD
    for c in letters:
        table[c] |= NAME_START
    for c in b" \t":
        table[c] |= BLANK
    for c in b"0123456789 \t()+-*/%,.":
        table[c] |= NUMERIC
    for c in b",)+-*/%":
        table[c] |= AFTER_NAME
    for c in b"#\"'":
        table[c] |= STRIP | SCAN_STOP
    table[ord("d")] |= SCAN_STOP
    return table


WORD, NAME_START, BLANK, NUMERIC, AFTER_NAME, STRIP, SCAN_STOP = 1, 2, 4, 8, 16, 32, 64
CLASSES = _byte_classes()
IN_STRING = np.arange(256, dtype=np.uint8)
"""Byte -> the byte written for it inside a one-line string literal: brackets masked."""
IN_STRING[list(b"([{")] = 44
IN_STRING[list(b")]}")] = 59
"""Byte -> class bits: ``WORD`` (token bytes: ASCII letters, digits, ``_``, >= 0x80),
``NAME_START`` (letters, ``_``), ``BLANK`` (space, tab), ``NUMERIC`` and ``AFTER_NAME``
(step 4's ``[0-9 \\t()+\\-*/%,.]`` and ``[,)+\\-*/%]``), ``STRIP`` (``#``, quotes),
``SCAN_STOP`` (``STRIP`` and ``d``, where ``def get_inputs`` may start: the bytes
:func:`strip_comments` looks at)."""
BRACKET_KIND = np.zeros(256, dtype=np.int64)
BRACKET_DELTA = np.zeros(256, dtype=np.int64)
"""Byte -> which of ``()``, ``[]``, ``{}`` it opens (+1) or closes (-1), for the counts of
:func:`curate.dedup.tokenpass.brackets` (``BRACKET_DELTA`` 0: not a bracket)."""
for _k, (_open, _close) in enumerate((b"()", b"[]", b"{}")):
    BRACKET_KIND[[_open, _close]] = _k
    BRACKET_DELTA[_open], BRACKET_DELTA[_close] = 1, -1


@njit(nogil=True, cache=True)
def is_word(c) -> bool:
    """ASCII letter, digit, ``_`` or a byte >= 0x80."""
    return (CLASSES[c] & WORD) != 0


@njit(nogil=True, cache=True)
def _blank(c) -> bool:
    return (CLASSES[c] & BLANK) != 0


@njit(nogil=True, cache=True)
def _at(src, i, n, lit) -> bool:
    """``src[i:i + len(lit)] == lit`` within ``src[:n]``."""
    m = len(lit)
    if i + m > n:
        return False
    for k in range(m):
        if src[i + k] != lit[k]:
            return False
    return True


@njit(nogil=True, cache=True)
def _at3(src, i, n, c) -> bool:
    return i + 2 < n and src[i] == c and src[i + 1] == c and src[i + 2] == c


@njit(nogil=True, cache=True)
def _triple_end(src, j, e, c) -> int:
    """End of the first ``ccc`` in ``src[j:e]``, or -1."""
    while True:
        while j < e and src[j] != c:
            j += 1
        if j + 2 >= e:
            return -1
        if src[j + 1] == c and src[j + 2] == c:
            return j + 3
        j += 1


@njit(nogil=True, cache=True)
def strip_comments(src, s, e, marker, out):
    """Step 1 on ``src[s:e]`` into ``out``; returns ``(bytes written, whether the text
    outside comments and strings says "def get_inputs")``."""
    n = 0
    i = s
    layout = False
    while i < e:
        c = src[i]
        # the bytes with nothing to do, copied in one tight loop (most of the text)
        while (CLASSES[c] & SCAN_STOP) == 0:
            out[n] = c
            n += 1
            i += 1
            if i >= e:
                return n, layout
            c = src[i]
        if c == 100:  # d
            if not layout and i + 3 < e and src[i + 3] == 32:  # "d?? "
                layout = _at(src, i, e, GET_INPUTS)
            out[n] = c
            n += 1
            i += 1
            continue
        if c == _HASH:
            out[n] = _DQ
            n += 1
            if _at(src, i, e, marker):
                return n, layout
            while i < e and src[i] != _NL:
                i += 1
            continue
        if _at3(src, i, e, c):
            j = _triple_end(src, i + 3, e, c)
            if j >= 0:
                out[n] = _DQ
                n += 1
                i = j
                continue
        # a one-line literal, copied with its brackets masked while it is read; one that
        # does not close on its line is undone: its quote is an ordinary byte
        n0 = n
        out[n] = c
        n += 1
        j = i + 1
        closed = False
        while j < e:
            b = src[j]
            out[n] = IN_STRING[b]
            n += 1
            j += 1
            if b == _BSL:
                if j < e:
                    out[n] = IN_STRING[src[j]]
                    n += 1
                    j += 1
            elif b == c:
                closed = True
                break
            elif b == _NL:
                break
        if closed:
            i = j
        else:
            n = n0
            out[n] = c
            n += 1
            i += 1
    return n, layout


@njit(nogil=True, cache=True)
def _skip_blanks(src, i, n) -> int:
    while i < n and (CLASSES[src[i]] & BLANK) != 0:
        i += 1
    return i


@njit(nogil=True, cache=True)
def _input_func_head(src, i, n) -> int:
    """End of ``def[ \\t]+get_(init_)?inputs\\b`` or ``if[ \\t]+__name__\\b`` at ``i``, or -1."""
    if i + 2 < n and src[i] == 100 and src[i + 1] == 101 and src[i + 2] == 102:  # def
        q = _skip_blanks(src, i + 3, n)
        if q == i + 3 or not _at(src, q, n, _GET_B):
            return -1
        q += 4
        if _at(src, q, n, _INIT_INPUTS_B):
            q += 11
        elif _at(src, q, n, _INPUTS_B):
            q += 6
        else:
            return -1
    elif i + 1 < n and src[i] == 105 and src[i + 1] == 102:  # if
        q = _skip_blanks(src, i + 2, n)
        if q == i + 2 or not _at(src, q, n, _DUNDER_NAME_B):
            return -1
        q += 8
    else:
        return -1
    if q < n and is_word(src[q]):
        return -1
    return q


@njit(nogil=True, cache=True)
def _input_func_end(src, i, n) -> int:
    """End of the input-function match starting at line start ``i``, or -1."""
    p = _input_func_head(src, i, n)
    if p < 0:
        return -1
    while p < n and src[p] != _NL:
        p += 1
    while p < n:  # src[p] is a newline
        q = p + 1
        if q < n and _blank(src[q]):  # an indented line
            while q < n and src[q] != _NL:
                q += 1
            p = q
        elif q >= n:  # a newline at the end
            p = q
        elif src[q] == _NL:  # a blank line: both newlines go
            p = q + 1
        else:
            break
    return p


@njit(nogil=True, cache=True)
def _import_end(src, i, n) -> int:
    """End of an import statement starting at line start ``i``, or -1."""
    p = i
    if _at(src, p, n, _FROM_B):
        r = _skip_blanks(src, p + 4, n)
        if r > p + 4:
            t = r
            while t < n and ((CLASSES[src[t]] & WORD) != 0 or src[t] == 46):
                t += 1
            if t > r:
                u = _skip_blanks(src, t, n)
                if u > t:
                    p = u
    if not _at(src, p, n, _IMPORT_B):
        return -1
    r = _skip_blanks(src, p + 6, n)
    if r == p + 6:
        return -1
    if r < n and src[r] == 40:  # ( ... ) over lines, to the first )
        t = r + 1
        while t < n and src[t] != 41:
            t += 1
        if t < n:
            return t + 1
    while r < n and src[r] != _NL:
        r += 1
    return r


@njit(nogil=True, cache=True)
def _numeric_assign_end(src, i, n) -> int:
    """End (the line's end) of ``NAME = <numbers, names, arithmetic>`` at ``i``, or -1."""
    if i >= n or (CLASSES[src[i]] & NAME_START) == 0:
        return -1
    p = i + 1
    while p < n and (CLASSES[src[p]] & WORD) != 0:
        p += 1
    p = _skip_blanks(src, p, n)
    if p >= n or src[p] != 61:
        return -1
    p = _skip_blanks(src, p + 1, n)
    depth = 0  # parentheses: `X = (` opening a multi-line tuple of dicts is not a number
    while True:
        if p >= n or src[p] == _NL:
            return p if depth == 0 else -1
        cls = CLASSES[src[p]]
        if cls & NUMERIC:
            depth += (src[p] == 40) - (src[p] == 41)
            p += 1
        elif cls & NAME_START:
            p += 1
            while p < n and (CLASSES[src[p]] & WORD) != 0:
                p += 1
            p = _skip_blanks(src, p, n)
            if p >= n or src[p] == _NL:
                return p if depth == 0 else -1
            if (CLASSES[src[p]] & AFTER_NAME) == 0:
                return -1
            depth += (src[p] == 40) - (src[p] == 41)
            p += 1
        else:
            return -1


@njit(nogil=True, cache=True)
def _copy_line(src, i, n, out, m):
    """Copy ``src[i:]`` up to and including its next newline to ``out[m:]``; returns the
    new ``(i, m)``."""
    while i < n:
        c = src[i]
        out[m] = c
        m += 1
        i += 1
        if c == _NL:
            break
    return i, m


@njit(nogil=True, cache=True)
def drop_input_funcs(src, n, out) -> int:
    """Step 2 on ``src[:n]`` into ``out``; returns the bytes written."""
    m = 0
    i = 0
    while i < n:  # i is at a line start
        if src[i] == 100 or src[i] == 105:
            j = _input_func_end(src, i, n)
            if j > i:
                i = j
                if src[i - 1] == _NL:
                    continue
        i, m = _copy_line(src, i, n, out, m)
    return m


@njit(nogil=True, cache=True)
def drop_imports_and_numbers(src, n, out) -> int:
    """Steps 3 and 4 on ``src[:n]`` into ``out`` in one scan; returns the bytes written.

    Step 4 reads step 3's output: where an import ends inside a line, what follows it
    starts a line there, so it is tried as a numeric assignment too."""
    m = 0
    i = 0
    while i < n:  # i is at a line start of both passes' input
        i = _skip_import_and_number(src, i, n)
        i, m = _copy_line(src, i, n, out, m)
    return m


@njit(nogil=True, cache=True)
def _skip_import_and_number(src, i, n) -> int:
    """Past an import (step 3) and then a numeric assignment (step 4) starting at line start
    ``i``; ``i`` itself when neither starts there."""
    if (CLASSES[src[i]] & NAME_START) != 0:
        if src[i] == 102 or src[i] == 105:  # f, i
            j = _import_end(src, i, n)
            if j > i:
                i = j
        j = _numeric_assign_end(src, i, n)
        if j > i:
            i = j
    return i


@njit(nogil=True, cache=True)
def strip_doc(marker, src, s, e, out, tmp) -> int:
    """Steps 1-4 on ``src[s:e]``; the result is ``out[:returned length]``.

    Args:
        marker: :data:`MARKER`.
        out, tmp: ``uint8`` buffers of at least ``e - s`` bytes (``tmp`` is scratch).
    """
    n, layout = strip_comments(src, s, e, marker, tmp)
    if layout:
        n = drop_input_funcs(tmp, n, out)
        tmp[:n] = out[:n]
    return drop_imports_and_numbers(tmp, n, out)


@njit(nogil=True, cache=True)
def tokenize(text, n, starts, lens, first) -> int:
    """Tokens of ``text[:n]``: their offsets, lengths and first bytes into ``starts``,
    ``lens`` (``int64``) and ``first`` (``uint8``), each at least ``n`` long; returns
    how many."""
    t = 0
    i = 0
    while i < n:
        c = text[i]
        if CLASSES[c] & WORD:
            j = i + 1
            while j < n and (CLASSES[text[j]] & WORD) != 0:
                j += 1
            starts[t] = i
            lens[t] = j - i
            first[t] = c
            t += 1
            i = j
        else:
            if c > 32:
                starts[t] = i
                lens[t] = 1
                first[t] = c
                t += 1
            i += 1
    return t


@njit(nogil=True, cache=True)
def _tokenize_line(text, i, n, t, starts, lens, first, counts):
    """:func:`tokenize` of ``text[i:n]`` up to its next newline (offsets into ``text``),
    appending from token ``t``, and the bracket counts of
    :func:`curate.dedup.tokenpass.brackets` added to ``counts``; returns ``(new token
    count, index of that newline or n)``. ``text[n]`` is ``0``, which ends every word
    (no bound check in the loop over a word's bytes)."""
    while True:
        c = text[i]
        if CLASSES[c] & WORD:
            k = i + 1
            while (CLASSES[text[k]] & WORD) != 0:
                k += 1
            starts[t] = i
            lens[t] = k - i
            first[t] = c
            t += 1
            i = k
        elif c > 32:
            starts[t] = i
            lens[t] = 1
            first[t] = c
            t += 1
            delta = BRACKET_DELTA[c]
            if delta != 0:
                counts[BRACKET_KIND[c]] += delta
            i += 1
        elif c == _NL or i >= n:
            return t, i
        else:
            i += 1


@njit(nogil=True, cache=True)
def strip_tokenize(marker, src, s, e, text, tmp, starts, lens, first, counts):
    """:func:`strip_doc` then :func:`tokenize`, with steps 3 and 4 read during
    tokenizing instead of written out: the tokens are those of :func:`strip_doc`'s text,
    their offsets into ``text`` (the text after steps 1-2, which the caller reads the
    tokens from). A dropped line starts after a newline and ends at one (or at an
    import's closing ``)``), so no two tokens become adjacent by it and the byte before a
    token is the same but for a dropped import's ``)``, which is no blank either.

    ``counts`` (3 ``int64``) gets the tokens' bracket balance, as
    :func:`curate.dedup.tokenpass.brackets` counts it. ``text`` and ``tmp`` hold at least
    ``e - s + 1`` bytes (a ``0`` is written after the text).

    Returns:
        ``(tokens, length of text)``.
    """
    counts[:] = 0
    n, layout = strip_comments(src, s, e, marker, text)
    if layout:
        n = drop_input_funcs(text, n, tmp)
        text[:n] = tmp[:n]
    text[n] = 0  # ends _tokenize_line's last word
    t = 0
    i = 0
    while i < n:  # i is at a line start, as drop_imports_and_numbers walks
        i = _skip_import_and_number(text, i, n)
        t, j = _tokenize_line(text, i, n, t, starts, lens, first, counts)
        i = j + 1 if j < n else j
    return t, n
