"""The problem table: the contract every stage reads and writes.

A run directory holds one folder per stage::

    RUN/<stage>/problems/part-00000.parquet   rows the stage kept
    RUN/<stage>/rejected/part-00000.parquet   rows it dropped, with reject_stage/reject_reason/reject_detail
    RUN/<stage>/stats.json                    rows in, kept, rejected by reason, seconds

Columns written by ``mine`` (every later stage keeps them and adds its own):

=================  ==========================================================
problem_id         str, stable id (hash of source name, file path and class name; not the version)
name               str, ``<source>.<ClassName>``, or ``<source>.<dotted path>.<ClassName>`` where
                   several classes of the table share that (unique in the table)
code               str, self-contained KernelBench-format source
init_args          str, JSON list of positional constructor arguments
input_spec         str, JSON list (see :mod:`curate.problem`)
source             struct{kind, name, uri, version, path, class_name, licence}
input_dtypes       str, JSON list: torch dtype name per tensor input (``int64`` for indices)
all_float_inputs   bool, every tensor input is floating point
checked_torch      str, ``<torch version>@<device>,...``: where the KernelBench-style check
                   (:mod:`curate.conform`) passed; measure appends its device's
=================  ==========================================================

Accountability: for every stage ``kept + rejected == in`` (checked by
:func:`write_stage`, which raises ``ValueError`` otherwise).

Every table and ``stats.json`` is written to a temporary file in its folder and then
renamed over the old one (:func:`write_atomic`), so a killed write never leaves half a
table that a later stage reads. :func:`stage_lock` keeps two processes from writing one
stage folder at once.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import polars as pl

STAGES = ("mine", "dedup", "diversify", "measure", "rank", "export")
SOURCE_FIELDS = ("kind", "name", "uri", "version", "path", "class_name", "licence")
REJECT_COLUMNS = ("reject_stage", "reject_reason", "reject_detail")
REQUIRED_COLUMNS = {
    "dedup": ("problem_id", "code"),
    "diversify": ("problem_id", "code", "init_args", "input_spec"),
    "measure": ("problem_id", "code", "init_args", "input_spec"),
    "rank": ("problem_id", "code", "init_args", "input_spec"),
    "export": ("problem_id", "code", "init_args", "input_spec"),
}
"""Columns of the table contract (module docstring) each stage cannot run without."""


class TableError(ValueError):
    """A stage's input table is unreadable, lacks a column the stage needs, or is empty."""


class StageLocked(RuntimeError):
    """Another live process is writing the same stage folder."""


def previous_stage(stage: str) -> str:
    i = STAGES.index(stage)
    if i == 0:
        raise ValueError("mine is the first stage; it reads a manifest")
    return STAGES[i - 1]


def stage_dir(out: Path | str, stage: str) -> Path:
    return Path(out) / stage


def latest_input(out: Path | str, stage: str) -> Path:
    """The folder ``stage`` reads by default: ``OUT/<previous stage>``, or, when that stage was
    skipped, the latest earlier stage folder holding problems (a note goes to stderr).

    Raises:
        FileNotFoundError: no stage before ``stage`` has written problems under ``out``.
    """
    expected = previous_stage(stage)
    for earlier in reversed(STAGES[: STAGES.index(stage)]):
        d = stage_dir(out, earlier)
        if any((d / "problems").glob("*.parquet")):
            if earlier != expected:
                print(f"{stage}: no {stage_dir(out, expected)}, reading {d}", file=sys.stderr)
            return d
    raise FileNotFoundError(f"{stage}: no stage output under {out} (run the stages before "
                            f"{stage} first, or pass --from)")


def _parquet_files(path: Path, sub: str) -> list[Path]:
    if path.is_file():
        return [path]
    for d in (path / sub, path):
        files = sorted(d.glob("*.parquet"))
        if files:
            return files
    return []


