"""The scaffolding every stage shares: its Python signature made from its options, the input
folder it reads, its clock, and the writing of kept rows, rejected rows and ``stats.json``.

A stage's work is a function of a :class:`StageRun` and its options, one keyword each::

    @stage("dedup")
    def run(sr: StageRun, threshold, num_perm, ...) -> dict:
        df = read_problems(sr.input)         # --from, else OUT/<previous stage>
        ...
        return sr.write(kept, rejected, df.height, extra)  # tables, stats.json, seconds

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
    """One run of a stage: where it writes, what it reads, since when it runs.

    Attributes:
        stage: the stage name. out: the run folder. source: ``--from`` as given (or None).
        t0: ``time.monotonic()`` when the stage started.
    """

    stage: str
    out: Path
    source: Path | None = None
    t0: float = field(default_factory=time.monotonic)

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

    def write(self, kept: Any, rejected: Any, rows_in: int, extra: dict[str, Any] | None = None,
              kept_in: int | None = None) -> dict[str, Any]:
        """Write the stage's tables and ``stats.json`` (:func:`curate.table.write_stage`) with
        the seconds since the start; return the stats."""
        from curate.table import write_stage

        return write_stage(self.out, self.stage, kept, rejected, rows_in, self.seconds(), extra,
                           kept_in=kept_in)


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
            h = StageRun(name, out, Path(source) if source is not None and str(source) != "" else None)
            return work(h, **opts)

        run.__signature__ = sig  # type: ignore[attr-defined]
        del run.__wrapped__  # type: ignore[attr-defined]  # inspect shows this signature, not work's
        run.options = cls  # type: ignore[attr-defined]
        run.stage = name  # type: ignore[attr-defined]
        return run

    return wrap
