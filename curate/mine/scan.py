"""Scan one resolved source: which files can hold a module class, their index, the candidates.

Phases, each timed (seconds in :attr:`Scan.seconds`):

1. ``prefilter``: read each file's bytes and keep those with a top-level ``class Name(``
   line (:func:`curate.mine.index.may_define_class`); the others cannot define an
   ``nn.Module`` subclass. They are counted (:attr:`Scan.skipped`), not rows: a file is a
   row only when it could hold a problem, i.e. when it may define a class but does not parse.
2. ``index``: index the kept files in parallel through an executor.
3. ``classes``: resolve each indexed class's bases to ``torch.nn.Module`` (following
   imports into other files of the source, which are indexed on demand when the prefilter
   skipped them: package ``__init__`` re-exports, helper files).

The dependency closures are built afterwards from :attr:`Scan.resolver`; files they need
that were skipped are indexed then, once each.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from curate.executor import Executor
from curate.mine.closure import ClosureError, Resolver, module_name
from curate.mine.index import FileIndex, index_source, may_define_class
from curate.mine.sources import Source
from curate.progress import progress


class FileResolver(Resolver):
    """A :class:`~curate.mine.closure.Resolver` that remembers which module files exist:
    closures ask for the same few hundred modules hundreds of thousands of times."""

    def __init__(self, root: Path, indexes: dict, importable: frozenset[str] = frozenset(),
                 dependencies: Sequence[tuple[Path, str]] = ()):
        super().__init__(root, indexes, importable, dependencies)
        self._paths: dict[str, Path | None] = {}

    def module_path(self, module: str) -> Path | None:
        try:
            return self._paths[module]
        except KeyError:
            path = self._paths[module] = super().module_path(module)
            return path


@dataclass
class Scan:
    """What mining found in one source before any closure or synthesis.

    Attributes:
        files: the source's Python files (after include/exclude).
        skipped: relative paths the prefilter ruled out (no top-level class with a base).
        broken: ``(relative path, error)`` of files that may hold a class but do not parse.
        candidates: ``(relative path, module, class name)`` of ``nn.Module`` subclasses, in
            file then source order.
        classes: top-level classes seen in the indexed files.
        seconds: wall-clock time per phase (``prefilter``, ``index``, ``classes``).
        cpu_seconds: CPU time per phase of this process and of the local worker processes
            that ended within it (Ray workers are not counted): on a shared machine it
            shows the work apart from the waiting.
    """

    source: Source
    resolver: Resolver
    files: int = 0
    skipped: list[str] = field(default_factory=list)
    broken: list[tuple[str, str]] = field(default_factory=list)
    candidates: list[tuple[str, str, str]] = field(default_factory=list)
    classes: int = 0
    eager: int = 0  # files indexed up front (the rest of the resolver's indexes came on demand)
    seconds: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def indexed_on_demand(self) -> int:
        """Files indexed later because a base-class lookup or a closure needed them."""
        return sum(1 for i in self.resolver.indexes.values() if i is not None) - self.eager


def cpu_time(executor: Executor | None = None) -> float:
    """CPU seconds of this process, its ended (waited-for) child processes and the
    executor's live local workers."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    live = executor.worker_cpu_seconds() if executor is not None else 0.0
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime + live


def index_file(item: tuple[str, str, bool]) -> tuple[FileIndex | None, str]:
    """Index one file ``(path, module, is_package)``; the error (``"Type: message"``) if it
    does not parse. Module level so executors can send it to other processes."""
    path, module, is_pkg = item
    try:
        return index_source(Path(path).read_text(errors="replace"), module, is_pkg), ""
    except Exception as exc:  # libcst.ParserSyntaxError, decoding problems
        first = str(exc).splitlines()[0] if str(exc) else ""
        return None, f"{type(exc).__name__}: {first}"


def scan(source: Source, executor: Executor, files: list[Path] | None = None,
         dependencies: Sequence[tuple[Path, str]] = ()) -> Scan:
    """Prefilter, index and find the ``nn.Module`` subclasses of ``source``'s files.

    Args:
        files: the files to scan (default: :meth:`Source.files`).
        dependencies: ``(root, label)`` of the source's dependency packages
            (:func:`curate.mine.deps.dependency_roots`): closures may copy their code, and
            base classes are followed into them. Their files are not candidates.
    """
    files = source.files() if files is None else files
    t0, c0 = time.monotonic(), cpu_time(executor)
    kept, skipped = [], []
    for f in files:
        (kept if may_define_class(f.read_bytes()) else skipped).append(f)
    t1, c1 = time.monotonic(), cpu_time(executor)

    items = []
    for f in kept:
        mod, is_pkg = module_name(source.root, f)
        items.append((str(f), mod, is_pkg))
    # ~2-4 chunks per worker and round: few round trips, still balanced on big files
    chunk = max(1, min(32, len(items) // (8 * executor.workers) or 1))
    results = list(progress(executor.map(index_file, items, chunksize=chunk), len(items),
                            f"index {source.name}"))
    t2, c2 = time.monotonic(), cpu_time(executor)

    # a file that does not parse is remembered as None, so no lookup parses it again
    indexes: dict[str, FileIndex | None] = {mod: idx for (_, mod, _), (idx, _) in zip(items, results)}
    result = Scan(source, FileResolver(source.root, indexes, source.importable, dependencies),
                  files=len(files),
                  skipped=[f.relative_to(source.root).as_posix() for f in skipped],
                  eager=sum(1 for i in indexes.values() if i is not None))
    for f, (_, mod, _), (idx, err) in zip(kept, items, results):
        rel = f.relative_to(source.root).as_posix()
        if idx is None:
            result.broken.append((rel, err))
            continue
        result.classes += len(idx.classes)
        for cls in idx.classes:
            if result.resolver.is_module_class(mod, cls):
                result.candidates.append((rel, mod, cls))
    t3, c3 = time.monotonic(), cpu_time(executor)
    result.seconds = {"prefilter": t1 - t0, "index": t2 - t1, "classes": t3 - t2}
    result.cpu_seconds = {"prefilter": c1 - c0, "index": c2 - c1, "classes": c3 - c2}
    return result


def closure_of(resolver: Resolver, item: tuple[str, str, str]) -> tuple[str, str]:
    """``("ok", source)`` of candidate ``(rel, module, class)``'s closure, else ``(reason,
    detail)``. Module level so executors can run it with the resolver as shared data."""
    _, mod, cls = item
    try:
        return "ok", resolver.closure(mod, cls).source
    except ClosureError as exc:
        return exc.reason, exc.detail
    except RecursionError:
        return "closure_too_deep", "dependency closure recursion limit"


def closure_sources(found: Scan, executor: Executor, candidates: list[tuple[str, str, str]],
                    min_parallel: int = 500) -> list[tuple[str, str]]:
    """:func:`closure_of` for each candidate, in order. Spread over the executor's workers
    (each receives the resolver once) when there are at least ``min_parallel``: below that,
    sending the index costs more than it saves."""
    if executor.workers <= 1 or len(candidates) < min_parallel:
        return [closure_of(found.resolver, c) for c in candidates]
    chunk = max(1, min(64, len(candidates) // (8 * executor.workers)))
    return list(progress(executor.map(closure_of, candidates, shared=found.resolver, chunksize=chunk),
                         len(candidates), f"closures {found.source.name}"))
