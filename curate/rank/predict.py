"""The difficulty predictor: the probability that a baseline language model's kernel for a
problem is correct, from the problem's structure and code.

A logistic regression and gradient-boosted trees over :func:`curate.rank.features.features`,
blended (the mean of their logits), fitted by ``benchmarks/fit_difficulty.py`` on public
per-problem results of language models on KernelBench (``curate/data/passrates``, with its
provenance; figures in ``docs/difficulty.md``). Their parameters ship as
``difficulty_model.json`` beside this module and are evaluated here with the standard library
alone (no scikit-learn at run time). The regression:
``p = sigmoid(intercept + sum_i w_i (x_i - mean_i) / scale_i)``, the pass rate of the average
model of the fit; the trees (scikit-learn's ``HistGradientBoostingClassifier``, exported node by
node: :func:`trees_probability`), the mean over the fit's models of each one's pass
probability. Two parameter sets: ``full`` (trace and code features; regression and trees) and
``code_only`` (the regression alone, for a problem whose meta-device trace failed). Buckets cut
the predicted pass rate at its quartiles over KernelBench's problems (``bucket_cuts``): ``easy``
at or above the upper cut, ``hard`` below the lower one.

In level 2 (a fused chain) the regression's part is the structural score instead
(:func:`curate.rank.difficulty.static_score`: the roofline share of matmul, convolution and
attention steps and the kernels traced), at the level's center and spread of the model's
logits over KernelBench's level-2 problems (``level2_static``): within level 2 the public results
agree with that score in every source (Spearman 0.10-0.22) and with the regression's ordering
barely (-0.03-0.10), and the swap carries over to held-out sources (``docs/difficulty.md``).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from curate.rank.difficulty import static_score
from curate.rank.features import code_features, features

MODEL_FILE = Path(__file__).resolve().parent / "difficulty_model.json"


@lru_cache(maxsize=4)
def load_model(path: str | None = None) -> dict[str, Any]:
    """The fitted parameters (``{"full": {...}, "code_only": {...}, ...}``).

    Raises:
        FileNotFoundError: no parameter file (a checkout without package data).
    """
    return json.loads(Path(path or MODEL_FILE).read_text())


def pass_probability(x: dict[str, float], params: dict[str, Any]) -> float:
    """The average model's pass probability for feature dict ``x`` under ``params`` (one of the
    parameter sets); a feature missing from ``x`` counts at its training mean."""
    z = params["intercept"]
    for name, w, mu, sd in zip(params["features"], params["weights"], params["mean"], params["scale"]):
        v = x.get(name)
        if v is None or not math.isfinite(v):
            continue
        z += w * (float(v) - mu) / (sd or 1.0)
    return _sigmoid(z)


def level2_probability(library_share: float, kernels: int, rule: dict[str, float]) -> float:
    """The pass probability of a level-2 problem from its structural score: the score
    standardized over KernelBench's level-2 problems (``static_center``, ``static_spread``: median
    and interquartile range / 1.349), a higher score harder, put on the regression's level-2
    logits (``logit_center``, ``logit_spread``, likewise)."""
    zs = (static_score(library_share, kernels) - rule["static_center"]) / (rule["static_spread"] or 1.0)
    return _sigmoid(rule["logit_center"] - rule["logit_spread"] * zs)


def trees_probability(x: dict[str, float], trees: dict[str, Any]) -> float:
    """The average model's pass probability for feature dict ``x`` under exported
    gradient-boosted trees: per model of the fit, ``sigmoid(baseline + the leaf values its
    features reach)``, then the mean over the models.

    ``trees``: ``features`` (names; a node's feature index past them is model indicator
    ``index - len(features)``, 1 for the model evaluated and 0 for the others), ``models``,
    ``baseline`` (the raw score before the first tree) and ``trees``, each a list of nodes, the
    root first: ``[value]`` for a leaf, ``[feature, threshold, missing_left, left, right]``
    otherwise, going left when the value is at most the threshold, and where a feature is missing
    from ``x`` (or not finite) left exactly when ``missing_left`` (scikit-learn's rule).
    """
    names = trees["features"]
    k = len(names)
    base = []
    for n in names:
        v = x.get(n)
        base.append(float(v) if v is not None and math.isfinite(v) else math.nan)
    total = 0.0
    for j in range(len(trees["models"])):
        raw = trees["baseline"]
        for tree in trees["trees"]:
            node = tree[0]
            while len(node) > 1:
                f, threshold, missing_left, left, right = node
                v = base[f] if f < k else float(f - k == j)
                go_left = missing_left if math.isnan(v) else v <= threshold
                node = tree[left if go_left else right]
            raw += node[0]
        total += _sigmoid(raw)
    return total / len(trees["models"])


def blend(p: float, q: float) -> float:
    """The probability at the mean of the logits of ``p`` and ``q`` (each clipped to
    [1e-9, 1 - 1e-9])."""
    return _sigmoid((logit(p) + logit(q)) / 2)


def logit(p: float) -> float:
    """``log(p / (1 - p))``, ``p`` clipped to [1e-9, 1 - 1e-9]."""
    p = min(1 - 1e-9, max(1e-9, p))
    return math.log(p / (1 - p))


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


def predict(code: str, structure: dict[str, Any] | None) -> tuple[float, str]:
    """``(predicted pass rate in [0, 1], signal)`` of one problem: ``predicted`` from its trace
    and code, or ``predicted_code`` from its code alone when the trace failed."""
    model = load_model()
    if structure and structure.get("ok"):
        p = full_probability(features(code, structure), model["full"], structure.get("level"),
                             structure.get("library_share") or 0.0, structure.get("kernels") or 1)
        return p, "predicted"
    return pass_probability(code_features(code or ""), model["code_only"]), "predicted_code"


def full_probability(x: dict[str, float], full: dict[str, Any], level: int | None, library_share: float,
                     kernels: int) -> float:
    """The ``full`` parameter set's pass probability for the features ``x`` of a traced problem
    of ``level`` (1-3) whose trace has ``library_share`` (0-1) and ``kernels``: the regression
    (for level 2 the structural score, :func:`level2_probability`, where the set has a
    ``level2_static`` rule), blended with the trees where the set has them (:func:`blend`)."""
    rule = full.get("level2_static")
    if rule and level == 2:
        p = level2_probability(library_share, kernels, rule)
    else:
        p = pass_probability(x, full)
    return blend(p, trees_probability(x, full["trees"])) if full.get("trees") else p


def bucket(pass_rate: float, signal: str = "predicted") -> str:
    """``easy``, ``medium`` or ``hard`` for a predicted pass rate (the parameter set's cuts)."""
    params = load_model()["full" if signal == "predicted" else "code_only"]
    lo, hi = params["bucket_cuts"]
    return "easy" if pass_rate >= hi else "medium" if pass_rate >= lo else "hard"
