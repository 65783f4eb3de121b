"""Executors: run a stage's CPU work on all local cores, or across a Ray cluster.

A stage hands an executor a module-level function and a list of items; the executor runs
``fn(item)`` (or ``fn(shared, item)``) somewhere and yields the results. Stage code does not
change between executors:

- :class:`LocalExecutor`: a process pool on this machine (``workers=1`` runs in-process);
- :class:`RayExecutor`: Ray tasks on a cluster (``address="auto"``, ``"ray://host:10001"``) or
  on a local Ray instance started for the run (``address=None``).

Untrusted code goes through :meth:`Executor.sandboxed`, which runs each call in a
:class:`curate.sandbox.Sandbox` process (time, memory and guard limits) wherever the
executor places the work: the local executor uses one sandbox pool; each Ray task starts its
own sandbox on the node it runs on.

Plugging a stage in (the function must be importable by name, and its items and results
picklable)::

    from curate.executor import make_executor

    def signatures(chunk: list[str]) -> list[bytes]: ...   # module level

    with make_executor("local", workers=None) as ex:
        for sigs in ex.map(signatures, chunks):              # input order
            ...

Pass data every call needs (an index, hash parameters) as ``shared``: it is sent once per
worker process (local) or stored once in Ray's object store, not once per item.
"""

from __future__ import annotations

import os
import pickle
import sys
from abc import ABC, abstractmethod
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import Any, Callable, Iterator, Sequence

from curate.cpus import cpu_count
from curate.isolation import die_with_parent
from curate.sandbox import Outcome, Sandbox

__all__ = ["Executor", "LocalExecutor", "RayExecutor", "make_executor", "sandboxed_map",
           "executor_for", "EXECUTORS"]

EXECUTORS = ("local", "ray")
_NO_SHARED = object()
_SHARED: Any = _NO_SHARED  # the shared object in a local pool's worker process


def _chunks(n: int, size: int) -> list[range]:
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def _run_chunk(fn: Callable, items: list, shared: Any = _NO_SHARED) -> list:
    if shared is _NO_SHARED:
        shared = _SHARED
    if shared is _NO_SHARED:
        return [fn(x) for x in items]
    return [fn(shared, x) for x in items]


_RAY_SHARED: dict[str, Any] = {}  # object id -> the shared object, in a Ray worker process


def _run_chunk_ray(fn: Callable, items: list, box: list | None = None) -> list:
    """A Ray task's body. The shared object comes as an ObjectRef inside a list (so Ray does
    not resolve it for every task) and is fetched once per worker process."""
    if box is None:
        return _run_chunk(fn, items)
    import ray

    key = box[0].hex()
    if key not in _RAY_SHARED:
        _RAY_SHARED.clear()  # one map's data at a time
        _RAY_SHARED[key] = ray.get(box[0])
    return _run_chunk(fn, items, _RAY_SHARED[key])


def _worker_init(blob: bytes | None = None) -> None:
    """A pool worker's start: it ends with its parent (a run killed with SIGKILL leaves no idle
    workers behind), and receives the map's shared data once."""
    global _SHARED
    die_with_parent()
    if blob is not None:
        _SHARED = pickle.loads(blob)


def _sandboxed_call(fn: Callable, args: tuple, kwargs: dict, timeout_s: float, mem_mb: int | None,
                    guard: bool) -> Outcome:
    """One call in a sandbox process of the machine this runs on (a Ray task's body)."""
    return Sandbox(workers=1, timeout_s=timeout_s, mem_mb=mem_mb, guard=guard).run(fn, *args, **kwargs)


