"""Token-level normalization and 5-gram shingles, one compiled pass per document.

What dedup compares of a problem, computed without parsing it: the standard library's
``ast`` reads under 4 MB per CPU-second (``docs/figures.md``), too slow for 10^7 problems.
A batch of documents goes to numba as one flat byte buffer (:mod:`.docpass`); each
document is stripped (:mod:`.textscan`) and its tokens hashed and renamed
(:mod:`.tokenpass`) in one pass, with the GIL released, so that threads can run batches
side by side. The steps, per document:

1. cut the generated inputs block (from :data:`curate.problem.INPUTS_MARKER` on); in a
   file in KernelBench's own layout, also the input functions ``get_inputs`` and
   ``get_init_inputs`` and an ``if __name__ ...`` block; and module-level assignments of
   numbers and plain names (``batch_size = 16``, ``N = 2048 * 2``): shapes do not count;
   and import statements at column 0 (the names they bind stay where they are used);
2. drop comments, docstrings and other triple-quoted strings; one-line string literals
   stay (their words are tokens; an f-string's names are renamed like code), and are
   read before comments: a ``#`` inside ``"a#b"`` starts no comment;
3. split into tokens: identifiers (runs of letters, digits, ``_`` and non-ASCII bytes)
   and single punctuation characters; formatting and blank lines vanish;
4. rename: every identifier becomes the placeholder :data:`PLACEHOLDER` except
   keywords, builtins, conventional module names (``torch``, ``nn``, ``F``) and torch's
   public names (:mod:`curate.dedup.vocab`); after a dot, torch's attribute names
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
numba or numpy version. Each document is normalized on its own: the result does not
depend on the batch it comes in.
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import blake2b
from typing import Sequence

import numpy as np
import polars as pl

from curate.dedup import docpass, tokenpass, vocab
from curate.dedup.textscan import MARKER

SHINGLE = tokenpass.SHINGLE
"""Tokens per shingle (5-grams, as BigCode and text-dedup use)."""
PLACEHOLDER = "_"

_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xBF58476D1CE4E5B9)
_K3 = np.uint64(0x94D049BB133111EB)
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


def hash_tokens(tokens: list[str]) -> np.ndarray:
    """``uint64`` hashes of ``tokens`` as :func:`normalize_batch` hashes them before
    renaming (:func:`curate.dedup.tokenpass.hash_span`, in numpy here): each token's bytes
    as little-endian 64-bit words, each xor-ed in and multiplied (as FxHash does), the
    length folded in first."""
    data = [t.encode() for t in tokens]
    lens = np.array([len(d) for d in data], dtype=np.int64)
    buf = np.frombuffer(b"".join(data) + bytes(8), dtype=np.uint8)
    starts = np.cumsum(lens) - lens
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


def hash_token(token: str) -> np.uint64:
    """:func:`hash_tokens` of one token."""
    return hash_tokens([token])[0]


NAME, ATTR = tokenpass.NAME, tokenpass.ATTR
ARITHMETIC_TOKENS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
"""Operator tokens read as ops (``**`` reads as two ``mul``; ``@`` is left out: it also
starts every decorator)."""
_VOCAB = vocab.load()
OP_NAMES: tuple[str, ...] = tuple(sorted(set(_VOCAB["ops"].values())))
"""Canonical op names; a document's ``ops`` are indices into this tuple."""


def _vocabulary() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    op_id = {op: k for k, op in enumerate(OP_NAMES)}
    entries: dict[str, tuple[int, int]] = {}
    for name in _VOCAB["names"]:
        entries[name] = (NAME, -1)
    for name in _VOCAB["attrs"]:
        entries[name] = (entries.get(name, (0, -1))[0] | ATTR, -1)
    for raw, op in _VOCAB["ops"].items():
        entries[raw] = (entries.get(raw, (0, -1))[0], op_id[op])
    for raw, op in ARITHMETIC_TOKENS.items():
        entries[raw] = (0, op_id[op])
    tokens = sorted(entries)
    hashes = hash_tokens(tokens)
    if len(np.unique(hashes)) != len(hashes):
        raise RuntimeError("two vocabulary tokens share a hash")
    return tokenpass.vocabulary_table(
        hashes, np.array([entries[t][0] for t in tokens], dtype=np.uint8),
        np.array([entries[t][1] for t in tokens], dtype=np.int32))


_VOCAB = _vocabulary()
# tokenpass.S_* order: placeholder, self, class, def, @
_SPECIAL = hash_tokens([PLACEHOLDER, "self", "class", "def", "@"])


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


