"""Time problems with curate's measure engine; compare with KernelBench's published timings.

Two inputs::

    # KernelBench problems, inputs from each problem's own get_inputs()
    python -m curate.bench.measure --kernelbench problems.jsonl \\
        --baseline baseline_times_h100.json --level 1 --out runs/bench-l1

    # curate problems (see curate.bench.export_jsonl), inputs from their input specs
    python -m curate.bench.measure --problems problems.jsonl --out runs/bench-ours

Every problem runs in a persistent worker (:mod:`curate.measure.worker`), one per GPU by
default, through :func:`curate.measure.core.measure_problem` with ``stop_on_reject=False``:
every problem is timed, and failed checks are reported as flags. KernelBench inputs are built
by ``torch.manual_seed`` then ``get_inputs()`` under ``torch.device(device)``, so its
``torch.rand(...)`` calls allocate on the GPU directly; KernelBench's own loop builds them
on the CPU and copies them, which is what made it slow. Values differ
(another generator) but not their distribution, and the timings do not depend on them.

Published figures are means of 100 trials (``curate/data/kernelbench/README.md``), so ratios compare our mean with
them; our median is reported too. Two published level-1 entries describe code changed since
(``curate/data/kernelbench/README.md``: ``12_Matmul_with_diagonal_matrices_``, ``97_ScaledDotProductAttention``);
they are timed but left out of the ratio and correlation summaries.

With ``--loop RESULTS.jsonl`` (the output of :mod:`curate.bench.kernelbench_loop`, a plain
KernelBench-style loop run on the same GPU) the summary also compares our eager medians
with the loop's (``vs_loop``: median absolute ratio deviation, percentiles, Spearman) and
our end-to-end throughput with the loop's.

``--fresh-cache`` gives the workers an empty Inductor/Triton cache folder, so compile
figures are cold-start figures (otherwise torch's default cache, warm from earlier runs,
is used, as a user's runs would).

Output under ``--out``: ``results.jsonl`` (one line per problem), ``summary.json``, and the
printed table as ``table.txt``.

Imports only torch (inside the workers), numpy-free standard library code and curate's
torch-only modules: it runs on the GPU machine without curate's CPU-side dependencies.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from curate.measure.stats import geomean, median, percentile, spearman
from curate.measure.worker import WorkerPool, gpu_slots

#: Published entries that describe older code (see the module docstring).
STALE = {"12_Matmul_with_diagonal_matrices_", "97_ScaledDotProductAttention"}


def load_kernelbench(path: Path | str, level: int, names: list[str] | None = None) -> list[dict[str, Any]]:
    """KernelBench rows of ``level`` as benchmark problems (no input spec: ``get_inputs()``)."""
    rows = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if int(r["level"]) != level or (names and r["name"] not in names):
                continue
            rows.append({"problem_id": f"L{level}/{r['name']}", "name": r["name"], "code": r["code"],
                         "input_spec": None, "init_args": None, "kernelbench_name": r["name"],
                         "level": level})
    return rows


def load_problems(path: Path | str, names: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of a problems JSONL (``problem_id``, ``code``, optional ``input_spec``,
    ``init_args``, ``kernelbench_name``, ``level``); JSON-string specs are parsed."""
    rows = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            for c in ("input_spec", "init_args"):
                if isinstance(r.get(c), str):
                    r[c] = json.loads(r[c])
            r.setdefault("name", r.get("problem_id"))
            if names and r["name"] not in names and r.get("problem_id") not in names:
                continue
            rows.append(r)
    return rows


def published_for(row: dict[str, Any], baseline: dict[str, Any] | None) -> dict[str, Any] | None:
    """The published ``{"eager_ms", "compile_ms"}`` of a row's ``kernelbench_name`` (the row's
    ``level`` first, then any level), or None."""
    name = row.get("kernelbench_name")
    if not baseline or not name:
        return None
    levels = [f"level{row['level']}"] if row.get("level") else []
    levels += [k for k in sorted(baseline) if k not in levels]
    for lv in levels:
        if name in baseline.get(lv, {}):
            return baseline[lv][name]
    return None


