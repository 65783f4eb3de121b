"""Process limits shared by the sandbox's tasks and the persistent measure workers.

- :func:`die_with_parent`: a process ends when the process that started it ends (Linux's
  parent-death signal, optionally backed by a watchdog thread);
- :func:`limit_address_space`: an allocation more than ``mem_mb`` MiB past the process's
  current size fails inside it (``RLIMIT_AS``).

Imports only the standard library, so GPU-side processes can use it before torch.
"""

from __future__ import annotations

import os
import signal
import threading
import time

_PR_SET_PDEATHSIG = 1


def die_with_parent(watch: bool = False) -> None:
    """SIGKILL this process when its parent ends.

    A run killed with SIGKILL takes its fork server or worker pool with it, and a child in its
    own session (a hostile infinite loop, a hanging task) would otherwise run on with nobody
    left to enforce its time limit. The signal follows the parent *thread* that started the
    process, so a pool must start and close each child in one thread. Linux only: elsewhere
    only the watchdog works.

    Args:
        watch: also start a daemon thread that checks the parent once a second and exits the
            process (``os._exit(1)``) when it has changed: a second line where the signal is
            unavailable.
    Exits at once (``os._exit(1)``) when the parent died before the signal was set.
    """
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
    if watch:
        def check() -> None:
            while True:
                time.sleep(1.0)
                if os.getppid() != parent:
                    os._exit(1)

        threading.Thread(target=check, daemon=True, name="parent-watch").start()


def vm_bytes() -> int:
    """This process's virtual memory size in bytes (``VmSize`` of ``/proc/self/status``; 0
    where that file cannot be read)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def limit_address_space(mem_mb: int) -> None:
    """Cap this process's address space (soft and hard ``RLIMIT_AS``) at ``mem_mb`` MiB above
    its current size: an allocation past it raises ``MemoryError`` (or the library's own
    out-of-memory error) inside the process. Call it after the big imports (torch), so their
    libraries count in the base. Not for CUDA processes: the driver reserves more address
    space than any sane limit.

    Raises:
        ValueError, OSError: from ``resource.setrlimit`` (a limit over the hard limit).
    """
    import resource

    limit = vm_bytes() + mem_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
