"""Quality figures of the dedup benchmark: precision and recall of near-duplicate pairs
against exact Jaccard (:func:`precision_recall`), recall of planted copies
(:func:`planted_recall`), and KernelBench decontamination of planted problems
(:func:`kernelbench_planted`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curate.bench.dedup.plant import PLANTS, plant_kernelbench, planted_rows
from curate.bench.dedup.timing import dedup_proper


def exact_pairs(sets: list[np.ndarray], threshold: float) -> dict[tuple[int, int], float]:
    """All pairs ``(i, j)``, ``i < j``, with exact Jaccard >= ``threshold``, and their Jaccard.

    Prefix filtering (Bayardo, Ma and Srikant 2007): with the shingles of every set ordered
    rarest first, two sets at Jaccard >= t share one of the first ``|A| - ceil(t |A|) + 1``
    of ``A``'s; only pairs sharing such a shingle (and of sizes within a factor t) are
    intersected.
    """
    from collections import defaultdict

    freq: dict[int, int] = defaultdict(int)
    for s in sets:
        for x in s.tolist():
            freq[x] += 1
    ordered = [sorted(s.tolist(), key=lambda x: (freq[x], x)) for s in sets]
    index: dict[int, list[int]] = defaultdict(list)
    cand: set[tuple[int, int]] = set()
    for i, s in enumerate(ordered):
        prefix = s[:len(s) - int(np.ceil(threshold * len(s))) + 1] if s else []
        for x in prefix:
            for j in index[x]:
                cand.add((j, i))
            index[x].append(i)
    out = {}
    for i, j in cand:
        a, b = sets[i], sets[j]
        if min(len(a), len(b)) < threshold * max(len(a), len(b)):
            continue
        inter = len(np.intersect1d(a, b, assume_unique=True))
        jac = inter / (len(a) + len(b) - inter)
        if jac >= threshold:
            out[(i, j)] = jac
    return out


def precision_recall(df: pl.DataFrame, args) -> dict[str, Any]:
    """Pairs found by MinHash + LSH (each backend) against exact Jaccard, on a sample of
    distinct normalized documents; and the clusters of the full run, on the same sample."""
    from curate.dedup.features import featurize_table
    from curate.dedup.minhash import candidate_arrays
    from curate.dedup.tokens import normalize_batch

    res = dedup_proper(df["code"], args.threshold, args.num_perm, args.workers)
    rows, (a, b, sim), agree, comp = res["rows"], res["pairs"], res["agree"], res["comp"]
    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(len(rows), size=min(args.sample, len(rows)), replace=False))
    pos = {int(d): k for k, d in enumerate(sample)}
    codes = [df["code"][int(rows[d])] for d in sample]
    batch = normalize_batch(codes)
    sets = [batch.shingle_set(k) for k in range(len(sample))]
    truth = exact_pairs(sets, args.threshold)
    out: dict[str, Any] = {"sample_documents": len(sample), "all_pairs": len(sample) * (len(sample) - 1) // 2,
                           "true_pairs": len(truth), "threshold": args.threshold}

    def score(found: set[tuple[int, int]]) -> dict[str, Any]:
        hit = len(found & set(truth))
        return {"found": len(found), "precision": round(hit / len(found), 4) if found else None,
                "recall": round(hit / len(truth), 4) if truth else None}

    def in_sample(x: np.ndarray, y: np.ndarray, keep: np.ndarray) -> set[tuple[int, int]]:
        return {tuple(sorted((pos[int(i)], pos[int(j)]))) for i, j in zip(x[keep], y[keep])
                if int(i) in pos and int(j) in pos}

    ones = np.ones(len(a), dtype=bool)
    ea, eb = res["estimated"]
    out["R-MinHash + banding, estimates only (full corpus run), pairs"] = score(
        in_sample(ea, eb, np.ones(len(ea), dtype=bool)))
    out["R-MinHash + banding + exact check near the threshold (as dedup runs), pairs"] = score(
        in_sample(a, b, ones))
    out["... after the op-name and core checks"] = score(in_sample(a, b, agree))
    label = comp[sample]
    same = {(x, y) for x in range(len(sample)) for y in range(x + 1, len(sample)) if label[x] == label[y]} \
        if len(sample) <= 5000 else set()
    out["clusters of the full run (pairs in one cluster)"] = score(same)
    feats = featurize_table(codes, args.num_perm, 1, backend="datasketch")
    x, y, _ = candidate_arrays(feats.sigs, args.threshold, "datasketch")
    out["datasketch MinHash + MinHashLSH (sample only), pairs"] = score(set(zip(x.tolist(), y.tolist())))
    return out


def planted_recall(df: pl.DataFrame, args) -> dict[str, Any]:
    """Recall of planted near-duplicates: a planted row counts when it lands in its
    original's cluster."""
    from curate.dedup.stage import run
    from curate.table import read_problems, read_rejected, write_stage

    rows, origin = planted_rows(df, args.planted, args.seed)
    frame = pl.concat([df.select("problem_id", "name", "code"), pl.DataFrame(rows)])
    with tempfile.TemporaryDirectory() as tmp:
        write_stage(tmp, "mine", frame, pl.DataFrame(), frame.height, 0.0)
        run(out=tmp, kernelbench="none", threshold=args.threshold, workers=args.workers)
        every = pl.concat([read_problems(Path(tmp) / "dedup"), read_rejected(Path(tmp) / "dedup")],
                          how="diagonal_relaxed")
    cluster = dict(zip(every["problem_id"].to_list(), every["dedup_cluster"].to_list()))
    out: dict[str, Any] = {"originals": len(set(origin.values()))}
    for kind in PLANTS:
        ids = [p for p in origin if p.split("/")[1] == kind]
        hit = sum(1 for p in ids if cluster[p] is not None and cluster[p] == cluster[origin[p]])
        out[kind] = {"planted": len(ids), "found": hit, "recall": round(hit / len(ids), 4) if ids else None}
    total = sum(v["planted"] for k, v in out.items() if k in PLANTS)
    found = sum(v["found"] for k, v in out.items() if k in PLANTS)
    out["all"] = {"planted": total, "found": found, "recall": round(found / total, 4) if total else None}
    return out


