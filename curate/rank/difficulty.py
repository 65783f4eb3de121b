"""Speed headroom, and the buckets of a solver's pass rate.

What ``difficulty_score`` is, the estimated probability that a baseline model's kernel is
wrong, comes from a solver's verified pass rate (:func:`difficulty` sets its bucket) or from
the predictor (:mod:`curate.rank.predict`). This module also scores a second axis, the
``speedup_headroom`` column: how hard the problem is to make faster than the compiler and the
vendor libraries, which tracks the share of models whose kernels are correct *and faster*, not
whether a kernel is correct at all (on KernelBench, Spearman 0.27-0.39 with the first and 0.40
with the second for this score; ``docs/difficulty.md``).

``pass_rate`` buckets (:func:`difficulty`): ``unsolved`` (no correct candidate), then ``easy``
(pass rate >= 2/3), ``medium`` (>= 1/3), ``hard``; on a GPU a correct best candidate slower
than eager moves one bucket harder and an easy problem whose best candidate reaches the
reward's 3x cap is ``trivial``.

``speedup_headroom`` from what ``curate measure`` recorded on a GPU (:func:`measured_score`;
``headroom_signal`` ``inductor+library``, or ``inductor``, ``library`` when only one was
measured):

- compiler headroom ``h = clip((ln 3 - ln s) / (ln 3 - ln 0.5), 0, 1)`` from
  ``inductor_speedup`` s = eager_ms / compile_ms: TorchInductor beating eager by 3x (the
  reward's cap) shows fusion wins a hand-written kernel can also take (h = 0); a
  compiler no faster than eager (s = 1: h = 0.61) or slower (s <= 0.5: h = 1) leaves
  only wins the compiler did not find;
- ``library_share`` L: the share of the forward's GPU time in cuBLAS/cuDNN/CUTLASS
  kernels, tuned by their vendors and the hardest to beat by hand;
- program size ``k = clip(log2(kernels) / log2(64), 0, 1)``: one eager kernel is one
  operator to write, 64 or more a whole model;

``score = (0.40 h + 0.45 L + 0.15 k) / (sum of the weights of the signals present)``.
A lone GEMM (s ~ 1, L ~ 1, one kernel) scores 0.69; conv + bias + ReLU (s ~ 1.3, L ~ 0.8)
about 0.6; a ReLU (s ~ 1, L = 0) 0.25; a chain Inductor speeds up 3x without library kernels
close to 0. ``eager_ms`` is not in the score: diversify aimed every shape at the same runtime
band, so it tells the shape, not the problem. Rows without GPU figures (a CPU-only run): the
same formula on the meta-device trace (:func:`static_score`, ``headroom_signal`` ``static``):
L from the roofline share of matmul/conv/attention steps, k from the traced kernel count, h
unknown (left out, weights renormalised). :func:`bucket` cuts a headroom score at
:data:`MEDIUM_SCORE` and :data:`HARD_SCORE`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ORDER = ("trivial", "easy", "medium", "hard", "unsolved", "unranked")
#: Thresholds of :func:`bucket` on a headroom score.
MEDIUM_SCORE = 0.40
HARD_SCORE = 0.65
#: Weights of compiler headroom, library share and program size.
WEIGHTS = {"headroom": 0.40, "library": 0.45, "size": 0.15}
#: inductor_speedup at which headroom is 0 (the reward's cap) and 1.
HEADROOM_SPEEDUPS = (3.0, 0.5)
#: Kernel count at which program size is 1.
SIZE_KERNELS = 64


@dataclass(frozen=True)
class DifficultyRule:
    """Thresholds of :func:`difficulty` (pass rates in [0, 1], speedups x eager)."""

    easy_pass_rate: float = 2 / 3
    medium_pass_rate: float = 1 / 3
    trivial_speedup: float = 3.0
    slow_speedup: float = 1.0


def difficulty(pass_rate: float | None, n_correct: int, best_speedup: float | None,
               speedup_on_gpu: bool, rule: DifficultyRule = DifficultyRule()) -> str:
    """The bucket of one problem from a solver's results (see the module docstring)."""
    if pass_rate is None:
        return "unranked"
    if n_correct == 0:
        return "unsolved"
    if pass_rate >= rule.easy_pass_rate:
        bucket = "easy"
    elif pass_rate >= rule.medium_pass_rate:
        bucket = "medium"
    else:
        bucket = "hard"
    if speedup_on_gpu and best_speedup is not None:
        if bucket == "easy" and best_speedup >= rule.trivial_speedup:
            return "trivial"
        if best_speedup < rule.slow_speedup and bucket != "hard":
            return ORDER[ORDER.index(bucket) + 1]
    return bucket


def _finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def headroom(inductor_speedup: float) -> float:
    """Compiler headroom in [0, 1] from ``eager_ms / compile_ms`` (> 0; see the docstring)."""
    hi, lo = HEADROOM_SPEEDUPS
    h = (math.log(hi) - math.log(inductor_speedup)) / (math.log(hi) - math.log(lo))
    return min(1.0, max(0.0, h))


def program_size(kernels: int) -> float:
    """Program size in [0, 1] from the kernels one eager forward runs (>= 0)."""
    return min(1.0, max(0.0, math.log2(max(1, kernels)) / math.log2(SIZE_KERNELS)))


def combine(parts: dict[str, float]) -> float | None:
    """The weighted mean of the parts present (keys of :data:`WEIGHTS`); None when none is."""
    w = sum(WEIGHTS[k] for k in parts)
    return sum(WEIGHTS[k] * v for k, v in parts.items()) / w if w else None


def measured_score(inductor_speedup: Any, library_share: Any, kernels: Any) -> tuple[float, str] | None:
    """``(score, signal)`` from a row's GPU figures, or None when it has neither an Inductor
    speedup nor a library share (kernels alone say too little)."""
    s, lib, k = _finite(inductor_speedup), _finite(library_share), _finite(kernels)
    parts: dict[str, float] = {}
    names = []
    if s is not None and s > 0:
        parts["headroom"] = headroom(s)
        names.append("inductor")
    if lib is not None:
        parts["library"] = min(1.0, max(0.0, lib))
        names.append("library")
    if not parts:
        return None
    if k is not None and k >= 1:
        parts["size"] = program_size(int(k))
    return combine(parts), "+".join(names)


def static_score(library_share: float, kernels: int) -> float:
    """The score from a meta-device trace: the roofline share of library-class steps
    (matmul, conv, attention) in [0, 1] and the kernels traced."""
    return combine({"library": min(1.0, max(0.0, library_share)), "size": program_size(kernels)})


def bucket(score: float) -> str:
    """``easy``, ``medium`` or ``hard`` for a measured or static headroom score in [0, 1]."""
    return "easy" if score < MEDIUM_SCORE else "medium" if score < HARD_SCORE else "hard"


def on_gpu(row: dict[str, Any]) -> bool:
    """True when a row's measure figures come from a GPU."""
    return bool(row.get("gpu")) or str(row.get("device") or "").startswith("cuda")
