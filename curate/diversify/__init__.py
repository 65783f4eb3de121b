"""The ``diversify`` stage: shapes of each problem aimed at a runtime band on a target GPU.

Modules: :mod:`.shapes` names the axes a problem can grow along and scales them (pure
Python), :mod:`.cost` prices a forward on the ``meta`` device against a GPU roofline,
:mod:`.plan` picks the shapes from those estimates in a sandboxed process, :mod:`.calibrate`
times them on a GPU and corrects them, and :mod:`.stage` reads and writes the tables
(polars; imported only when :func:`run` is called, so sandbox children stay light).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["run"]


def run(out: Path | str, source: Path | str | None = None, **kwargs: Any) -> dict[str, Any]:
    """Run the diversify stage; see :func:`curate.diversify.stage.run` for the arguments."""
    from curate.diversify.stage import run as _run

    return _run(out=out, source=source, **kwargs)
