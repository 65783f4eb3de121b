"""Decontamination: which problems are too close to a KernelBench problem.

A document is *contaminated* by a reference problem when either

- their MinHash-estimated Jaccard similarity (5-token shingles of the normalized forms,
  :mod:`.tokens`) is >= the contamination threshold **and** their ``Model.forward`` op
  sequences (:mod:`.ops`, read from the parse tree) agree: a copy, however renamed and
  reformatted. The ops agree when either sequence is incomplete (a call could not be
  resolved) or their ``difflib`` ratio is >= :data:`OPS_AGREEMENT`. Why the second
  condition: KernelBench's level-1 files share one template, so any one-line module
  (``return torch.exp(x)``) scores about 0.7 against ``19_ReLU``; similar text computing
  other ops is another problem. A long program (VGG16) with one layer changed still
  agrees (ratio 0.97); or
- their op sequences are identical, complete (every call resolved) and at least
  :data:`MIN_STRUCTURAL_OPS` long: the same computation written differently
  (``conv2d relu add`` is KernelBench ``level2/1_Conv2D_ReLU_BiasAdd``).

A one-op match does not contaminate: mined ``torch.nn.ReLU`` and KernelBench
``level1/19_ReLU`` (``torch.relu(x)``) share the op ``relu``, as every activation,
convolution or matmul wrapper in mined code shares it with a level-1 problem: rejecting
those would remove most of the single-op modules that torch.nn code is full of. The
match is reported in ``kernelbench_nearest`` instead, and a copy of the level-1 file is
still caught by MinHash. (For comparison, CUDA-Agent keeps tasks whose AST similarity to KernelBench is below
0.9; KernelBook only matched KernelBench names.)

Cost. Every document is compared with every reference signature (:func:`.minhash.query_pairs`);
parsing is the expensive part (:func:`.ops.forward_ops`, a few ms per problem), so only two
kinds of documents are parsed, by the worker that made their features
(:meth:`Screen.needs_forward`):

- those with a reference problem at MinHash similarity >= the threshold;
- *structural candidates*: the op names the document mentions (:mod:`.tokens`; arithmetic
  aside) include every op of a reference problem's sequence and nothing the reference file
  does not mention, each op at most once more often than the sequence runs it, and the
  document has an operator or call for each arithmetic op of the sequence. A rewrite
  of a KernelBench problem passes; a document whose file also mentions ops that no
  branch of the reference uses is not parsed, and so is not matched structurally.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Sequence

import numpy as np

from curate.dedup.features import Features, FeatureTable, featurize_chunk_table
from curate.dedup.minhash import SlotClasses, jaccard, query_pairs
from curate.dedup.ops import forward_ops, is_complete
from curate.dedup.reference import Reference
from curate.dedup.tokens import OP_NAMES, normalize_batch

MIN_STRUCTURAL_OPS = 2
OPS_AGREEMENT = 0.8
ARITHMETIC = frozenset({"add", "sub", "mul", "div", "matmul", "pow", "floordiv", "mod"})
_OP_ID = {op: k for k, op in enumerate(OP_NAMES)}
_ARITH_IDS = frozenset(_OP_ID[o] for o in ARITHMETIC if o in _OP_ID)


def ops_agree(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    """Whether two op sequences are compatible with one being a copy of the other:
    either is unknown, empty or incomplete, or their ``difflib.SequenceMatcher`` ratio is
    >= :data:`OPS_AGREEMENT`."""
    if not a or not b or not is_complete(a) or not is_complete(b):
        return True
    return a == b or SequenceMatcher(None, a, b, autojunk=False).ratio() >= OPS_AGREEMENT


def parse_forward(code: str) -> tuple[tuple[str, ...] | None, str]:
    """``(forward op sequence, "")``, or ``(None, why)`` when ``code`` does not parse."""
    try:
        return forward_ops(code), ""
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes in source
        return None, f"{type(exc).__name__}: {exc}"[:500]
    except RecursionError:
        return None, "RecursionError: nesting too deep to parse"
    except Exception:  # the op reading is a heuristic; without it only MinHash compares
        return ("?",), ""


@dataclass
class _Structure:
    """What a document's token-level op names must look like to possibly run reference
    problem ``k``'s op sequence (module docstring)."""

    k: int
    required: frozenset[int]
    allowed: frozenset[int]
    most: dict[int, int]
    arithmetic: frozenset[int]


