"""Timing of the dedup benchmark: wall and CPU seconds of dedup proper and of the whole
``dedup`` stage, with and without KernelBench decontamination (:func:`throughput`).
"""

from __future__ import annotations

import os
import resource
import statistics
import tempfile
import time
from typing import Any

import numpy as np
import polars as pl


def cpu_seconds() -> float:
    """CPU seconds of this process and its waited-for children so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, *args, **kwargs) -> tuple[Any, float, float]:
    """``(result, wall seconds, CPU seconds of this process and its children)``. A dedup
    worker still running when ``fn`` returns (the pool does not wait for a worker that got
    no chunk) is waited for after the wall clock stops and before CPU time is read, so
    that its CPU time counts."""
    import multiprocessing

    w, c = time.monotonic(), cpu_seconds()
    out = fn(*args, **kwargs)
    wall = time.monotonic() - w
    for child in multiprocessing.active_children():
        child.join(timeout=60)
    return out, wall, cpu_seconds() - c


def dedup_proper(codes: pl.Series, threshold: float, num_perm: int, workers: int | None,
                 backend: str = "rminhash") -> dict[str, Any]:
    """Normalize, shingle, sign (pool), distinct documents, LSH, op and core checks, components."""
    from curate.dedup.features import featurize_table
    from curate.dedup.minhash import candidate_arrays, components
    from curate.dedup.exact import MARGIN, FlatShingles, settle
    from curate.dedup.stage import _Rows, duplicate_pairs

    feats = featurize_table(codes, num_perm, workers, backend=backend, description="bench: features")
    first: dict[str, int] = {}
    for i, h in enumerate(feats.norm_hash):
        if h is not None:
            first.setdefault(h, i)
    rows = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    a, b, sim = candidate_arrays(feats.sigs[rows], threshold, backend, floor=threshold - MARGIN)
    estimated = (a[sim >= threshold], b[sim >= threshold])
    a, b, sim, _ = settle(_Rows(codes, rows), a, b, sim, threshold,
                          shingles=FlatShingles(feats.shingles, feats.shingle_offsets, rows))
    agree, _ = duplicate_pairs(feats, codes, rows, a, b, threshold)
    comp = components(len(rows), (a[agree], b[agree]))
    return {"feats": feats, "rows": rows, "pairs": (a, b, sim), "agree": agree, "comp": comp,
            "estimated": estimated}


def throughput(df: pl.DataFrame, args) -> dict[str, Any]:
    from curate.dedup.stage import run
    from curate.table import write_stage

    codes = df["code"]
    n = df.height
    out: dict[str, Any] = {"documents": n, "megabytes": round(codes.str.len_bytes().sum() / 1e6, 1),
                           "cores": os.cpu_count()}
    runs: dict[str, list[tuple[float, float]]] = {"dedup proper": [], "stage, no decontamination": [],
                                                  "stage, with KernelBench": []}
    steps = []
    with tempfile.TemporaryDirectory() as tmp:
        write_stage(tmp, "mine", df, pl.DataFrame(), n, 0.0)
        for _ in range(args.repeat):
            _, w, c = timed(dedup_proper, codes, args.threshold, args.num_perm, args.workers)
            runs["dedup proper"].append((w, c))
            _, w, c = timed(run, out=tmp, kernelbench="none", threshold=args.threshold,
                            workers=args.workers)
            runs["stage, no decontamination"].append((w, c))
            if args.kernelbench.is_file():
                stats, w, c = timed(run, out=tmp, kernelbench=str(args.kernelbench),
                                    threshold=args.threshold, workers=args.workers)
                runs["stage, with KernelBench"].append((w, c))
                steps.append(stats["step_seconds"])
    out["load_average"] = [round(x, 1) for x in os.getloadavg()]
    for name, xs in runs.items():
        if xs:
            w = statistics.median(x[0] for x in xs)
            c = statistics.median(x[1] for x in xs)
            out[name] = {"wall_s": round(w, 2), "cpu_s": round(c, 2), "docs_per_s": round(n / w),
                         "docs_per_cpu_s": round(n / c)}
    if steps:
        out["stage steps (s, last run)"] = steps[-1]
    # context: datasketch, on a sample
    from curate.dedup.features import featurize_table
    from curate.dedup.minhash import candidate_arrays

    sample = codes.sample(min(args.context_sample, n), seed=1)
    for backend in ("rminhash", "datasketch"):
        feats, w, c = timed(featurize_table, sample, args.num_perm, 1, backend=backend)
        _, w2, _ = timed(candidate_arrays, feats.sigs, args.threshold, backend)
        out[f"context: features + LSH, {backend}, 1 core"] = {
            "docs": len(sample), "features_docs_per_s": round(len(sample) / w),
            "lsh_docs_per_s": round(len(sample) / max(w2, 1e-9))}
    return out
