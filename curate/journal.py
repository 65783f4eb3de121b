"""A resume journal: finished work items of a stage, appended as they complete.

A stage killed half-way (a lost GPU lease, Ctrl-C) and started again with the same
settings reads the journal and only works on the items missing from it. The journal is
JSON lines: a header ``{"fingerprint": ...}`` then ``{"key": ..., "value": ...}`` per
item; a truncated last line (the kill came mid-write) is ignored. A different fingerprint
(other settings) discards the old journal. The stage harness removes it once the stage's
tables are written (:meth:`curate.harness.stage.StageRun.journal`).

Standard library only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def content_key(*parts: Any) -> str:
    """A short stable hash of ``parts`` (JSON-serialised), for item keys."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha1(blob).hexdigest()[:20]


class Journal:
    """Append-only record of finished items.

    Args:
        path: the journal file (its folder is created).
        fingerprint: JSON-serialisable settings the recorded values depend on.
    """

    def __init__(self, path: Path | str, fingerprint: Any):
        self.path = Path(path)
        self.fingerprint = self.normal(fingerprint)
        self.done: dict[str, Any] = {}
        self.resumed = 0
        if self.path.exists():
            self._load()
        if not self.done:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"fingerprint": self.fingerprint}) + "\n")
        self.resumed = len(self.done)

    @staticmethod
    def normal(fingerprint: Any) -> Any:
        """``fingerprint`` as the journal stores it (through JSON: tuples become lists)."""
        return json.loads(json.dumps(fingerprint, sort_keys=True, default=str))

    def _load(self) -> None:
        lines = self.path.read_text().splitlines()
        try:
            header = json.loads(lines[0]) if lines else {}
        except json.JSONDecodeError:
            header = {}
        if header.get("fingerprint") != self.fingerprint:
            return
        for line in lines[1:]:
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue  # a write cut short by the kill
            self.done[item["key"]] = item["value"]

    def __contains__(self, key: str) -> bool:
        return key in self.done

    def get(self, key: str) -> Any:
        return self.done.get(key)

    def add(self, key: str, value: Any) -> None:
        """Record ``key`` as finished with ``value`` (flushed to disk at once)."""
        self.done[key] = value
        with self.path.open("a") as f:
            f.write(json.dumps({"key": key, "value": value}, default=str) + "\n")
            f.flush()

    def remove(self) -> None:
        """Delete the journal (the stage's output is complete)."""
        self.path.unlink(missing_ok=True)


def read_entries(path: Path | str):
    """``(entry number from 1, key, value)`` for each entry of a journal file in the order
    written, whatever its fingerprint (for reports on a running or stopped stage); a line cut
    short by a kill is skipped."""
    with open(path) as f:
        next(f, None)  # the fingerprint header
        for n, line in enumerate(f, start=1):
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue
            yield n, item["key"], item["value"]


def read_done(path: Path | str) -> dict[str, Any]:
    """The finished items of a journal file (the latest value per key), as :func:`read_entries`."""
    return {key: value for _, key, value in read_entries(path)}
