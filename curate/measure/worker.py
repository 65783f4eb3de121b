"""Persistent measurement workers for the GPU, and the pool that feeds them.

A fresh process that touches CUDA pays several seconds (5.5 s on the H100 machine, see
``benchmarks/h100-measure.md``) before its first kernel, so the GPU path keeps *spawned* worker
processes alive across problems: each imports torch, initialises CUDA and allocates the
L2-flush buffer once, then answers tasks over a pipe. Two roles:

- ``measure``: one per GPU by default; runs :func:`curate.measure.core.measure_problem`
  (checks and timed trials). It holds the GPU lock exclusively around timed trials
  (:mod:`curate.measure.gpu_lock`), so no other worker's kernel runs beside them. Several
  measure workers may share a GPU: each then builds, checks and compiles its own problem
  under the shared lock (or none) while another times.
- ``compile``: a few per GPU, on the remaining CPU cores; run
  :func:`curate.measure.compile_ahead.precompile` on the problems the measure worker will
  take next, so its TorchInductor compiles hit the on-disk caches.

Isolation: each task has a wall-clock limit. When a worker dies (segfault, ``os._exit``,
a CUDA error that breaks the context: ``fatal`` results) or overruns the limit, its whole
process group is killed, the task gets a ``crash`` or ``timeout`` result, and the next task
starts a fresh worker. GPU memory: each worker's CUDA caching allocator is capped at a share
of the device (``torch.cuda.set_per_process_memory_fraction``), so an allocation past it is
an out-of-memory error inside that worker (a ``memory`` result), not a starved neighbour;
on the CPU an address-space limit does the same.

Imports only the standard library here; the worker processes import torch and curate's
torch-only modules (``curate.problem``, ``curate.measure.*``), nothing else.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import queue
import signal
import threading
import time
from typing import Any, Iterable, Iterator

from curate.cpus import cpu_count, usable_cpus
from curate.isolation import die_with_parent, limit_address_space
from curate.sandbox import death_reason, kill_tree
from curate.measure.torch_state import restore_torch_globals, torch_globals


#: Seconds a new worker may take to import torch and initialise its device.
READY_TIMEOUT_S = 300.0
#: A task's wall time may reach this many times its limit when the excess was spent waiting
#: for the GPU lock (a queue behind several hung problems); past it the task times out.
LOCK_WAIT_CAP = 10.0


#: The problem a new worker measures once before taking tasks (a conv and a linear layer).
WARMUP_SOURCE = """import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 14 * 14, 16)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))
"""
WARMUP_SPEC = [{"kind": "tensor", "shape": [4, 3, 16, 16], "dtype": "float32"}]


class WorkerStartError(RuntimeError):
    """A worker process failed to start or to initialise its device."""


def dead_result(reason: str, detail: str, device: str, wall_s: float = 0.0,
                role: str = "measure") -> dict[str, Any]:
    """The result of a task whose process died or timed out: shaped like
    :func:`~curate.measure.core.measure_problem`'s (``role="measure"``) or
    :func:`~curate.measure.compile_ahead.precompile`'s (``role="compile"``)."""
    if role == "compile":
        return {"status": reason, "detail": detail, "seconds": wall_s, "cache": None,
                "fatal": True}
    return {"reason": reason, "detail": detail, "flags": [reason], "notes": [], "fatal": True,
            "device": device, "gpu": None, "torch_version": None, "eager": None, "compile": None,
            "eager_graph": None, "compile_graph": None, "compile_s": None,
            "compile_error": None, "compile_max_abs_diff": None, "compile_cache": None,
            "peak_mem_mb": None, "constant_margin": None, "profile": None, "seconds": {},
            "timed_ms": 0.0, "wall_s": wall_s}


