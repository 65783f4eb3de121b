"""The measure stage on a Ray cluster: one GPU actor per GPU on every node.

Each actor is a Ray actor holding one GPU (``num_gpus=1``; Ray sets its
``CUDA_VISIBLE_DEVICES``) and a one-worker :class:`curate.measure.worker.WorkerPool`
(measure worker and compile-ahead workers) on its node. The stage's driver cuts the rows
into shards, keeps two shards queued per actor, and journals each row as its shard comes
back, so a restarted run measures only the rows missing from the journal; results land in
the same stage tables as a local run's.

Faults: a row whose worker died (``worker_died``) is sent again, alone, to another actor
(``retries`` times at most); an actor that dies (its node lost, its process killed) has
the rows of its unfinished shards sent to the others the same way. A row that killed
every worker it was sent to keeps its ``crash`` result. When no actor is left, the rest get
``crash`` results naming why; nothing is dropped and nothing is answered twice.

Joining a cluster: start Ray on each node (``ray start --head`` on one, ``ray start
--address=HEAD:6379`` on the others; each node's GPUs are found by Ray), then run
``curate measure --executor ray --ray-address auto`` on a node of the cluster. Without an
address a local Ray instance is started for the run (this machine's GPUs).

Imports only the standard library and ``ray`` (when called); the actors import torch.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any, Iterator

#: Rows per shard sent to an actor (its compile-ahead workers work within a shard).
SHARD_ROWS = 8


class GpuActor:
    """The body of one GPU actor (wrapped by ``ray.remote`` in :func:`measure_on_ray`).

    Args:
        device: the device its worker measures on (``cuda``; ``cpu`` for tests).
        timeout_s: wall-clock limit per row.
        opts: :class:`~curate.measure.worker.WorkerPool` options (``compile_workers``,
            ``gpu_mem_fraction``, ``inductor_cache``, ``warm_inductor``).
    """

    def __init__(self, device: str, timeout_s: float, opts: dict[str, Any]):
        from curate.measure.worker import WorkerPool

        # several actors share a node's cores: no pinning to fixed core numbers
        self.pool = WorkerPool([{}], device=device, timeout_s=timeout_s, retries=0,
                               pin_cpus=False, **opts)
        # started once, kept across shards (a fresh CUDA worker costs seconds)
        self.start_seconds = self.pool.start_workers(keep_alive=True)
        self.where = {"pid": os.getpid(), "node": _node_ip(),
                      "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def info(self) -> dict[str, Any]:
        return {**self.where, "start_seconds": round(self.start_seconds, 2)}

    def measure(self, shard: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
        """Measure ``(row, task)`` pairs; return ``(row, result)`` pairs (any order)."""
        out = []
        for k, res in self.pool.map([task for _, task in shard]):
            res.pop("worker", None)
            out.append((shard[k][0], {**res, "node": self.where["node"]}))
        return out

    def close(self) -> None:
        self.pool.close()


def _node_ip() -> str:
    try:
        import ray

        return ray.util.get_node_ip_address()
    except Exception:
        import socket

        return socket.gethostname()


def gpu_count(ray) -> int:
    """GPUs the cluster's nodes offer (Ray's ``GPU`` resource)."""
    return int(ray.cluster_resources().get("GPU", 0))


def measure_on_ray(tasks: list[dict[str, Any]], device: str, timeout_s: float,
                   opts: dict[str, Any] | None = None, actors: int | None = None,
                   shard_rows: int = SHARD_ROWS, retries: int = 1,
                   stats: dict[str, Any] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Measure ``tasks`` on the running Ray instance (``ray.init`` done by the caller, e.g.
    :class:`curate.executor.RayExecutor`); yield ``(task index, result)`` as shards finish,
    exactly once per task.

    Args:
        device: what the actors' workers measure on (``cuda``, or ``cpu``).
        actors: actors to start (default: one per GPU of the cluster; one on a cluster
            without GPUs, CPU device only).
        shard_rows: rows per shard.
        retries: times a row whose worker or actor died is sent again (to another actor
            when one is left).
        stats: filled with ``actors`` (their node, pid and visible devices), ``retried``
            and ``actors_lost``.
    Raises:
        ValueError: a CUDA run on a cluster without GPUs.
    """
    import ray

    gpus = gpu_count(ray)
    if device.startswith("cuda") and gpus == 0:
        raise ValueError("the Ray cluster offers no GPU (start each node with its GPUs visible, "
                         "or pass --device cpu)")
    n = max(1, actors or gpus or 1)
    # one call at a time per actor (its pool is not shared between threads); a second shard
    # waits in the actor's queue so the GPU never idles between shards
    remote = ray.remote(num_gpus=1 if gpus else 0, num_cpus=1, max_restarts=0)(GpuActor)
    handles = [remote.remote(device, timeout_s, dict(opts or {})) for _ in range(n)]
    stats = stats if stats is not None else {}
    stats.update(retried=0, actors_lost=0, actors=[])
    pending: deque = deque()  # (indices, died_on) shards waiting for an actor
    order = list(range(len(tasks)))
    for k in range(0, len(order), max(1, shard_rows)):
        pending.append((order[k:k + shard_rows], ()))
    alive = set(range(n))
    load = {a: 0 for a in range(n)}
    running: dict[Any, tuple[int, list[int], tuple[int, ...]]] = {}
    answered: set[int] = set()

    def pick(died_on: tuple[int, ...]) -> int | None:
        fresh = [a for a in alive if a not in died_on and load[a] < 2]
        if fresh:
            return min(fresh, key=lambda a: load[a])
        if not (alive - set(died_on)):  # every live actor had it die: any of them, once more
            free = [a for a in alive if load[a] < 2]
            return min(free, key=lambda a: load[a]) if free else None
        return None

    def requeue(rows: list[int], died_on: tuple[int, ...], why: str) -> Iterator[tuple[int, dict]]:
        for i in rows:
            if i in answered:
                continue
            if len(died_on) <= retries and alive:
                stats["retried"] += 1
                pending.appendleft(([i], died_on))
            else:
                answered.add(i)
                yield i, _crash(why, died_on, device)

    try:
        for a, h in enumerate(handles):
            try:
                stats["actors"].append(ray.get(h.info.remote()))
            except Exception as exc:  # an actor that cannot start is one fewer
                alive.discard(a)
                stats["actors_lost"] += 1
                stats["actors"].append({"error": f"{type(exc).__name__}: {exc}"[:300]})
        while len(answered) < len(tasks):
            if not alive:
                for i in range(len(tasks)):
                    if i not in answered:
                        answered.add(i)
                        yield i, _crash("no GPU actor left in the Ray cluster", (), device)
                break
            held = deque()
            while pending:
                rows, died_on = pending.popleft()
                a = pick(died_on)
                if a is None:
                    held.append((rows, died_on))
                    continue
                ref = handles[a].measure.remote([(i, tasks[i]) for i in rows])
                running[ref] = (a, rows, died_on)
                load[a] += 1
            pending.extend(held)
            if not running:
                continue
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                a, rows, died_on = running.pop(ref)
                load[a] -= 1
                try:
                    got = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    if a in alive:
                        alive.discard(a)
                        stats["actors_lost"] += 1
                    yield from requeue(rows, died_on + (a,), f"GPU actor died: {exc}"[:500])
                    continue
                except Exception as exc:  # an actor-side error: the rows go elsewhere
                    yield from requeue(rows, died_on + (a,), f"{type(exc).__name__}: {exc}"[:500])
                    continue
                for i, res in got:
                    if i in answered:
                        continue
                    if res.get("worker_died") and len(died_on) + 1 <= retries:
                        stats["retried"] += 1
                        pending.appendleft(([i], died_on + (a,)))
                        continue
                    if res.get("worker_died") and died_on:
                        res["detail"] = (f"{res.get('detail')}; the worker died on it on "
                                         f"{len(died_on) + 1} actors, not retried again")
                    elif died_on:
                        res["notes"] = list(res.get("notes") or []) + ["worker_died"]
                    answered.add(i)
                    yield i, res
    finally:
        for h in handles:
            try:
                ray.kill(h)
            except Exception:
                pass


def _crash(why: str, died_on: tuple[int, ...], device: str) -> dict[str, Any]:
    from curate.measure.worker import dead_result

    detail = why if not died_on else f"{why} (sent to {len(died_on)} actors, not retried again)"
    return dead_result("crash", detail, device)
