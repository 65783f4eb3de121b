"""What an export holds, in a few lines: printed at the end of ``curate run`` and ``curate export``.

Reads the ``default`` config's parquet splits (``OUT/export/parquet/{train,validation,test}.parquet``)
with polars; nothing else is loaded.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from curate.export.hf import CONFIG_DIRS
from curate.export.split import SPLITS


def _counts(frame: pl.DataFrame, column: str) -> str:
    if column not in frame.columns or frame.height == 0:
        return ""
    counts = frame.group_by(column).len().sort(column, nulls_last=True)
    return ", ".join(f"{value}: {n}" for value, n in counts.iter_rows())


def describe_export(out: Path | str) -> str:
    """A short, human-readable account of ``OUT/export``: where it is, rows per split, per
    KernelBench level, per dtype and per difficulty bucket where those columns exist, and the
    first training example's prompt size (tokens, characters) and problem name.

    Raises:
        FileNotFoundError: ``OUT/export`` holds no parquet split.
    """
    export = Path(out) / "export"
    folder = export / CONFIG_DIRS["default"]
    paths = {s: folder / f"{s}.parquet" for s in SPLITS if (folder / f"{s}.parquet").exists()}
    if not paths:
        raise FileNotFoundError(f"no exported splits in {folder}")
    splits = {s: pl.read_parquet(p) for s, p in paths.items()}
    rows = pl.concat([f.select(sorted(set.intersection(*(set(g.columns) for g in splits.values()))))
                      for f in splits.values()], how="vertical_relaxed")
    lines = [f"export: {export.resolve()}",
             "  rows per split: " + ", ".join(f"{s}: {f.height}" for s, f in splits.items())
             + f" (total {rows.height}; {rows['base_problem_id'].n_unique() if 'base_problem_id' in rows.columns else rows.height} base problems)"]
    for column, label in (("level", "per KernelBench level"), ("dtype", "per dtype"),
                          ("difficulty", "per difficulty")):
        text = _counts(rows, column)
        if text:
            lines.append(f"  rows {label}: {text}")
    first = next((f for f in splits.values() if f.height), None)
    if first is not None:
        row = first.row(0, named=True)
        tokens = row.get("prompt_tokens")
        size = f"{tokens} tokens, " if tokens is not None else ""
        lines.append(f"  first example: {row.get('name')} (prompt {size}{len(row.get('prompt') or '')} characters)")
    lines.append(f"  load it: datasets.load_dataset({str(export)!r}) or load_dataset({str(export)!r}, 'verl')")
    return "\n".join(lines)
