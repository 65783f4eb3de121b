"""KernelBench's 250 problems through ``curate mine`` (as a ``kernelbench`` source), ``measure``
and ``rank``, and the difficulty columns checked against published per-problem pass rates.

    python benchmarks/kernelbench_pipeline.py run --out runs/kb [--device cpu|cuda] [--limit N]
    python benchmarks/kernelbench_pipeline.py score --out runs/kb [--results FILE.csv]
    python benchmarks/kernelbench_pipeline.py completions --out runs/kb [--backends triton,cuda]

``run`` writes KernelBench's files (the copy in ``curate/data/kernelbench``, or ``--problems
FILE.jsonl`` of the same fields, e.g. the sizes of another KernelBench version) into
``OUT/problems/level<L>/<name>.py``, mines them, measures them (on the GPU with TorchInductor
when ``--device cuda``; on the CPU at each file's CPU shape) and ranks them.

``score`` reads ``OUT/rank`` and a results file in the format of
``curate/data/passrates/results.csv`` (``level``, ``problem_id``, ``n_samples``,
``n_correct``; rows with ``n_env_failure`` dropped; ``--sources`` keeps some sources only),
and prints and writes to ``OUT/difficulty-check.json``: rows kept and unranked, rows with
each column, Spearman of ``difficulty_score`` and of ``speedup_headroom`` with 1 - the pooled
pass rate (and of the reference's line count), and the mean pass rate per bucket. The
default results file holds the predictor's own training data (and a few runs its fit leaves
out): a fit check, not a held-out one.

``completions`` verifies published model-written kernels (``tests/data/model_kernels``) with
``curate rank --solver completions`` on the mined (or measured) rows, into ``OUT/completions``,
and writes ``OUT/completions-check.json``: per problem, curate's pass rate beside the
publishers' verdicts on the same kernels. ``--kernels FILE.jsonl`` verifies other kernels of
that format; ``--unpublished`` keeps those without a publisher's verdict and ``--per-model``
gives each model and backend its own pass rates (``benchmarks/held_out_kernels.py`` scores the
difficulty columns against them). On the CPU only Triton kernels can run (the interpreter);
CUDA ones need the GPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_RESULTS = ROOT / "curate" / "data" / "passrates" / "results.csv"


def write_problems(out: Path, problems: Path | None, limit: int | None) -> Path:
    from curate.data import kernelbench_problems

    rows = kernelbench_problems() if problems is None else [
        json.loads(x) for x in problems.read_text().splitlines() if x.strip()]
    folder = out / "problems"
    for r in rows[:limit]:
        path = folder / f"level{r['level']}" / f"{r['name']}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(r["code"])
    manifest = out / "kernelbench.yaml"
    manifest.write_text(f"sources:\n  - {{kind: kernelbench, name: kernelbench, path: {folder.resolve()}}}\n")
    return manifest


def run(args) -> None:
    from curate.measure import run as measure
    from curate.mine import run as mine
    from curate.rank import run as rank

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = write_problems(out, Path(args.problems) if args.problems else None, args.limit)
    seconds = {}
    t = time.monotonic()
    st = mine(manifest=manifest, out=out, workers=args.workers, timeout_s=60)
    seconds["mine"] = time.monotonic() - t
    print(f"mine: {st['kept']} kept, {st['rejected']} rejected {st.get('rejected_by_reason')}", flush=True)
    if args.mine_only:
        return
    if args.skip_measure:  # rank reads mine's table: the difficulty needs no timing
        import shutil

        shutil.rmtree(out / "measure", ignore_errors=True)
    t = time.monotonic()
    kw = {"device": args.device}
    if args.device == "cpu":
        kw.update(trials=5, warmup=1, timeout_s=300)
    if not args.skip_measure:
        st = measure(out=out, **kw)
        seconds["measure"] = time.monotonic() - t
        print(f"measure: {st['kept']} kept, {st['rejected']} rejected {st.get('rejected_by_reason')}", flush=True)
    t = time.monotonic()
    st = rank(out=out, device=args.device, workers=args.workers)
    seconds["rank"] = time.monotonic() - t
    print(f"rank: {st['kept']} kept; difficulty {st['difficulty']}; signals {st['difficulty_signal']}, "
          f"headroom {st['headroom_signal']}", flush=True)
    (out / "pipeline-seconds.json").write_text(json.dumps(seconds, indent=1))
    print("seconds:", {k: round(v, 1) for k, v in seconds.items()})


def pooled(results: Path, sources: set[str] | None) -> dict[tuple[int, int], float]:
    c: dict = defaultdict(int)
    n: dict = defaultdict(int)
    with results.open() as f:
        for r in csv.DictReader(f):
            if sources and r.get("source") not in sources:
                continue
            if int(r.get("n_env_failure") or 0) or int(r["n_samples"]) <= 0:
                continue
            k = (int(r["level"]), int(r["problem_id"]))
            c[k] += int(r["n_correct"])
            n[k] += int(r["n_samples"])
    return {k: c[k] / n[k] for k in n}


def spearmanr_value(a, b) -> float | None:
    """Spearman's rank correlation (ties get their mean rank), with numpy alone: the GPU
    machine has no scipy."""
    import numpy as np

    def ranks(x):
        x = np.asarray(x, float)
        order = np.argsort(x, kind="mergesort")
        r = np.empty(len(x))
        r[order] = np.arange(len(x))
        for v in np.unique(x):
            m = x == v
            r[m] = r[m].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return None  # a constant side has no ranking to compare
    return float(np.corrcoef(ra, rb)[0, 1])


def score(args) -> dict:
    from curate.rank.features import module_source
    from curate.table import read_problems, read_stats

    out = Path(args.out)
    rows = read_problems(out / "rank").to_dicts()
    truth = pooled(Path(args.results), set(args.sources.split(",")) if args.sources else None)
    got = []
    for r in rows:
        path = r["source"]["path"]  # level<L>/<id>_<name>.py
        level = int(path.split("/")[0].removeprefix("level"))
        pid = int(path.split("/")[-1].split("_")[0])
        if (level, pid) in truth:
            loc = len([x for x in module_source(r["code"]).splitlines() if x.strip() and not x.strip().startswith("#")])
            got.append((r, truth[(level, pid)], loc))
    fail = [1 - t for _, t, _ in got]
    res = {"rows": len(rows), "matched": len(got), "results": str(args.results),
           "unranked": sum(1 for r in rows if r["difficulty"] == "unranked" or r["difficulty_score"] is None),
           "with_difficulty_score": sum(1 for r in rows if r["difficulty_score"] is not None),
           "with_speedup_headroom": sum(1 for r in rows if r["speedup_headroom"] is not None),
           "difficulty_signal": dict(read_stats(out / "rank").get("difficulty_signal") or {}),
           "headroom_signal": dict(read_stats(out / "rank").get("headroom_signal") or {})}
    res["spearman_difficulty_score"] = spearmanr_value([r["difficulty_score"] for r, _, _ in got], fail)
    hr = [(r["speedup_headroom"], f) for (r, _, _), f in zip(got, fail) if r["speedup_headroom"] is not None]
    res["spearman_speedup_headroom"] = spearmanr_value(*zip(*hr)) if len(hr) > 2 else None
    res["spearman_line_count"] = spearmanr_value([loc for _, _, loc in got], fail)
    by: dict = defaultdict(list)
    for r, t, _ in got:
        by[r["difficulty"]].append(t)
    res["bucket_mean_pass_rate"] = {b: sum(v) / len(v) for b, v in by.items()}
    res["bucket_rows"] = {b: len(v) for b, v in by.items()}
    if by.get("easy") and by.get("hard"):
        e, h = res["bucket_mean_pass_rate"]["easy"], res["bucket_mean_pass_rate"]["hard"]
        res["easy_over_hard"] = e / h if h > 0 else None
    (out / "difficulty-check.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return res


def _verify(out: Path, src: Path, recs: list[dict], args, cache: Path) -> tuple[dict, list[dict]]:
    """``curate rank --solver completions`` on ``recs`` into ``out``: the stage's stats and rows."""
    from curate.rank import run as rank
    from curate.table import read_problems

    out.mkdir(parents=True, exist_ok=True)
    path = out / "kernels.jsonl"
    path.write_text("".join(json.dumps({"level": r["level"], "problem_name": r["problem_name"], "code": r["code"]})
                            + "\n" for r in recs))
    st = rank(out=out, source=src, solver="completions", completions=path, device=args.device,
              workers=args.verify_workers, timeout_s=300, time_it=False, cache_dir=cache)
    return st, read_problems(out / "rank").to_dicts()


