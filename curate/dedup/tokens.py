"""Token-level normalization and 5-gram shingles, vectorized with polars and numpy.

What dedup compares of a problem, computed for a whole batch of documents at once
instead of parsing each file: the standard library's ``ast`` reads about 6 MB/s per core
(DESIGN.md section 5), too slow for 10^7 problems. One Rust regex pass (polars) strips
each document; everything after runs in numpy over one flat byte buffer and one flat
array of token hashes. The steps, per document:

1. cut the generated inputs block (from :data:`curate.problem.INPUTS_MARKER` on); in a
   file in KernelBench's own layout, also the input functions ``get_inputs`` and
   ``get_init_inputs`` and an ``if __name__ ...`` block; and module-level assignments of
   numbers and plain names (``batch_size = 16``, ``N = 2048 * 2``): shapes do not count;
   and import statements at column 0 (the names they bind stay where they are used);
2. drop comments, docstrings and other triple-quoted strings; one-line string literals
   stay (their words are tokens; an f-string's names are renamed like code);
3. split into tokens: identifiers (runs of letters, digits, ``_`` and non-ASCII bytes)
   and single punctuation characters; formatting and blank lines vanish;
4. rename: every identifier becomes the placeholder :data:`PLACEHOLDER` except
   keywords, builtins, conventional module names (``torch``, ``nn``, ``F``) and torch's
   public names (:mod:`curate.dedup.vocab_data`); after a dot, torch's attribute names
   stay (``x.view``, ``F.relu``, ``nn.Conv2d``) unless the dot follows ``self``
   (``self.norm`` is the user's layer); a class the document defines is renamed even
   when torch has one of that name. Renamed variables, classes, parameters and layers do
   not count; the API calls a module makes do.

Results per document (:class:`TokenBatch`):

- ``norm_hash``: 32 hex characters (blake2b-128), *independent of the order of methods
  and top-level definitions*: the renamed tokens are cut into chunks before every
  ``def``, ``class`` and ``@``, each chunk is hashed, and the sorted chunk hashes are
  hashed. Equal hashes are exact duplicates.
- shingles: 64-bit hashes of every 5 consecutive renamed tokens; a document of fewer
  than 5 tokens has one shingle of all its tokens.
- ops: ids (into :data:`OP_NAMES`) of the op names the document mentions, in text order
  (``nn.Conv2d``, ``F.relu``, ``x.softmax``, a bare ``Linear``, not ``self.<name>``; and
  the arithmetic operators ``+ - * /``): a
  cheap structural reading that keeps near-duplicates computing different things apart
  (torch's ``ReLU`` and ``Mish`` differ in one name) and preselects documents for the
  parsed op sequence of :mod:`curate.dedup.ops`.
- ``error``: non-empty when the document cannot be Python: not a string, no code, or
  unbalanced brackets. A token-level check, not a parse: a subtler syntax error passes
  here (dedup parses the documents that need a parsed tree, and its ``parse_check``
  option parses all).

Hashes are defined on bytes (a token's bytes read as little-endian 64-bit words, mixed
with splitmix64's finalizer, Steele, Lea and Flood 2014), so they do not depend on the
polars or numpy version.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import polars as pl

from curate.dedup import vocab_data
from curate.problem import INPUTS_MARKER

SHINGLE = 5
"""Tokens per shingle (5-grams, as BigCode and text-dedup use)."""
PLACEHOLDER = "_"

# One pass of plain replacements (a replacement without group references runs about 3x
# faster: no capture groups to resolve): the inputs block (to the end), triple-quoted
# strings and comments all become one quote, which the tokenizer drops with the other
# delimiters after using it to drop a string prefix glued to it (``r"""``). One-line
# string literals stay and are tokenized. A triple-quoted string is written with negated
# classes (no run of three quotes inside, not ending in a quote): it matches what the lazy
# ``"""(?s:.*?)"""`` matches, and runs faster.
_STRIP = ("(?s:" + INPUTS_MARKER.replace("(", r"\(").replace(")", r"\)") + ".*)"
          + "|" + r'"""[^"]*(?:"{1,2}[^"]+)*"""' + "|" + r"'''[^']*(?:'{1,2}[^']+)*'''"
          + "|" + r"#[^\n]*")