def _serve(conn, device: str, env: dict[str, str], quiet: bool, mem_mb: int | None,
           role: str = "measure", lock_path: str | None = None,
           gpu_mem_fraction: float | None = None, cpus: list[int] | None = None,
           warm_inductor: bool = False, threads: int | None = None, wait_clock=None) -> None:
    """Worker process main loop: initialise, then answer tasks until told to stop."""
    os.setsid()  # own process group: a kill also reaches compiler subprocesses
    die_with_parent(watch=True)
    os.environ.update(env)
    if role == "compile":
        # one core each: several compile-ahead workers share the machine's cores
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except (AttributeError, OSError):
            pass
    if quiet:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    try:
        import torch

        from curate.measure import core
        from curate.measure.compile_ahead import precompile
        from curate.measure.gpu_lock import GpuLock
        from curate.problem import assemble

        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", 0)  # the first of the devices CUDA_VISIBLE_DEVICES shows
        if mem_mb is not None and dev.type == "cpu":
            limit_address_space(mem_mb)
        if threads:
            # Inductor's cache keys include torch's thread count: measure and compile-ahead
            # workers must agree on it, whatever cores each is pinned to
            torch.set_num_threads(threads)
        timing_cpus = [int(c) for c in os.environ.get(TIMING_CPUS_ENV, "").split(",") if c.strip()]
        lock = GpuLock(lock_path, timing_cpus=timing_cpus or None, wait_clock=wait_clock) \
            if lock_path else None
        info: dict[str, Any] = {"pid": os.getpid(), "torch_version": torch.__version__,
                                "device": str(dev), "gpu": None, "role": role}
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
            torch.empty(1, device=dev)  # create the context now, not inside the first task
            if gpu_mem_fraction is not None:
                torch.cuda.set_per_process_memory_fraction(gpu_mem_fraction, dev)
            info["gpu"] = torch.cuda.get_device_name(dev)
            info["gpu_mem_limit_mb"] = round(
                torch.cuda.get_device_properties(dev).total_memory * (gpu_mem_fraction or 1.0) / 2**20)
        # one small problem through the whole path: cuBLAS/cuDNN handles, lazy imports and
        # cold code pages (and with warm_inductor the first, slowest Inductor compile) are
        # paid here (start time), not by the first real problem
        warm_code = assemble(WARMUP_SOURCE, WARMUP_SPEC, [])
        if role == "compile":
            warm = precompile(warm_code, WARMUP_SPEC, [], device=str(dev), lock=lock)
            info["warmup_reason"] = None if warm["status"] == "ok" else warm["detail"][:300]
            handler = lambda task: precompile(**task, lock=lock)  # noqa: E731
        elif role == "calibrate":
            # diversify on a GPU: planned shapes timed and moved into the band
            from curate.diversify.calibrate import calibrate_problem, set_gpu_lock

            set_gpu_lock(lock)
            info["warmup_reason"] = None
            handler = lambda task: calibrate_problem(**task, device=str(dev))  # noqa: E731
        else:
            if dev.type == "cuda":
                core._flush_for(dev)
            warm = core.measure_problem(warm_code, WARMUP_SPEC, [], device=str(dev), trials=3,
                                        warmup=1, inductor=warm_inductor, profile=False)
            info["warmup_reason"] = warm["reason"]
            core.set_gpu_lock(lock)
            handler = lambda task: core.measure_problem(**task)  # noqa: E731
        conn.send(("ready", info))
    except BaseException as exc:
        try:
            conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        finally:
            os._exit(1)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            break
        if task is None:
            break
        saved = torch_globals()
        # a task may run with more of the GPU's memory than the worker's share (a row
        # measured again alone after a memory refusal beside other workers)
        fraction = task.pop("gpu_mem_fraction", None) if role == "measure" else None
        if fraction and dev.type == "cuda":
            torch.cuda.set_per_process_memory_fraction(fraction, dev)
        result = handler(task)
        if fraction and dev.type == "cuda":
            torch.cuda.set_per_process_memory_fraction(gpu_mem_fraction or 1.0, dev)
        try:
            restore_torch_globals(saved)
        except Exception:  # state we cannot put back: let a fresh worker take the next task
            result["fatal"] = True
        conn.send(("result", result))
        if result.get("fatal"):
            break
    conn.close()
    os._exit(0)