@dataclass
class Screen:
    """The cheap part of matching against a reference, shipped to dedup's workers.

    Attributes:
        sigs: ``(m, num_perm)`` reference signatures.
        threshold: contamination threshold (estimated Jaccard).
        structures: :class:`_Structure` of each complete reference sequence of >= 1 op.
    """

    sigs: np.ndarray
    threshold: float
    structures: list[_Structure]
    sets: list[np.ndarray] = field(default_factory=list)
    _cache: dict = field(default_factory=dict, repr=False)
    _slots: SlotClasses | None = field(default=None, repr=False)

    def candidates(self, op_ids: np.ndarray) -> list[int]:
        """Reference problems whose op sequence a document with these token op ids might run."""
        counts = Counter(op_ids.tolist())
        names = frozenset(o for o in counts if o not in _ARITH_IDS)
        if not names:
            return []
        key = (names, frozenset(o for o in counts if o in _ARITH_IDS))
        if key not in self._cache:
            self._cache[key] = [s for s in self.structures
                                if s.required <= names <= s.allowed and s.arithmetic <= key[1]]
        return [s.k for s in self._cache[key]
                if all(counts[o] <= s.most.get(o, 0) + 1 for o in names)]

    def screen(self, table: FeatureTable, codes: Sequence[str] | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, set[int]]:
        """``(doc, ref, jaccard)`` arrays of the pairs at >= ``threshold``, and the set of
        documents to parse (those in a pair, and the structural candidates).

        With ``codes`` (and the reference's shingle ``sets``), every pair estimated at >=
        ``threshold -`` :data:`curate.dedup.exact.MARGIN` gets its exact Jaccard (few
        documents are that close to a reference problem)."""
        from curate.dedup.exact import MARGIN, sorted_set

        exact_ok = codes is not None or table.shingles is not None
        floor = self.threshold - MARGIN if exact_ok and self.sets else self.threshold
        if self._slots is None:  # built once per process, used for every chunk
            self._slots = SlotClasses(self.sigs)
        pairs = query_pairs(table.sigs, self.sigs, floor, slots=self._slots)
        i = np.array([p[0] for p in pairs], dtype=np.int64)
        j = np.array([p[1] for p in pairs], dtype=np.int64)
        sim = np.array([p[2] for p in pairs], dtype=np.float64)
        if floor < self.threshold:
            # every pair, not only those near the threshold: the exact figure also picks
            # the right one of close reference problems (conv_transposed_3D variants)
            unsure = np.arange(len(sim))
            if len(unsure):
                docs = sorted(set(i[unsure].tolist()))
                if table.shingles is not None:  # kept from the first pass
                    own = {d: sorted_set(table.shingles_of(d)) for d in docs}
                else:
                    batch = normalize_batch([codes[d] for d in docs])
                    own = {d: batch.shingle_set(k) for k, d in enumerate(docs)}
                for u in unsure.tolist():
                    x, y = own[int(i[u])], self.sets[int(j[u])]
                    inter = len(np.intersect1d(x, y, assume_unique=True))
                    sim[u] = inter / max(len(x) + len(y) - inter, 1)
            keep = sim >= self.threshold
            i, j, sim = i[keep], j[keep], sim[keep]
        todo = set(i.tolist())
        for d in range(len(table)):
            if table.error[d] or d in todo:
                continue
            if self.candidates(table.op_ids(d)):
                todo.add(d)
        return i, j, sim, todo


