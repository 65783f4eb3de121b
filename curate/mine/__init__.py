"""The ``mine`` stage: PyTorch modules from real code -> KernelBench-format problems.

Pipeline inside the stage: resolve the manifest's sources (:mod:`.sources`); prefilter their
files, index the rest in parallel and find ``nn.Module`` subclasses (:mod:`.scan`,
:mod:`.index`); make each self-contained (:mod:`.closure`); synthesize constructor
arguments and inputs in sandboxed, guarded workers (:mod:`.synthesize`). The parallel work
runs on an executor (:mod:`curate.executor`): local processes or a Ray cluster.

Rows in = candidate classes + files that may define a class but do not parse + sources
that could not be had; each ends kept or rejected with a reason. Files the prefilter
rules out (no top-level ``class Name(``) cannot hold a problem: they are counted per source
in ``stats.json`` (``files``, ``prefilter_skipped``), not rows.

A manifest entry's ``deps`` (other pinned PyPI packages) are downloaded too: closures may
copy their code, with its provenance in a comment. Imports of einops, packaging and pieces
of transformers' infrastructure resolve to torch-only stand-ins (:mod:`curate.mine.shims`).
A class rejected where a placeholder of another package failed is synthesized a second time
with the code of that package, where the source declares it (or it is torchvision or timm),
and kept if that try keeps it (:mod:`curate.mine.declared`).

Mined code that reaches for the network, writes outside its working folder or starts
processes is stopped at the first attempt and rejected as ``network``, ``filesystem`` or
``process`` (see :mod:`curate.sandbox`). Synthesis itself rejects code whose errors show it
needs a download or data files it does not have (``needs_network``, ``needs_data_files``,
e.g. a stand-in that refuses to fetch weights), and modules whose output is non-finite or
differs between two runs on the same inputs (``nonfinite_output``: also with inputs drawn in
[0.01, 0.99]; ``random_output``).

Resumable: each synthesis outcome is appended to ``OUT/mine/_journal.jsonl`` as it finishes;
a run killed half-way and started again with the same manifest and settings synthesizes
only the classes missing from it, and writes the same table as an uninterrupted run. A
finished run keeps the journal as ``OUT/mine/_synthesized.jsonl`` (the stage harness renames
it, :meth:`curate.harness.stage.StageRun.journal`), so the next run synthesizes only classes
that are new or whose closure changed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["run", "closures", "default_cache"]


def default_cache() -> Path:
    """Download/clone cache: ``$CURATE_CACHE`` or ``~/.cache/curate``."""
    return Path(os.environ.get("CURATE_CACHE", Path.home() / ".cache" / "curate"))


def __getattr__(name: str) -> Any:
    if name == "run":  # see curate.mine.stage.run; its options: curate.mine.options
        from curate.mine.stage import run

        return run
    raise AttributeError(f"module 'curate.mine' has no attribute {name!r}")


def closures(*args: Any, **kwargs: Any) -> list:
    """Closures of a scan's candidates: see :func:`curate.mine.stage.closures`."""
    from curate.mine.stage import closures as _closures

    return _closures(*args, **kwargs)
