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
difficulty         str, trivial / easy / medium / hard / unsolved, or unranked when no signal
                   exists (see .difficulty)
difficulty_score   float in [0, 1], higher is harder (null when unranked)
difficulty_signal  str, what set the bucket: ``pass_rate`` (a solver), ``inductor+library``
                   (``inductor``, ``library``: measure's GPU figures), ``static`` (the
                   meta-device trace), ``none``
level              int, KernelBench level 1/2/3 from the traced ATen graph (null: the trace
                   failed; see :mod:`curate.structure`)
category           str, operator category where the forward spends its time (matmul, conv,
                   attention, normalization, pooling, reduction, embedding, data_movement,
                   elementwise, other; null: the trace failed)
solver             str, ``none``, ``inductor``, ``openai:<model>`` or ``completions:<file>``
rank_error         str, why a solver did not rank a problem (null when it did or none ran)
=================  ========================================================================

With ``solver="none"`` (the default) no candidate is generated: difficulty comes from what
measure recorded on the GPU (TorchInductor's speedup, the vendor-library share of GPU time,
the kernel count), or on a CPU-only run from the meta-device trace. An LLM solver's pass rate
takes precedence wherever it ranked a row; the Inductor solver's only where no GPU figures
exist (it passes nearly everything it compiles, which says little about difficulty).

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
