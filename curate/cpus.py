"""The CPU cores this process may run on.

``os.cpu_count()`` counts the host's cores, also when the process is confined to fewer
(``taskset``, a cgroup's cpuset, a batch scheduler's allocation). Worker counts and core
pinning use these instead, so a run given 16 cores of a 64-core host starts workers for 16
and pins them to those 16, and several runs side by side (one per GPU) stay off each
other's cores.

Standard library only.
"""

from __future__ import annotations

import os


def usable_cpus() -> list[int]:
    """The core ids this process may run on, ascending (all of ``os.cpu_count()`` where the
    platform has no affinity call)."""
    if hasattr(os, "sched_getaffinity"):
        try:
            return sorted(os.sched_getaffinity(0))
        except OSError:
            pass
    return list(range(os.cpu_count() or 1))


def cpu_count() -> int:
    """How many cores this process may run on (at least 1)."""
    return max(1, len(usable_cpus()))
