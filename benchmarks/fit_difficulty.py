"""Fit the difficulty predictor (:mod:`curate.rank.predict`) on public per-problem results of
language models on KernelBench, report its cross-validated figures and write its parameters.

    pip install scikit-learn            # the fit only; rank evaluates the JSON with numpy
    python benchmarks/fit_difficulty.py features   # trace + code features of KernelBench's 250 (minutes)
    python benchmarks/fit_difficulty.py features --sizes 2024   # the same at their 2024 sizes (optional)
    python benchmarks/fit_difficulty.py fit        # cross-validate, fit, write the model JSON

Data: ``curate/data/passrates/results.csv`` (its ``PROVENANCE.md`` names the sources: per
source, model and problem, samples and correct ones, as the publishers judged them). Rows whose
verdict the evaluation machine caused (``n_env_failure``) are dropped. ``--sources`` picks the
sources (default: the four independent publishers, ``technoabsurdist_kb``, ``yenhao_kb``,
``llmkernel_triton`` and ``aikg_agent``, less the runs in :data:`LEFT_OUT`; ``pango0_agentic``
is one 7B model with 11 prompting methods on 30 problems, ``younglord_musa`` one model that
passes 99 of 100).

Model: logistic regression (scikit-learn, L2) of "this model's kernel for this problem is
correct" on the problem's features (:func:`curate.rank.features.features`, standardized) plus
one indicator per model (models differ in skill; the problem's difficulty is what is left).
Each source (publisher: its own harness, GPU and tolerance) carries the same total weight, so
no one harness's quirks set the difficulty. The predicted pass rate of a problem is that of
the average model (the mean of the model terms). ``C`` is chosen on the held-out sources (fitted
on the other sources, checked on the held-out one's problems held out too): the strongest
regularization within 0.01 of the best mean Spearman. The shipped ``full`` predictor blends the
regression with gradient-boosted trees over the same features and model indicators
(:data:`TREES`; the mean of the two logits; the trees' pass rate also that of the average
model), and every figure of ``full`` is the blend's.

Figures (written to ``benchmarks/results/difficulty-fit.json`` and printed): Spearman of the
predicted difficulty (1 - predicted pass rate) with 1 - the pooled pass rate of the held-out
problems (5-fold cross-validation grouped by problem, repeated over 10 shuffles; each problem
predicted once per repeat), beside the reference's line count and the structural score this
project used before (:func:`curate.rank.difficulty.static_score`); mean pass rates per bucket
(easy / medium / hard cut at the quartiles of the predicted pass rate: the highest quarter
easy, the lowest hard); 95% bootstrap
intervals over problems. The same against the first two sources' pooled pass rates alone (the
figures of the earlier fit) and against the one-shot sources' (:data:`ONE_SHOT_SOURCES`: one
kernel per model and problem, all 250 problems), and source by source: fitted on the other
sources, checked on the held-out source's pass rates of held-out problems. How well the sources agree with each other
(Spearman of their pooled pass rates on shared problems) bounds what any predictor can show.
A second, code-only model (no trace features) stands in where a problem's trace fails.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curate.data import KERNELBENCH_DIR, kernelbench_problems  # noqa: E402
from curate.rank import features as F  # noqa: E402
from curate.rank.predict import blend, logit, trees_probability  # noqa: E402

RESULTS = KERNELBENCH_DIR.parent / "passrates" / "results.csv"
FEATURES = ROOT / "benchmarks" / "results" / "difficulty-features.json"
#: The same of KernelBench's files at their 2024 sizes (``features --sizes 2024``): the fit is
#: checked on them too, as the parameters fitted at the current sizes meet both in use.
FEATURES_2024 = ROOT / "benchmarks" / "results" / "difficulty-features-2024.json"
PROBLEMS_2024 = ROOT / "benchmarks" / "data" / "kernelbench-2024.jsonl"
REPORT = ROOT / "benchmarks" / "results" / "difficulty-fit.json"
MODEL = ROOT / "curate" / "rank" / "difficulty_model.json"
DEFAULT_SOURCES = ("technoabsurdist_kb", "yenhao_kb", "llmkernel_triton", "aikg_agent")
#: The sources of the earlier fit: its figures are also reported against their pass rates.
FIRST_SOURCES = ("technoabsurdist_kb", "yenhao_kb")
#: The sources whose verdicts are one kernel per model and problem (not an agent's pass@4): the
#: figures are also reported against their pooled pass rates, the truth closest to a set of
#: one-shot models judged on all of KernelBench's problems.
ONE_SHOT_SOURCES = ("technoabsurdist_kb", "yenhao_kb", "llmkernel_triton")
#: Runs of a default source the fit leaves out, by (source, start of the model name), and why
#: (``curate/data/passrates/PROVENANCE.md`` gives the details).
LEFT_OUT = {
    ("llmkernel_triton", "deepseek [seed"): "verdicts of some 60 runs over a week with two providers and "
                                            "changing prompts, each problem keeping its last run",
    ("aikg_agent", "AIKG agent [cpp"): "C++ for the CPU, not a GPU kernel",
    ("aikg_agent", "AIKG agent [triton_ascend"): "kernels for an Ascend NPU, not a GPU",
}
CS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: ``C`` is the smallest of :data:`CS` whose held-out-source Spearman (:func:`held_out_sources`,
#: averaged over the sources) is within this of the best.
C_TOLERANCE = 0.01
#: The model indicators' value: their coefficients are penalized 1/MODEL_SCALE**2 as much as a
#: feature's, so the penalty shrinks the features, not the models' differences in skill.
MODEL_SCALE = 10.0
#: Quantiles of the predicted pass rate over KernelBench's problems at which the buckets are
#: cut: ``hard`` the lowest quarter, ``easy`` the highest (terciles gave easy/hard pass rates of
#: only about 1.7x in cross-validation).
BUCKET_QUANTILES = (0.25, 0.75)
#: Order level-2 problems by the structural score (:func:`curate.rank.predict.level2_probability`)
#: rather than by the regression: within level 2 the sources agree with that score (Spearman
#: 0.10-0.22 in each) and barely with the regression's out-of-fold ordering (-0.03-0.10).
LEVEL2_STATIC = True


def key(level: int, pid: int) -> str:
    return f"{level}/{pid}"


# ---- features of KernelBench's problems, as the rank stage sees them after mine ----

def build_features(out: Path, rows: list[dict] | None = None) -> None:
    """Each KernelBench problem (``rows``, default the package's copy) through
    :func:`curate.mine.kernelbench.kernelbench_task` (its row as ``curate mine`` writes it),
    traced as ``curate rank`` traces it; a file mine rejects is traced from its own
    ``get_inputs`` (meta device)."""
    from curate.mine.kernelbench import kernelbench_task
    from curate.structure import structure_task

    rows = kernelbench_problems() if rows is None else rows
    got: dict[str, dict] = {}
    t0 = time.monotonic()
    for k, r in enumerate(rows):
        res = kernelbench_task(r["code"], 60.0)
        if res["ok"]:
            st = structure_task(res["code"], res["init_args"], res["input_spec"],
                                res["mined_input_spec"], res["mined_init_args"])
            code = res["code"]
        else:
            st = structure_task(r["code"])
            code = r["code"]
        got[key(r["level"], r["problem_id"])] = {
            "name": r["name"], "mine": "ok" if res["ok"] else res["reason"],
            "trace": st.get("traced_on") if st.get("ok") else st.get("error"),
            "static": {"library_share": st.get("library_share"), "kernels": st.get("kernels")},
            "loc": len([x for x in F.module_source(code).splitlines()
                        if x.strip() and not x.strip().startswith("#")]),
            "features": F.features(code, st), "code_features": F.features(code, None)}
        if k % 25 == 24:
            print(f"{k + 1}/{len(rows)} problems, {time.monotonic() - t0:.0f} s", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(got, indent=1, sort_keys=True))
    print(f"wrote {out} ({len(got)} problems, {time.monotonic() - t0:.0f} s)")


# ---- the data ----

def left_out(source: str, model: str) -> bool:
    return any(source == s and model.startswith(m) for s, m in LEFT_OUT)


def load_results(sources: tuple[str, ...]) -> list[dict]:
    """``results.csv`` rows of ``sources`` without env failures and the :data:`LEFT_OUT` runs:
    ``{"key", "source", "model", "n", "c"}``."""
    out = []
    with RESULTS.open() as f:
        for r in csv.DictReader(f):
            if r["source"] not in sources or int(r["n_env_failure"] or 0) or left_out(r["source"], r["model"]):
                continue
            n = int(r["n_samples"])
            if n <= 0:
                continue
            out.append({"key": key(int(r["level"]), int(r["problem_id"])), "source": r["source"],
                        "model": f"{r['source']}:{r['model']}", "n": n, "c": int(r["n_correct"])})
    return out


def source_weights(rows: list[dict]) -> dict[str, float]:
    """A weight per source such that every source's samples weigh the same in total (mean 1)."""
    n: dict[str, int] = defaultdict(int)
    for r in rows:
        n[r["source"]] += r["n"]
    total = sum(n.values())
    return {s: total / (len(n) * v) for s, v in n.items()}


def pooled(rows: list[dict]) -> dict[str, float]:
    """Pooled pass rate per problem: correct over samples across all models."""
    c: dict[str, int] = defaultdict(int)
    n: dict[str, int] = defaultdict(int)
    for r in rows:
        c[r["key"]] += r["c"]
        n[r["key"]] += r["n"]
    return {k: c[k] / n[k] for k in n}


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


# ---- the fit ----

class Fit:
    """Standardized features + model indicators -> logistic regression (sklearn)."""

    def __init__(self, names: list[str], models: list[str], C: float):
        self.names, self.models, self.C = names, models, C

    def design(self, X: np.ndarray, model_idx: np.ndarray | None) -> np.ndarray:
        Z = (X - self.mean) / self.scale
        M = np.zeros((len(X), len(self.models)))
        if model_idx is None:
            M[:] = MODEL_SCALE / len(self.models)  # the average model
        else:
            M[np.arange(len(X)), model_idx] = MODEL_SCALE
        return np.hstack([Z, M])

    def fit(self, X: np.ndarray, model_idx: np.ndarray, y: np.ndarray, w: np.ndarray) -> "Fit":
        """Weighted fit; the features are standardized with their unweighted mean and spread."""
        from sklearn.linear_model import LogisticRegression

        self.mean = X.mean(0)
        self.scale = X.std(0)
        self.scale[self.scale < 1e-9] = 1.0
        # the model terms carry the intercept (one per model); features are penalized
        self.lr = LogisticRegression(C=self.C, fit_intercept=False, max_iter=5000)
        self.lr.fit(self.design(X, model_idx), y, sample_weight=w)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Pass probability of the average model for each problem row of ``X``."""
        return self.lr.predict_proba(self.design(X, None))[:, 1]

    def params(self) -> dict:
        coef = self.lr.coef_[0]
        k = len(self.names)
        model_terms = coef[k:] * MODEL_SCALE
        return {"features": self.names, "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "weights": coef[:k].tolist(), "intercept": float(model_terms.mean()),
                "model_terms": dict(zip(self.models, model_terms.tolist())), "C": self.C}


def expand(rows: list[dict], feats: dict[str, dict], names: list[str], models: list[str], field: str):
    """Per (problem, model) row two weighted samples: correct (weight c) and not (n - c), times
    the source's weight (:func:`source_weights` of ``rows``)."""
    sw = source_weights(rows)
    X, mi, y, w, keys = [], [], [], [], []
    for r in rows:
        f = feats[r["key"]][field]
        x = [f[nm] for nm in names]
        for label, weight in ((1, r["c"]), (0, r["n"] - r["c"])):
            if weight:
                X.append(x)
                mi.append(models.index(r["model"]))
                y.append(label)
                w.append(weight * sw[r["source"]])
                keys.append(r["key"])
    return np.array(X, float), np.array(mi), np.array(y), np.array(w, float), keys


def problem_matrix(keys: list[str], feats: dict[str, dict], names: list[str], field: str) -> np.ndarray:
    return np.array([[feats[k][field][nm] for nm in names] for k in keys], float)


def static_of(k: str, feats: dict[str, dict]) -> float:
    from curate.rank.difficulty import static_score

    st = feats[k]["static"]
    return static_score(st["library_share"] or 0.0, st["kernels"] or 1)


def level2_rule(pred: dict[str, float], feats: dict[str, dict]) -> dict[str, float] | None:
    """The constants of :func:`curate.rank.predict.level2_probability` from predictions of the
    regression: the center (median) and spread (interquartile range / 1.349, the standard
    deviation of a normal distribution with that range) of its logits and of the structural
    score over the level-2 problems of ``pred`` (None: fewer than 3 of them). Robust, as one
    extreme out-of-fold prediction once tripled a plain standard deviation."""
    l2 = [k for k in pred if feats[k]["features"].get("level2")]
    if len(l2) < 3:
        return None
    lg = np.array([logit(pred[k]) for k in l2])
    st = np.array([static_of(k, feats) for k in l2])

    def spread(a: np.ndarray) -> float:
        return float((np.quantile(a, 0.75) - np.quantile(a, 0.25)) / 1.349)

    return {"logit_center": float(np.median(lg)), "logit_spread": spread(lg),
            "static_center": float(np.median(st)), "static_spread": spread(st)}


def with_level2(pred: dict[str, float], feats: dict[str, dict], rule: dict[str, float] | None = None) -> dict[str, float]:
    """``pred`` with its level-2 problems ordered by the structural score
    (:func:`curate.rank.predict.level2_probability`; ``rule`` from :func:`level2_rule` of
    ``pred`` itself when not given)."""
    from curate.rank.predict import level2_probability

    rule = rule or level2_rule(pred, feats)
    if rule is None:
        return pred
    out = dict(pred)
    for k in pred:
        if feats[k]["features"].get("level2"):
            st = feats[k]["static"]
            out[k] = level2_probability(st["library_share"] or 0.0, st["kernels"] or 1, rule)
    return out


def buckets(pred_pass: np.ndarray, cuts: tuple[float, float]) -> np.ndarray:
    """0 easy (predicted pass >= upper cut), 1 medium, 2 hard (below the lower cut)."""
    return np.where(pred_pass >= cuts[1], 0, np.where(pred_pass >= cuts[0], 1, 2))


def _out_of_fold(rows, keys, repeats, folds, seed, predict, fit_predict) -> list[dict[str, float]]:
    """Per shuffle, every problem of ``keys`` in ``predict`` (all where None) predicted by
    ``fit_predict(training rows, problems)`` fitted on the rows of the other folds' problems
    (folds grouped by problem)."""
    out = []
    for rep in range(repeats):
        order = keys[:]
        random.Random(seed + rep).shuffle(order)
        fold_of = {k: i % folds for i, k in enumerate(order)}
        pred: dict[str, float] = {}
        for fold in range(folds):
            test = [k for k in keys if fold_of[k] == fold and (predict is None or k in predict)]
            pred.update(zip(test, fit_predict([r for r in rows if fold_of[r["key"]] != fold], test)))
        out.append(pred)
    return out


def cross_validate(rows, feats, names, models, field, C, repeats=10, folds=5, seed=0, keys=None,
                   predict=None, level2=None, test_feats=None, trees=False):
    """Out-of-fold predicted pass rates per problem, per repeat: ``[{key: p}]``.

    ``keys``: the problems split into folds (default: those of ``rows``); ``predict``: the
    problems predicted (default: all of ``keys``); ``level2``: order level-2 problems by the
    structural score (:func:`with_level2`; default :data:`LEVEL2_STATIC` for the trace model);
    ``test_feats``: the held-out problems' features (default ``feats``; the 2024 sizes' to check
    parameters fitted at the current sizes on those files); ``trees``: blend with the trees
    (:func:`trees_cross_validate` on the same folds), as the shipped ``full`` predictor does."""
    level2 = (LEVEL2_STATIC and field == "features") if level2 is None else level2
    test_feats = feats if test_feats is None else test_feats
    keys = sorted({r["key"] for r in rows}) if keys is None else keys

    def fit_predict(train, test):
        X, mi, y, w, _ = expand(train, feats, names, models, field)
        return Fit(names, models, C).fit(X, mi, y, w).predict(problem_matrix(test, test_feats, names, field))

    out = _out_of_fold(rows, keys, repeats, folds, seed, predict, fit_predict)
    out = [with_level2(pred, test_feats) for pred in out] if level2 else out
    if trees:
        out = _blend(out, trees_cross_validate(rows, feats, names, repeats, folds, seed, keys, predict, test_feats))
    return out


def figures(preds: list[dict[str, float]], truth: dict[str, float], feats, cuts_from="fold") -> dict:
    """Spearman with 1 - pooled pass rate and bucket means over repeats (mean and range)."""
    keys = sorted(truth)
    rhos, ratios, means = [], [], []
    for pred in preds:
        p = np.array([pred[k] for k in keys])
        t = np.array([truth[k] for k in keys])
        rhos.append(spearman(1 - p, 1 - t))
        cuts = tuple(np.quantile(p, BUCKET_QUANTILES))
        b = buckets(p, cuts)
        m = [float(t[b == i].mean()) for i in range(3)]
        means.append(m)
        ratios.append(m[0] / m[2] if m[2] > 0 else math.inf)
    return {"spearman": float(np.mean(rhos)), "spearman_range": [float(min(rhos)), float(max(rhos))],
            "bucket_pass_rate": [float(np.mean([m[i] for m in means])) for i in range(3)],
            "easy_over_hard": float(np.mean(ratios))}


def bootstrap_ci(x: np.ndarray, t: np.ndarray, n: int = 2000, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n):
        idx = rng.integers(0, len(x), len(x))
        vals.append(spearman(x[idx], t[idx]))
    return [float(np.quantile(vals, 0.025)), float(np.quantile(vals, 0.975))]


#: Gradient-boosted trees blended with the regression (:data:`TREES_BLEND`): scikit-learn's
#: ``HistGradientBoostingClassifier`` with these settings, set once, not tuned.
TREES = {"max_depth": 3, "learning_rate": 0.05, "max_iter": 200, "min_samples_leaf": 20}
#: The shipped predictor (``full``) is the mean of the logits of the regression (level 2 by the
#: structural score) and of the trees; ``C`` is still chosen for the regression alone.
TREES_BLEND = True


def fit_trees(train, feats, names):
    """The trees fitted on ``train``'s verdicts: the raw features and one indicator per model
    (``(classifier, models)``)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    models = sorted({r["model"] for r in train})
    X, mi, y, w, _ = expand(train, feats, names, models, "features")
    eye = np.eye(len(models))
    return HistGradientBoostingClassifier(random_state=0, **TREES).fit(np.hstack([X, eye[mi]]), y,
                                                                       sample_weight=w), models


def trees_predict(clf, models, P: np.ndarray) -> np.ndarray:
    """The average model's pass probability per problem row of ``P``: the mean of the models'."""
    eye = np.eye(len(models))
    return np.mean([clf.predict_proba(np.hstack([P, np.tile(eye[j], (len(P), 1))]))[:, 1]
                    for j in range(len(models))], axis=0)


def export_trees(clf, names, models) -> dict:
    """The fitted trees as :func:`curate.rank.predict.trees_probability` reads them. Read from
    scikit-learn's fitted predictors (``_predictors``, ``_baseline_prediction``: private, checked
    against ``predict_proba`` by the fit on every problem)."""
    trees = []
    for (pred,) in clf._predictors:  # one predictor per iteration for a binary classifier
        nodes = []
        for n in pred.nodes:
            if n["is_leaf"]:
                nodes.append([float(n["value"])])
            else:
                if n["is_categorical"]:
                    raise ValueError("categorical splits are not exported")
                nodes.append([int(n["feature_idx"]), float(n["num_threshold"]), bool(n["missing_go_to_left"]),
                              int(n["left"]), int(n["right"])])
        trees.append(nodes)
    return {"features": list(names), "models": list(models),
            "baseline": float(np.ravel(clf._baseline_prediction)[0]), "trees": trees, "settings": dict(TREES)}


def split_gain(clf, names, models) -> dict[str, float]:
    """Each feature's share of the trees' total split gain (the model indicators together as
    ``model``), largest first: which features the trees lean on (they have no weights)."""
    gain: dict[str, float] = defaultdict(float)
    for (pred,) in clf._predictors:
        for n in pred.nodes:
            if not n["is_leaf"]:
                f = int(n["feature_idx"])
                gain[names[f] if f < len(names) else "model"] += float(n["gain"])
    total = sum(gain.values()) or 1.0
    return {k: v / total for k, v in sorted(gain.items(), key=lambda kv: -kv[1])}


def trees_cross_validate(rows, feats, names, repeats=3, folds=5, seed=0, keys=None, predict=None,
                         test_feats=None):
    """As :func:`cross_validate` (the same shuffles and folds), for the trees alone."""
    test_feats = feats if test_feats is None else test_feats
    keys = sorted({r["key"] for r in rows}) if keys is None else keys

    def fit_predict(train, test):
        clf, models = fit_trees(train, feats, names)
        return trees_predict(clf, models, problem_matrix(test, test_feats, names, "features"))

    return _out_of_fold(rows, keys, repeats, folds, seed, predict, fit_predict)


def _blend(a: list[dict[str, float]], b: list[dict[str, float]]) -> list[dict[str, float]]:
    """Per repeat, the mean of two predictions' logits."""
    return [{k: blend(x[k], y[k]) for k in x} for x, y in zip(a, b)]