def _problem(row: dict) -> tuple[int, str]:
    """(level, file name) of a row mined from ``OUT/problems/level<L>/<name>.py``."""
    parts = row["source"]["path"].split("/")
    return int(parts[0].removeprefix("level")), parts[-1].removesuffix(".py")


def completions(args) -> dict:
    """``curate rank --solver completions`` on model-written kernels (``--kernels``, by default
    the published ones of ``tests/data/model_kernels/kernels.jsonl``; ``--backends``), into
    ``OUT/completions``; per problem, curate's pass rate beside the publishers' verdicts on the
    same kernels where they have one. ``--unpublished`` keeps kernels without a publisher's
    verdict; ``--per-model`` verifies each model's kernels of each backend in a rank run of its own
    (``OUT/completions/<n>``, one shared verification cache), so each problem's pass rate is
    that model's in that language (``per_model`` in the check file)."""
    out = Path(args.out)
    src = out / ("measure" if (out / "measure" / "problems").is_dir() else "mine")
    backends = set(args.backends.split(","))
    recs = [json.loads(x) for x in Path(args.kernels).read_text().splitlines() if x.strip()]
    recs = [r for r in recs if r["backend"] in backends and not (r.get("annotations") or {}).get("env_failure")
            and (args.unpublished or (r.get("published") or {}).get("correct") is not None)]
    if args.max_kernels is not None and len(recs) > args.max_kernels:
        import random

        recs = random.Random(0).sample(recs, args.max_kernels)
    t = time.monotonic()
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in recs:
        groups[f"{r['model']} [{r['backend']}]" if args.per_model else ""].append(r)
    cache = out / "completions" / "cache"
    stats, rows_of, verified = {}, {}, 0
    for n, (model, group) in enumerate(sorted(groups.items())):
        st, rows = _verify(out / "completions" / (str(n) if args.per_model else ""), src, group, args, cache)
        stats[model], rows_of[model] = st, rows
        verified += st.get("candidates_verified") or 0
    published: dict = defaultdict(list)
    for r in recs:
        if (r.get("published") or {}).get("correct") is not None:
            published[(r["level"], r["problem_name"])].append(bool(r["published"]["correct"]))
    ours: dict = defaultdict(lambda: [0, 0])  # (level, name) -> [correct, candidates] over all groups
    per_model: dict = {}
    for model, rows in rows_of.items():
        for r in rows:
            if r["pass_rate"] is None:
                continue
            prob = _problem(r)
            ours[prob][0] += r["n_correct"]
            ours[prob][1] += r["n_candidates"]
            if args.per_model:
                per_model.setdefault(model, {})[f"{prob[0]}/{prob[1]}"] = {
                    "correct": r["n_correct"], "kernels": r["n_candidates"],
                    "verify_reasons": json.loads(r["verify_reasons"] or "{}")}
    pairs = [{"problem": f"{lv}/{name}", "ours": c / n, "published": sum(pub) / len(pub), "kernels": len(pub),
              "ours_correct": c}
             for (lv, name), (c, n) in sorted(ours.items()) if (pub := published.get((lv, name))) and n]
    agree = sum(1 for p in pairs if (p["ours"] > 0) == (p["published"] > 0))
    reasons: dict[str, int] = defaultdict(int)
    for st in stats.values():
        for k, v in (st.get("verify_reasons") or {}).items():
            reasons[k] += v
    res = {"backends": sorted(backends), "kernels": len(recs), "problems": len(ours), "problems_published": len(pairs),
           "verified": verified, "seconds": round(time.monotonic() - t, 1),
           "ours_mean_pass_rate": sum(c / n for c, n in ours.values() if n) / max(1, len(ours)),
           "kernels_correct_ours": sum(c for c, _ in ours.values()),
           "verify_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1]))}
    if pairs:
        res.update({"ours_mean_pass_rate_published_problems": sum(p["ours"] for p in pairs) / len(pairs),
                    "published_mean_pass_rate": sum(p["published"] for p in pairs) / len(pairs),
                    "problems_agreeing_any_correct": agree,
                    "kernels_correct_published": sum(round(p["published"] * p["kernels"]) for p in pairs)})
    if len(pairs) > 2:
        res["spearman_ours_published"] = spearmanr_value([p["ours"] for p in pairs], [p["published"] for p in pairs])
    res["per_problem"] = pairs
    if args.per_model:
        res["per_model"] = per_model
    (out / "completions-check.json").write_text(json.dumps(res, indent=1))
    print(json.dumps({k: v for k, v in res.items() if k not in ("per_problem", "per_model")}, indent=1))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("run", "score", "both", "completions"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--limit", type=int, default=None, help="only the first N problems")
    ap.add_argument("--problems", help="JSONL of {level, problem_id, name, code} (default: the shipped copy)")
    ap.add_argument("--results", default=str(DEFAULT_RESULTS))
    ap.add_argument("--sources", default="", help="comma-separated sources of the results file to use")
    ap.add_argument("--kernels", default=str(ROOT / "tests" / "data" / "model_kernels" / "kernels.jsonl"),
                    help="completions: published kernels (JSONL of level, problem_name, code, backend, published)")
    ap.add_argument("--backends", default="triton", help="completions: backends to verify (triton,cuda,other)")
    ap.add_argument("--verify-workers", type=int, default=None, help="completions: concurrent verifications")
    ap.add_argument("--max-kernels", type=int, default=None, help="completions: a seeded sample of this many kernels")
    ap.add_argument("--unpublished", action="store_true",
                    help="completions: also verify kernels that carry no publisher's verdict")
    ap.add_argument("--per-model", action="store_true",
                    help="completions: one rank run per model, so pass rates are per model and problem")
    ap.add_argument("--mine-only", action="store_true", help="run: stop after mine")
    ap.add_argument("--skip-measure", action="store_true", help="run: rank mine's table (no timings)")
    args = ap.parse_args()
    if args.what == "completions":
        completions(args)
        return
    if args.what in ("run", "both"):
        run(args)
    if args.what in ("score", "both"):
        score(args)


if __name__ == "__main__":
    main()
