"""Persistent verification workers: the reward's fast path.

A one-shot verification (:func:`curate.verify.verify`) forks a fresh sandbox process per
candidate, which then pays for CUDA's context, the reference's load and its baseline timings
every time. A :class:`VerifierPool` keeps up to ``workers`` sandboxed processes alive
(:meth:`curate.sandbox.Sandbox.start_worker` running :func:`curate.verify.worker.serve`):
each keeps its CUDA context, Triton's and Inductor's caches and, per problem, the loaded
reference and its baseline timings. Every call still draws a fresh seed, so the reference's
model, inputs and outputs are new each time. Calls for a problem go to a worker that already
holds it when one is free.

Isolation: a candidate that crashes, hangs past its time limit or runs out of memory ends
its own worker only (the next call starts a fresh one); a candidate that leaves the process
changed (a replaced torch function, a global setting, a thread: see
:func:`curate.verify.guards.process_state`) gets its result, and its worker is retired.
Workers are also retired after ``max_calls`` calls. Thread-safe: any number of threads may
call :meth:`VerifierPool.verify` at once; ``workers`` of them verify at a time.

Out of memory beside others: where several workers share a GPU, a call whose candidate or
reference runs out of memory (a ``memory`` outcome, or a verdict naming "out of memory") may
only have met the other workers' allocations; it is verified again once alone on that GPU: new
calls wait for other GPUs (or, with one, for its end) and the retry starts when the GPU's other
calls have finished. Its verdict is the one returned (``details["memory_retried_alone"]`` keeps
the first one's reason); :attr:`VerifierPool.memory_retried` counts them. The measure stage does
the same for rows refused ``memory`` beside other workers
(:meth:`curate.measure.worker.MeasurePool.map_memory_alone`).

Many GPUs: each worker is pinned to one GPU (its ``CUDA_VISIBLE_DEVICES``, one *slot* per
visible GPU, :func:`device_slots`). A new worker goes to the slot with the fewest workers; a
call goes to a free worker holding its problem on the least busy GPU, so concurrent calls
(``compute_score_batch``, a trainer's reward threads) spread over every GPU of the host.

Imports only the standard library (workers import torch and triton).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from curate.cpus import cpu_count
from curate.sandbox import MEMORY, OK, Outcome, Sandbox, Worker
from curate.verify.verifier import VerifyResult, _from_outcome, out_of_memory


def device_slots(device: str) -> list[dict[str, str]]:
    """One environment per GPU a ``device`` pool spreads its workers over: for ``cuda``, a
    ``CUDA_VISIBLE_DEVICES`` per visible GPU (:func:`curate.measure.worker.gpu_slots`); for
    ``cpu`` or one named GPU (``cuda:1``), one slot that changes nothing."""
    if device != "cuda":
        return [{}]
    from curate.measure.worker import WorkerStartError, gpu_slots

    try:
        return gpu_slots()
    except WorkerStartError:
        return [{}]


class VerifierPool:
    """Up to ``workers`` persistent verification workers for one device, spread over its GPUs.

    Args:
        workers: workers at once (default: ``CURATE_REWARD_WORKERS``, else 8 per GPU on CUDA
            and the CPU count, at most 8, on the CPU).
        device: ``"cpu"`` or ``"cuda"`` (resolved, not ``"auto"``).
        mem_mb: address-space budget per worker on top of its start size (MiB); None: no
            limit (CUDA's default: the driver reserves huge address ranges).
        max_calls: calls after which a worker is replaced (bounds slow leaks).
        slots: one environment per GPU (default :func:`device_slots`); each worker gets one.
        memory_alone: verify a call that ran out of memory again alone on its GPU (default:
            on CUDA where more than one worker may share a GPU).
    """

    def __init__(self, workers: int | None = None, device: str = "cpu", mem_mb: int | None = None,
                 max_calls: int = 500, slots: list[dict[str, str]] | None = None,
                 memory_alone: bool | None = None):
        self.slots = [dict(s) for s in (slots if slots is not None else device_slots(device))] or [{}]
        env = os.environ.get("CURATE_REWARD_WORKERS")
        default = 8 * len(self.slots) if device.startswith("cuda") else min(8, cpu_count())
        self.workers = max(1, int(workers or (int(env) if env else default)))
        self.device = device
        self.mem_mb = mem_mb
        self.max_calls = max_calls
        self._cond = threading.Condition()
        self._idle: list[tuple[Worker, set[str], int]] = []  # (worker, problems it holds, slot)
        self._count = 0  # workers alive or starting, idle or busy
        self._live = [0] * len(self.slots)  # workers per slot, alive or starting
        self._busy = [0] * len(self.slots)  # calls running per slot
        #: calls answered per slot
        self.calls_per_slot = [0] * len(self.slots)
        self.memory_alone = (device.startswith("cuda") and self.workers > len(self.slots)) \
            if memory_alone is None else memory_alone
        #: calls verified again alone on their GPU after running out of memory beside others
        self.memory_retried = 0
        self._reserved = [0] * len(self.slots)  # retries waiting for, or running alone on, a slot
        self._closed = False

    def verify(self, reference_code: str, candidate_code: str, cfg: dict[str, Any],
               timeout_s: float, problem_key: str) -> VerifyResult:
        """Verify one candidate in a persistent worker (``cfg`` from
        :func:`curate.verify.make_config` for this pool's device).

        Returns:
            The :class:`VerifyResult`; ``details["worker_retired"]`` names what a candidate
            left changed, when it did; ``details["gpu_slot"]`` is the slot (GPU) that ran it
            and ``details["visible_devices"]`` what its worker saw;
            ``details["memory_retried_alone"]`` (``{"first_reason": ...}``) marks a verdict of a
            call verified again alone on its GPU after running out of memory. Never raises for
            a failing candidate or worker.
        """
        result, slot = self._call(reference_code, candidate_code, cfg, timeout_s, problem_key)
        if self.memory_alone and out_of_memory(result):
            first = result.reason
            with self._cond:
                self._reserved[slot] += 1  # no new call starts on this GPU from now on
            try:
                result, _ = self._call(reference_code, candidate_code, cfg, timeout_s, problem_key, alone=slot)
            finally:
                with self._cond:
                    self._reserved[slot] -= 1
                    self.memory_retried += 1
                    self._cond.notify_all()
            result.details["memory_retried_alone"] = {"first_reason": first}
        return result

    def _call(self, reference_code: str, candidate_code: str, cfg: dict[str, Any], timeout_s: float,
              problem_key: str, alone: int | None = None) -> tuple[VerifyResult, int]:
        requested_at = time.time()
        worker, held, slot = self._acquire(problem_key, alone)
        start = time.monotonic()
        try:
            outcome = worker.call((reference_code, candidate_code, cfg), timeout_s)
        except RuntimeError as exc:  # the worker was closed under us (pool closed)
            outcome = Outcome("crash", None, str(exc), time.monotonic() - start)
        retire: list[str] = []
        visible = None
        if outcome.status == OK:
            retire = list(outcome.value.get("retire") or [])
            visible = outcome.value.get("visible_devices")
            outcome = Outcome(OK, outcome.value["result"], "", outcome.seconds)
        elif outcome.status == "error" and "MemoryError" in outcome.error:
            outcome = Outcome(MEMORY, None, outcome.error, outcome.seconds)
        result = _from_outcome(outcome, cfg)
        result.details["worker_call"] = worker.calls  # 1: this call started the worker
        boot = result.details.get("worker_startup")
        if boot:  # seconds from asking for a worker to its loop's start (server, fork, imports)
            boot["to_serve_s"] = round(boot.pop("entered_at") - requested_at, 4)
        if retire:
            result.details["worker_retired"] = retire
        result.details["gpu_slot"] = slot
        if visible is not None:
            result.details["visible_devices"] = visible
        keep = outcome.status == OK and not retire and worker.alive and worker.calls < self.max_calls
        self._release(worker, held | {problem_key}, keep, slot)
        return result, slot

    def _pick_idle(self, key: str, usable) -> int | None:
        """The idle worker to use: one holding ``key`` on the least busy usable GPU, else None."""
        best = None
        for i, (_, held, slot) in enumerate(self._idle):
            if key in held and usable(slot) and (best is None or self._busy[slot] < self._busy[self._idle[best][2]]):
                best = i
        return best

    def _acquire(self, key: str, alone: int | None = None) -> tuple[Worker, set[str], int]:
        """A worker for ``key``: an idle one or a new one. ``alone``: a slot whose other calls
        must all have finished first (a retry after running out of memory); other calls skip
        slots reserved for such retries."""
        if alone is None:
            def usable(s: int) -> bool:
                return not self._reserved[s]
        else:
            def usable(s: int) -> bool:
                return s == alone
        stopped: list[Worker] = []
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("verifier pool is closed")
                if alone is not None:
                    if self._busy[alone]:
                        self._cond.wait()
                        continue
                    # alone means the whole GPU: the slot's idle workers hold CUDA contexts and
                    # whatever their allocators kept; the retry gets a fresh worker
                    for k in [k for k, (_, _, s) in enumerate(self._idle) if s == alone][::-1]:
                        stopped.append(self._idle.pop(k)[0])
                        self._count -= 1
                        self._live[alone] -= 1
                i = self._pick_idle(key, usable)
                free = [k for k, (_, _, s) in enumerate(self._idle) if usable(s)]
                if i is None and self._count >= self.workers and free:
                    # a free worker holding other problems, on the least busy GPU
                    i = min(free, key=lambda k: self._busy[self._idle[k][2]])
                if i is not None:
                    worker, held, slot = self._idle.pop(i)
                    self._busy[slot] += 1
                    return worker, held, slot
                if self._count >= self.workers and alone is not None and self._idle:
                    # make room on the retry's GPU: stop an idle worker of another GPU
                    worker, _, other = self._idle.pop(0)
                    self._count -= 1
                    self._live[other] -= 1
                    stopped.append(worker)
                usable_slots = [s for s in range(len(self.slots)) if usable(s)]
                if self._count < self.workers and usable_slots:
                    slot = min(usable_slots, key=lambda s: (self._live[s], self._busy[s]))
                    self._count += 1
                    self._live[slot] += 1
                    self._busy[slot] += 1
                    break
                self._cond.wait()
        for w in stopped:
            w.close()
        try:
            sandbox = Sandbox(workers=1, timeout_s=600, mem_mb=self.mem_mb, preload="verify")
            from curate.verify.worker import serve

            threads = max(1, cpu_count() // self.workers)
            return sandbox.start_worker(serve, self.device, self.slots[slot], threads), set(), slot
        except BaseException:
            with self._cond:
                self._count -= 1
                self._live[slot] -= 1
                self._busy[slot] -= 1
                self._cond.notify()
            raise

    def _release(self, worker: Worker, held: set[str], keep: bool, slot: int) -> None:
        if not keep:
            worker.close()
        with self._cond:
            self._busy[slot] -= 1
            self.calls_per_slot[slot] += 1
            if keep and not self._closed:
                self._idle.append((worker, set(list(held)[-64:]), slot))
            else:
                self._count -= 1
                self._live[slot] -= 1
                if keep:
                    worker.close()
            self._cond.notify()

    def close(self) -> None:
        """Stop every idle worker; busy ones stop when their call returns."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            for _, _, slot in idle:
                self._live[slot] -= 1
            self._cond.notify_all()
        for w, _, _ in idle:
            w.close()


_POOLS: dict[tuple, tuple[int, VerifierPool]] = {}
_POOLS_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    global _POOLS_LOCK
    _POOLS_LOCK = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork_in_child)


def shared_pool(device: str, mem_mb: int | None, workers: int | None = None) -> VerifierPool:
    """This process's pool for ``device`` (made on first use; a forked child gets its own)."""
    key = (device, mem_mb, workers)
    with _POOLS_LOCK:
        entry = _POOLS.get(key)
        if entry is None or entry[0] != os.getpid():
            entry = _POOLS[key] = (os.getpid(), VerifierPool(workers, device, mem_mb))
        return entry[1]