def encode(codes: Sequence | pl.Series) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """The documents as compiled code reads them.

    Args:
        codes: ``str`` documents (a list, or a polars String Series, read through its
            Arrow buffers without making Python strings).
    Returns:
        ``(buf, offsets, not_str)``: the UTF-8 bytes of all documents as one read-only
        ``uint8`` array, ``(n + 1,)`` ``int64`` offsets, and the type name of each
        document that is not a ``str`` (empty there), by index.
    """
    if isinstance(codes, pl.Series):
        import pyarrow as pa

        arr = codes.cast(pl.String).to_arrow()
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if arr.type != pa.large_string():
            arr = arr.cast(pa.large_string())
        _, raw_offsets, data = arr.buffers()
        offsets = np.frombuffer(raw_offsets, dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
        offsets = offsets - offsets[0]
        base = np.frombuffer(raw_offsets, dtype=np.int64)[arr.offset]
        buf = np.frombuffer(data, dtype=np.uint8)[base:base + offsets[-1]] if data is not None \
            else np.frombuffer(b"", dtype=np.uint8)
        not_str = ({int(i): "NoneType" for i in np.flatnonzero(codes.is_null().to_numpy())}
                   if codes.null_count() else {})
        return buf, offsets, not_str
    parts = []
    not_str = {}
    for i, c in enumerate(codes):
        if type(c) is str:
            parts.append(c.encode("utf-8", "surrogatepass"))
        else:
            parts.append(b"")
            not_str[i] = type(c).__name__
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets, not_str


def _error(not_str: str | None, err: int, brackets: np.ndarray) -> str:
    if not_str is not None:
        return f"code is {not_str}, not str"
    if err == docpass.ERR_NO_CODE:
        return "no code"
    if err == docpass.ERR_BRACKETS:
        b = brackets.tolist()
        return f"unbalanced brackets: ( {b[0]:+d}, [ {b[1]:+d}, {{ {b[2]:+d}"
    return ""


def normalize_batch(codes: Sequence | pl.Series) -> TokenBatch:
    """Normalize, tokenize, shingle and read the ops of ``codes`` (see the module docstring).

    Runs in numba with the GIL released (after :func:`encode`), so threads may call it
    side by side. The first call in a process loads the compiled code from numba's cache
    (about 1-2 s, most of it numba's own start; tens of seconds the first time ever, to
    compile).

    Args:
        codes: documents (a list, or a polars String Series); anything that is not a
            ``str`` gets an ``error``.
    Returns:
        A :class:`TokenBatch` of ``len(codes)`` documents.
    """
    buf, offsets, not_str = encode(codes)
    err, brackets, n_tokens, sums, sum_off, shingles, sh_off, ops, op_off = docpass.run(
        buf, offsets, MARKER, _SPECIAL, *_VOCAB)
    # BLAKE2b-128 of each document's sorted chunk sums as little-endian bytes (about 1 us a
    # document; a compiled BLAKE2b inside the pass saved 1 ms per 5,900: benchmarks/cpu-dedup.md)
    data = sums.astype("<u8", copy=False).tobytes()
    cut = (sum_off * 8).tolist()
    norm_hash: list[str | None] = [blake2b(data[cut[i]:cut[i + 1]], digest_size=16).hexdigest()
                                   for i in range(len(cut) - 1)]
    errors = [""] * len(norm_hash)
    if not_str or err.any():
        for i in set(np.flatnonzero(err).tolist()) | set(not_str):
            errors[i] = _error(not_str.get(i), err[i], brackets[i])
            norm_hash[i] = None
    return TokenBatch(norm_hash, errors, n_tokens, shingles, sh_off, ops, op_off)


def normalized_tokens(code: str) -> list[str]:
    """The renamed tokens of one document, as text (what the shingles hash), for reading
    and testing; ``[]`` when it is not usable code."""
    if not isinstance(code, str):
        return []
    buf = encode([code])[0]
    text, starts, lens, h, mapped, err = docpass.inspect(buf, MARKER, _SPECIAL, *_VOCAB)
    if err:
        return []
    data = text.tobytes()
    return [PLACEHOLDER if m != r else data[s:s + n].decode(errors="replace")
            for s, n, r, m in zip(starts.tolist(), lens.tolist(), h.tolist(), mapped.tolist())]


def strip(codes: pl.Series | Sequence) -> pl.Series:
    """Steps 1 and 2 (:mod:`.textscan`) on each document: the text that is tokenized, as
    a String series (a document that is not a ``str`` gives ``""``)."""
    out = []
    for code in (codes.to_list() if isinstance(codes, pl.Series) else codes):
        buf = encode([code])[0]
        text = docpass.inspect(buf, MARKER, _SPECIAL, *_VOCAB)[0]
        out.append(text.tobytes().decode("utf-8", "surrogatepass"))
    return pl.Series("code", out, dtype=pl.String)
