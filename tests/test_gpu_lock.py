"""The GPU lock between processes: an exclusive holder excludes readers, readers share, a
queued writer is not starved by a stream of readers, and a dead holder frees the lock."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

from curate.measure.gpu_lock import GpuLock


def _hold(path: str, mode: str, seconds: float, log: str, tag: str) -> None:
    lock = GpuLock(path)
    with getattr(lock, mode)():
        with open(log, "a") as f:
            f.write(f"{tag} in {time.monotonic():.4f}\n")
        time.sleep(seconds)
        with open(log, "a") as f:
            f.write(f"{tag} out {time.monotonic():.4f}\n")


def _reader_stream(path: str, until: float, log: str, tag: str) -> None:
    lock = GpuLock(path)
    while time.monotonic() < until:
        with lock.shared():
            with open(log, "a") as f:
                f.write(f"{tag} in {time.monotonic():.4f}\n")
            time.sleep(0.05)
            with open(log, "a") as f:
                f.write(f"{tag} out {time.monotonic():.4f}\n")


def _intervals(log: str) -> dict[str, list[tuple[float, float]]]:
    open_at: dict[str, float] = {}
    out: dict[str, list[tuple[float, float]]] = {}
    for line in open(log).read().split("\n"):
        if not line:
            continue
        tag, what, t = line.split()
        if what == "in":
            open_at[tag] = float(t)
        else:
            out.setdefault(tag, []).append((open_at.pop(tag), float(t)))
    return out


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_exclusive_excludes_readers_and_readers_share(tmp_path):
    path, log = str(tmp_path / "gpu.lock"), str(tmp_path / "log")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_hold, args=(path, "exclusive", 0.6, log, "w"))]
    procs += [ctx.Process(target=_hold, args=(path, "shared", 0.6, log, f"r{i}")) for i in range(2)]
    procs[0].start()
    time.sleep(0.2)  # the writer is in first
    for p in procs[1:]:
        p.start()
    for p in procs:
        p.join(20)
    iv = _intervals(log)
    w = iv["w"][0]
    assert not _overlap(w, iv["r0"][0]) and not _overlap(w, iv["r1"][0])
    assert _overlap(iv["r0"][0], iv["r1"][0])  # readers held it together


def test_a_queued_writer_is_not_starved_by_readers(tmp_path):
    path, log = str(tmp_path / "gpu.lock"), str(tmp_path / "log")
    ctx = mp.get_context("spawn")
    until = time.monotonic() + 4.0
    readers = [ctx.Process(target=_reader_stream, args=(path, until, log, f"r{i}")) for i in range(3)]
    for p in readers:
        p.start()
    time.sleep(1.0)
    t_ask = time.monotonic()
    writer = ctx.Process(target=_hold, args=(path, "exclusive", 0.3, log, "w"))
    writer.start()
    writer.join(20)
    for p in readers:
        p.join(20)
    iv = _intervals(log)
    w = iv["w"][0]
    assert w[0] - t_ask < 1.5  # got in while the readers kept coming (they stop at +4 s)
    assert w[1] < until
    for tag in ("r0", "r1", "r2"):
        assert not any(_overlap(w, r) for r in iv[tag])


def _die_holding(path: str) -> None:
    lock = GpuLock(path)
    with lock.exclusive():
        os._exit(1)


def test_a_dead_holder_releases_the_lock(tmp_path):
    path = str(tmp_path / "gpu.lock")
    p = mp.get_context("spawn").Process(target=_die_holding, args=(path,))
    p.start()
    p.join(20)
    t = time.monotonic()
    with GpuLock(path).exclusive():
        pass
    assert time.monotonic() - t < 1.0


def test_a_held_lock_makes_inner_requests_no_ops(tmp_path):
    """A compiled graph asks for the shared lock on every run; while its own worker times it
    under the exclusive lock that request must neither convert nor release the ``flock``."""
    path = tmp_path / "gpu.lock"
    lock = GpuLock(path)
    other = mp.get_context("spawn")
    with lock.exclusive():
        assert lock.held == "exclusive"
        with lock.shared():
            assert lock.held == "exclusive"
        with lock.exclusive():
            pass
        # still exclusive after the inner requests: another process cannot read
        p = other.Process(target=_try_shared, args=(str(path), 0.3, tmp_path / "got"))
        p.start()
        p.join()
        assert not (tmp_path / "got").exists()
    assert lock.held is None
    with lock.shared():
        assert lock.held == "shared"
        with lock.shared():
            assert lock.held == "shared"
        try:
            with lock.exclusive():
                raise AssertionError("exclusive inside shared must refuse")
        except RuntimeError as exc:
            assert "held shared" in str(exc)
    assert lock.held is None


def _try_shared(path: str, wait_s: float, flag) -> None:
    import fcntl

    fd = os.open(path, os.O_RDWR)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            open(flag, "w").close()
            return
        except BlockingIOError:
            time.sleep(0.02)


def test_exclusive_holder_times_on_the_timing_cores(tmp_path):

    before = os.sched_getaffinity(0)
    core = min(before)
    lock = GpuLock(tmp_path / "gpu.lock", timing_cpus=[core])
    try:
        with lock.shared():
            assert os.sched_getaffinity(0) == before  # untimed work stays where it was
        with lock.exclusive():
            assert os.sched_getaffinity(0) == {core}
            with lock.exclusive():  # re-entrant: still on the timing core
                assert os.sched_getaffinity(0) == {core}
        assert os.sched_getaffinity(0) == before
        # a core this process may not use: it times where it is, without an error
        other = GpuLock(tmp_path / "gpu2.lock", timing_cpus=[10_000])
        with other.exclusive():
            assert os.sched_getaffinity(0) == before
        other.close()
    finally:
        lock.close()
        os.sched_setaffinity(0, before)


def test_time_waiting_for_the_lock_is_not_counted_against_a_task_s_limit(tmp_path):
    """A hung problem holding the GPU lock until its own limit kills it must not time out the
    rows queued behind it: a worker's limit counts its task's own time, not its lock waits."""
    import threading

    from curate.measure.worker import PersistentWorker
    from curate.problem import assemble

    code = assemble("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return x * 2\n",
                    [{"kind": "tensor", "shape": [8, 8], "dtype": "float32"}], [])
    path = str(tmp_path / "gpu.lock")
    worker = PersistentWorker("cpu", lock_path=path, quiet=True)
    try:
        worker.start()
        held = GpuLock(path)
        task = {"code": code, "device": "cpu", "trials": 3, "warmup": 1}
        with held.exclusive():  # another worker's long hold (a hung problem's)
            t = time.monotonic()
            out = {}
            th = threading.Thread(target=lambda: out.update(worker.measure(task, timeout_s=2.0)))
            th.start()
            time.sleep(4.0)  # twice the task's limit, all of it spent waiting for the lock
        th.join(60)
        assert out.get("reason") is None, out.get("detail")
        assert out["wall_s"] > 3.5 and time.monotonic() - t > 3.5
        assert out["shared_wait_s"] > 3.0  # the worker saw the wait, and said so

        # the limit still holds for the task's own time
        slow = dict(task, code=code.replace("return x * 2", "import time; time.sleep(30); return x"))
        t = time.monotonic()
        res = worker.measure(slow, timeout_s=2.0)
        assert res["reason"] == "timeout" and time.monotonic() - t < 10
    finally:
        worker.close()