class PersistentWorker:
    """One long-lived worker process, restarted after a crash, fatal error or timeout.

    Args:
        device: the device the worker uses (``cuda``, ``cuda:1`` or ``cpu``).
        env: environment variables set in the worker before torch touches the device
            (e.g. ``CUDA_VISIBLE_DEVICES``, Inductor's cache folders).
        quiet: send the worker's stdout/stderr to /dev/null (problem code prints).
        mem_mb: on the CPU, an address-space limit (MiB) so a huge problem fails with a
            ``memory`` result instead of exhausting the machine; ignored on CUDA.
        role: ``measure`` (:func:`curate.measure.core.measure_problem` tasks), ``compile``
            (:func:`curate.measure.compile_ahead.precompile` tasks) or ``calibrate``
            (:func:`curate.diversify.calibrate.calibrate_problem` tasks).
        lock_path: the GPU lock file shared with the other workers of this GPU (None: none).
        gpu_mem_fraction: share of the GPU's memory this worker's allocator may hold (None:
            no cap).
        cpus: CPU cores to pin the worker to (None: any).
        warm_inductor: also compile the warm-up problem at start (measure role).
        threads: ``torch.set_num_threads`` in the worker (None: torch's default). Workers
            that share Inductor's cache must agree on it (it is part of the cache keys).
    """

    def __init__(self, device: str = "cuda", env: dict[str, str] | None = None, quiet: bool = True,
                 ready_timeout_s: float = READY_TIMEOUT_S, mem_mb: int | None = 8192,
                 role: str = "measure", lock_path: str | None = None,
                 gpu_mem_fraction: float | None = None, cpus: list[int] | None = None,
                 warm_inductor: bool = False, threads: int | None = None):
        if role not in ("measure", "compile", "calibrate"):
            raise ValueError(f"role must be 'measure', 'compile' or 'calibrate', got {role!r}")
        self.device = device
        self.mem_mb = mem_mb
        self.env = dict(env or {})
        self.quiet = quiet
        self.ready_timeout_s = ready_timeout_s
        self.role = role
        self.lock_path = lock_path
        self.gpu_mem_fraction = gpu_mem_fraction
        self.cpus = cpus
        self.warm_inductor = warm_inductor
        self.threads = threads
        self.proc = None
        self.conn = None
        self._clock = None
        self.info: dict[str, Any] | None = None
        #: wall seconds each (re)start took, including torch import and device initialisation
        self.start_seconds: list[float] = []
        atexit.register(self.close)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def start(self) -> dict[str, Any]:
        """Start the worker process (if not running) and return its info
        (``pid``, ``torch_version``, ``device``, ``gpu``, ``role``).

        Raises:
            WorkerStartError: it died or did not report ready within ``ready_timeout_s``.
        """
        if self.alive and self.info is not None:
            return self.info
        self.close()
        t = time.monotonic()
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._clock = ctx.RawArray("d", 2) if self.lock_path else None
        proc = ctx.Process(target=_serve, args=(child, self.device, self.env, self.quiet, self.mem_mb,
                                                self.role, self.lock_path, self.gpu_mem_fraction,
                                                self.cpus, self.warm_inductor, self.threads,
                                                self._clock),
                           name=f"curate-{self.role}-worker")
        proc.start()
        child.close()
        self.proc, self.conn = proc, parent
        ready = mpc.wait([parent, proc.sentinel], timeout=self.ready_timeout_s)
        msg = None
        if parent in ready:
            try:
                msg = parent.recv()
            except (EOFError, OSError):
                msg = None
        if not msg or msg[0] != "ready":
            detail = msg[1] if msg else ("no answer" if not ready else "exited during start")
            self.close()
            raise WorkerStartError(f"{self.role} worker on {self.device}: {detail}")
        self.info = msg[1]
        self.start_seconds.append(time.monotonic() - t)
        return self.info

    def _lock_waited(self) -> float:
        """Seconds this worker has waited for its GPU lock since it started, the wait in
        progress included (0.0 without a lock)."""
        clock = self._clock
        if clock is None:
            return 0.0
        since, total = clock[0], clock[1]
        return total + (max(0.0, time.monotonic() - since) if since > 0 else 0.0)

    def _wait_result(self, timeout_s: float) -> tuple[list, float]:
        """Wait for the worker's answer or death. The limit is ``timeout_s`` seconds of the
        task's own time: seconds spent waiting for the GPU lock (behind another worker's timed
        trials, or a hung problem that holds the lock until its own limit kills it) do not
        count, up to :data:`LOCK_WAIT_CAP` times ``timeout_s`` of wall time in all.
        Returns what became ready (empty: timed out) and the seconds waited for the lock."""
        t, waited0 = time.monotonic(), self._lock_waited()
        while True:
            waited = self._lock_waited() - waited0
            wall = time.monotonic() - t
            left = min(timeout_s - (wall - waited), LOCK_WAIT_CAP * timeout_s - wall)
            if left <= 0:
                return [], waited
            ready = mpc.wait([self.conn, self.proc.sentinel], timeout=left)
            if ready:
                return ready, waited

    def measure(self, task: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Run one task in the worker with a limit of ``timeout_s`` seconds, time spent
        waiting for the GPU lock not counted (see :meth:`_wait_result`).

        Returns:
            The worker's result, or :func:`dead_result` with reason ``timeout`` or ``crash``;
            a ``crash`` (the process died without answering) also has ``worker_died: True``.
        Raises:
            WorkerStartError: a (re)start failed.
        """
        self.start()
        t = time.monotonic()
        try:
            self.conn.send(task)
        except (OSError, BrokenPipeError) as exc:
            self.close()
            return {**dead_result("crash", f"worker pipe broken: {exc}", self.device,
                                  time.monotonic() - t, self.role), "worker_died": True}
        ready, waited = self._wait_result(timeout_s)
        if self.conn in ready:
            try:
                kind, result = self.conn.recv()
                result["wall_s"] = time.monotonic() - t
                if result.get("fatal"):
                    self.close()
                return result
            except (EOFError, OSError):
                pass
        if not ready:
            self.close()
            extra = f" (and {waited:.0f} s waiting for the GPU)" if waited >= 1 else ""
            return dead_result("timeout", f"no result after {timeout_s:.0f} s{extra}", self.device,
                               time.monotonic() - t, self.role)
        self.proc.join(5)
        code = self.proc.exitcode
        self.close()
        return {**dead_result("crash", _death(code), self.device, time.monotonic() - t, self.role),
                "worker_died": True}

    def close(self) -> None:
        """Stop the worker (politely, then by killing its process group)."""
        proc, conn = self.proc, self.conn
        self.proc = self.conn = None
        self.info = None
        if conn is not None:
            try:
                if proc is not None and proc.is_alive():
                    conn.send(None)
            except (OSError, BrokenPipeError):
                pass
            conn.close()
        if proc is None:
            return
        proc.join(2)
        kill_tree(proc)


def _death(exitcode: int | None) -> str:
    return f"worker {death_reason(exitcode)}"


def gpu_slots(workers: int | None = None) -> list[dict[str, str]]:
    """``CUDA_VISIBLE_DEVICES`` settings for ``workers`` GPU workers (default one per GPU),
    honouring an existing ``CUDA_VISIBLE_DEVICES``. More workers than GPUs share GPUs
    round-robin; a :class:`WorkerPool` gives the workers of one GPU one lock, so only one of
    them times at a time."""
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [x.strip() for x in visible.split(",") if x.strip()] if visible else \
        [str(i) for i in range(torch.cuda.device_count())]
    if not ids:
        raise WorkerStartError("no CUDA device visible")
    n = workers or len(ids)
    return [{"CUDA_VISIBLE_DEVICES": ids[k % len(ids)]} for k in range(n)]


def default_compile_workers(gpus: int, cores: int | None = None) -> int:
    """Compile-ahead workers per GPU by default: the cores left after one for the stage's
    own process and two per measure worker, at most 8 per GPU; 0 on small machines."""
    cores = cores or cpu_count()
    spare = cores - 1 - 2 * gpus
    return max(0, min(8, spare // max(1, gpus))) if spare >= 2 else 0


#: Share of a GPU's memory for its measure worker when compile-ahead workers share the GPU
#: (they split :data:`COMPILE_MEM_SHARE`); alone, the measure worker may use 90%.
MEASURE_MEM_SHARE = 0.5
COMPILE_MEM_SHARE = 0.4
ALONE_MEM_SHARE = 0.9
#: The part of a GPU's memory each of several measure workers sharing it may use. Their sum
#: exceeds the GPU: rows seldom peak together (a band row's median peak is 1.4-2 GB on an
#: H100), and a row refused memory beside the others is measured again alone at the end
#: (curate.measure.stage); an even split of 80 GB over ten workers refused 19% of band rows.
SHARED_MEM_SHARE = 0.3
#: the worker environment variable naming the cores its GPU's timed trials run on
TIMING_CPUS_ENV = "CURATE_TIMING_CPUS"


def compile_mem_fraction(k: int, n: int) -> float:
    """GPU memory share of compile-ahead worker ``k`` of ``n``: worker 0 is the large one
    (half of :data:`COMPILE_MEM_SHARE`, 16 GB of an 80 GB H100), which also retries what a
    small worker ran out of memory on; the others split the other half. Split evenly, eight
    workers got 4 GB each and 55 of KernelBench's 100 level-1 problems (inputs and outputs of
    4-16 GB) could not be compiled ahead (H100 run, benchmarks/h100-measure.md)."""
    if n <= 1:
        return COMPILE_MEM_SHARE
    return COMPILE_MEM_SHARE / 2 if k == 0 else COMPILE_MEM_SHARE / 2 / (n - 1)


class _Board:
    """Tasks ready for the measure workers. A task whose worker died waits for a worker it has
    not died on; when every worker still taking tasks has, the next one of them takes it (a
    fresh process), so no task waits forever."""

    def __init__(self, workers: int, tasks: int):
        self.cond = threading.Condition()
        self.items: list[tuple[int, dict, tuple[int, ...]]] = []  # (index, task, died on)
        self.alive = set(range(workers))
        self.left = tasks  # tasks not answered yet

    def put(self, i: int, task: dict, died_on: tuple[int, ...] = ()) -> None:
        with self.cond:
            self.items.append((i, task, died_on))
            self.cond.notify_all()

    def take(self, g: int) -> tuple[int, dict, tuple[int, ...]] | None:
        """The next task for worker ``g``; None once every task is answered."""
        with self.cond:
            while True:
                if self.left <= 0:
                    return None
                for n, (i, task, died_on) in enumerate(self.items):
                    if g not in died_on or not (self.alive - set(died_on)):
                        return self.items.pop(n)
                self.cond.wait(0.5)

    def answered(self) -> None:
        with self.cond:
            self.left -= 1
            self.cond.notify_all()

    def leave(self, g: int) -> None:
        with self.cond:
            self.alive.discard(g)
            self.cond.notify_all()


class WorkerPool:
    """Measure a list of tasks: one measure worker per environment (GPU), fed by threads,
    with optional compile-ahead workers per GPU that compile the next problems first.

    A measure worker that dies on a task (a segfault, a kill from outside: a ``crash`` with
    ``worker_died``) has that task retried on another worker, ``retries`` times at most (on
    the same GPU's fresh worker when no other is left); a task that killed every worker it
    ran on keeps its ``crash`` result, with the workers named in its ``detail``. Timeouts are
    not retried (a hang costs ``timeout_s`` again on any GPU). Every task gets exactly one
    result.

    Args:
        envs: one environment per measure worker (see :func:`gpu_slots`); ``[{}]`` for a
            single worker that inherits the environment.
        device: the device each worker uses (``cuda`` after ``CUDA_VISIBLE_DEVICES``).
        timeout_s: wall-clock limit per task (measure and compile-ahead alike).
        compile_workers: compile-ahead workers per measure worker; used for tasks with
            ``inductor`` set. None: :func:`default_compile_workers` on CUDA, 0 on the CPU.
        gpu_mem_fraction: the measure worker's share of its GPU's memory (None: 0.5 beside
            compile-ahead workers, 0.9 alone); compile-ahead workers split 0.4.
        inductor_cache: a folder for Inductor's and Triton's caches shared by the workers
            (None: torch's default, which persists between runs).
        pin_cpus: pin measure workers to two cores each and compile-ahead workers to the
            rest (on machines with at least 8 cores).
        retries: times a task whose worker died is run again (0: never).
    """

    def __init__(self, envs: list[dict[str, str]], device: str = "cuda", timeout_s: float = 300.0,
                 quiet: bool = True, mem_mb: int | None = 8192, compile_workers: int | None = None,
                 gpu_mem_fraction: float | None = None, inductor_cache: str | None = None,
                 pin_cpus: bool = True, warm_inductor: bool = False, retries: int = 1):
        import tempfile

        cuda = device.startswith("cuda")
        gpu_of = [e.get("CUDA_VISIBLE_DEVICES", str(g)) for g, e in enumerate(envs)]
        per_gpu = {k: gpu_of.count(k) for k in gpu_of}
        shared_gpus = max(per_gpu.values(), default=1) > 1
        if compile_workers is None:
            # several measure workers per GPU compile their own problems: nothing to run ahead
            compile_workers = default_compile_workers(len(per_gpu)) if cuda and not shared_gpus else 0
        self.device = device
        self.timeout_s = timeout_s
        self.retries = max(0, int(retries))
        self._lock_dir = tempfile.mkdtemp(prefix="curate-gpu-lock-")
        extra_env = {}
        if inductor_cache:
            extra_env = {"TORCHINDUCTOR_CACHE_DIR": str(inductor_cache),
                         "TRITON_CACHE_DIR": os.path.join(str(inductor_cache), "triton")}
        # the cores this process may use (taskset, cgroups), so runs side by side stay apart
        avail = usable_cpus()
        cores = len(avail)
        pin = pin_cpus and cores >= 8 and 2 * len(envs) < cores
        rest = avail[2 * len(envs):] if pin else None
        # several workers per GPU compile on every core; two cores per GPU are kept for
        # whichever of them holds its GPU's lock to time (curate.measure.gpu_lock)
        gpus = sorted(per_gpu)
        reserve = pin_cpus and shared_gpus and cores >= 8 and 2 * len(gpus) + len(envs) <= cores
        timing_cpus = {k: avail[2 * n:2 * n + 2] for n, k in enumerate(gpus)} if reserve else {}
        compile_cpus = avail[2 * len(gpus):] if reserve else None
        self.envs = [dict(e) for e in envs]
        #: whether several measure workers share a GPU (see :meth:`map_memory_alone`)
        self.shares_gpus = shared_gpus
        #: rows :meth:`map_memory_alone` measured again alone after a memory refusal
        self.memory_retried = 0
        self.workers: list[PersistentWorker] = []
        self.compilers: list[list[PersistentWorker]] = []
        for g, env in enumerate(envs):
            env = {**env, **extra_env}
            sharing = per_gpu[gpu_of[g]]
            if sharing > 1:
                # one core each: a compile runs in the worker, Triton's included
                env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
                if gpu_of[g] in timing_cpus:
                    env[TIMING_CPUS_ENV] = ",".join(map(str, timing_cpus[gpu_of[g]]))
            # one lock per GPU, for all of its measure and compile-ahead workers
            lock = os.path.join(self._lock_dir, f"gpu{gpu_of[g]}.lock") \
                if cuda and (compile_workers or sharing > 1) else None
            alone = ALONE_MEM_SHARE if sharing == 1 else SHARED_MEM_SHARE
            share = (MEASURE_MEM_SHARE if compile_workers else alone) \
                if gpu_mem_fraction is None else gpu_mem_fraction
            threads = 2 if pin else (1 if sharing > 1 else None)  # the measure worker's cores
            self.workers.append(PersistentWorker(
                device, env, quiet, mem_mb=mem_mb, lock_path=lock,
                gpu_mem_fraction=share if cuda else None,
                cpus=avail[2 * g:2 * g + 2] if pin else (compile_cpus if sharing > 1 else None),
                warm_inductor=warm_inductor, threads=threads))
            self.compilers.append([PersistentWorker(
                device, env, quiet, mem_mb=mem_mb, role="compile", lock_path=lock,
                gpu_mem_fraction=compile_mem_fraction(k, compile_workers) if cuda else None,
                cpus=rest, threads=threads)
                for k in range(compile_workers)])
        #: compile-ahead outcomes by status, and FX-graph cache hits of the measure workers
        self.compile_ahead: dict[str, int] = {}
        #: tasks run again after their worker died, and the results per measure worker
        self.retried = 0
        self.per_worker: list[int] = [0] * len(envs)
        self._running: dict[int, tuple[int, int]] = {}
        self._running_lock = threading.Lock()
        #: measure workers stay up after each map (see :meth:`start_workers`)
        self.keep_alive = False
        self._stop = threading.Event()
        self._holders: list[threading.Thread] = []

    @property
    def start_seconds(self) -> list[float]:
        return [s for w in self.workers for s in w.start_seconds]

    @property
    def compile_start_seconds(self) -> list[float]:
        return [s for ws in self.compilers for w in ws for s in w.start_seconds]

    @property
    def infos(self) -> list[dict[str, Any]]:
        return [w.info for w in self.workers if w.info]

    def start_workers(self, keep_alive: bool = True) -> float:
        """Start every measure worker now, all at once, each from a thread that lives until
        :meth:`close` (a worker ends with the thread that started it: Linux's parent-death
        signal). With ``keep_alive`` the workers also outlive each :meth:`map`, so a caller
        mapping many batches (a Ray actor's shards) pays their start once.

        Returns:
            Wall seconds the starts took.
        Raises:
            WorkerStartError: a worker failed to start.
        """
        self.keep_alive = keep_alive
        t = time.monotonic()
        started = [threading.Event() for _ in self.workers]
        errors: list[BaseException] = []

        def hold(k: int, w: PersistentWorker) -> None:
            try:
                w.start()
            except BaseException as exc:
                errors.append(exc)
            finally:
                started[k].set()
            self._stop.wait()

        for k, w in enumerate(self.workers):
            th = threading.Thread(target=hold, args=(k, w), daemon=True, name=f"curate-hold-{k}")
            th.start()
            self._holders.append(th)
        for e in started:
            e.wait()
        if errors:
            raise errors[0]
        return time.monotonic() - t

    def running(self) -> dict[int, tuple[int, int]]:
        """``{measure worker number: (task index, worker pid)}`` for the tasks being measured
        now (for progress reports and fault-injection tests)."""
        with self._running_lock:
            return dict(self._running)

    def map_memory_alone(self, tasks: Iterable[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any]]]:
        """:meth:`map`, except that where workers share a GPU a row refused ``memory`` beside
        the others is held back and measured again once the rest are done, alone on the GPU
        with :data:`ALONE_MEM_SHARE` of its memory (the shares of workers on one GPU add up to
        more than the GPU, as band rows seldom peak together). Yields ``(index, result)`` once
        per task; :attr:`memory_retried` counts the rows measured again."""
        items = list(tasks)
        again: list[int] = []
        for j, res in self.map(items):
            if self.shares_gpus and res.get("reason") == "memory":
                again.append(j)
                continue
            yield j, res
        for j in again:  # one at a time: the other workers stay idle
            self.memory_retried += 1
            for _, res in self.map([{**items[j], "gpu_mem_fraction": ALONE_MEM_SHARE}]):
                yield j, res

    def map(self, tasks: Iterable[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any]]]:
        """Measure ``tasks``; yield ``(index, result)`` in completion order, once per task.

        Tasks with ``inductor`` set pass through a compile-ahead worker first (when the pool
        has any); the measure workers take whichever task is ready. A worker that cannot
        (re)start hands its task to the others and stops taking tasks (the last one of each
        kind keeps trying, its tasks getting ``crash`` results, so no task is left
        unanswered). Each result names its measure worker (``worker``, its number in
        ``envs``); a task run again after a worker died on it has ``died_on`` (the workers'
        numbers) and the note ``worker_died``.
        """
        items = list(enumerate(tasks))
        board = _Board(len(self.workers), len(items))
        to_compile: queue.Queue = queue.Queue()
        retry: queue.Queue = queue.Queue()  # out of memory on a small compile worker
        compilers = [w for ws in self.compilers for w in ws]
        large = {id(ws[0]) for ws in self.compilers if len(ws) > 1}
        for i, task in items:
            if compilers and task.get("inductor"):
                to_compile.put((i, task))
            else:
                board.put(i, task)
        n_compile = to_compile.qsize()
        done: queue.Queue = queue.Queue()
        lock = threading.Lock()
        active = {"measure": len(self.workers), "compile": len(compilers)}
        compiled = [0]
        unresolved = [n_compile]  # compile tasks not yet handed to the measure workers
        large_alive = [len(large)]

        def give_up(kind: str) -> bool:
            with lock:
                if active[kind] > 1:
                    active[kind] -= 1
                    return True
            return False

        def resolve(i: int, task: dict, pre: dict) -> None:
            with lock:
                self.compile_ahead[pre["status"]] = self.compile_ahead.get(pre["status"], 0) + 1
                compiled[0] += 1
                unresolved[0] -= 1
            board.put(i, {**task, "precompile": {k: pre.get(k) for k in ("status", "detail",
                                                                          "seconds", "cache")}})

        def next_task(is_large: bool):
            while True:
                if is_large:
                    try:
                        return retry.get_nowait()
                    except queue.Empty:
                        pass
                try:
                    return to_compile.get_nowait()
                except queue.Empty:
                    pass
                with lock:
                    waiting = is_large and unresolved[0] > 0
                if not waiting:
                    return None
                try:  # small workers may still hand over a task that ran out of memory
                    return retry.get(timeout=0.1)
                except queue.Empty:
                    continue

        def compile_feed(worker: PersistentWorker) -> None:
            is_large = id(worker) in large
            while True:
                got = next_task(is_large)
                if got is None:
                    break
                i, task = got
                try:
                    pre = worker.measure(task, self.timeout_s)
                except WorkerStartError as exc:
                    resolve(i, task, {"status": "unavailable", "detail": str(exc)})
                    if give_up("compile"):
                        break
                    continue
                except BaseException as exc:
                    pre = {"status": "unavailable", "detail": f"{type(exc).__name__}: {exc}"}
                if pre.get("status") == "memory" and not is_large:
                    with lock:  # checked and queued together, so the drain below misses none
                        handed = large_alive[0] > 0
                        if handed:
                            retry.put((i, task))
                    if handed:
                        continue
                resolve(i, task, pre)
            if is_large:
                left = []
                with lock:
                    large_alive[0] -= 1
                    if not large_alive[0]:
                        while not retry.empty():
                            left.append(retry.get_nowait())
                for i, task in left:  # nobody is left to retry these: hand them on uncompiled
                    resolve(i, task, {"status": "memory", "detail": "no compile worker left to retry"})
            worker.close()

        def measure_feed(g: int, worker: PersistentWorker) -> None:
            held_pid = worker.info["pid"] if worker.alive and worker.info else None
            while True:
                got = board.take(g)
                if got is None:
                    break
                i, task, died_on = got
                try:
                    pid = worker.start()["pid"]
                    with self._running_lock:
                        self._running[g] = (i, pid)
                    result = worker.measure(task, self.timeout_s)
                except WorkerStartError as exc:
                    if give_up("measure"):  # the others take this task and the rest
                        board.leave(g)
                        board.put(i, task, died_on)
                        break
                    result = dead_result("crash", str(exc), self.device)
                except BaseException as exc:  # never leave a task unanswered
                    result = dead_result("crash", f"{type(exc).__name__}: {exc}", self.device)
                finally:
                    with self._running_lock:
                        self._running.pop(g, None)
                if result.get("worker_died"):
                    died = died_on + (g,)
                    if len(died) <= self.retries:
                        with lock:
                            self.retried += 1
                        board.put(i, task, died)
                        continue
                    result["detail"] = (f"{result['detail']}; the worker died on it {len(died)} times "
                                        f"(workers {', '.join(map(str, died))}), not retried again")
                    died_on = died
                elif died_on:
                    result["notes"] = list(result.get("notes") or []) + ["worker_died"]
                result["worker"] = g
                if died_on:
                    result["died_on"] = list(died_on)
                if task.get("precompile"):
                    result["precompile"] = task["precompile"]
                with lock:
                    self.per_worker[g] += 1
                done.put((i, result))
                board.answered()
            # a worker this thread (re)started dies with it: close it now, cleanly
            if not self.keep_alive or (worker.info or {}).get("pid") != held_pid:
                worker.close()

        threads = [threading.Thread(target=compile_feed, args=(w,), daemon=True) for w in compilers
                   if n_compile]
        threads += [threading.Thread(target=measure_feed, args=(g, w), daemon=True)
                    for g, w in enumerate(self.workers)]
        for t in threads:
            t.start()
        for _ in range(len(items)):
            yield done.get()
        for t in threads:
            t.join()

    def close(self) -> None:
        import shutil

        for w in self.workers + [c for ws in self.compilers for c in ws]:
            w.close()
        self._stop.set()
        shutil.rmtree(self._lock_dir, ignore_errors=True)
