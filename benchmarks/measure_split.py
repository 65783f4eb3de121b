"""Where `curate measure`'s time goes: the per-row step seconds of a measure journal.

    python benchmarks/measure_split.py RUN/measure/_journal.jsonl[.xz] --wall-s 312 [--json OUT]

Reads the journal a measure run writes as rows finish (``{"key", "value"}`` lines, ``value``
being :func:`curate.measure.core.measure_problem`'s result) and prints, over the rows it
holds: rows/hour for the given stage wall time, the sum and median of each step's seconds
(conformance, load = build + inputs + first forward, checks, eager timing, profile, compile,
compiled timing, CUDA-graph timing, cleanup) inside the measure worker, the seconds spent
waiting for the GPU lock (for timed trials; for untimed GPU work) and inside timed trials, the
worker's CPU seconds, the compile's main sections (Dynamo's ``compilation_time_metrics``:
the whole Dynamo compile, Triton's kernel compiles, Inductor's autotuning benchmarks) and the
compile-cache hits. Standard library only, so it runs on the GPU machine as it is.
"""

from __future__ import annotations

import argparse
import json
import lzma
import statistics
from collections import Counter


#: Sections of ``compile_split`` worth summing (nested: the first holds the others but the
#: autotuning, which runs at the compiled graph's first call).
COMPILE_SECTIONS = ("_compile.compile_inner", "async_compile.precompile", "GraphLowering.codegen",
                    "bytecode_tracing", "CachingAutotuner.benchmark_all_configs")


def split(values: list[dict], wall_s: float | None) -> dict:
    steps: dict[str, list[float]] = {}
    reasons: Counter = Counter()
    timed, waited, inner, hits = [], [], [], 0
    shared, cpu, sections = [], [], Counter()
    for v in values:
        reasons[v.get("reason") or "kept"] += 1
        for k, s in (v.get("seconds") or {}).items():
            steps.setdefault(k, []).append(float(s))
        timed.append(float(v.get("timed_ms") or 0.0) / 1e3)
        waited.append(float(v.get("lock_wait_s") or 0.0))
        inner.append(float(v.get("inner_s") or v.get("wall_s") or 0.0))
        hits += bool((v.get("compile_cache") or {}).get("hit"))
        shared.append(float(v.get("shared_wait_s") or 0.0))
        cpu.append(float(v.get("cpu_s") or 0.0))
        for k, s in (v.get("compile_split") or {}).items():
            if k in COMPILE_SECTIONS:
                sections[k] += float(s)
    n = len(values)
    out = {"rows": n, "wall_s": wall_s,
           "rows_per_hour": round(3600 * n / wall_s) if wall_s else None,
           "reasons": dict(reasons.most_common()),
           "worker_s_sum": round(sum(inner), 1), "timed_s_sum": round(sum(timed), 1),
           "lock_wait_s_sum": round(sum(waited), 1),
           "shared_wait_s_sum": round(sum(shared), 1), "cpu_s_sum": round(sum(cpu), 1),
           "compile_sections_s": {k: round(sections[k], 1) for k in COMPILE_SECTIONS if k in sections},
           "compile_cache_hits": hits,
           "steps": {k: {"rows": len(v), "sum_s": round(sum(v), 1),
                         "median_s": round(statistics.median(v), 3)}
                     for k, v in sorted(steps.items(), key=lambda kv: -sum(kv[1]))}}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("journal")
    ap.add_argument("--wall-s", type=float, default=None, help="the stage's wall seconds")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    values = []
    opener = lzma.open if args.journal.endswith(".xz") else open
    with opener(args.journal, "rt") as fh:
        for line in fh.readlines()[1:]:
            try:
                values.append(json.loads(line)["value"])
            except (json.JSONDecodeError, KeyError):
                continue  # a line cut short by a kill
    out = split(values, args.wall_s)
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return out


if __name__ == "__main__":
    main()