def _read(f: Path) -> pl.DataFrame:
    try:
        return pl.read_parquet(f)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise TableError(f"{f}: not a readable parquet table ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def read_problems(path: Path | str) -> pl.DataFrame:
    """Read the kept rows of a stage.

    Args:
        path: a stage folder (``RUN/<stage>``), its ``problems`` folder, or one parquet file.
    Raises:
        FileNotFoundError: no parquet file there.
        TableError: a file is not a readable parquet table.
    """
    path = Path(path)
    files = _parquet_files(path, "problems")
    if not files:
        raise FileNotFoundError(f"no problems parquet under {path}")
    return pl.concat([_read(f) for f in files], how="diagonal_relaxed")


def check_input(path: Path | str, stage: str) -> int:
    """Check, before ``stage`` starts, the table it will read: parquet files that open, the
    :data:`REQUIRED_COLUMNS` of ``stage``, at least one row. Reads file footers only.

    Returns:
        rows in the table.
    Raises:
        FileNotFoundError: no parquet file at ``path``.
        TableError: a file is unreadable, a required column is missing, or there are no rows.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    files = _parquet_files(path, "problems")
    if not files:
        raise FileNotFoundError(f"{stage}: no problems parquet under {path}")
    rows = 0
    for f in files:
        try:
            meta = pq.ParquetFile(f).metadata
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a bad file
            raise TableError(f"{f}: not a readable parquet table ({_first_line(exc)})") from None
        names = set(meta.schema.to_arrow_schema().names)
        missing = [c for c in REQUIRED_COLUMNS.get(stage, ()) if c not in names]
        if missing:
            raise TableError(f"{f}: missing columns {missing} that {stage} needs "
                             f"(has {sorted(names)[:12]})")
        rows += meta.num_rows
    if rows == 0:
        raise TableError(f"{path}: no problems (0 rows): nothing for {stage} to do")
    return rows


def write_atomic(path: Path, write: Callable[[Path], Any]) -> None:
    """Call ``write(tmp)`` on a temporary name in ``path``'s folder, then rename it to
    ``path`` (atomic on one file system): readers see the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


@contextmanager
def stage_lock(out: Path | str, stage: str) -> Iterator[Path]:
    """Hold ``OUT/<stage>/.lock`` (this process's pid and host) while a stage writes there.

    A lock left by a process that is gone (same host, pid not running) is stale and taken
    over; the lock file is removed on exit.

    Raises:
        StageLocked: a live process (or one on another host) holds the lock.
        OSError: the stage folder cannot be created or written (e.g. a read-only ``out``).
    """
    d = stage_dir(out, stage)
    d.mkdir(parents=True, exist_ok=True)
    lock = d / ".lock"
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                held = json.loads(lock.read_text() or "{}")
            except (OSError, ValueError):
                held = {}
            pid, host = held.get("pid"), held.get("host")
            if isinstance(pid, int) and (host != me["host"] or _pid_alive(pid)):
                raise StageLocked(f"{d} is being written by another curate process (pid {pid} on "
                                  f"{host}); wait for it to end, or remove {lock} if it is gone") from None
            lock.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    else:
        raise StageLocked(f"{d}: could not take {lock}")
    try:
        yield lock
    finally:
        try:
            if json.loads(lock.read_text()).get("pid") == me["pid"]:
                lock.unlink()
        except (OSError, ValueError):
            pass


def read_rejected(path: Path | str) -> pl.DataFrame:
    files = sorted((Path(path) / "rejected").glob("*.parquet"))
    if not files:
        return pl.DataFrame()
    return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")


def read_stats(path: Path | str) -> dict[str, Any]:
    return json.loads((Path(path) / "stats.json").read_text())


@dataclass
class Rejections:
    """Collects rejected rows with their reason while a stage runs."""

    stage: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, row: dict[str, Any], reason: str, detail: str = "") -> None:
        """Reject ``row``. ``reason`` is a short category (counted in stats), ``detail`` free text."""
        r = dict(row)
        r["reject_stage"] = self.stage
        r["reject_reason"] = reason
        r["reject_detail"] = (detail or "")[:2000]
        self.rows.append(r)

    def add_frame(self, df: pl.DataFrame, reason: str, detail: str | Iterable[str] = "") -> None:
        details = [detail] * df.height if isinstance(detail, str) else list(detail)
        for row, d in zip(df.iter_rows(named=True), details):
            self.add(row, reason, d)

    def frame(self, like: pl.DataFrame | None = None) -> pl.DataFrame:
        if not self.rows:
            schema = dict(like.schema) if like is not None else {}
            schema.update({c: pl.String for c in REJECT_COLUMNS})
            return pl.DataFrame(schema=schema)
        return pl.DataFrame(self.rows, infer_schema_length=None)


def write_stage(
    out: Path | str,
    stage: str,
    kept: pl.DataFrame,
    rejected: pl.DataFrame,
    rows_in: int,
    seconds: float,
    extra: dict[str, Any] | None = None,
    kept_in: int | None = None,
) -> dict[str, Any]:
    """Write a stage's kept rows, rejected rows and ``stats.json``; return the stats.

    Args:
        kept_in: input rows that were kept, when a stage expands one input row into several
            output rows (diversify's shape variants); default ``kept.height``. ``stats.json``
            then reports ``kept`` = ``kept_in`` and ``rows_out`` = ``kept.height``.
    Raises:
        ValueError: ``kept_in + rejected.height != rows_in`` (a row was lost or invented).
    """
    kept_in = kept.height if kept_in is None else kept_in
    if kept_in + rejected.height != rows_in:
        raise ValueError(
            f"{stage}: kept {kept_in} + rejected {rejected.height} != in {rows_in}"
        )
    d = stage_dir(out, stage)
    for sub, df in (("problems", kept), ("rejected", rejected)):
        (d / sub).mkdir(parents=True, exist_ok=True)
        part = d / sub / "part-00000.parquet"
        write_atomic(part, df.write_parquet)
        for old in (d / sub).glob("*.parquet"):
            if old != part:
                old.unlink()
    reasons = Counter(rejected["reject_reason"].to_list()) if rejected.height else Counter()
    stats = {
        "stage": stage,
        "in": rows_in,
        "kept": kept_in,
        "rejected": rejected.height,
        "rows_out": kept.height,
        "rejected_by_reason": dict(reasons.most_common()),
        "seconds": round(seconds, 3),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if extra:
        stats.update(extra)
    text = json.dumps(stats, indent=2, default=str)
    write_atomic(d / "stats.json", lambda tmp: tmp.write_text(text))
    return stats


def source_struct(**kw: Any) -> dict[str, Any]:
    """A ``source`` column value with every field present (missing ones ``None``)."""
    unknown = set(kw) - set(SOURCE_FIELDS)
    if unknown:
        raise ValueError(f"unknown source fields {sorted(unknown)}")
    return {f: (None if kw.get(f) is None else str(kw[f])) for f in SOURCE_FIELDS}