class Executor(ABC):
    """Where a stage's work runs. Use as a context manager, or call :meth:`close`.

    Attributes:
        workers: how many calls run at once (processes here, CPUs of the Ray cluster).
        kind: ``"local"`` or ``"ray"``.
    """

    kind = ""
    workers = 1

    @abstractmethod
    def imap(self, fn: Callable, items: Sequence, *, shared: Any = _NO_SHARED,
             chunksize: int = 1) -> Iterator[tuple[int, Any]]:
        """Run ``fn(item)`` (``fn(shared, item)`` when ``shared`` is given) for each item; yield
        ``(index, result)`` in completion order. ``chunksize`` items travel per task.

        Raises:
            whatever ``fn`` raises (stage functions return failures as data instead).
        """

    def map(self, fn: Callable, items: Sequence, *, shared: Any = _NO_SHARED,
            chunksize: int = 1) -> Iterator[Any]:
        """Like :meth:`imap` but yields the results alone, in input order."""
        done: dict[int, Any] = {}
        nxt = 0
        for i, r in self.imap(fn, items, shared=shared, chunksize=chunksize):
            done[i] = r
            while nxt in done:
                yield done.pop(nxt)
                nxt += 1

    @abstractmethod
    def sandboxed(self, fn: Callable, calls: Sequence[tuple[tuple, dict]], *, timeout_s: float,
                  mem_mb: int | None, guard: bool = False) -> Iterator[tuple[int, Outcome]]:
        """Run untrusted ``fn(*args, **kwargs)`` per call, each in its own sandbox process
        (see :class:`curate.sandbox.Sandbox`); yield ``(index, Outcome)`` in completion order."""

    def worker_cpu_seconds(self) -> float:
        """CPU seconds used so far by live worker processes this machine can see (0 when
        they are elsewhere); for benchmarks, with ``RUSAGE_CHILDREN`` for ended ones."""
        return 0.0

    def close(self) -> None:
        """Release the executor's resources (a Ray instance it started)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LocalExecutor(Executor):
    """Processes on this machine.

    Args:
        workers: processes (default: CPU count); 1 runs everything in the calling process.
            The pool starts at the first :meth:`imap` and lives until :meth:`close`; a map with
            ``shared`` data uses a pool of its own for that map.
    """

    kind = "local"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or cpu_count())
        self._pool: ProcessPoolExecutor | None = None

    def _new_pool(self, **init: Any) -> ProcessPoolExecutor:
        # spawn, not fork: the parent may hold torch's threads; a forked child could deadlock
        init.setdefault("initializer", _worker_init)
        return ProcessPoolExecutor(self.workers, mp_context=get_context("spawn"), **init)

    def imap(self, fn: Callable, items: Sequence, *, shared: Any = _NO_SHARED,
             chunksize: int = 1) -> Iterator[tuple[int, Any]]:
        items = list(items)
        if self.workers == 1 or len(items) <= 1:
            for i, x in enumerate(items):
                yield i, (fn(x) if shared is _NO_SHARED else fn(shared, x))
            return
        if shared is _NO_SHARED:  # one pool for the executor's life: workers start once
            self._pool = self._pool or self._new_pool()
            yield from self._stream(self._pool, fn, items, chunksize)
            return
        # shared data reaches each worker once, through the initializer of a pool of its own
        with self._new_pool(initializer=_worker_init, initargs=(pickle.dumps(shared, protocol=5),)) as pool:
            yield from self._stream(pool, fn, items, chunksize)

    def _stream(self, pool: ProcessPoolExecutor, fn: Callable, items: list,
                chunksize: int) -> Iterator[tuple[int, Any]]:
        todo = deque(_chunks(len(items), max(1, chunksize)))
        running: dict[Future, range] = {}
        try:
            while todo or running:
                while todo and len(running) < 4 * self.workers:  # bounded: results stream back
                    r = todo.popleft()
                    running[pool.submit(_run_chunk, fn, [items[i] for i in r])] = r
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    r = running.pop(fut)
                    yield from zip(r, fut.result())
        finally:
            for fut in running:  # a failed or abandoned map leaves no queued work behind
                fut.cancel()

    def sandboxed(self, fn: Callable, calls: Sequence[tuple[tuple, dict]], *, timeout_s: float,
                  mem_mb: int | None, guard: bool = False) -> Iterator[tuple[int, Outcome]]:
        sandbox = Sandbox(workers=self.workers, timeout_s=timeout_s, mem_mb=mem_mb, guard=guard)
        yield from sandbox.map(fn, calls)

    def worker_cpu_seconds(self) -> float:
        total = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        for proc in list(getattr(self._pool, "_processes", None) or {}):
            try:  # /proc/PID/stat fields 14 and 15: user and system time in clock ticks
                with open(f"/proc/{proc}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
            except (OSError, ValueError, IndexError):
                continue
        return total

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class RayExecutor(Executor):
    """Ray tasks, one CPU each.

    Args:
        address: a running cluster (``"auto"``, ``"ray://head:10001"``); None starts a local
            Ray instance for this executor (shut down by :meth:`close`).
        num_cpus: CPUs of that local instance (default: all); ignored with an address.
        runtime_env: Ray runtime environment for the tasks, e.g. ``{"py_modules": [curate]}``
            when the cluster's nodes do not have ``curate`` installed.
    Raises:
        RuntimeError: ``ray`` is not installed (``pip install ray``).
    """

    kind = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 runtime_env: dict | None = None):
        try:
            import ray
        except ImportError as exc:
            raise RuntimeError("the ray executor needs the ray package: pip install ray") from exc
        self._ray = ray
        self._owned = not ray.is_initialized()
        if self._owned:
            if address is None and runtime_env is None:
                # a local instance imports what this process imports, as a spawned pool would
                path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
                runtime_env = {"env_vars": {"PYTHONPATH": path}}
            ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                     log_to_driver=False, runtime_env=runtime_env, configure_logging=False)
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._chunk = ray.remote(num_cpus=1)(_run_chunk_ray)
        self._call = ray.remote(num_cpus=1, max_retries=0)(_sandboxed_call)

    def _stream(self, submit: Callable[[int], Any], n: int) -> Iterator[tuple[int, Any]]:
        """Submit task ``k`` for k in range(n), at most 2x the cluster's CPUs at a time; yield
        ``(k, value)`` as tasks finish."""
        ray = self._ray
        nxt = 0
        running: dict[Any, int] = {}
        while nxt < n or running:
            while nxt < n and len(running) < 2 * self.workers:
                running[submit(nxt)] = nxt
                nxt += 1
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                yield running.pop(ref), ray.get(ref)

    def imap(self, fn: Callable, items: Sequence, *, shared: Any = _NO_SHARED,
             chunksize: int = 1) -> Iterator[tuple[int, Any]]:
        items = list(items)
        chunks = _chunks(len(items), max(1, chunksize))
        extra = ([self._ray.put(shared)],) if shared is not _NO_SHARED else ()
        for k, results in self._stream(
                lambda k: self._chunk.remote(fn, [items[i] for i in chunks[k]], *extra), len(chunks)):
            yield from zip(chunks[k], results)

    def sandboxed(self, fn: Callable, calls: Sequence[tuple[tuple, dict]], *, timeout_s: float,
                  mem_mb: int | None, guard: bool = False) -> Iterator[tuple[int, Outcome]]:
        calls = list(calls)
        yield from self._stream(
            lambda k: self._call.remote(fn, calls[k][0], calls[k][1], timeout_s, mem_mb, guard), len(calls))

    def close(self) -> None:
        if self._owned and self._ray.is_initialized():
            self._ray.shutdown()
            self._owned = False


def make_executor(kind: str = "local", workers: int | None = None, ray_address: str | None = None) -> Executor:
    """The executor named ``kind`` (``local`` or ``ray``).

    Args:
        workers: local processes; for ``ray`` without an address, the CPUs of the local instance.
        ray_address: the Ray cluster to join (``ray`` only).
    Raises:
        ValueError: an unknown kind.
        RuntimeError: ``ray`` asked for but not installed.
    """
    if kind == "local":
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(address=ray_address, num_cpus=workers)
    raise ValueError(f"unknown executor {kind!r}; choose one of {list(EXECUTORS)}")


def executor_for(executor: "str | Executor", workers: int | None = None,
                 ray_address: str | None = None) -> "tuple[Executor | None, bool]":
    """A stage's ``executor`` option as ``(executor, owned)``: ``(None, False)`` for
    ``"local"`` (the stage keeps its own local pools), a new Ray executor it must close for
    ``"ray"``, or a given :class:`Executor` it must not close.

    Raises:
        ValueError: an unknown kind. RuntimeError: ``ray`` asked for but not installed.
    """
    if isinstance(executor, Executor):
        return executor, False
    if executor == "local":
        return None, False
    return make_executor(executor, workers, ray_address), True


def sandboxed_map(fn: Callable, calls: Sequence[tuple[tuple, dict]], *, executor: "Executor | None",
                  workers: int | None, timeout_s: float, mem_mb: int | None,
                  guard: bool = False) -> Iterator[tuple[int, Outcome]]:
    """Run untrusted ``fn(*args, **kwargs)`` per call in sandbox processes; yield ``(index,
    Outcome)`` in completion order: on ``executor`` (Ray tasks, each with a sandbox on its
    node), or, with None, on a local :class:`curate.sandbox.Sandbox` pool of ``workers``."""
    if executor is None:
        yield from Sandbox(workers=workers, timeout_s=timeout_s, mem_mb=mem_mb, guard=guard).map(fn, calls)
    else:
        yield from executor.sandboxed(fn, calls, timeout_s=timeout_s, mem_mb=mem_mb, guard=guard)