def kernelbench_planted(df: pl.DataFrame, args) -> dict[str, Any]:
    """Every level-1 and level-2 KernelBench problem planted (class and variables renamed)
    into the corpus: how many are rejected as contaminated, naming the problem (or one of
    its normalized twins); and the corpus's own rows rejected as contaminated."""
    from curate.dedup.stage import run
    from curate.table import read_problems, read_rejected, write_stage

    if not args.kernelbench.is_file():
        return {"skipped": f"no KernelBench copy at {args.kernelbench}"}
    kb = [json.loads(line) for line in args.kernelbench.read_text().splitlines() if line.strip()]
    kb = [r for r in kb if int(r["level"]) in (1, 2)]
    rows = [{"problem_id": f"kb-planted/{k}", "name": "planted.kernelbench",
             "code": plant_kernelbench(r["code"], k)} for k, r in enumerate(kb)]
    labels = {f"kb-planted/{k}": f"level{r['level']}/{r['name']}" for k, r in enumerate(kb)}
    frame = pl.concat([df.select("problem_id", "name", "code"), pl.DataFrame(rows)])
    with tempfile.TemporaryDirectory() as tmp:
        write_stage(tmp, "mine", frame, pl.DataFrame(), frame.height, 0.0)
        stats = run(out=tmp, kernelbench=str(args.kernelbench), threshold=args.threshold,
                    workers=args.workers)
        rejected = read_rejected(Path(tmp) / "dedup")
        kept = read_problems(Path(tmp) / "dedup")
    bad = {r["problem_id"]: r for r in rejected.iter_rows(named=True)}
    named = contaminated = 0
    misses = []
    for pid, label in labels.items():
        r = bad.get(pid)
        if r is not None and r["reject_reason"] == "contaminated":
            contaminated += 1
            if r["contaminated_by"] == label or label in (r["reject_detail"] or ""):
                named += 1
            else:
                misses.append(f"{label} -> {r['contaminated_by']}")
        else:
            misses.append(f"{label}: {r['reject_reason'] if r else 'kept'}")
    real = rejected.filter((pl.col("reject_reason") == "contaminated")
                           & ~pl.col("problem_id").str.starts_with("kb-planted/"))
    return {"planted": len(labels), "rejected_contaminated": contaminated,
            "named_right_or_twin": named, "misses": misses[:20],
            "real_rows": df.height, "real_rows_contaminated": real.height,
            "real_contaminated_by": dict(real.group_by("contaminated_by").len()
                                         .sort("len", descending=True).head(15).iter_rows()),
            "real_contaminated_examples": real.select("name", "contaminated_by").head(15).rows(),
            "stage_seconds": stats["seconds"], "kept": kept.height}