_KERNELBENCH_LAYOUT = "def get_inputs"
_INPUT_FUNCS = (r"(?m)^(?:def[ \t]+get_(?:init_)?inputs\b|if[ \t]+__name__\b)"
                r"[^\n]*(?:\n[ \t]+[^\n]*|\n[ \t]*(?:\n|$))*")
# Import statements at column 0 (with a parenthesized name list over several lines), and
# ``NAME = <numbers, plain names, arithmetic>`` at column 0 (a call or a dotted name keeps
# the line); two passes, each faster than their alternation
_IMPORTS = r"(?m)^(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)"
_NUMERIC_ASSIGN = (r"(?m)^[A-Za-z_]\w*[ \t]*=[ \t]*"
                   r"(?:[0-9 \t()+\-*/%,.]|[A-Za-z_]\w*[ \t]*(?:[,)+\-*/%]|$))*$")

_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xBF58476D1CE4E5B9)
_K3 = np.uint64(0x94D049BB133111EB)
# one odd multiplier per position in a shingle
_POS = np.array([0xA0761D6478BD642F, 0xE7037ED1A0B428DB, 0x8EBC6AF09C88C6E3,
                 0x589965CC75374CC3, 0x1D8E4E27C47D124F], dtype=np.uint64)
_LOW = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_S29, _S32 = np.uint64(29), np.uint64(32)


def mix64(x: np.ndarray) -> np.ndarray:
    """A 64-bit finalizer (xorshift-multiply, as splitmix64's), elementwise on ``uint64``;
    returns a new array."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> _S32)
        x *= _K2
        x ^= x >> _S29
        x *= _K3
        x ^= x >> _S32
    return x


def _hash_spans(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``uint64`` hash of each byte span ``buf[starts[k]:starts[k] + lens[k]]``: its bytes
    as little-endian 64-bit words, each xor-ed in and multiplied (as FxHash does), the
    length folded in first. ``buf`` must end with 8 zero bytes (reads are 8 bytes wide)."""
    words = np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
    with np.errstate(over="ignore"):
        h = words[starts]
        h &= _LOW[np.minimum(lens, 8)]
        h ^= lens.astype(np.uint64) << np.uint64(56)
        h *= _K1
        long = np.flatnonzero(lens > 8)
        off = 8
        while len(long):
            rest = lens[long] - off
            part = words[starts[long] + off] & _LOW[np.minimum(rest, 8)]
            h[long] = ((h[long] ^ (h[long] >> _S29)) ^ part) * _K1
            off += 8
            long = long[rest > 8]
    return h


def hash_tokens(tokens: list[str]) -> np.ndarray:
    """The hashes :func:`normalize_batch` gives ``tokens`` (before renaming), ``uint64``."""
    data = [t.encode() for t in tokens]
    lens = np.array([len(d) for d in data], dtype=np.int64)
    buf = np.frombuffer(b"".join(data) + bytes(8), dtype=np.uint8)
    return _hash_spans(buf, np.cumsum(lens) - lens, lens)


def hash_token(token: str) -> np.uint64:
    """:func:`hash_tokens` of one token."""
    return hash_tokens([token])[0]