def load_loop(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """Records of :mod:`curate.bench.kernelbench_loop` by problem name (later files win)."""
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                out[rec["name"]] = rec
    return out


def compare_with_loop(results: list[dict[str, Any]], loop: dict[str, dict[str, Any]],
                      wall_s: float) -> dict[str, Any]:
    """Our eager medians against the plain loop's, and the two throughputs.

    Returns:
        ``{"n", "median_abs_deviation" (median over problems of |ours / loop - 1|),
        "median_ratio", "p10_ratio", "p90_ratio", "within_5pct" (share of problems),
        "spearman", "loop_seconds", "loop_problems", "loop_problems_per_hour",
        "ours_seconds", "ours_problems_per_hour", "throughput_ratio"}``. Loop records made
        with ``--gpu-inputs`` count for agreement but not for the loop's throughput.
    """
    pairs = [(r["eager"]["median_ms"], loop[r["name"]]["median_ms"]) for r in results
             if r.get("eager") and r["name"] in loop and loop[r["name"]].get("median_ms")]
    ratios = sorted(a / b for a, b in pairs)
    # throughput only from records that built their inputs on the CPU, as KernelBench does
    loop_recs = [loop[r["name"]] for r in results
                 if r["name"] in loop and not loop[r["name"]].get("gpu_inputs")]
    loop_s = sum(x["wall_seconds"] for x in loop_recs)
    out: dict[str, Any] = {"n": len(pairs)}
    if ratios:
        out.update({
            "median_abs_deviation": median([abs(x - 1.0) for x in ratios]),
            "median_ratio": median(ratios), "p10_ratio": percentile(ratios, 10),
            "p90_ratio": percentile(ratios, 90),
            "within_5pct": sum(1 for x in ratios if abs(x - 1.0) <= 0.05) / len(ratios),
            "spearman": spearman([a for a, _ in pairs], [b for _, b in pairs]),
        })
    n = len(results)
    out.update({"loop_problems": len(loop_recs), "loop_seconds": loop_s,
                "loop_problems_per_hour": 3600 * len(loop_recs) / loop_s if loop_s else None,
                "ours_problems": n, "ours_seconds": wall_s,
                "ours_problems_per_hour": 3600 * n / wall_s if wall_s else None})
    if out["loop_problems_per_hour"] and out["ours_problems_per_hour"]:
        out["throughput_ratio"] = out["ours_problems_per_hour"] / out["loop_problems_per_hour"]
    return out


def summarize_runs(results: list[dict[str, Any]], wall_s: float, start_s: list[float]) -> dict[str, Any]:
    """Aggregate per-problem results: ratios to published figures, Spearman correlations,
    throughput and per-problem overhead."""
    timed = [r for r in results if r.get("eager")]
    comparable = [r for r in timed if r.get("published") and r["name"] not in STALE]
    out: dict[str, Any] = {"problems": len(results), "timed": len(timed),
                           "flags": _count(f for r in results for f in r.get("flags") or []),
                           "compared": len(comparable)}
    for kind, pub_key in (("eager", "eager_ms"), ("compile", "compile_ms")):
        pairs = [(r[kind]["mean_ms"], r[kind]["median_ms"], r["published"][pub_key])
                 for r in comparable if r.get(kind) and r["published"].get(pub_key)]
        if not pairs:
            continue
        ratios = sorted(m / p for m, _, p in pairs)
        out[kind] = {
            "n": len(pairs),
            "median_ratio_mean_to_published": median(ratios),
            "p10_ratio": percentile(ratios, 10),
            "p90_ratio": percentile(ratios, 90),
            "median_ratio_median_to_published": median([md / p for _, md, p in pairs]),
            "spearman_mean_vs_published": spearman([m for m, _, _ in pairs], [p for _, _, p in pairs]),
        }
    speedups = [r["eager"]["mean_ms"] / r["compile"]["mean_ms"] for r in timed
                if r.get("compile") and r["compile"]["mean_ms"] > 0]
    if speedups:
        out["inductor_speedup_geomean"] = geomean(speedups)
    pub = [(r["eager"]["mean_ms"] / r["compile"]["mean_ms"],
            r["published"]["eager_ms"] / r["published"]["compile_ms"]) for r in comparable
           if r.get("compile") and r["compile"]["mean_ms"] > 0 and r["published"].get("compile_ms")]
    if pub:
        out["inductor_speedup_geomean_compared"] = {"ours": geomean([a for a, _ in pub]),
                                                    "published": geomean([b for _, b in pub]),
                                                    "n": len(pub)}
    n = max(1, len(results))
    timed_s = sum(r.get("timed_ms", 0.0) for r in results) / 1e3
    eager_part = [sum(v for k, v in (r.get("seconds") or {}).items() if k in ("load", "checks", "eager"))
                  for r in results]
    over_eager = [sum(v for k, v in r["seconds"].items() if k in ("load", "checks", "eager"))
                  - r["eager"].get("timed_ms_total", 0.0) / 1e3 for r in timed]
    hits = [r for r in results if (r.get("compile_cache") or {}).get("hit")]
    out["throughput"] = {
        "wall_seconds": wall_s,
        "worker_start_seconds": start_s,
        "problems_per_hour_end_to_end": 3600 * len(results) / wall_s if wall_s else None,
        "with_inductor": any(r.get("compile") for r in results),
        # the measure worker's own eager path (load, checks, eager timing) per problem: what a
        # run without Inductor costs once the worker is up
        "problems_per_hour_eager_path": 3600 / (sum(eager_part) / n) if any(eager_part) else None,
        "timed_seconds": timed_s,
        "timed_seconds_per_problem_mean": timed_s / n,
        "overhead_seconds_per_problem": (wall_s - timed_s) / n if wall_s else None,
        "overhead_seconds_per_problem_eager_path_mean":
            sum(over_eager) / len(over_eager) if over_eager else None,
        "compile_cache_hits": len(hits),
        "measure_worker_compile_seconds_median": median(
            [r["compile_s"] for r in results if r.get("compile_s")]) or None,
        "lock_wait_seconds": sum(r.get("lock_wait_s") or 0.0 for r in results),
    }
    return out


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def table(results: list[dict[str, Any]]) -> str:
    """A fixed-width text table, one line per problem."""
    head = (f"{'problem':44} {'eager_med':>9} {'eager_mean':>10} {'pub_eager':>9} {'ratio':>6} "
            f"{'ind_mean':>9} {'pub_ind':>8} {'ratio':>6} {'compile_s':>9}  flags")
    lines = [head, "-" * len(head)]
    for r in results:
        e, c, p = r.get("eager") or {}, r.get("compile") or {}, r.get("published") or {}
        re_ = e.get("mean_ms") / p["eager_ms"] if e and p.get("eager_ms") else None
        rc = c.get("mean_ms") / p["compile_ms"] if c and p.get("compile_ms") else None
        flags = ",".join(r.get("flags") or []) + (" stale" if r["name"] in STALE else "")
        lines.append(f"{str(r['name'])[:44]:44} {_fmt(e.get('median_ms')):>9} {_fmt(e.get('mean_ms')):>10} "
                     f"{_fmt(p.get('eager_ms'), 2):>9} {_fmt(re_, 3):>6} {_fmt(c.get('mean_ms')):>9} "
                     f"{_fmt(p.get('compile_ms'), 2):>8} {_fmt(rc, 3):>6} "
                     f"{_fmt(r.get('compile_s'), 2):>9}  {flags}")
    return "\n".join(lines)


def run_bench(rows: list[dict[str, Any]], out: Path, baseline: dict[str, Any] | None, device: str,
              workers: int | None, inductor: bool, trials: int, warmup: int, budget_s: float | None,
              timeout_s: float, checks: bool, verbose: bool = True,
              compile_workers: int | None = None, inductor_cache: str | None = None,
              loop: dict[str, dict[str, Any]] | None = None, cuda_graph: str = "auto",
              profile: bool | None = None) -> dict[str, Any]:
    """Measure ``rows`` and write ``results.jsonl``, ``summary.json`` and ``table.txt`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    if device.startswith("cuda"):
        envs = gpu_slots(workers)
        worker_device = "cuda"
    else:
        envs = [{} for _ in range(workers or 1)]
        worker_device = "cpu"
    tasks = [dict(code=r["code"], input_spec=r.get("input_spec"), init_args=r.get("init_args"),
                  device=worker_device, inductor=inductor, trials=trials, warmup=warmup,
                  budget_s=budget_s, min_ms=0.0, max_ms=math.inf, checks_on=checks,
                  stop_on_reject=False, cuda_graph=cuda_graph, profile=profile,
                  name=str(r.get("problem_id") or r["name"]).replace("/", "_"))
             for r in rows]
    pool = WorkerPool(envs, device=worker_device, timeout_s=timeout_s, compile_workers=compile_workers,
                      inductor_cache=inductor_cache, warm_inductor=inductor)
    t0 = time.monotonic()
    results: list[dict[str, Any] | None] = [None] * len(rows)
    with (out / "results.jsonl").open("w") as f:
        try:
            for done, (i, res) in enumerate(pool.map(tasks), 1):
                row = rows[i]
                rec = {"problem_id": row.get("problem_id"), "name": row["name"],
                       "kernelbench_name": row.get("kernelbench_name"),
                       "published": published_for(row, baseline), **res}
                results[i] = rec
                f.write(json.dumps(rec, default=str) + "\n")
                f.flush()
                if verbose:
                    e = (res.get("eager") or {}).get("mean_ms")
                    print(f"[{done}/{len(rows)}] {row['name']}: eager {_fmt(e)} ms "
                          f"{','.join(res.get('flags') or [])} ({_fmt(res.get('wall_s'), 1)} s)",
                          file=sys.stderr, flush=True)
        finally:
            pool.close()
    wall = time.monotonic() - t0
    done_results = [r for r in results if r is not None]
    summary = summarize_runs(done_results, wall, pool.start_seconds)
    summary["compile_ahead"] = {"workers": sum(len(c) for c in pool.compilers),
                                "outcomes": dict(pool.compile_ahead),
                                "start_seconds": pool.compile_start_seconds}
    if loop:
        summary["vs_loop"] = compare_with_loop(done_results, loop, wall)
    gpus = sorted({r["gpu"] for r in done_results if r.get("gpu")})
    summary.update({"device": device, "gpus": gpus,
                    "torch_version": next((r["torch_version"] for r in done_results if r.get("torch_version")), None),
                    "settings": {"trials": trials, "warmup": warmup, "budget_s": budget_s,
                                 "inductor": inductor, "checks": checks, "workers": len(envs),
                                 "compile_workers": sum(len(c) for c in pool.compilers),
                                 "fresh_cache": bool(inductor_cache)}})
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    text = table(done_results)
    (out / "table.txt").write_text(text + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m curate.bench.measure", description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--problems", type=Path, help="JSONL of problems (curate.bench.export_jsonl)")
    src.add_argument("--kernelbench", type=Path, help="KernelBench problems.jsonl")
    ap.add_argument("--baseline", type=Path, help="published timings (baseline_times_h100.json)")
    ap.add_argument("--level", type=int, default=1, help="KernelBench level (with --kernelbench)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--names", default="", help="comma-separated problem names to keep")
    ap.add_argument("--skip", type=int, default=0, help="skip the first N problems (to split a run)")
    ap.add_argument("--limit", type=int, default=None, help="at most N problems (after --skip)")
    ap.add_argument("--device", default="auto", help="auto, cuda or cpu")
    ap.add_argument("--workers", type=int, default=None, help="workers (default: one per GPU; 1 on CPU)")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=None,
                    help="seconds of timed trials per callable (default 0.25 on CUDA, 1 on CPU)")
    ap.add_argument("--compile-workers", type=int, default=None,
                    help="compile-ahead workers per GPU (default: spare cores, at most 8; 0: off)")
    ap.add_argument("--fresh-cache", action="store_true",
                    help="start from an empty Inductor/Triton cache (cold-start figures)")
    ap.add_argument("--loop", default="", help="comma-separated results.jsonl files of "
                    "curate.bench.kernelbench_loop to compare with")
    ap.add_argument("--cuda-graph", default="auto", choices=["auto", "on", "off"])
    ap.add_argument("--no-profile", action="store_true", help="skip the profiler's library share")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="wall-clock limit per problem")
    ap.add_argument("--no-inductor", action="store_true", help="skip torch.compile")
    ap.add_argument("--no-checks", action="store_true", help="skip the output checks")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    names = [n for n in args.names.split(",") if n] or None
    if args.kernelbench:
        rows = load_kernelbench(args.kernelbench, args.level, names)
    else:
        rows = load_problems(args.problems, names)
    rows = rows[args.skip:]
    if args.limit is not None:
        rows = rows[: args.limit]
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    loop = load_loop([Path(p) for p in args.loop.split(",") if p]) if args.loop else None
    cache = None
    if args.fresh_cache:
        import tempfile

        cache = tempfile.mkdtemp(prefix="curate-inductor-cache-")
    summary = run_bench(rows, args.out, baseline, device, args.workers, not args.no_inductor,
                        args.trials, args.warmup, args.budget_s, args.timeout_s, not args.no_checks,
                        verbose=not args.quiet, compile_workers=args.compile_workers,
                        inductor_cache=cache, loop=loop, cuda_graph=args.cuda_graph,
                        profile=False if args.no_profile else None)
    print((args.out / "table.txt").read_text())
    print(json.dumps(summary, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
