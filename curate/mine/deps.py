"""Dependencies of a mine source: other packages whose code its modules may copy.

A manifest entry can name them::

    - {kind: pypi, name: torchgeo, version: "0.8.1", deps: [{name: timm, version: "1.0.31"}]}

Each dependency is a PyPI distribution (pinned), downloaded like a ``pypi`` source; the
closure (:class:`curate.mine.closure.Resolver`) follows imports into it and copies what a
mined class needs, so the problem stays runnable with torch and numpy alone. Its name, version and
licence are written into the problems that use its code.
"""

from __future__ import annotations

import logging
from pathlib import Path

from curate.mine.sources import Source, SourceUnavailable, resolve

log = logging.getLogger(__name__)


def provenance_label(src: Source) -> str:
    """``"name version (licence)"``: how a dependency's code is credited in the problems that
    copy it."""
    return f"{src.name} {src.version} ({src.licence or 'licence unknown'})"


def dependency_roots(entry: dict, cache: Path) -> list[tuple[Path, str]]:
    """``(root, "name version (licence)")`` for each dependency of manifest ``entry`` that
    could be had; one that could not is logged and skipped (its imports then stay missing,
    and the classes needing them are rejected as ``import_missing``)."""
    out = []
    for dep in entry.get("deps") or ():
        spec = {"kind": "pypi", **dep} if isinstance(dep, dict) else {"kind": "pypi", "name": str(dep)}
        try:
            src = resolve(spec, cache)
        except SourceUnavailable as exc:
            log.warning("dependency %s of %s unavailable: %s", spec["name"], entry.get("name"), exc)
            continue
        out.append((src.root, provenance_label(src)))
    return out