def trees_blend(rows, feats, names, C, truths: dict[str, dict[str, float]], repeats=3,
                feats_2024: dict | None = None) -> dict:
    """Figures of the regression (as shipped: level 2 by the structural score), of the trees and
    of their blend (mean logit), on the same folds: Spearman against each of ``truths`` (pooled
    pass rates) in cross-validation, and source by source as :func:`held_out_sources` (2 shuffles;
    with ``feats_2024``, also checked on the 2024 files' features, ``held_out_2024``).
    The parts of the shipped ``full`` predictor (the blend) measured side by side."""
    models = sorted({r["model"] for r in rows})
    reg = cross_validate(rows, feats, names, models, "features", C, repeats)
    trees = trees_cross_validate(rows, feats, names, repeats)
    out: dict = {"trees": dict(TREES), "repeats": repeats}
    for label, preds in (("regression", reg), ("trees", trees), ("blend", _blend(reg, trees))):
        out[label] = {name: figures(preds, truth, feats)["spearman"] for name, truth in truths.items()}
    keys = sorted({r["key"] for r in rows})
    for tag, test in (("held_out", feats), ("held_out_2024", feats_2024)):
        if test is None:
            continue
        held: dict[str, dict[str, float]] = {"regression": {}, "trees": {}, "blend": {}}
        for src in sorted({r["source"] for r in rows}):
            train = [r for r in rows if r["source"] != src]
            truth = pooled([r for r in rows if r["source"] == src])
            ms = sorted({r["model"] for r in train})
            r_ = cross_validate(train, feats, names, ms, "features", C, 2, keys=keys, predict=truth, test_feats=test)
            t_ = trees_cross_validate(train, feats, names, 2, keys=keys, predict=truth, test_feats=test)
            for label, preds in (("regression", r_), ("trees", t_), ("blend", _blend(r_, t_))):
                held[label][src] = figures(preds, truth, test)["spearman"]
        for label in held:
            out[label][f"{tag}_sources"] = held[label]
            out[label][f"{tag}_mean"] = float(np.mean(list(held[label].values())))
    return out