@dataclass
class Match:
    """A document's nearest reference problem.

    Attributes:
        label: ``level<N>/<name>`` of the reference problem.
        jaccard: estimated Jaccard similarity to it.
        how: ``"minhash"`` (similar text, agreeing ops), ``"ops"`` (same op sequence,
            >= 2 ops); not contaminating, only reported: ``"ops_single"`` (same single
            op) and ``"text"`` (similar text, other ops).
        ops: the reference problem's op sequence.
        twins: other reference problems with the same normalized code or the same shingle
            set (KernelBench has such sets: ``1_Square_matrix_multiplication_`` and
            ``2_Standard_...`` differ only in their input shapes), which the match cannot
            tell apart.
    """

    label: str
    jaccard: float
    how: str
    ops: tuple[str, ...] = ()
    twins: tuple[str, ...] = ()

    @property
    def contaminating(self) -> bool:
        return self.how in ("minhash", "ops")

    def describe(self, threshold: float) -> str:
        """``level2/1_Conv2D_ReLU_BiasAdd (same op sequence: conv2d relu add; ...)``."""
        if self.how in ("minhash", "text"):
            why = f"minhash jaccard {self.jaccard:.2f} >= {threshold:.2f}"
        else:
            why = f"same op sequence: {' '.join(self.ops)}; minhash jaccard {self.jaccard:.2f}"
        if self.twins:
            why += "; same normalized code as " + ", ".join(self.twins)
        return f"{self.label} ({why})"


def _shingle_sets(table: FeatureTable, codes: Sequence[str]) -> list[np.ndarray]:
    """Sorted distinct shingle hashes of each document of ``table``: from its kept
    shingles, else by normalizing ``codes`` again."""
    from curate.dedup.exact import sorted_set

    if table.shingles is not None:
        return [sorted_set(table.shingles_of(k)) for k in range(len(table))]
    batch = normalize_batch(list(codes))
    return [batch.shingle_set(k) for k in range(len(batch))]


@dataclass
class ReferenceIndex:
    """Reference problems' features, ready to match documents against.

    Attributes:
        reference: the problems.
        table: their token-level features and signatures.
        forward: each problem's parsed ``Model.forward`` op sequence (``None``: unparsed).
        by_ops: complete op sequence -> problems.
        by_hash: normalized hash -> problems.
        shingle_key, by_shingles: each problem's shingle set (as bytes), and set -> problems.
    """

    reference: Reference
    table: FeatureTable
    forward: list[tuple[str, ...] | None]
    by_ops: dict[tuple[str, ...], list[int]]
    by_hash: dict[str, list[int]]
    shingle_key: list[bytes] = field(default_factory=list)
    by_shingles: dict[bytes, list[int]] = field(default_factory=dict)

    @classmethod
    def build(cls, reference: Reference, num_perm: int, backend: str = "rminhash") -> "ReferenceIndex":
        table = featurize_chunk_table(reference.codes, num_perm, backend)
        forward = [parse_forward(c)[0] for c in reference.codes]
        by_ops: dict[tuple[str, ...], list[int]] = defaultdict(list)
        by_hash: dict[str, list[int]] = defaultdict(list)
        for j, ops in enumerate(forward):
            if ops and is_complete(ops):
                by_ops[ops].append(j)
            if table.norm_hash[j] is not None:
                by_hash[table.norm_hash[j]].append(j)
        # problems whose shingle sets are equal cannot be told apart by similarity either
        # (61_ and 73_conv_transposed_3D differ in one repeated ``stride=stride``)
        keys = [x.tobytes() for x in _shingle_sets(table, reference.codes)]
        by_shingles: dict[bytes, list[int]] = defaultdict(list)
        for j, key in enumerate(keys):
            by_shingles[key].append(j)
        return cls(reference, table, forward, dict(by_ops), dict(by_hash), keys, dict(by_shingles))

    def screen(self, threshold: float) -> Screen:
        """The :class:`Screen` for documents matched at ``threshold``."""
        structures = []
        for k, ops in enumerate(self.forward):
            if not ops or not is_complete(ops):
                continue
            required = frozenset(_OP_ID[o] for o in ops if o in _OP_ID and o not in ARITHMETIC)
            if not required:
                continue  # arithmetic only: no token-level name to look for
            mentioned = frozenset(int(o) for o in self.table.op_ids(k) if int(o) not in _ARITH_IDS)
            most = Counter(_OP_ID[o] for o in ops if o in _OP_ID and o not in ARITHMETIC)
            arithmetic = frozenset(_OP_ID[o] for o in ops if o in ARITHMETIC and o in _OP_ID
                                   and o in ("add", "sub", "mul", "div"))
            structures.append(_Structure(k, required, required | mentioned, dict(most), arithmetic))
        return Screen(self.table.sigs, threshold, structures,
                      _shingle_sets(self.table, self.reference.codes))

    def result(self, j: int, sim: float, how: str) -> Match:
        """The :class:`Match` of reference problem ``j``."""
        h = self.table.norm_hash[j]
        same = set(self.by_hash.get(h, ())) | set(self.by_shingles.get(self.shingle_key[j], ()))
        twins = tuple(self.reference.labels[k] for k in sorted(same) if k != j)
        return Match(self.reference.labels[j], sim, how, self.forward[j] or (), twins)

    @property
    def unparsed(self) -> list[str]:
        return [lab for lab, f in zip(self.reference.labels, self.forward) if f is None]


