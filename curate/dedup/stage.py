"""The ``dedup`` stage: exact dedup, MinHash-LSH near-dedup, KernelBench decontamination.

Reads the ``mine`` table (or ``source``) and writes ``OUT/dedup``. Steps:

1. normalize every problem's ``code`` at the token level (:mod:`.tokens`: comments,
   docstrings, string contents, formatting, the names of classes, functions, parameters,
   locals and layers, and the order of methods do not count) and hash it: equal hashes
   are exact duplicates;
2. MinHash signatures of the normalized tokens' 5-gram shingles (compiled R-MinHash, or
   datasketch with ``backend="datasketch"``), LSH banding for candidate pairs with Jaccard >=
   ``threshold`` (estimated, and computed exactly for the pairs estimated within 0.1 of
   the threshold: :mod:`.exact`), kept when the op names the two documents mention agree
   (:func:`ops_agree`: torch's ``ReLU`` and ``Mish`` differ by one op) and their
   cores are alike at ``threshold`` too (:mod:`.core`: the mined class and its wrapper,
   not the closure it shares with its library), clusters = connected components
   (:mod:`.minhash`); exact duplicates join their twin's cluster;
3. match every distinct document against KernelBench (:mod:`.decontaminate`): MinHash
   similarity >= ``contamination_threshold`` with agreeing ``forward`` op sequences, or
   an identical op sequence of >= 2 ops, contaminates; a one-op match (torch's ``ReLU``
   and ``level1/19_ReLU``) is only reported in ``kernelbench_nearest``.

Steps 1 and the cheap part of 3 run in chunks on all cores (:mod:`.features`: threads
running compiled code in this process; worker processes as well for a large input that
needs parsing).

Columns added (every row, kept or rejected):

=====================  =================================================================
dedup_cluster          str, the cluster's representative's ``problem_id`` (null if the
                       code is not usable)
is_representative      bool, this row represents its cluster
contaminated_by        str or null, ``level<N>/<name>`` of the KernelBench problem that
                       makes the row (or, for a representative, its cluster) contaminated
kernelbench_nearest    str or null, the nearest KernelBench problem found, contaminating
                       or not (a one-op match such as torch's ``ReLU`` -> ``level1/19_ReLU``,
                       or similar text computing other ops)
norm_hash              str or null, 32 hex characters of the normalized code
=====================  =================================================================

The representative of a cluster is its row with the shortest ``code``, then the smallest
``problem_id``: independent of row order. Kept rows are the representatives of clusters
with no contaminated member. Rejected, in this order of precedence:

- ``unparseable``: ``code`` missing, not code (no tokens, unbalanced brackets), or not
  valid Python where it was parsed (every row with ``parse_check``; otherwise the rows
  decontamination parses);
- ``contaminated``: the row matches a KernelBench problem (detail: the problem and the
  similarity), or it represents a cluster with a member that does;
- ``exact_duplicate`` / ``near_duplicate``: same normalized hash as / MinHash-similar to
  the representative (detail: its ``problem_id`` and the estimated Jaccard).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import polars as pl
from numba import njit

from curate.cpus import cpu_count
from curate.dedup import jit  # noqa: F401  (sets numba's cache folder before the decorations below)

from curate.dedup import exact
from curate.dedup.core import core_text
from curate.dedup.decontaminate import Match, ReferenceIndex, match_pairs
from curate.dedup.features import FeatureTable, featurize_table
from curate.dedup.minhash import BACKENDS, candidate_arrays, components, jaccard
from curate.dedup.reference import ReferenceUnavailable, resolve
from curate.dedup.tokens import normalize_batch
from curate.harness.stage import StageRun, stage
from curate.table import REJECT_COLUMNS, read_problems

__all__ = ["run", "ReferenceUnavailable"]

STAGE = "dedup"
OPS_AGREEMENT = 0.8
"""Least multiset overlap of two near-duplicates' op names (:func:`ops_agree`)."""
KEEP_SHINGLES_MAX_CODE_BYTES = 6 << 30
"""Up to this much code (bytes), the features keep every document's shingle hashes for
the exact check near the threshold (about 0.6 bytes per byte of code on mined problems,
held until the check is done); above it, the check normalizes the documents of unsure
pairs again (about 80 us per document) instead of holding them all."""


