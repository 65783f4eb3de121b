"""Calibrate many problems on one GPU with several worker processes.

Each worker (:class:`curate.measure.worker.PersistentWorker`, role ``calibrate``) loads its
problem, builds models and inputs holding the GPU lock shared, and times each probe holding it
exclusively (:mod:`curate.measure.gpu_lock`), so probes never run beside another worker's GPU
work while the loading, building and Python work of the others overlaps them. One worker
calibrated 0.9-1.3 problems a second on an H100 (most of its time outside the timed probes).

A crash or hang ends that problem only (a ``dead_result``, turned into ``{"ok": False}``);
a worker that cannot start fails the problems it takes, never the run.
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
from typing import Any, Iterator

from curate.cpus import cpu_count

#: Share of the GPU's memory the calibrate workers of one GPU may hold between them (each gets
#: an equal part; a shape past its part is shrunk like one past the memory budget).
CALIBRATE_MEM_SHARE = 0.85


def default_calibrate_workers(cores: int | None = None) -> int:
    """Calibrate workers on one GPU by default: 4 on a host with at least 8 cores, else 1."""
    return 4 if (cores or cpu_count()) >= 8 else 1


def calibrate_many(todo: list[tuple[Any, Any, dict]], device: str, timeout_s: float,
                   workers: int) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """Run :func:`curate.diversify.calibrate.calibrate_problem` on each task of ``todo``.

    Args:
        todo: ``(index, key, task)`` triples; ``task`` holds ``calibrate_problem``'s keyword
            arguments but ``device``.
        device: the GPU (``cuda``, ``cuda:1``), or ``cpu`` (host timers: tests).
        timeout_s: wall seconds per task, time spent waiting for the GPU lock not counted.
        workers: worker processes (at least 1; more than one share the GPU through a lock).
    Yields:
        ``(index, key, result)`` in completion order, exactly once per task: the calibration's
        result, or ``{"ok": False, "detail"}`` when the worker died, timed out or did not start.
    """
    from curate.measure.worker import PersistentWorker

    n = max(1, min(int(workers), len(todo)))
    if not todo:
        return
    lock_dir = tempfile.mkdtemp(prefix="curate-calibrate-") if n > 1 else None
    lock_path = os.path.join(lock_dir, "gpu.lock") if lock_dir else None
    fraction = CALIBRATE_MEM_SHARE / n if n > 1 and device.startswith("cuda") else None
    tasks: queue.Queue = queue.Queue()
    for item in todo:
        tasks.put(item)
    done: queue.Queue = queue.Queue()
    stop = threading.Event()

    def serve() -> None:
        worker = PersistentWorker(device=device, role="calibrate", mem_mb=None,
                                  lock_path=lock_path, gpu_mem_fraction=fraction)
        try:
            while not stop.is_set():
                try:
                    i, key, task = tasks.get_nowait()
                except queue.Empty:
                    return
                try:
                    res = worker.measure(task, timeout_s)
                    if "ok" not in res:  # the worker died or timed out: a dead_result
                        res = {"ok": False, "detail": f"{res.get('reason')}: {res.get('detail')}"}
                except Exception as exc:  # a worker that will not (re)start fails this task only
                    res = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:500]}
                done.put((i, key, res))
        finally:
            worker.close()

    threads = [threading.Thread(target=serve, name=f"calibrate-{k}", daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    try:
        for _ in range(len(todo)):
            yield done.get()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        if lock_dir:
            shutil.rmtree(lock_dir, ignore_errors=True)
