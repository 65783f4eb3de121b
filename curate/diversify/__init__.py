"""The ``diversify`` stage: shapes of each problem aimed at a runtime band on a target GPU.

Modules: :mod:`.shapes` names the axes a problem can grow along and scales them (pure
Python), :mod:`.cost` prices a forward on the ``meta`` device against a GPU roofline,
:mod:`.plan` picks the shapes from those estimates in a sandboxed process, :mod:`.calibrate`
times them on a GPU and corrects them, :mod:`.options` declares the stage's options, and
:mod:`.stage` reads and writes the tables (polars; imported only when :func:`run` is asked
for, so sandbox children stay light).
"""

from __future__ import annotations

from typing import Any

__all__ = ["run"]


def __getattr__(name: str) -> Any:
    if name == "run":  # see curate.diversify.stage.run
        from curate.diversify.stage import run

        return run
    raise AttributeError(f"module 'curate.diversify' has no attribute {name!r}")