class _Table:
    """Token hash -> vocabulary flags and op id: a table of 2**16 slots indexed by the
    hash's top bits, one probe per lookup; the few entries whose slot is taken go to a
    small overflow array searched only for tokens that land on such a slot."""

    BITS = 16

    def __init__(self, entries: dict[str, tuple[int, int]]):
        size = 1 << self.BITS
        self.keys = np.zeros(size, dtype=np.uint64)
        self.flags = np.zeros(size, dtype=np.uint8)
        self.op = np.full(size, -1, dtype=np.int32)
        self.crowded = np.zeros(size, dtype=bool)
        over: list[tuple[np.uint64, int, int]] = []
        tokens = sorted(entries)
        for token, h in zip(tokens, hash_tokens(tokens)):
            flags, op = entries[token]
            slot = int(h >> np.uint64(64 - self.BITS))
            if self.keys[slot] == 0:
                self.keys[slot], self.flags[slot], self.op[slot] = h, flags, op
            else:
                self.crowded[slot] = True
                over.append((h, flags, op))
        self.over_keys = np.array([o[0] for o in over], dtype=np.uint64)
        self.over_flags = np.array([o[1] for o in over], dtype=np.uint8)
        self.over_op = np.array([o[2] for o in over], dtype=np.int32)

    def lookup(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(flags uint8, op int32)`` of each hash (0 and -1 when absent)."""
        slot = (h >> np.uint64(64 - self.BITS)).astype(np.intp)
        hit = self.keys[slot] == h
        flags = np.where(hit, self.flags[slot], np.uint8(0))
        op = np.where(hit, self.op[slot], np.int32(-1))
        if len(self.over_keys):
            miss = np.flatnonzero(~hit & self.crowded[slot])
            for k, key in enumerate(self.over_keys):
                found = miss[h[miss] == key]
                flags[found] = self.over_flags[k]
                op[found] = self.over_op[k]
        return flags, op


_DELIMITER = np.zeros(256, dtype=bool)
_DELIMITER[list(b"()[]{},:;.\"'`")] = True
_QUOTE = np.zeros(256, dtype=bool)
_QUOTE[list(b"\"'")] = True
_PREFIX_BYTE = np.zeros(256, dtype=bool)
_PREFIX_BYTE[list(b"rRbBuUfF")] = True
_WORD_BYTE = np.zeros(256, dtype=bool)
_WORD_BYTE[list(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")] = True
_WORD_BYTE[128:] = True
_INDENT = np.array([32, 9], dtype=np.uint8)
_OPENER = np.zeros(256, dtype=bool)  # what precedes a unary operator
_OPENER[list(b"(,=[:{")] = True
_BRACKET_WEIGHT = np.zeros(256, dtype=np.int64)
for _k, _pair in enumerate((b"()", b"[]", b"{}")):
    _BRACKET_WEIGHT[_pair[0]], _BRACKET_WEIGHT[_pair[1]] = 1 << (20 * _k), -(1 << (20 * _k))

NAME, ATTR = 1, 2
ARITHMETIC_TOKENS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
"""Operator tokens read as ops (``**`` reads as two ``mul``; ``@`` is left out: it also
starts every decorator)."""
OP_NAMES: tuple[str, ...] = tuple(sorted(set(vocab_data.OPS.values())))
"""Canonical op names; a document's ``ops`` are indices into this tuple."""


def _vocabulary() -> _Table:
    op_id = {op: k for k, op in enumerate(OP_NAMES)}
    entries: dict[str, tuple[int, int]] = {}
    for name in vocab_data.NAMES:
        entries[name] = (NAME, -1)
    for name in vocab_data.ATTRS:
        entries[name] = (entries.get(name, (0, -1))[0] | ATTR, -1)
    for raw, op in vocab_data.OPS.items():
        entries[raw] = (entries.get(raw, (0, -1))[0], op_id[op])
    for raw, op in ARITHMETIC_TOKENS.items():
        entries[raw] = (0, op_id[op])
    return _Table(entries)


_VOCAB = _vocabulary()
_H = dict(zip((PLACEHOLDER, "self", "class", "def", "@"),
              hash_tokens([PLACEHOLDER, "self", "class", "def", "@"])))


@dataclass
class TokenBatch:
    """Normalized tokens of ``n`` documents, flat.

    Attributes:
        norm_hash: ``n`` hex strings, ``None`` where ``error`` is set.
        error: ``n`` strings, ``""`` for a usable document.
        n_tokens: ``(n,)`` ``int64``, tokens per document (0 on error).
        shingles: ``uint64`` shingle hashes of all documents, concatenated.
        shingle_offsets: ``(n + 1,)`` ``int64``; document ``i`` owns
            ``shingles[shingle_offsets[i]:shingle_offsets[i + 1]]`` (may repeat a value).
        ops: ``int32`` op ids (:data:`OP_NAMES`) of all documents, concatenated.
        op_offsets: ``(n + 1,)`` ``int64``, as ``shingle_offsets``.
    """

    norm_hash: list[str | None]
    error: list[str]
    n_tokens: np.ndarray
    shingles: np.ndarray
    shingle_offsets: np.ndarray
    ops: np.ndarray
    op_offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.error)

    def shingle_set(self, i: int) -> np.ndarray:
        """Sorted distinct shingle hashes of document ``i``."""
        return np.unique(self.shingles[self.shingle_offsets[i]:self.shingle_offsets[i + 1]])

    def op_names(self, i: int) -> tuple[str, ...]:
        """Op names document ``i`` mentions, in text order."""
        return tuple(OP_NAMES[k] for k in self.ops[self.op_offsets[i]:self.op_offsets[i + 1]])


