"""The scaffolding every stage shares: its Python signature made from its options, the input
folder it reads, its clock, its resume journal, its progress bars, where its work runs (the
executor its ``executor``/``workers``/``ray_address`` options choose), and the writing of
kept rows, rejected rows and ``stats.json``.

A stage's work is a function of a :class:`StageRun` and its options, one keyword each::

    @stage("dedup")
    def run(sr: StageRun, threshold, num_perm, ...) -> dict:
        df = read_problems(sr.input)         # --from, else OUT/<previous stage>
        ...
        return sr.write(kept, rejected, df.height, extra)  # tables, stats.json, seconds

The other services, for stages that need them::

    journal = sr.journal(settings)            # OUT/<stage>/_journal.jsonl, resumed if there
    for i, outcome in sr.progress(sr.sandboxed(task, calls, timeout_s=60, mem_mb=4096),
                                  len(calls), "plan"):
        journal.add(key, outcome.value)       # a killed run's rerun skips it
    for result in sr.map(fn, items): ...      # on the stage's executor, input order

The journal is removed once :meth:`StageRun.write` has written the tables (kept on failure,
so a rerun resumes), and an executor the harness made is closed when the stage returns or
raises.

:func:`stage` checks that the function's keywords are the options dataclass's fields (one
declaration: a field added there and not here fails at import), and gives the wrapped
``run(out, source=None, *, <options with their defaults>)`` (mine: ``run(manifest, out, ...)``)
that callers and :mod:`curate.pipeline` use.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from curate.harness.options import default, fields, options_class, unknown_error

#: The resume journal's file name in ``OUT/<stage>``.
JOURNAL = "_journal.jsonl"


def resolve_input(out: Path | str, stage: str, source: Path | str | None = None) -> Path:
    """The table ``stage`` reads: ``source`` when given (a stage folder or a parquet file),
    else ``OUT/<previous stage>`` or, when that stage was skipped, the latest earlier stage
    folder holding problems (:func:`curate.table.latest_input`).

    Raises:
        FileNotFoundError: no source and no earlier stage output under ``out``.
    """
    from curate.table import latest_input

    return Path(source) if source is not None and str(source) != "" else latest_input(out, stage)


@dataclass
class StageRun:
    """One run of a stage: where it writes, what it reads, since when it runs, where its work
    runs, and its journal.

    Attributes:
        stage: the stage name. out: the run folder. source: ``--from`` as given (or None).
        t0: ``time.monotonic()`` when the stage started.
        executor_kind: the stage's ``executor`` option (``local``, ``ray``) or an
            :class:`curate.executor.Executor` given through the Python API (not closed here).
        workers: the stage's ``workers`` option (None: the executor's default).
        ray_address: the stage's ``ray_address`` option.
    """

    stage: str
    out: Path
    source: Path | None = None
    t0: float = field(default_factory=time.monotonic)
    executor_kind: Any = "local"
    workers: int | None = None
    ray_address: str | None = None
    _executor: Any = field(default=None, repr=False)
    _owned: bool = field(default=False, repr=False)
    _journal: Any = field(default=None, repr=False)
    _keep_as: str | None = field(default=None, repr=False)

    @property
    def dir(self) -> Path:
        """``OUT/<stage>``."""
        return self.out / self.stage

    @functools.cached_property
    def input(self) -> Path:
        """The input table (:func:`resolve_input`), resolved when first asked for, so a stage
        checks its options before it looks for input."""
        return resolve_input(self.out, self.stage, self.source)

    def seconds(self) -> float:
        """Seconds since the stage started."""
        return time.monotonic() - self.t0

    # -- where the work runs -------------------------------------------------------------

    @property
    def executor(self) -> Any:
        """The stage's :class:`curate.executor.Executor`: a
        :class:`~curate.executor.LocalExecutor` of ``workers`` processes for ``local``, a
        :class:`~curate.executor.RayExecutor` (joining ``ray_address``, else a running or a
        new local instance) for ``ray``, or the executor the caller gave. Made on first use
        and closed by the harness when the stage ends.

        Raises:
            ValueError: an unknown executor kind. RuntimeError: ``ray`` without the package.
        """
        if self._executor is None:
            from curate.executor import Executor, make_executor

            if isinstance(self.executor_kind, Executor):
                self._executor = self.executor_kind
            else:
                self._executor = make_executor(self.executor_kind, self.workers, self.ray_address)
                self._owned = True
        return self._executor

    @property
    def remote(self) -> Any:
        """The stage's executor unless the stage runs ``local`` (then None): Ray, or an
        executor the caller gave. For work whose local path runs on a pool of its own
        (dedup's threads, a sandbox pool) and takes an executor only to send it elsewhere."""
        return None if self.executor_kind == "local" else self.executor

    def map(self, fn: Callable, items: Any, *, shared: Any = None, chunksize: int = 1) -> Any:
        """``fn(item)`` (``fn(shared, item)`` with ``shared``) for each item on the stage's
        :attr:`executor`; yields the results in input order. ``fn`` must be a module-level
        function, items and results picklable (see :mod:`curate.executor`).

        Raises:
            whatever ``fn`` raises.
        """
        given = {} if shared is None else {"shared": shared}
        return self.executor.map(fn, items, chunksize=chunksize, **given)

    def sandboxed(self, fn: Callable, calls: Any, *, timeout_s: float, mem_mb: int | None,
                  guard: bool = False, workers: int | None = None) -> Any:
        """Untrusted ``fn(*args, **kwargs)`` per ``(args, kwargs)`` of ``calls``, each in a
        sandbox process (time limit ``timeout_s`` seconds, address space ``mem_mb`` MiB):
        on :attr:`remote` when the stage runs elsewhere (a sandboxed Ray task each), else on
        a local :class:`curate.sandbox.Sandbox` pool of ``workers`` processes (default: the
        stage's ``workers`` option, then the CPU count). Yields ``(index, Outcome)`` in
        completion order."""
        from curate.executor import sandboxed_map

        return sandboxed_map(fn, calls, executor=self.remote,
                             workers=self.workers if workers is None else workers,
                             timeout_s=timeout_s, mem_mb=mem_mb, guard=guard)

    def progress(self, items: Any, total: int | None = None, label: str = "") -> Any:
        """``items``, shown as a progress bar ``<stage>: <label>`` on stderr
        (:func:`curate.progress.progress`: a line every 10% when stderr is not a terminal)."""
        from curate.progress import progress

        return progress(items, total, f"{self.stage}: {label}" if label else self.stage)

    # -- resume ------------------------------------------------------------------------

    def journal(self, settings: Any, keep_as: str | None = None) -> Any:
        """The stage's resume journal (:class:`curate.journal.Journal`) at
        ``OUT/<stage>/_journal.jsonl`` for ``settings`` (JSON-serialisable: other settings
        start a new journal); the same one on a second call. A run killed part way leaves it
        behind, and the rerun skips what it holds; :meth:`write` removes it once the tables
        are written.

        Args:
            keep_as: instead of removing it, rename the finished journal to
                ``OUT/<stage>/<keep_as>``, a cache of outcomes keyed by content that the
                next run starts from (mine: the syntheses of unchanged classes).
        Raises:
            ValueError: a second call with other settings.
        """
        from curate.journal import Journal

        path = self.dir / JOURNAL
        if self._journal is not None:
            if self._journal.fingerprint != Journal.normal(settings):
                raise ValueError(f"{self.stage}: one journal per stage run")
            return self._journal
        if keep_as is not None:
            kept = self.dir / keep_as
            if kept.exists() and not path.exists():
                kept.rename(path)
        self._journal, self._keep_as = Journal(path, settings), keep_as
        return self._journal

    def write(self, kept: Any, rejected: Any, rows_in: int, extra: dict[str, Any] | None = None,
              kept_in: int | None = None) -> dict[str, Any]:
        """Write the stage's tables and ``stats.json`` (:func:`curate.table.write_stage`) with
        the seconds since the start and, for a stage with a journal, ``resumed`` (items the
        journal held at the start); then retire the journal (see :meth:`journal`). Return
        the stats."""
        from curate.table import write_stage

        if self._journal is not None:
            extra = {**(extra or {}), "resumed": self._journal.resumed}
        stats = write_stage(self.out, self.stage, kept, rejected, rows_in, self.seconds(), extra,
                            kept_in=kept_in)
        if self._journal is not None:
            if self._keep_as is not None:
                self._journal.path.replace(self.dir / self._keep_as)
            else:
                self._journal.remove()
            self._journal = None
        return stats

    def close(self) -> None:
        """Close the executor the harness made (called when the stage returns or raises)."""
        if self._owned and self._executor is not None:
            self._executor.close()
        self._executor, self._owned = None, False


def _signature(stage: str, cls: type) -> inspect.Signature:
    P = inspect.Parameter
    params = []
    fs = fields(cls)
    positional = [f for f in fs if f.metadata.get("argument")]
    for f in positional:
        params.append(P(f.name, P.POSITIONAL_OR_KEYWORD, annotation=f.type))
    params.append(P("out", P.POSITIONAL_OR_KEYWORD, annotation=Path | str))
    if stage != "mine":
        params.append(P("source", P.POSITIONAL_OR_KEYWORD, default=None, annotation=Path | str | None))
    for f in fs:
        if not f.metadata.get("argument"):
            params.append(P(f.name, P.KEYWORD_ONLY, default=default(f), annotation=f.type))
    return inspect.Signature(params, return_annotation=dict[str, Any])


def stage(name: str) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
    """Make a stage's ``run`` from ``work(sr: StageRun, **options)`` (see the module docstring).

    Raises (at decoration):
        TypeError: ``work``'s keywords differ from the options dataclass's fields.
    Raises (the made ``run``):
        TypeError: an option the stage does not take (the message names the closest), or a
            required one missing, as Python does for a plain function.
    """
    cls = options_class(name)

    def wrap(work: Callable[..., dict]) -> Callable[..., dict]:
        names = [f.name for f in fields(cls)]
        got = [p for p in inspect.signature(work).parameters][1:]
        if sorted(got) != sorted(names):
            raise TypeError(f"{work.__module__}.{work.__name__} takes {got}, but {cls.__name__} "
                            f"declares {names}")
        sig = _signature(name, cls)
        defaults = {f.name: default(f) for f in fields(cls)}

        @functools.wraps(work)
        def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as exc:
                unknown = [k for k in kwargs if k not in sig.parameters]
                if unknown:
                    raise TypeError(unknown_error(name, unknown, list(sig.parameters))) from None
                raise TypeError(f"{name}: {exc}") from None
            given = dict(bound.arguments)
            out = Path(given.pop("out"))
            source = given.pop("source", None)
            opts = {**defaults, **given}
            missing = [k for k, v in opts.items() if v is dataclasses.MISSING]
            if missing:
                raise TypeError(f"{name}: missing {missing}")
            h = StageRun(name, out, Path(source) if source is not None and str(source) != "" else None,
                         executor_kind=opts.get("executor", "local"), workers=opts.get("workers"),
                         ray_address=opts.get("ray_address"))
            try:
                return work(h, **opts)
            finally:
                h.close()

        run.__signature__ = sig  # type: ignore[attr-defined]
        del run.__wrapped__  # type: ignore[attr-defined]  # inspect shows this signature, not work's
        run.options = cls  # type: ignore[attr-defined]
        run.stage = name  # type: ignore[attr-defined]
        return run

    return wrap