def held_out_sources(rows, feats, names, field, C, repeats=5, folds=5, seed=0, level2=None,
                     test_feats=None, trees=False) -> dict:
    """Source by source: fitted on the other sources' verdicts of the training folds' problems,
    checked on the held-out source's pooled pass rates of the held-out problems (a new publisher,
    harness and set of models on problems the fit has not seen), beside the line count (of
    ``test_feats``' files where given: see :func:`cross_validate`)."""
    lines = feats if test_feats is None else test_feats
    keys = sorted({r["key"] for r in rows})
    out = {}
    for src in sorted({r["source"] for r in rows}):
        train_rows = [r for r in rows if r["source"] != src]
        truth = pooled([r for r in rows if r["source"] == src])
        models = sorted({r["model"] for r in train_rows})
        preds = cross_validate(train_rows, feats, names, models, field, C, repeats, folds, seed,
                               keys=keys, predict=truth, level2=level2, test_feats=test_feats, trees=trees)
        fig = figures(preds, truth, feats)
        tk = sorted(truth)
        fig["line_count"] = spearman([lines[k]["loc"] for k in tk], [1 - truth[k] for k in tk])
        fig["problems"] = len(tk)
        out[src] = fig
    return out


def seen_problems_sources(rows, feats, names, C) -> dict:
    """Source by source, with the problems seen: fitted on every problem of the other sources,
    checked on the held-out source's pooled pass rates (the situation of an independent check on
    KernelBench's own problems, whose verdicts from other models the fit has seen). One fit per
    source; the regression (level 2 by the structural score), the blend and the line count."""
    out = {}
    for src in sorted({r["source"] for r in rows}):
        train = [r for r in rows if r["source"] != src]
        truth = pooled([r for r in rows if r["source"] == src])
        seen, tk = sorted({r["key"] for r in train}), sorted(truth)
        models = sorted({r["model"] for r in train})
        X, mi, y, w, _ = expand(train, feats, names, models, "features")
        fit = Fit(names, models, C).fit(X, mi, y, w)
        rule = level2_rule(dict(zip(seen, fit.predict(problem_matrix(seen, feats, names, "features")))), feats)
        P = problem_matrix(tk, feats, names, "features")
        reg = with_level2(dict(zip(tk, fit.predict(P))), feats, rule)
        clf, tree_models = fit_trees(train, feats, names)
        both = {k: blend(reg[k], q) for k, q in zip(tk, trees_predict(clf, tree_models, P))}
        fail = [1 - truth[k] for k in tk]
        out[src] = {"problems": len(tk), "regression": spearman([1 - reg[k] for k in tk], fail),
                    "blend": spearman([1 - both[k] for k in tk], fail),
                    "line_count": spearman([feats[k]["loc"] for k in tk], fail)}
    return out


