"""The ``dedup`` stage: exact dedup, MinHash-LSH near-dedup, KernelBench decontamination.

The stage itself is :func:`curate.dedup.stage.run` (its docstring describes the steps and
the columns; :class:`curate.dedup.options.DedupOptions` its options). This package module
imports nothing heavy, so that dedup's worker processes start with only what they use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run", "ReferenceUnavailable"]


def __getattr__(name: str) -> Any:
    if name == "run":
        from curate.dedup.stage import run

        return run
    if name == "ReferenceUnavailable":
        from curate.dedup.reference import ReferenceUnavailable

        return ReferenceUnavailable
    raise AttributeError(f"module 'curate.dedup' has no attribute {name!r}")
