"""Where numba keeps the dedup stage's compiled code: a folder named by the content of every
module of :mod:`curate.dedup`.

numba's own cache checks only the source file of each compiled function, so
``docpass.run``, compiled with ``textscan``'s functions inlined, would load stale machine code
after a change to ``textscan.py`` alone (it did, during development). Keying the folder by all
the sources makes any change compile afresh. The folder is
``$NUMBA_CACHE_DIR/curate-dedup-<key>`` when that variable is set, else
``$CURATE_CACHE/numba/<key>`` (default ``~/.cache/curate``). Import this module before any
``@njit(cache=True)`` decoration: numba reads the folder when it decorates.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numba

_SOURCES = sorted(Path(__file__).parent.glob("*.py"))
KEY = hashlib.sha1(b"".join(p.name.encode() + p.read_bytes() for p in _SOURCES)).hexdigest()[:16]


def cache_dir() -> Path:
    """The folder this process's compiled dedup code is cached in."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"]) / f"curate-dedup-{KEY}"
    base = Path(os.environ.get("CURATE_CACHE", Path.home() / ".cache" / "curate"))
    return base / "numba" / KEY


numba.config.CACHE_DIR = str(cache_dir())
