"""The dedup benchmark's side by side: our engine against a rensa + polars path
(:func:`polars_features`, :func:`rensa_decide`) on the same corpus in the same run
(needs ``pip install 'curate[bench]'``).
"""

from __future__ import annotations

import os
import statistics
from typing import Any

import numpy as np
import polars as pl

from curate.bench.dedup.plant import PLANTS, planted_rows
from curate.bench.dedup.quality import exact_pairs
from curate.bench.dedup.timing import dedup_proper, timed
from curate.problem import INPUTS_MARKER


TOKEN = r"[A-Za-z_]\w*|\d+|[^\w\s]"
_GRAM = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                  0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD], dtype=np.uint64)
RENSA_BANDS = 16
"""Bands of the rensa path's LSH: rensa needs a divisor of ``num_perm``; 16 x 8 is the one
nearest our own band choice (21 x 6) that keeps P(candidate | J = 0.8) above 0.9 (0.947)."""


def polars_features(codes: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rensa + polars path's normalization, polars and numpy only: the inputs block cut,
    docstrings, comments and import lines removed by regular expressions, tokens by a
    regular expression, every identifier outside the torch/Python vocabulary that dedup
    keeps (:func:`curate.dedup.vocab.load`) renamed ``_``, tokens hashed by polars.

    Returns:
        ``(key, shingles, offsets)``: a ``uint64`` exact-duplicate key per document (hash
        of its renamed token sequence); the flat ``uint64`` 5-gram shingle hashes; the
        ``uint64`` row offsets of each document's shingles (``len(codes) + 1``).
    """
    from curate.dedup import vocab

    v = vocab.load()
    keep = pl.Series(sorted(v["names"] | v["attrs"])).implode()
    strip = r'(?s)""".*?"""|\'\'\'.*?\'\'\'|#[^\n]*|(?m:^[ \t]*(?:import|from)[ \t][^\n]*)'
    tok = (pl.DataFrame({"code": codes}).lazy()
           .select(pl.col("code").str.split(INPUTS_MARKER).list.first()
                   .str.replace_all(strip, " ").str.extract_all(TOKEN)
                   .list.eval(pl.when(pl.element().is_in(keep)).then(pl.element())
                              .otherwise(pl.lit("_")).hash(7)).alias("tok"))
           .collect()["tok"])
    key = tok.hash(3).to_numpy()
    lens = tok.list.len().fill_null(0).to_numpy().astype(np.int64)
    flat = tok.explode().drop_nulls().to_numpy().astype(np.uint64)
    k = len(_GRAM)
    grams = np.maximum(lens - k + 1, 0)
    m = max(len(flat) - k + 1, 0)
    g = np.zeros(m, np.uint64)
    with np.errstate(over="ignore"):
        for i in range(k):
            g ^= flat[i:i + m] * _GRAM[i]
    starts = np.zeros(len(lens), np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    within = np.arange(grams.sum()) - np.repeat(np.cumsum(grams) - grams, grams)
    offsets = np.zeros(len(lens) + 1, np.uint64)
    np.cumsum(grams, out=offsets[1:])
    return key, g[np.repeat(starts, grams) + within], offsets


def rensa_decide(key: np.ndarray, shingles: np.ndarray, offsets: np.ndarray, threshold: float,
                 num_perm: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rensa path's decision: the first of equal keys is kept (the rest exact
    duplicates); each distinct document, in order, is signed by rensa's R-MinHash and put
    into rensa's ``RMinHashLSH``, and is a near-duplicate when it shares a band with an
    earlier one (rensa's duplicate flags: no Jaccard estimate or check).

    Returns:
        ``(exact, near, distinct)``: two boolean masks over the documents, and the indices
        of the distinct documents.
    """
    from rensa import RMinHash, RMinHashLSH

    n = len(key)
    _, first = np.unique(key, return_index=True)
    first = np.sort(first)
    exact = np.ones(n, bool)
    exact[first] = False
    lsh = RMinHashLSH(threshold, num_perm, RENSA_BANDS)
    near = np.zeros(n, bool)
    for d in first.tolist():
        a, b = int(offsets[d]), int(offsets[d + 1])
        row = RMinHash.digest_matrix_from_flat_token_hashes(
            shingles[a:b], np.array([0, b - a], np.uint64), num_perm, 1)
        near[d] = lsh.insert_matrix_and_query_duplicate_flags(row, d)[0]
    return exact, near, first


def _earlier_partner(shingles: np.ndarray, offsets: np.ndarray, docs: np.ndarray,
                     threshold: float) -> np.ndarray:
    """For each of ``docs`` (in order): whether an earlier one of them has exact Jaccard >=
    ``threshold`` with it on these shingles (the truth a keep-first dedup is judged by)."""
    sets = [np.unique(shingles[int(offsets[d]):int(offsets[d + 1])]) for d in docs.tolist()]
    has = np.zeros(len(docs), bool)
    for i, j in exact_pairs(sets, threshold):
        has[max(i, j)] = True
    return has


def side_by_side(df: pl.DataFrame, args) -> dict[str, Any]:
    """Our engine and a rensa + polars path on the same corpus, part by part and end to
    end, each timed ``--repeat`` times interleaved (median); then what each decides."""
    from curate.dedup import rminhash
    from curate.dedup.exact import MARGIN, FlatShingles, settle
    from curate.dedup.minhash import candidate_arrays
    from curate.dedup.stage import _Rows
    from curate.dedup.tokens import normalize_batch

    try:
        from rensa import RMinHash
    except ImportError:
        return {"skipped": "rensa is not installed (pip install 'curate[bench]')"}
    codes = df["code"]
    n = df.height
    t, nump = args.threshold, args.num_perm
    ours_tb = normalize_batch(codes)
    key, sh, soff = polars_features(codes)
    first: dict[str, int] = {}
    for i, h in enumerate(ours_tb.norm_hash):
        if h is not None:
            first.setdefault(h, i)
    rows = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    sigs = rminhash.sign(ours_tb.shingles, ours_tb.shingle_offsets, nump, 1)

    def rensa_sign():
        m = RMinHash.digest_matrix_from_flat_token_hashes(
            ours_tb.shingles, ours_tb.shingle_offsets.astype(np.uint64), nump, 1)
        return np.array(m.to_rows(), dtype=np.uint32)

    def our_lsh():
        a, b, sim = candidate_arrays(sigs[rows], t, floor=t - MARGIN)
        return settle(_Rows(codes, rows), a, b, sim, t,
                      shingles=FlatShingles(ours_tb.shingles, ours_tb.shingle_offsets, rows))

    def rensa_lsh():
        okey = np.array([hash(h) for h in ours_tb.norm_hash], dtype=np.int64)  # our exact key
        return rensa_decide(okey, ours_tb.shingles, ours_tb.shingle_offsets.astype(np.uint64), t, nump)

    parts = {
        "normalize + shingle (ours: 1 thread; polars: its pool)": (
            lambda: normalize_batch(codes), lambda: polars_features(codes)),
        "signatures, 1 thread (our shingles)": (
            lambda: rminhash.sign(ours_tb.shingles, ours_tb.shingle_offsets, nump, 1), rensa_sign),
        "LSH and decision (our signatures/shingles)": (our_lsh, rensa_lsh),
        "end to end": (lambda: dedup_proper(codes, t, nump, args.workers),
                       lambda: rensa_decide(*polars_features(codes), t, nump)),
    }
    out: dict[str, Any] = {"documents": n, "load_average_start": [round(x, 1) for x in os.getloadavg()],
                           "rensa_bands": f"{RENSA_BANDS} x {nump // RENSA_BANDS}"}
    assert np.array_equal(sigs, rensa_sign()), "compiled R-MinHash differs from rensa"
    out["signatures equal to rensa's"] = True
    for name, (ours, theirs) in parts.items():
        ws = {"ours": [], "rensa + polars": []}
        cs = {"ours": [], "rensa + polars": []}
        for _ in range(args.repeat):
            for label, fn in (("ours", ours), ("rensa + polars", theirs)):
                _, w, c = timed(fn)
                ws[label].append(w)
                cs[label].append(c)
        out[name] = {label: {"wall_s": round(statistics.median(ws[label]), 3),
                             "cpu_s": round(statistics.median(cs[label]), 3),
                             "docs_per_s": round(n / statistics.median(ws[label]))} for label in ws}
    out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]

    # what each decides on the corpus, judged by exact Jaccard on its own shingles
    ours_run = dedup_proper(codes, t, nump, args.workers)
    dup = np.zeros(n, bool)
    comp, orow = ours_run["comp"], ours_run["rows"]
    seen: set[int] = set()
    for k, c in enumerate(comp.tolist()):
        if c in seen:
            dup[orow[k]] = True
        seen.add(c)
    ours_exact = np.array([h is not None and first.get(h) != i for i, h in enumerate(ours_tb.norm_hash)])
    exact, near, distinct = rensa_decide(key, sh, soff, t, nump)
    truth = _earlier_partner(sh, soff, distinct, t)
    flagged = near[distinct]
    out["decisions"] = {
        "ours: exact duplicates": int(ours_exact.sum()), "ours: near duplicates": int(dup.sum()),
        "ours: kept": int(n - ours_exact.sum() - dup.sum()),
        "rensa + polars: exact duplicates": int(exact.sum()), "rensa + polars: near duplicates": int(near.sum()),
        "rensa + polars: kept": int(n - exact.sum() - near.sum()),
        "rensa + polars near flags: precision vs exact Jaccard on its shingles":
            round(float((flagged & truth).sum() / max(flagged.sum(), 1)), 3),
        "rensa + polars near flags: recall vs exact Jaccard on its shingles":
            round(float((flagged & truth).sum() / max(truth.sum(), 1)), 3),
        "dropped by both": int(((exact | near) & (ours_exact | dup)).sum()),
        "dropped by rensa + polars only": int(((exact | near) & ~(ours_exact | dup)).sum()),
        "dropped by ours only": int((~(exact | near) & (ours_exact | dup)).sum()),
    }
    # planted copies: each must be dropped (it comes after its original)
    planted, origin = planted_rows(df, args.planted, args.seed)
    frame = pl.concat([df.select("problem_id", "name", "code"), pl.DataFrame(planted)])
    e2, n2, _ = rensa_decide(*polars_features(frame["code"]), t, nump)
    dropped = e2 | n2
    ids = frame["problem_id"].to_list()
    recall = {}
    for kind in PLANTS:
        idx = [k for k, pid in enumerate(ids) if pid.startswith(f"planted/{kind}/")]
        recall[kind] = f"{int(dropped[idx].sum())} / {len(idx)}"
    out["rensa + polars: planted copies dropped"] = recall
    return out
