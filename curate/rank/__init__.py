"""The ``rank`` stage: every problem's difficulty and structure, and optionally a baseline
solver's candidates scored by the verifier.

Reads ``OUT/measure`` (or the latest earlier stage with problems, or ``source``) and writes
``OUT/rank`` with these columns added to every kept row:

=================  ========================================================================
pass_rate          float, a solver's correct / candidates (null when no solver ranked it)
pass_at_k          float, unbiased pass@k (Chen et al. 2021; see .passk); for a deterministic
                   solver (inductor) equal to pass_rate; null when fewer than k candidates
n_candidates       int, candidates verified
n_correct          int, candidates the verifier accepted
best_speedup       float, best eager / candidate time among correct candidates (null: none)
difficulty         str, trivial / easy / medium / hard / unsolved (a solver's pass rate), or
                   easy / medium / hard (the predicted pass rate, cut at its quartiles over
                   KernelBench's problems; see .predict)
difficulty_score   float in [0, 1]: the estimated probability that a baseline model's kernel
                   for the problem is wrong: ``1 - pass_rate`` of an LLM solver, else
                   ``1 - predicted_pass_rate``
difficulty_signal  str, what set it: ``pass_rate`` (an LLM solver), ``predicted`` (the
                   predictor on the trace and the code), ``predicted_code`` (the code alone:
                   the trace failed)
predicted_pass_rate float, the predictor's pass rate for every row (:mod:`.predict`, fitted
                   on public per-problem results of language models on KernelBench: a logistic
                   model, level 2 ordered by the structural score, blended with trees)
speedup_headroom   float in [0, 1], how hard the problem is to speed up: compiler headroom,
                   vendor-library share and kernel count (see .difficulty): a second axis,
                   apart from whether a model writes a correct kernel (null: no trace and
                   no GPU figures)
headroom_signal    str, what set it: ``inductor+library`` (``inductor``, ``library``:
                   measure's GPU figures), ``static`` (the meta-device trace), ``none``
level              int, KernelBench level 1/2/3 from the traced ATen graph (null: the trace
                   failed; see :mod:`curate.structure`)
category           str, operator category where the forward spends its time (matmul, conv,
                   attention, normalization, pooling, reduction, embedding, data_movement,
                   elementwise, other; null: the trace failed)
solver             str, ``none``, ``inductor``, ``openai:<model>`` or ``completions:<file>``
rank_error         str, why a solver did not rank a problem (null when it did or none ran)
verify_reasons     str, JSON ``{reason: candidates}``: the verifier's verdicts on the row's
                   candidates (``correct``, ``wrong output on trial 0``, ``no custom kernel
                   launched``, ...; null when no solver ranked it)
=================  ========================================================================

With ``solver="none"`` (the default) no candidate is generated: every row's difficulty comes
from the predictor (:mod:`.predict`), its speed headroom from what measure recorded on the GPU
(TorchInductor's speedup, the vendor-library share of GPU time, the kernel count), or on a
CPU-only run from the meta-device trace. An LLM solver's pass rate takes precedence wherever it
ranked a row; the Inductor solver's pass rate is recorded but sets no difficulty (it passes
nearly everything it compiles, which says little about a model writing a kernel).

Rows are rejected only for broken input: no code (``missing_code``), ``init_args`` or
``input_spec`` that are not JSON lists (``bad_input_spec``), or a reference that fails inside the
verifier (``reference_error``). A problem whose candidates all fail is kept as ``unsolved``.

Verification results are cached under ``cache_dir`` (default ``OUT/rank/cache``) keyed by
reference, candidate and settings, so a killed run started again verifies only what is left.
"""

from __future__ import annotations

from curate.harness import lazy_stage

__all__ = ["run", "default_source"]


# the stage (polars, the verifier) loads when asked for: the CLI reads the options alone
__getattr__ = lazy_stage(__name__)
