"""The decontamination reference: which KernelBench problems to compare against.

By default (``auto``) the copy of KernelBench levels 1-3 that ships in ``curate/data/kernelbench``
(MIT, with its provenance) is used; a JSONL file or a Hugging Face dataset id may be given instead.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from curate.data import KERNELBENCH_PROBLEMS

HF_ID = "ScalingIntelligence/KernelBench"
ENV_VAR = "CURATE_KERNELBENCH"
HINT = (f"Pass a local KernelBench problems JSONL (--kernelbench PATH, or set {ENV_VAR}), "
        f"or --kernelbench none to skip decontamination.")
_HF_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


class ReferenceUnavailable(RuntimeError):
    """The reference could not be found or read; the message says what to pass instead."""


@dataclass
class Reference:
    """Reference problems.

    Attributes:
        origin: where they came from (a file path or a Hugging Face dataset id).
        labels: ``level<N>/<name>`` per problem, e.g. ``level1/19_ReLU``.
        codes: each problem's source.
    """

    origin: str
    labels: list[str]
    codes: list[str]


def _label(row: dict) -> str:
    level = row.get("level")
    name = row.get("name")
    if name is None:
        raise ReferenceUnavailable(f"reference row without a name: keys {sorted(row)}")
    return f"level{level}/{name}" if level is not None else str(name)


def _rows(rows: list[dict], origin: str) -> Reference:
    rows = [r for r in rows if isinstance(r.get("code"), str) and r["code"].strip()]
    if not rows:
        raise ReferenceUnavailable(f"{origin}: no rows with a non-empty 'code' field")
    return Reference(origin, [_label(r) for r in rows], [r["code"] for r in rows])


def load_jsonl(path: Path | str) -> Reference:
    """Read a JSONL of ``{"code", "level", "name", ...}`` rows (the layout of
    ``curate/data/kernelbench/problems.jsonl``).

    Raises:
        ReferenceUnavailable: unreadable file, a line that is not JSON, or no usable row.
    """
    path = Path(path)
    rows = []
    try:
        with path.open() as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    rows.append(json.loads(line))
    except OSError as exc:
        raise ReferenceUnavailable(f"cannot read {path}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ReferenceUnavailable(f"{path}:{n}: not JSON ({exc})") from exc
    return _rows(rows, str(path))


def load_hf(dataset_id: str) -> Reference:
    """Load every split of a Hugging Face dataset with ``code``/``level``/``name`` columns
    (``ScalingIntelligence/KernelBench`` has splits ``level_1`` ... ``level_4``).

    Raises:
        ReferenceUnavailable: the dataset could not be loaded (offline, unknown id, ...).
    """
    try:
        import datasets

        loaded = datasets.load_dataset(dataset_id)
    except Exception as exc:  # offline, missing, malformed: all end the same way
        raise ReferenceUnavailable(
            f"could not load the Hugging Face dataset {dataset_id!r} "
            f"({type(exc).__name__}: {str(exc)[:200]}). {HINT}") from exc
    splits = loaded.values() if hasattr(loaded, "values") else [loaded]
    rows = [dict(r) for split in splits for r in split]
    return _rows(rows, dataset_id)


def auto_candidates() -> list[Path]:
    """Local places ``auto`` looks, in order: ``$CURATE_KERNELBENCH``, then the copy shipped in
    the package (``curate/data/kernelbench/problems.jsonl``)."""
    out = []
    if os.environ.get(ENV_VAR):
        out.append(Path(os.environ[ENV_VAR]))
    out.append(KERNELBENCH_PROBLEMS)
    return out


def resolve(spec: str, hf_id: str = HF_ID) -> Reference | None:
    """Turn the ``kernelbench`` option into reference problems.

    Args:
        spec: ``"none"`` (returns ``None``: decontamination skipped), ``"auto"``, a path to
            a JSONL file (or a folder holding ``problems.jsonl``), or a Hugging Face dataset id.
        hf_id: the Hugging Face dataset ``auto`` falls back to when no local file is found
            (default ``ScalingIntelligence/KernelBench``).
    Raises:
        ReferenceUnavailable: nothing usable found; the message names what was tried.
    """
    spec = str(spec).strip()
    if spec.lower() == "none":
        return None
    if spec.lower() == "auto":
        tried = []
        for p in auto_candidates():
            tried.append(str(p))
            if p.is_file():
                return load_jsonl(p)
        try:
            return load_hf(hf_id)
        except ReferenceUnavailable as exc:
            raise ReferenceUnavailable(
                f"kernelbench='auto' found no reference: no file at {', '.join(tried)}; "
                f"then {exc}") from exc
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "problems.jsonl").is_file():
        path = path / "problems.jsonl"
    if path.is_file():
        return load_jsonl(path)
    if path.suffix in (".jsonl", ".json") or path.is_dir() or not _HF_ID.match(spec):
        raise ReferenceUnavailable(f"kernelbench reference {spec!r}: no such file. The option "
                             f"takes a JSONL path, a Hugging Face dataset id, 'auto' or 'none'.")
    return load_hf(spec)
