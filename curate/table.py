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
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import polars as pl

STAGES = ("mine", "dedup", "diversify", "measure", "rank", "export")
SOURCE_FIELDS = ("kind", "name", "uri", "version", "path", "class_name", "licence")
REJECT_COLUMNS = ("reject_stage", "reject_reason", "reject_detail")


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


def read_problems(path: Path | str) -> pl.DataFrame:
    """Read the kept rows of a stage.

    Args:
        path: a stage folder (``RUN/<stage>``), its ``problems`` folder, or one parquet file.
    Raises:
        FileNotFoundError: no parquet file there.
    """
    path = Path(path)
    files = _parquet_files(path, "problems")
    if not files:
        raise FileNotFoundError(f"no problems parquet under {path}")
    return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")


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
        for old in (d / sub).glob("*.parquet"):
            old.unlink()
        df.write_parquet(d / sub / "part-00000.parquet")
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
    (d / "stats.json").write_text(json.dumps(stats, indent=2, default=str))
    return stats


def source_struct(**kw: Any) -> dict[str, Any]:
    """A ``source`` column value with every field present (missing ones ``None``)."""
    unknown = set(kw) - set(SOURCE_FIELDS)
    if unknown:
        raise ValueError(f"unknown source fields {sorted(unknown)}")
    return {f: (None if kw.get(f) is None else str(kw[f])) for f in SOURCE_FIELDS}