def source_agreement(rows) -> dict:
    """How well one source's pooled pass rates rank the problems as another's do (Spearman on the
    problems both cover), and each source against the pooled rest: the ceiling on what a
    predictor can show against any one source."""
    by_src = {s: pooled([r for r in rows if r["source"] == s]) for s in sorted({r["source"] for r in rows})}
    pairs = {}
    for a, b in itertools.combinations(by_src, 2):
        ks = sorted(set(by_src[a]) & set(by_src[b]))
        pairs[f"{a}|{b}"] = {"spearman": spearman([by_src[a][k] for k in ks], [by_src[b][k] for k in ks]),
                             "problems": len(ks)}
    rest = {}
    for s in by_src:
        others = pooled([r for r in rows if r["source"] != s])
        ks = sorted(set(by_src[s]) & set(others))
        rest[s] = {"spearman": spearman([by_src[s][k] for k in ks], [others[k] for k in ks]), "problems": len(ks)}
    both = [v["spearman"] for v in pairs.values()]
    return {"pairs": pairs, "mean_pair": float(np.mean(both)), "vs_rest": rest,
            "mean_vs_rest": float(np.mean([v["spearman"] for v in rest.values()]))}


def pool_reliability(rows) -> dict:
    """How far a pooled pass rate of one-shot models can be predicted at all: its models split
    into two halves every balanced way, the Spearman correlation of the halves' pooled pass rates
    (problems both cover) averaged over the splits (``split_half``), stepped up to the whole pool
    by the Spearman-Brown formula (``reliability`` = 2r / (1 + r); Spearman 1910, Brown 1910),
    and its square root (``ceiling``): roughly the most that a predictor of the problems' true
    difficulty can reach against this pool, however good."""
    models = sorted({r["model"] for r in rows})
    if len(models) < 2:
        return {}
    rs = []
    for half in itertools.combinations(models, len(models) // 2):
        if len(models) % 2 == 0 and models[0] not in half:
            continue  # each split once
        a = pooled([r for r in rows if r["model"] in half])
        b = pooled([r for r in rows if r["model"] not in half])
        ks = sorted(set(a) & set(b))
        rs.append(spearman([a[k] for k in ks], [b[k] for k in ks]))
    r = float(np.mean(rs))
    rel = 2 * r / (1 + r)
    return {"models": len(models), "splits": len(rs), "split_half": r, "reliability": rel,
            "ceiling": math.sqrt(max(rel, 0.0))}


def fit_main(args) -> None:
    feats = json.loads(FEATURES.read_text())
    feats_2024 = json.loads(FEATURES_2024.read_text()) if FEATURES_2024.exists() else None
    for v in itertools.chain(feats.values(), (feats_2024 or {}).values()):
        v["features"] = F.interactions(v["features"])  # derived from others: no new trace needed
    sources = tuple(args.sources.split(","))
    rows = [r for r in load_results(sources) if r["key"] in feats]
    truth = {k: v for k, v in pooled(rows).items() if k in feats}
    first = {k: v for k, v in pooled([r for r in rows if r["source"] in FIRST_SOURCES]).items()}
    one_shot = pooled([r for r in rows if r["source"] in ONE_SHOT_SOURCES])
    models = sorted({r["model"] for r in rows})
    names = sorted(next(iter(feats.values()))["features"])
    code_names = sorted(F.code_features(""))
    keys = sorted(truth)
    t = np.array([truth[k] for k in keys])
    print(f"{len(rows)} (problem, model) results, {len(models)} models, {len(keys)} problems; "
          f"sources {', '.join(sources)}; source weights "
          + ", ".join(f"{s} {w:.2f}" for s, w in sorted(source_weights(rows).items())))
    report: dict = {"sources": list(sources), "left_out": {f"{s}:{m}": why for (s, m), why in LEFT_OUT.items()},
                    "source_weighting": "equal total weight per source", "models": models,
                    "problems": len(keys), "results": len(rows), "samples": int(sum(r["n"] for r in rows)),
                    "truth": "pooled pass rate over " + ", ".join(sources),
                    "truth_first": "pooled pass rate over " + ", ".join(s for s in FIRST_SOURCES if s in sources),
                    "truth_one_shot": "pooled pass rate over " + ", ".join(s for s in ONE_SHOT_SOURCES if s in sources)}
    loc = np.array([feats[k]["loc"] for k in keys], float)
    stat = np.array([static_of(k, feats) if feats[k]["static"]["kernels"] is not None else np.nan for k in keys])
    ok = ~np.isnan(stat)
    fk, ok1 = sorted(first), sorted(one_shot)
    report["baselines"] = {
        "line_count": {"spearman": spearman(loc, 1 - t), "ci95": bootstrap_ci(loc, 1 - t),
                       "spearman_first": spearman([feats[k]["loc"] for k in fk], [1 - first[k] for k in fk]),
                       "spearman_one_shot": spearman([feats[k]["loc"] for k in ok1], [1 - one_shot[k] for k in ok1])},
        "static_score": {"spearman": spearman(stat[ok], 1 - t[ok]), "ci95": bootstrap_ci(stat[ok], 1 - t[ok]),
                         "problems": int(ok.sum())}}
    report["source_agreement"] = agree = source_agreement(rows)
    report["one_shot_reliability"] = rel = pool_reliability([r for r in rows if r["source"] in ONE_SHOT_SOURCES])
    if rel:
        print(f"the one-shot sources' pool ({rel['models']} models): split-half Spearman {rel['split_half']:.3f}, "
              f"reliability {rel['reliability']:.3f}, ceiling for any predictor about {rel['ceiling']:.3f}")
    print(f"source agreement (Spearman of pooled pass rates): pairs mean {agree['mean_pair']:.3f} ("
          + ", ".join(f"{k} {v['spearman']:+.2f}" for k, v in agree["pairs"].items())
          + f"); each against the rest, mean {agree['mean_vs_rest']:.3f} ("
          + ", ".join(f"{k} {v['spearman']:+.2f}" for k, v in agree["vs_rest"].items()) + ")")
    for label, field, nm in (("full", "features", names), ("code_only", "code_features", code_names)):
        scores, pooled_scores = {}, {}
        for C in CS:
            preds = cross_validate(rows, feats, nm, models, field, C, repeats=3)
            pooled_scores[C] = figures(preds, truth, feats)["spearman"]
            scores[C] = float(np.mean([x["spearman"] for x in
                                       held_out_sources(rows, feats, nm, field, C, repeats=3).values()]))
            print(f"  {label} C={C}: cross-validated Spearman {pooled_scores[C]:.3f}, "
                  f"held-out sources {scores[C]:.3f}")
        # chosen on the held-out sources (new models, harness and problems: what the predictor is
        # for); among those within C_TOLERANCE of the best, the strongest regularization
        best_c = min(C for C in CS if scores[C] >= max(scores.values()) - C_TOLERANCE)
        with_trees = TREES_BLEND and field == "features"
        preds = cross_validate(rows, feats, nm, models, field, best_c, repeats=10, trees=with_trees)
        fig = figures(preds, truth, feats)
        mean_pred = np.mean([[p[k] for k in keys] for p in preds], axis=0)
        fig["ci95"] = bootstrap_ci(1 - mean_pred, 1 - t)
        fig["C"] = best_c
        fig["by_C"] = {"held_out_sources": scores, "pooled": pooled_scores}
        fig["against_first"] = figures(preds, first, feats)
        fig["against_one_shot"] = figures(preds, one_shot, feats) if one_shot else None
        fig["held_out_sources"] = held_out_sources(rows, feats, nm, field, best_c, trees=with_trees)
        report[label] = fig
        if field == "features":
            report["trees_blend"] = tb = trees_blend(rows, feats, nm, best_c,
                                                     {"pooled": truth, "one_shot": one_shot}, feats_2024=feats_2024)
            for lab in ("regression", "trees", "blend"):
                print(f"  {lab} (3 shuffles): pooled {tb[lab]['pooled']:.3f}, one-shot sources "
                      f"{tb[lab]['one_shot']:.3f}, held-out sources mean {tb[lab]['held_out_mean']:.3f}"
                      + (f" (at the 2024 sizes {tb[lab]['held_out_2024_mean']:.3f})" if feats_2024 else ""))
        X, mi, y, w, _ = expand(rows, feats, nm, models, field)
        fit = Fit(nm, models, best_c).fit(X, mi, y, w)
        p_all = fit.predict(problem_matrix(keys, feats, nm, field))
        params = fit.params()
        if LEVEL2_STATIC and field == "features":
            rule = level2_rule(dict(zip(keys, p_all)), feats)
            params["level2_static"] = rule
            ruled = with_level2(dict(zip(keys, p_all)), feats, rule)
            p_all = np.array([ruled[k] for k in keys])
            plain = cross_validate(rows, feats, nm, models, field, best_c, repeats=3, level2=False, trees=with_trees)
            fig["without_level2_static"] = {**figures(plain, truth, feats),
                                            "held_out_sources": {s: x["spearman"] for s, x in held_out_sources(
                                                rows, feats, nm, field, best_c, level2=False,
                                                trees=with_trees).items()}}
        if with_trees:
            clf, tree_models = fit_trees(rows, feats, nm)
            params["trees"] = export_trees(clf, nm, tree_models)
            fig["trees_split_gain"] = split_gain(clf, nm, tree_models)
            fig["seen_problems_sources"] = seen = seen_problems_sources(rows, feats, nm, best_c)
            print("  with the problems seen, held-out sources (blend / regression / line count): "
                  + ", ".join(f"{k} {v['blend']:.3f} / {v['regression']:.3f} / {v['line_count']:.3f}"
                              for k, v in seen.items()))
            P = problem_matrix(keys, feats, nm, field)
            p_trees = trees_predict(clf, tree_models, P)
            exported = np.array([trees_probability(feats[k][field], params["trees"]) for k in keys])
            if np.abs(exported - p_trees).max() > 1e-9:
                raise SystemExit(f"the exported trees disagree with scikit-learn by {np.abs(exported - p_trees).max():.3g}")
            # a few problems' features and scikit-learn's probability, for the package's tests
            params["trees"]["check"] = [{"problem": k, "features": feats[k][field], "pass_probability": float(p)}
                                        for k, p in list(zip(keys, p_trees))[::50]]
            p_all = np.array([blend(a, b) for a, b in zip(p_all, p_trees)])
        if feats_2024 is not None:
            # the parameters are fitted at the current sizes and meet the 2024 files in use too
            fig["sizes_2024"] = sz = {"held_out_sources": {s: {x: v[x] for x in ("spearman", "line_count")} for s, v in
                                                           held_out_sources(rows, feats, nm, field, best_c,
                                                                            test_feats=feats_2024,
                                                                            trees=with_trees).items()}}
            if LEVEL2_STATIC and field == "features":
                sz["without_level2_static"] = {s: x["spearman"] for s, x in held_out_sources(
                    rows, feats, nm, field, best_c, level2=False, test_feats=feats_2024, trees=with_trees).items()}
            # the pooled views at the 2024 sizes: out-of-fold predictions of the 2024 files' traces
            # against the pooled and the one-shot pass rates, beside the 2024 files' line counts
            k24 = [k for k in keys if k in feats_2024]
            p24 = cross_validate(rows, feats, nm, models, field, best_c, repeats=3, keys=k24,
                                 test_feats=feats_2024, trees=with_trees)
            for view, tr in (("pooled", truth), ("one_shot", one_shot)):
                if not tr:
                    continue
                tk = sorted(k for k in tr if k in feats_2024)
                sz[view] = {**figures(p24, {k: tr[k] for k in tk}, feats_2024),
                            "line_count": spearman([feats_2024[k]["loc"] for k in tk], [1 - tr[k] for k in tk])}
            print(f"  {label} at the 2024 sizes (3 shuffles): "
                  + ", ".join(f"{view} {sz[view]['spearman']:.3f} (line count {sz[view]['line_count']:.3f})"
                              for view in ("pooled", "one_shot") if view in sz))
            print(f"  {label} at the 2024 sizes, held-out sources: "
                  + ", ".join(f"{s} {v['spearman']:.3f} (line count {v['line_count']:.3f})"
                              for s, v in sz["held_out_sources"].items()))
        cuts = [float(c) for c in np.quantile(p_all, BUCKET_QUANTILES)]
        params["bucket_cuts"] = cuts
        b = buckets(p_all, tuple(cuts))
        params["training_bucket_pass_rate"] = [float(t[b == i].mean()) for i in range(3)]
        report[label]["params"] = params
        print(f"{label}{' (blend)' if with_trees else ''}: C={best_c} cross-validated Spearman {fig['spearman']:.3f} "
              f"(range {fig['spearman_range'][0]:.3f}-{fig['spearman_range'][1]:.3f}, 95% CI {fig['ci95'][0]:.3f}-"
              f"{fig['ci95'][1]:.3f}); bucket pass rates easy/medium/hard "
              + "/".join(f"{v:.3f}" for v in fig["bucket_pass_rate"]) + f", easy/hard {fig['easy_over_hard']:.2f}x; "
              f"against the first sources' pass rates {fig['against_first']['spearman']:.3f}, easy/hard "
              f"{fig['against_first']['easy_over_hard']:.2f}x"
              + (f"; against the one-shot sources' {fig['against_one_shot']['spearman']:.3f}, easy/medium/hard "
                 + "/".join(f"{v:.3f}" for v in fig["against_one_shot"]["bucket_pass_rate"])
                 + f", {fig['against_one_shot']['easy_over_hard']:.2f}x" if fig["against_one_shot"] else ""))
        for src, x in fig["held_out_sources"].items():
            print(f"  {label}, {src} held out ({x['problems']} problems): Spearman {x['spearman']:.3f}, "
                  f"line count {x['line_count']:.3f}; easy/medium/hard pass rates "
                  + "/".join(f"{v:.3f}" for v in x["bucket_pass_rate"]) + f", {x['easy_over_hard']:.2f}x")
    print(f"line count: Spearman {report['baselines']['line_count']['spearman']:.3f} "
          f"(95% CI {report['baselines']['line_count']['ci95'][0]:.3f}-{report['baselines']['line_count']['ci95'][1]:.3f}; "
          f"against the first sources {report['baselines']['line_count']['spearman_first']:.3f}, "
          f"the one-shot sources {report['baselines']['line_count']['spearman_one_shot']:.3f}); "
          f"static score: {report['baselines']['static_score']['spearman']:.3f}")
    top = sorted(zip(report["full"]["params"]["features"], report["full"]["params"]["weights"]),
                 key=lambda kv: -abs(kv[1]))[:12]
    print("largest weights (per standard deviation, + = more often correct):",
          ", ".join(f"{n} {w:+.2f}" for n, w in top))
    if "trees_split_gain" in report["full"]:
        print("the trees' largest shares of split gain:",
              ", ".join(f"{n} {g:.2f}" for n, g in list(report["full"]["trees_split_gain"].items())[:12]))
    if not args.dry_run:  # a trial fit leaves the committed figures as they are
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(json.dumps(without_trees(report), indent=1))
    model = {"about": "curate's difficulty predictor: logistic regression and gradient-boosted trees (full: the mean "
                      "of their logits) of a language model's kernel being "
                      "correct on a KernelBench problem, fitted by benchmarks/fit_difficulty.py on "
                      "curate/data/passrates/results.csv (see its PROVENANCE.md); docs/difficulty.md",
             "sources": list(sources), "left_out": report["left_out"], "source_weighting": report["source_weighting"],
             "truth": report["truth"],
             "full": report["full"]["params"], "code_only": report["code_only"]["params"],
             "cross_validated": {k: {**{x: report[k][x] for x in ("spearman", "ci95", "bucket_pass_rate", "easy_over_hard")},
                                     "one_shot_spearman": (report[k]["against_one_shot"] or {}).get("spearman")}
                                 for k in ("full", "code_only")},
             "baselines": {**{k: v["spearman"] for k, v in report["baselines"].items()},
                           "line_count_one_shot": report["baselines"]["line_count"]["spearman_one_shot"]},
             "held_out_sources": {k: {s: {x: v[x] for x in ("spearman", "line_count")}
                                      for s, v in report[k]["held_out_sources"].items()} for k in ("full", "code_only")},
             "source_agreement": {"mean_pair": agree["mean_pair"], "mean_vs_rest": agree["mean_vs_rest"]}}
    if not args.dry_run:
        MODEL.write_text(dump_model(model))
        print(f"wrote {MODEL} and {REPORT}")


def without_trees(report: dict) -> dict:
    """``report`` with the exported trees summarized (their size; the model JSON holds them)."""
    trees = report["full"]["params"].get("trees")
    if not trees:
        return report
    summary = {"trees": len(trees["trees"]), "nodes": sum(map(len, trees["trees"])), "settings": trees["settings"],
               "in": "curate/rank/difficulty_model.json"}
    return {**report, "full": {**report["full"], "params": {**report["full"]["params"], "trees": summary}}}


def dump_model(model: dict) -> str:
    """``model`` as JSON, indented, but each exported tree on one line."""
    trees = model["full"].get("trees")
    if not trees:
        return json.dumps(model, indent=1) + "\n"
    marker = "@trees@"
    text = json.dumps({**model, "full": {**model["full"], "trees": {**trees, "trees": marker}}}, indent=1)
    body = "[\n" + ",\n".join(json.dumps(t, separators=(",", ":")) for t in trees["trees"]) + "\n]"
    return text.replace(json.dumps(marker), body) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("features", "fit"))
    ap.add_argument("--sources", default=",".join(DEFAULT_SOURCES),
                    help="comma-separated sources of results.csv to fit on")
    ap.add_argument("--dry-run", action="store_true", help="print only; leave the model JSON and the figures file as they are")
    ap.add_argument("--sizes", choices=("current", "2024"), default="current",
                    help="features: KernelBench's files at their current sizes (the fit's) or their 2024 sizes "
                         "(benchmarks/data/kernelbench-2024.jsonl; the fit then also reports its figures on them)")
    args = ap.parse_args()
    if args.what == "features":
        if args.sizes == "2024":
            build_features(FEATURES_2024, [json.loads(x) for x in PROBLEMS_2024.read_text().splitlines() if x.strip()])
        else:
            build_features(FEATURES)
    else:
        fit_main(args)


if __name__ == "__main__":
    main()