def match_pairs(n: int, sigs: np.ndarray, forward: dict[int, tuple[str, ...] | None],
                pairs: tuple[np.ndarray, np.ndarray, np.ndarray], index: ReferenceIndex) -> list[Match | None]:
    """The nearest reference problem of each of ``n`` documents, or ``None``.

    In order of precedence: the most similar problem among ``pairs`` (estimated Jaccard
    >= the threshold) whose ops agree (:func:`ops_agree`); the problem with the same
    complete op sequence and the most similar text; the most similar problem whose ops
    do not agree (``how="text"``). Ties go to the reference order.

    Args:
        n: documents.
        sigs: their ``(n, num_perm)`` signatures.
        forward: parsed op sequences of the documents that were parsed (others: unknown).
        pairs: ``(doc, ref, jaccard)`` arrays from :meth:`Screen.screen`.
    """
    agreeing: dict[int, tuple[bool, float, int]] = {}
    other: dict[int, tuple[bool, float, int]] = {}
    for i, j, sim in zip(*(a.tolist() for a in pairs)):
        a, b = forward.get(i), index.forward[j]
        pool = agreeing if ops_agree(a, b) else other
        # same ops first (VGG19 and VGG16 texts score alike), then similarity, then order
        key = (a is not None and a == b, sim, -j)
        if i not in pool or key > pool[i]:
            pool[i] = key
    best: list[Match | None] = [None] * n
    for i in range(n):
        if i in agreeing:
            _, sim, neg_j = agreeing[i]
            best[i] = index.result(-neg_j, sim, "minhash")
            continue
        ops = forward.get(i)
        same = index.by_ops.get(ops) if ops and is_complete(ops) else None
        if same:
            sims = jaccard(sigs[i], index.table.sigs[same])
            k = int(np.argmax(sims))  # first maximum: reference order breaks ties
            how = "ops" if len(ops) >= MIN_STRUCTURAL_OPS else "ops_single"
            best[i] = index.result(same[k], float(sims[k]), how)
        elif i in other:
            _, sim, neg_j = other[i]
            best[i] = index.result(-neg_j, sim, "text")
    return best


def match(features: Sequence[Features], sigs: np.ndarray, index: ReferenceIndex, threshold: float,
          codes: Sequence[str] | None = None) -> list[Match | None]:
    """:func:`match_pairs` for documents given as :class:`Features` (and their codes).

    The op sequences needed (documents with a similar reference problem, and structural
    candidates) are parsed from ``codes`` when their ``forward_ops`` is not set yet.
    """
    table = FeatureTable([f.norm_hash for f in features], [f.error for f in features],
                         np.array([f.n_tokens for f in features], dtype=np.int64),
                         np.array([_OP_ID[o] for f in features for o in f.ops], dtype=np.int32),
                         np.concatenate([[0], np.cumsum([len(f.ops) for f in features])]).astype(np.int64),
                         sigs)
    i, j, sim, todo = index.screen(threshold).screen(table, codes)
    forward: dict[int, tuple[str, ...] | None] = {}
    for d in todo:
        f = features[d]
        if f.forward_ops is None and codes is not None:
            f.forward_ops = parse_forward(codes[d])[0]
        forward[d] = f.forward_ops
    return match_pairs(len(features), sigs, forward, (i, j, sim), index)