def strip(codes: pl.Series) -> pl.Series:
    """Steps 1 and 2 on a String series (the text that is tokenized)."""
    s = codes.str.replace_all(_STRIP, '"')
    layout = s.str.contains(_KERNELBENCH_LAYOUT, literal=True)
    if layout.any():
        idx = layout.arg_true()
        s = s.scatter(idx, s.gather(idx).str.replace_all(_INPUT_FUNCS, ""))
    return s.str.replace_all(_IMPORTS, "").str.replace_all(_NUMERIC_ASSIGN, "")


def _tokenize(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, lens)`` of the tokens of ``buf`` (``uint8``): runs of word bytes, and
    single punctuation bytes; bytes <= 32 separate."""
    if not len(buf):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    with np.errstate(over="ignore"):
        word = ((buf | np.uint8(32)) - np.uint8(97)) < 26
        word |= (buf - np.uint8(48)) < 10
        word |= buf == 95
        word |= buf >= 128
    punct = buf > 32
    punct &= ~word
    edge = np.empty_like(word)
    edge[0] = word[0]
    np.not_equal(word[1:], word[:-1], out=edge[1:])
    starts_mask = edge & word
    starts_mask |= punct
    ends_mask = np.empty_like(word)
    ends_mask[-1] = word[-1]
    np.greater(word[:-1], word[1:], out=ends_mask[:-1])  # last byte of a word run
    ends_mask |= punct
    starts = np.flatnonzero(starts_mask)
    return starts, np.flatnonzero(ends_mask) + 1 - starts


def _renamed_tokens(codes: list):
    """Steps 1-4 for ``codes``: ``(errors, buf, starts, lens, raw hashes, renamed hashes,
    op ids, tokens per document)``, the tokens of erroneous documents left out."""
    n = len(codes)
    text = strip(pl.Series("code", [c if isinstance(c, str) else "" for c in codes], dtype=pl.String))
    raw = b"\n".join(text.cast(pl.Binary).to_list())  # bytes: no str decode and encode
    buf = np.frombuffer(raw + bytes(8), dtype=np.uint8)  # 8 zero bytes for 8-byte reads
    doc_starts = _bounds(text.str.len_bytes().to_numpy().astype(np.int64) + 1)
    starts, lens = _tokenize(buf[:len(raw)])
    first = buf[starts]
    errors = _errors(codes, first, np.searchsorted(starts, doc_starts))

    # Delimiters (brackets, commas, colons, dots, quotes) leave the token stream, after
    # marking the token a dot precedes; a string prefix glued to its quote goes too.
    dot = first == 46
    attr = np.zeros(len(first), dtype=bool)
    attr[1:] = dot[:-1]
    # an attribute whose object is a plain name right before the dot (``me.norm``, not
    # ``f(x).norm``): _rename compares that name with the method's first parameter
    plain = np.zeros(len(first), dtype=bool)
    plain[2:] = attr[2:] & (starts[:-2] + lens[:-2] == starts[1:-1]) & _WORD_BYTE[first[:-2]]
    # a name bound with ``=`` (an assignment, a parameter default, a keyword) is the
    # document's own even when torch has one of that name (``reduce=None``)
    eq = (first == 61) & (lens == 1)
    bound = np.zeros(len(first), dtype=bool)
    bound[:-2] = _WORD_BYTE[first[:-2]] & eq[1:-1] & ~eq[2:] & ~attr[:-2]
    keep = ~_DELIMITER[first]
    # operators that compute nothing: ``->``, unpacking ``*args``/``**kw``, a unary minus
    prev = np.zeros(len(first), dtype=np.uint8)
    prev[1:] = first[:-1]
    adjacent = np.zeros(len(first), dtype=bool)
    adjacent[1:] = starts[:-1] + lens[:-1] == starts[1:]
    star, minus = first == 42, first == 45
    unpack = star & _OPENER[prev]
    unpack[1:] |= star[1:] & unpack[:-1] & adjacent[1:]
    arrow = minus.copy()
    arrow[:-1] &= (first[1:] == 62) & adjacent[1:]
    arrow[-1:] = False
    keep &= ~(unpack | arrow | (minus & _OPENER[prev]))
    keep[1:] &= ~((first[1:] == 62) & arrow[:-1])
    glued = np.flatnonzero(keep[:-1] & (lens[:-1] <= 2) & _QUOTE[first[1:]]
                           & (starts[:-1] + lens[:-1] == starts[1:]))
    if len(glued):
        second = buf[starts[glued] + 1]
        prefix = _PREFIX_BYTE[first[glued]] & ((lens[glued] == 1) | _PREFIX_BYTE[second])
        keep[glued[prefix]] = False
    bad = np.fromiter(map(bool, errors), dtype=bool, count=n)
    if bad.any():
        keep &= ~np.repeat(bad, np.diff(np.searchsorted(starts, doc_starts)))
    idx = np.flatnonzero(keep)
    starts, lens, first = starts.take(idx), lens.take(idx), first.take(idx)
    attr, plain, bound = attr.take(idx), plain.take(idx), bound.take(idx)
    tok_lens = np.diff(np.searchsorted(starts, doc_starts))
    offsets = _bounds(tok_lens)
    h = _hash_spans(buf, starts, lens)
    chunk_start = _chunks(h, offsets)
    self_attr = _self_attributes(buf, starts, h, plain, chunk_start)
    mapped, ops = _rename(first, h, attr, self_attr, bound, offsets)
    return errors, buf, starts, lens, h, mapped, ops, tok_lens, chunk_start


def normalize_batch(codes: list) -> TokenBatch:
    """Normalize, tokenize, shingle and read the ops of ``codes`` (see the module docstring).

    Fastest in batches of a few hundred documents, whose arrays stay in the CPU caches.

    Args:
        codes: documents; anything that is not a ``str`` gets an ``error``.
    Returns:
        A :class:`TokenBatch` of ``len(codes)`` documents.
    """
    n = len(codes)
    errors, _, _, _, h, mapped, ops, tok_lens, chunk_start = _renamed_tokens(codes)
    offsets = _bounds(tok_lens)
    has_op = np.flatnonzero(ops >= 0)
    norm_hash: list[str | None] = _norm_hashes(mapped, chunk_start, offsets)
    for i, e in enumerate(errors):
        if e:
            norm_hash[i] = None
    shingles, shingle_offsets = shingle_hashes(mapped, tok_lens)
    op_doc = np.searchsorted(offsets, has_op, "right") - 1
    return TokenBatch(norm_hash, errors, tok_lens.astype(np.int64), shingles, shingle_offsets,
                      ops[has_op], _bounds(np.bincount(op_doc, minlength=n)))


def normalized_tokens(code: str) -> list[str]:
    """The renamed tokens of one document, as text (what the shingles hash), for reading
    and testing; ``[]`` when it is not usable code."""
    errors, buf, starts, lens, h, mapped, _, _, _ = _renamed_tokens([code])
    if errors[0]:
        return []
    data = buf.tobytes()
    return [PLACEHOLDER if m != r else data[s:s + n].decode(errors="replace")
            for s, n, r, m in zip(starts.tolist(), lens.tolist(), h.tolist(), mapped.tolist())]


def _errors(codes: list, first: np.ndarray, bounds: np.ndarray) -> list[str]:
    """Why each document cannot be Python, from its tokens' first bytes (``""``: no reason);
    document ``i`` owns tokens ``bounds[i]:bounds[i + 1]``."""
    # one running sum: each bracket kind weighs a different power of 2**20
    weight = _BRACKET_WEIGHT[first]
    run = np.zeros(len(first) + 1, dtype=np.int64)
    np.cumsum(weight, out=run[1:])
    total = run[bounds[1:]] - run[bounds[:-1]]
    odd = (total != 0) | (bounds[1:] == bounds[:-1])
    if not odd.any() and all(type(c) is str for c in codes):
        return [""] * len(codes)  # the usual batch: no Python work per document
    out = []
    for i, code in enumerate(codes):
        if not odd[i] and isinstance(code, str):
            out.append("")
        elif not isinstance(code, str):
            out.append(f"code is {type(code).__name__}, not str")
        elif bounds[i + 1] == bounds[i]:
            out.append("no code")
        elif total[i]:
            part = first[bounds[i]:bounds[i + 1]]
            b = [int(np.count_nonzero(part == o)) - int(np.count_nonzero(part == c))
                 for o, c in (b"()", b"[]", b"{}")]
            out.append(f"unbalanced brackets: ( {b[0]:+d}, [ {b[1]:+d}, {{ {b[2]:+d}")
        else:
            out.append("")
    return out


def _bounds(lens: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=out[1:])
    return out


def _chunks(h: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Index of the first token of each token's chunk: chunks start at every ``def``,
    ``class`` and ``@`` token and at each document's first token."""
    cut = h == _H["def"]
    cut |= h == _H["class"]
    cut |= h == _H["@"]
    cut[offsets[:-1][offsets[:-1] < offsets[1:]]] = True
    starts = np.flatnonzero(cut)
    return starts[np.cumsum(cut) - 1] if len(h) else np.zeros(0, np.int64)