def _check(threshold: float, num_perm: int, contamination_threshold: float, backend: str) -> None:
    for name, v in (("threshold", threshold), ("contamination_threshold", contamination_threshold)):
        if not 0.0 < float(v) <= 1.0:
            raise ValueError(f"{name} must be in (0, 1], got {v}")
    if int(num_perm) < 2:
        raise ValueError(f"num_perm must be >= 2, got {num_perm}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")


def ops_agree(table: FeatureTable, rows_a: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
    """Whether each pair of documents mentions the same ops: their op-name multisets
    overlap by ``2 |A & B| / (|A| + |B|) >= OPS_AGREEMENT`` (``difflib``'s ``quick_ratio``),
    or either mentions none.

    Returns:
        ``bool`` array, one entry per pair.
    """
    return _ops_agree(np.ascontiguousarray(table.ops, dtype=np.int32),
                      np.ascontiguousarray(table.op_offsets, dtype=np.int64),
                      np.ascontiguousarray(rows_a, dtype=np.int64),
                      np.ascontiguousarray(rows_b, dtype=np.int64), OPS_AGREEMENT)


@njit(nogil=True, cache=True)
def _ops_agree(ops, offsets, rows_a, rows_b, agreement):
    """The multiset overlap counted in a table of op ids (one increment per op of the
    first document, one decrement per matched op of the second, then undone): no sorted
    copies per pair."""
    out = np.ones(len(rows_a), np.bool_)
    have = np.zeros(ops.max() + 1 if len(ops) else 1, np.int64)
    for k in range(len(rows_a)):
        a, b = rows_a[k], rows_b[k]
        na, nb = offsets[a + 1] - offsets[a], offsets[b + 1] - offsets[b]
        if na == 0 or nb == 0:
            continue
        for p in range(offsets[a], offsets[a + 1]):
            have[ops[p]] += 1
        common = 0
        for p in range(offsets[b], offsets[b + 1]):
            if have[ops[p]] > 0:
                have[ops[p]] -= 1
                common += 1
        for p in range(offsets[a], offsets[a + 1]):
            have[ops[p]] = 0
        if common == na and common == nb:
            continue
        out[k] = 2 * common / (na + nb) >= agreement
    return out


def duplicate_pairs(feats: FeatureTable, codes, doc_rows: np.ndarray, a: np.ndarray, b: np.ndarray,
                    threshold: float) -> tuple[np.ndarray, int]:
    """Which pairs of documents ``(a[k], b[k])`` found alike by Jaccard over the whole text are
    near-duplicates: those that also mention the same ops (torch's ReLU and Mish differ by one
    call and pass 0.8 Jaccard, but are different kernels to write) and whose cores
    (:func:`curate.dedup.core.core_text`: the mined class, not the closure it shares with the
    rest of its library) are alike at ``threshold`` by exact Jaccard.

    Returns:
        (``bool`` array, one entry per pair; how many pairs the core check turned down).
    """
    agree = ops_agree(feats, doc_rows[a], doc_rows[b])
    idx = np.flatnonzero(agree)
    if not len(idx):
        return agree, 0
    # the cores of the documents in those pairs, normalized by compiled code on every core
    docs = np.unique(np.concatenate([a[idx], b[idx]]))
    rows = doc_rows[docs]
    texts = codes.gather(rows).to_list() if isinstance(codes, pl.Series) else [codes[int(r)] for r in rows]
    texts = [core_text(t) if t is not None else t for t in texts]
    parts = [p for p in np.array_split(np.arange(len(texts)), min(len(texts), cpu_count())) if len(p)]
    with ThreadPoolExecutor(len(parts)) as pool:  # the compiled pass releases the GIL
        batches = list(pool.map(lambda p: normalize_batch([texts[i] for i in p]), parts))
    values = np.concatenate([bt.shingles for bt in batches])
    sizes = np.concatenate([np.diff(bt.shingle_offsets) for bt in batches])
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    where = np.full(len(doc_rows), -1, dtype=np.int64)
    where[docs] = np.arange(len(docs))
    sims = exact.pair_jaccard_exact(None, a[idx], b[idx], floor=threshold,
                                    shingles=exact.FlatShingles(values, offsets, where))
    agree[idx] = sims >= threshold
    return agree, int((sims < threshold).sum())


class _Rows:
    """``codes[rows[k]]`` as a sequence indexed by ``k`` (no copy of the column)."""

    def __init__(self, codes: pl.Series, rows: np.ndarray):
        self.codes, self.rows = codes, rows

    def __getitem__(self, k: int) -> str:
        return self.codes[int(self.rows[k])]

    def __len__(self) -> int:
        return len(self.rows)


@stage(STAGE)
def run(sr: StageRun, threshold: float, num_perm: int, kernelbench: str,
        contamination_threshold: float, backend: str, workers: int | None,
        parse_check: bool, executor: str, ray_address: str | None) -> dict[str, Any]:
    """Dedup and decontaminate a problem table; write ``OUT/dedup``; return its stats.

    Options (:class:`curate.dedup.options.DedupOptions`):
        out: run folder.
        source: a stage folder or parquet to read instead of ``OUT/mine``.
        threshold: estimated Jaccard (0-1] at and above which two problems are near-duplicates.
        num_perm: MinHash permutations (signature length).
        kernelbench: the decontamination reference: a JSONL path, a Hugging Face dataset
            id, ``"auto"`` or ``"none"`` (see :func:`curate.dedup.reference.resolve`).
        contamination_threshold: estimated Jaccard (0-1] to a KernelBench problem at and
            above which a problem is contaminated.
        backend: MinHash and LSH implementation, ``"rminhash"`` or ``"datasketch"``
            (:mod:`curate.dedup.minhash`).
        workers: threads (and, for a large input with parsing, processes) to use
            (default: all cores; 1: this thread only).
        parse_check: parse every problem with ``ast`` and reject the ones that do not
            parse (a few ms per problem; without it the check is token-level).
        executor: ``local`` or ``ray``: where documents are featurized (Ray tasks over chunks
            of the table, :mod:`curate.executor`); the grouping and decisions run here.
        ray_address: the Ray cluster to join (``executor="ray"``; None starts a local one).
    Returns:
        The stats written to ``OUT/dedup/stats.json``: the table's counts plus ``clusters``,
        ``exact_duplicates``, ``near_duplicates``, ``decontamination`` (``"done"`` or
        ``"skipped"``), ``contamination_reference``, the contamination counts and
        ``step_seconds``.
    Raises:
        ValueError: a threshold outside (0, 1], ``num_perm`` < 2 or an unknown backend.
        ReferenceUnavailable: the KernelBench reference could not be found or loaded.
        FileNotFoundError: no input table.
    """
    t0 = sr.t0
    steps: dict[str, float] = {}
    _check(threshold, num_perm, contamination_threshold, backend)
    reference = resolve(kernelbench)  # before the work, so a bad option fails fast
    df = read_problems(sr.input)
    codes = df["code"] if "code" in df.columns else pl.Series("code", [None] * df.height, pl.String)
    index = ReferenceIndex.build(reference, num_perm, backend) if reference is not None else None
    steps["read"] = time.monotonic() - t0

    t = time.monotonic()
    keep = int(codes.str.len_bytes().sum() or 0) <= KEEP_SHINGLES_MAX_CODE_BYTES
    feats = featurize_table(codes, num_perm, workers, backend=backend, parse_check=parse_check,
                            screen=index.screen(contamination_threshold) if index else None,
                            keep_shingles=keep, executor=sr.remote)
    steps["features"] = time.monotonic() - t

    # One entry per distinct normalized text; identical texts share everything below.
    t = time.monotonic()
    first: dict[str, int] = {}
    doc_of = np.full(df.height, -1, dtype=np.int64)
    for i, h in enumerate(feats.norm_hash):
        if h is not None:
            doc_of[i] = first.setdefault(h, len(first))
    doc_rows = np.full(len(first), -1, dtype=np.int64)
    has_doc = np.flatnonzero(doc_of >= 0)
    doc_rows[doc_of[has_doc][::-1]] = has_doc[::-1]  # each document's first row
    doc_sigs = feats.sigs[doc_rows]
    a, b, sim = candidate_arrays(doc_sigs, threshold, backend, floor=threshold - exact.MARGIN)
    doc_codes = _Rows(codes, doc_rows)
    kept = (exact.FlatShingles(feats.shingles, feats.shingle_offsets, doc_rows)
            if feats.shingles is not None else None)
    a, b, sim, checked = exact.settle(doc_codes, a, b, sim, threshold, shingles=kept)
    feats.shingles = feats.shingle_offsets = None  # not needed any more
    agree, cores_differ = duplicate_pairs(feats, codes, doc_rows, a, b, threshold)
    comp = components(len(doc_rows), (a[agree], b[agree]))
    steps["lsh_and_clusters"] = time.monotonic() - t

    t = time.monotonic()
    matches: list[Match | None] = [None] * len(doc_rows)
    ref_info: dict[str, Any] = {"decontamination": "skipped"}
    if index is not None:
        ri, rj, rs = feats.ref_pairs
        first_row = doc_rows[doc_of[ri]] == ri  # pairs of each document's first row
        pairs = (doc_of[ri][first_row], rj[first_row], rs[first_row])
        forward = {int(doc_of[r]): ops for r, ops in feats.forward.items()
                   if doc_of[r] >= 0 and doc_rows[doc_of[r]] == r}
        matches = match_pairs(len(doc_rows), doc_sigs, forward, pairs, index)
        ref_info = {"decontamination": "done", "contamination_reference": reference.origin,
                    "contamination_reference_problems": len(reference.labels),
                    "contamination_reference_unparsed": index.unparsed,
                    "parsed_for_decontamination": len(feats.forward)}
    steps["decontamination"] = time.monotonic() - t

    t = time.monotonic()
    cols, reasons, details, counts = _decide(df, feats, doc_of, comp, matches, contamination_threshold)
    table = df.with_columns(
        pl.Series("dedup_cluster", cols["dedup_cluster"], dtype=pl.String),
        pl.Series("is_representative", cols["is_representative"], dtype=pl.Boolean),
        pl.Series("contaminated_by", cols["contaminated_by"], dtype=pl.String),
        pl.Series("kernelbench_nearest", cols["kernelbench_nearest"], dtype=pl.String),
        pl.Series("norm_hash", feats.norm_hash, dtype=pl.String),
    )
    is_rejected = pl.Series([r is not None for r in reasons], dtype=pl.Boolean)
    kept = table.filter(~is_rejected)
    rejected = table.with_columns(
        pl.lit(STAGE).alias(REJECT_COLUMNS[0]),
        pl.Series(REJECT_COLUMNS[1], reasons, dtype=pl.String),
        pl.Series(REJECT_COLUMNS[2], details, dtype=pl.String),
    ).filter(is_rejected)

    sizes = Counter(c for c in cols["dedup_cluster"] if c is not None)
    steps["decide"] = time.monotonic() - t
    extra = {
        "threshold": threshold, "num_perm": num_perm, "backend": backend,
        "contamination_threshold": contamination_threshold,
        "clusters": len(sizes),
        "duplicate_clusters": sum(1 for n in sizes.values() if n > 1),
        "largest_cluster": max(sizes.values(), default=0),
        "distinct_normalized": len(doc_rows),
        "workers": workers or cpu_count(),
        "chunks_in_workers": feats.chunks_in_workers,
        "near_duplicate_pairs": int(agree.sum()),
        "pairs_checked_exactly": checked,
        "near_duplicate_pairs_ops_disagree": int((~agree).sum()) - cores_differ,
        "near_duplicate_pairs_cores_differ": cores_differ,
        **counts, **ref_info,
        "step_seconds": {k: round(v, 3) for k, v in steps.items()},
    }
    return sr.write(kept, rejected, df.height, extra)


def _decide(df: pl.DataFrame, feats: FeatureTable, doc_of: np.ndarray, comp: np.ndarray,
            matches: list[Match | None], ct: float):
    """Cluster, representative, contamination and rejection reason of every row."""
    n = df.height
    sigs = feats.sigs
    ids = [str(p) for p in df["problem_id"].to_list()]
    lengths = (df["code"].str.len_chars().fill_null(0).to_list() if "code" in df.columns
               else [0] * n)
    doc = [int(d) if d >= 0 else None for d in doc_of.tolist()]
    members: dict[int, list[int]] = defaultdict(list)
    for i, d in enumerate(doc):
        if d is not None:
            members[int(comp[d])].append(i)
    rep_of: dict[int, int] = {c: min(rows, key=lambda i: (lengths[i], ids[i], i))
                              for c, rows in members.items()}
    # A cluster is contaminated when any of its documents is: the first such row says why.
    tainted: dict[int, int] = {}
    for c, rows in members.items():
        for i in sorted(rows, key=lambda i: (lengths[i], ids[i], i)):
            m = matches[doc[i]]
            if m is not None and m.contaminating:
                tainted[c] = i
                break

    cols: dict[str, list] = {k: [None] * n for k in
                             ("dedup_cluster", "contaminated_by", "kernelbench_nearest")}
    cols["is_representative"] = [False] * n
    reasons: list[str | None] = [None] * n
    details: list[str | None] = [None] * n
    counts = Counter()
    for i in range(n):
        if doc[i] is None:
            reasons[i], details[i] = "unparseable", feats.error[i]
            counts["unparseable"] += 1
            continue
        c = int(comp[doc[i]])
        rep = rep_of[c]
        cols["dedup_cluster"][i] = ids[rep]
        cols["is_representative"][i] = i == rep
        m = matches[doc[i]]
        if m is not None:
            cols["kernelbench_nearest"][i] = m.label
        if m is not None and m.contaminating:
            cols["contaminated_by"][i] = m.label
            reasons[i], details[i] = "contaminated", m.describe(ct)
            counts[f"contaminated_by_{m.how}"] += 1
        elif i != rep:
            if feats.norm_hash[i] == feats.norm_hash[rep]:
                reasons[i] = "exact_duplicate"
                details[i] = f"same normalized code as {ids[rep]} (jaccard 1.00)"
            else:
                reasons[i] = "near_duplicate"
                details[i] = (f"near-duplicate of {ids[rep]} "
                              f"(minhash jaccard {jaccard(sigs[i], sigs[rep]):.2f})")
        elif c in tainted:
            src = tainted[c]
            via = matches[doc[src]]
            cols["contaminated_by"][i] = via.label
            reasons[i] = "contaminated"
            details[i] = (f"{via.label}, through near-duplicate {ids[src]} (minhash jaccard "
                          f"{jaccard(sigs[i], sigs[src]):.2f}), which matches {via.describe(ct)}")
            counts["contaminated_via_duplicate"] += 1
        elif m is not None:
            counts["kernelbench_nearest_only"] += 1
    by_reason = Counter(r for r in reasons if r is not None)
    counts["exact_duplicates"] = by_reason["exact_duplicate"]
    counts["near_duplicates"] = by_reason["near_duplicate"]
    counts["contaminated"] = by_reason["contaminated"]
    for key in ("contaminated_by_minhash", "contaminated_by_ops", "contaminated_via_duplicate",
                "kernelbench_nearest_only", "unparseable"):
        counts.setdefault(key, 0)
    return cols, reasons, details, dict(counts)
