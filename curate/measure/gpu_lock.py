"""A cross-process reader-writer lock that keeps timed trials alone on the GPU.

The measurement worker times with the lock held *exclusively*; compile-ahead workers
(:mod:`curate.measure.compile_ahead`) hold it *shared* while they run work on the GPU
(building a model and its inputs, running a compiled graph, Inductor's autotuning) and
release it while they compile on the CPU. So compiles overlap timing, while no kernel of
ours runs beside a timed trial.

Several measure workers may share one GPU the same way: each builds, checks and compiles its
problem under the shared lock (or none) and takes the lock exclusively only for its timed
trials. Inside a held lock a further request is a no-op (a compiled graph that takes the
shared lock while its worker times it exclusively), so the two modes never nest in ``flock``.

Built on ``fcntl.flock`` over two files next to each other: the lock itself, and a
*turnstile* that a writer holds while it waits, so a stream of readers cannot starve it
(the classic writer-preferring construction). ``flock`` locks belong to the open file
description: they vanish when the holder dies, so a crashed worker never leaves the GPU
locked. Standard library only (it runs on the GPU machine).

Kernel launches are CPU work: a timed eager forward of a model of many small kernels runs at
the launch rate of its thread. Where several workers compile on every core, each can be
given ``timing_cpus``, cores the others are kept off: the thread that holds the lock
exclusively moves onto them for its timed trials and back afterwards.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator


class GpuLock:
    """Shared/exclusive lock named by a file path; one instance per process.

    Args:
        path: the lock file (created); the turnstile is ``path + ".turnstile"``.
        timing_cpus: cores the holder of the exclusive lock runs on while it holds it
            (``os.sched_setaffinity`` of the calling thread; Linux), restored after; None
            leaves the affinity alone.
        wait_clock: a two-float array shared with the parent process
            (``multiprocessing.RawArray("d", 2)``): ``[0]`` is the ``time.monotonic()`` at which
            the current wait began (0.0 while not waiting), ``[1]`` the seconds waited so far.
            The parent leaves time spent waiting for the GPU out of a task's time limit (a
            hung problem holding the lock must not time out the rows queued behind it).
    """

    def __init__(self, path: str | os.PathLike, timing_cpus: list[int] | None = None,
                 wait_clock=None):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        self._gate = os.open(self.path + ".turnstile", os.O_RDWR | os.O_CREAT, 0o600)
        #: seconds spent waiting for the lock, by mode (for the stage's overhead figures)
        self.waited = {"shared": 0.0, "exclusive": 0.0}
        self._held: str | None = None
        self.timing_cpus = sorted(set(timing_cpus)) if timing_cpus else None
        self._clock = wait_clock

    def _wait_begins(self) -> float:
        t = time.perf_counter()
        if self._clock is not None:
            self._clock[0] = time.monotonic()
        return t

    def _wait_ends(self, mode: str, t: float) -> None:
        dt = time.perf_counter() - t
        self.waited[mode] += dt
        if self._clock is not None:
            self._clock[1] += dt
            self._clock[0] = 0.0

    @property
    def held(self) -> str | None:
        """The mode this process holds the lock in (``"shared"``, ``"exclusive"``) or None."""
        return self._held

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the lock alone (timed trials); a no-op while already held exclusively.

        Raises:
            RuntimeError: asked for while this process holds the lock shared (``flock``
                would convert the lock, and the inner release would drop it).
        """
        if self._held == "exclusive":
            yield
            return
        if self._held == "shared":
            raise RuntimeError("GpuLock.exclusive() requested while the lock is held shared")
        t = self._wait_begins()
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
            self._wait_ends("exclusive", t)
        self._held = "exclusive"
        saved = self._move_to(self.timing_cpus)
        try:
            yield
        finally:
            self._move_to(saved)
            self._held = None
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the lock with other readers (untimed GPU work); a no-op while held either way."""
        if self._held is not None:
            yield
            return
        t = self._wait_begins()
        try:
            fcntl.flock(self._gate, fcntl.LOCK_EX)  # waits behind a writer that is queued
            fcntl.flock(self._gate, fcntl.LOCK_UN)
            fcntl.flock(self._fd, fcntl.LOCK_SH)
        finally:
            self._wait_ends("shared", t)
        self._held = "shared"
        try:
            yield
        finally:
            self._held = None
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    @staticmethod
    def _move_to(cpus) -> set[int] | None:
        """Pin the calling thread to ``cpus``; return the cores it had (None: unchanged)."""
        if not cpus or not hasattr(os, "sched_setaffinity"):
            return None
        try:
            before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, cpus)
            return before
        except OSError:  # a core this process may not use: time where it is
            return None

    def close(self) -> None:
        for fd in (self._fd, self._gate):
            try:
                os.close(fd)
            except OSError:
                pass


def held(lock, mode: str):
    """``lock.shared()`` or ``lock.exclusive()`` (``mode``), a no-op context when ``lock`` is
    None (a worker alone on its GPU)."""
    return getattr(lock, mode)() if lock is not None else nullcontext()


class NoLock:
    """Stands in for :class:`GpuLock` where nothing shares the device."""

    waited = {"shared": 0.0, "exclusive": 0.0}
    held = None

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        yield

    @contextmanager
    def shared(self) -> Iterator[None]:
        yield

    def close(self) -> None:
        pass