def _self_attributes(buf: np.ndarray, starts: np.ndarray, h: np.ndarray, plain: np.ndarray,
                     chunk_start: np.ndarray) -> np.ndarray:
    """Whether each token is an attribute of ``self``: of a plain name that is ``self`` or
    the first parameter of the indented ``def`` (a method) whose chunk holds it."""
    total = len(h)
    defs = np.flatnonzero(h == _H["def"])
    defs = defs[(defs + 2 < total) & np.isin(buf[np.maximum(starts[defs] - 1, 0)], _INDENT)]
    first_param = np.zeros(total, dtype=np.uint64)
    first_param[defs] = h[defs + 2]  # def <name> <first parameter>
    obj = np.flatnonzero(plain)
    out = np.zeros(total, dtype=bool)
    if len(obj):
        name = h[obj - 1]
        out[obj] = (name == _H["self"]) | (name == first_param[chunk_start[obj]])
    return out


def _rename(first: np.ndarray, h: np.ndarray, attr: np.ndarray, self_attr: np.ndarray,
            bound: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step 4: ``(renamed token hashes, op id or -1)`` per token, given each token's first
    byte, hash, whether a dot precedes it and whether that dot follows ``self``, whether
    ``=`` binds it, and the documents' token offsets."""
    total = len(h)
    flags, op = _VOCAB.lookup(h)
    with np.errstate(over="ignore"):
        upper = (first - np.uint8(65)) < 26
        ident = ((first | np.uint8(32)) - np.uint8(97)) < 26
    ident |= first == 95
    ident |= first >= 128
    attr_ok = (flags & ATTR) > 0
    attr_ok &= attr
    attr_ok &= ~self_attr
    name_ok = (flags & NAME) > 0
    name_ok &= ~attr
    # a name the document defines (``class <name>``) or binds with ``=`` is its own, even
    # when torch or Python has one of that name
    cand = np.flatnonzero(name_ok)
    after_class = np.zeros(total, dtype=bool)
    after_class[1:] = h[:-1] == _H["class"]
    after_class[offsets[:-1][offsets[:-1] < total]] = False
    own = np.flatnonzero((after_class | bound) & name_ok)
    if len(cand) and len(own):
        def key(idx: np.ndarray) -> np.ndarray:
            doc = (np.searchsorted(offsets, idx, "right") - 1).astype(np.uint64)
            with np.errstate(over="ignore"):
                return h[idx] ^ (doc * _K2)
        name_ok[cand[np.isin(key(cand), key(own))]] = False
    keep = attr_ok | name_ok
    keep |= ~ident
    mapped = np.where(keep, h, _H[PLACEHOLDER])
    # bare names are ops only as layer classes (``Linear``): a bare ``max`` is Python's;
    # operators (not identifiers) have an op only if arithmetic
    op_ok = name_ok & upper
    op_ok |= attr_ok
    op_ok |= ~ident
    return mapped, np.where(op_ok, op, np.int32(-1))


def shingle_hashes(hashes: np.ndarray, lens: np.ndarray, k: int = SHINGLE) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of every ``k`` consecutive tokens of each document.

    Args:
        hashes: ``uint64`` token hashes of all documents, concatenated.
        lens: ``(n,)`` tokens per document.
    Returns:
        ``(shingles, offsets)``: ``uint64`` shingle hashes, concatenated, and ``(n + 1,)``
        offsets. A document of ``0 < m < k`` tokens has one shingle (its ``m`` tokens).
    """
    starts = _bounds(lens)
    total = int(starts[-1])
    # windows that run past their document are dropped below; a short document's one
    # window is redone over its own tokens
    padded = np.concatenate([hashes, np.zeros(k - 1, dtype=np.uint64)])
    with np.errstate(over="ignore"):
        acc = padded[:total] * _POS[0]
        for j in range(1, k):
            acc += padded[j:j + total] * _POS[j]
        for i in np.flatnonzero((lens > 0) & (lens < k)):
            s, m = int(starts[i]), int(lens[i])
            acc[s] = np.sum(hashes[s:s + m] * _POS[:m], dtype=np.uint64)
    counts = np.where(lens >= k, lens - (k - 1), np.minimum(lens, 1))
    # drop each document's tail positions: +1 where its tail starts, -1 where it ends
    mark = np.zeros(total + 1, dtype=np.int32)
    np.add.at(mark, starts[:-1] + counts, 1)
    np.add.at(mark, starts[1:], -1)
    keep = np.cumsum(mark[:-1]) == 0
    return mix64(acc[keep]), _bounds(counts)


def _norm_hashes(mapped: np.ndarray, chunk_start: np.ndarray, offsets: np.ndarray) -> list[str | None]:
    """blake2b-128 of each document's sorted chunk hashes (see the module docstring)."""
    n = len(offsets) - 1
    total = len(mapped)
    starts = np.flatnonzero(chunk_start == np.arange(total))
    rel = (np.arange(total) - chunk_start).astype(np.uint64)
    with np.errstate(over="ignore"):
        rel *= _K3
        rel += mapped
        mixed = mix64(rel)
        sums = np.add.reduceat(mixed, starts) if total else np.zeros(0, np.uint64)
    chunk_doc = np.searchsorted(offsets, starts, "right") - 1
    order = np.lexsort((sums, chunk_doc))
    data = sums[order].tobytes()
    bounds = np.searchsorted(chunk_doc[order], np.arange(n + 1))
    return [hashlib.blake2b(data[8 * bounds[i]:8 * bounds[i + 1]], digest_size=16).hexdigest()
            for i in range(n)]
