"""The difficulty predictor against pass rates it never saw: kernels of models outside its
training data, verified by curate's own verifier on a GPU.

    bash benchmarks/gpu/kernelbench_rank.sh kernels benchmarks/data/hzeng2000-level2-kernels.jsonl   # GPU
    python benchmarks/held_out_kernels.py OUT/completions-check.json [--write FILE.json] [--sizes 2024]   # CPU

Reads the ``per_model`` verdicts of ``kernelbench_pipeline.py completions --per-model`` (one
rank run per model and backend), pools them per KernelBench problem, and prints the Spearman
correlation of 1 - that pass rate with: the shipped predictor's ``difficulty_score`` (computed
here from ``benchmarks/results/difficulty-features.json``, the features the rank stage computes
for KernelBench's files at their current sizes) and its trees alone, the reference's line
count, the static structural score (the CPU form of ``speedup_headroom``; at level 2 it also
orders the regression's part) and the fit's own training data (the pooled pass rates of its
four sources on the same problems: how well other models' measured verdicts rank these ones).
Also each model and backend alone, and the mean pass rate per bucket.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import fit_difficulty as fd  # noqa: E402
from curate.rank import features as F  # noqa: E402
from curate.rank.predict import bucket, full_probability, load_model, trees_probability  # noqa: E402


def predicted_pass(v: dict, full: dict) -> float:
    """The shipped ``full`` predictor on one problem's stored features."""
    x = F.interactions(v["features"])
    st = v["static"]
    return full_probability(x, full, 2 if x.get("level2") else None, st["library_share"] or 0.0, st["kernels"] or 1)


def check(per_model: dict[str, dict[str, dict]], features: Path = fd.FEATURES) -> dict:
    """Figures of ``per_model``'s pooled and per-group pass rates against the columns, each
    computed from the problems' stored ``features`` (default the current files'; the 2024
    files' traces read the same problems at their 2024 sizes)."""
    named = json.loads(fd.FEATURES.read_text())
    feats = json.loads(features.read_text())
    full = load_model()["full"]
    # the verdicts name problems by the current files' names; some 2024 files are named otherwise
    by_name = {v["name"]: k for k, v in named.items() if k in feats}
    pred = {k: predicted_pass(v, full) for k, v in feats.items()}
    trees = {k: trees_probability(F.interactions(v["features"]), full["trees"]) for k, v in feats.items()}
    training = fd.pooled(fd.load_results(fd.DEFAULT_SOURCES))

    def key(problem: str) -> str:
        return by_name[problem.split("/", 1)[1]]  # "<level>/<file name>"

    def figures(rates: dict[str, float]) -> dict:
        ks = sorted(rates)
        fail = [1 - rates[k] for k in ks]
        out = {"problems": len(ks), "mean_pass_rate": float(np.mean([rates[k] for k in ks])),
               "difficulty_score": fd.spearman([1 - pred[k] for k in ks], fail),
               "trees_alone": fd.spearman([1 - trees[k] for k in ks], fail),
               "line_count": fd.spearman([feats[k]["loc"] for k in ks], fail),
               "static_score": fd.spearman([fd.static_of(k, feats) for k in ks], fail)}
        seen = [k for k in ks if k in training]
        out["training_pass_rates"] = fd.spearman([1 - training[k] for k in seen], [1 - rates[k] for k in seen])
        return out

    pooled: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    res: dict = {"groups": {}}
    for group, problems in sorted(per_model.items()):
        rates = {}
        for problem, v in problems.items():
            k = key(problem)
            pooled[k][0] += v["correct"]
            pooled[k][1] += v["kernels"]
            rates[k] = v["correct"] / v["kernels"]
        res["groups"][group] = figures(rates)
    rates = {k: c / n for k, (c, n) in pooled.items() if n}
    res["pooled"] = figures(rates)
    res["pooled"]["kernels"] = sum(n for _, n in pooled.values())
    res["pooled"]["correct"] = sum(c for c, _ in pooled.values())
    per_bucket: dict[str, list[float]] = defaultdict(list)
    for k, r in rates.items():
        per_bucket[bucket(pred[k])].append(r)
    res["pooled"]["buckets"] = {b: {"problems": len(v), "mean_pass_rate": float(np.mean(v))}
                                for b, v in sorted(per_bucket.items())}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("check", type=Path, help="completions-check.json with per_model verdicts")
    ap.add_argument("--write", type=Path, help="also write the figures to this JSON file")
    ap.add_argument("--sizes", choices=("current", "2024"), default="current",
                    help="compute the columns from the traces of KernelBench's files at these sizes "
                         "(2024: `fit_difficulty.py features --sizes 2024` first)")
    args = ap.parse_args()
    per_model = json.loads(args.check.read_text()).get("per_model")
    if not per_model:
        raise SystemExit(f"error: {args.check} has no per_model verdicts (run completions with --per-model)")
    res = check(per_model, fd.FEATURES_2024 if args.sizes == "2024" else fd.FEATURES)
    res["sizes"] = args.sizes
    text = json.dumps(res, indent=1)
    print(text)
    if args.write:
        args.write.write_text(text + "\n")


if __name__ == "__main__":
    main()
