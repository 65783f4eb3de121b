"""The reward's verification on a Ray cluster: one verifier actor per GPU of every node.

Each actor holds one GPU (``num_gpus=1``; Ray sets its ``CUDA_VISIBLE_DEVICES``) and a
:class:`curate.verify.pool.VerifierPool` of ``workers_per_gpu`` persistent workers on its
node; it takes that many calls at once. :class:`RayVerifierPool` has the local pool's
``verify`` signature, so :func:`curate.rl.score.compute_score` uses it unchanged
(``RewardConfig(executor="ray")``): a call goes to an actor that has verified its problem
before when one has room, else to the actor with the fewest calls in flight. An actor that
dies (its node lost) is dropped and the call is tried on another; with none left the call
ends ``crash``.

Joining a cluster: ``ray start --head`` on one node, ``ray start --address=HEAD:6379`` on the
others, then ``ray_address="auto"`` (or ``CURATE_RAY_ADDRESS``) in the trainer's process.
Imports only the standard library and ``ray`` (when used).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from curate.verify.verifier import VerifyResult


class VerifierActor:
    """The body of one verifier actor (wrapped by ``ray.remote``)."""

    def __init__(self, device: str, mem_mb: int | None, workers: int):
        from curate.verify.pool import VerifierPool

        self.pool = VerifierPool(workers, device, mem_mb, slots=[{}])  # Ray pinned the GPU
        self.where = {"pid": os.getpid(), "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def info(self) -> dict[str, Any]:
        return dict(self.where)

    def verify(self, reference_code: str, candidate_code: str, cfg: dict[str, Any], timeout_s: float,
               problem_key: str) -> VerifyResult:
        result = self.pool.verify(reference_code, candidate_code, cfg, timeout_s, problem_key)
        result.details["actor_visible_devices"] = self.where["visible_devices"]
        return result

    def close(self) -> None:
        self.pool.close()


class RayVerifierPool:
    """Verifier actors across a Ray cluster, one per GPU (``actors`` to choose).

    Args:
        device: ``"cuda"`` or ``"cpu"`` (the actors' workers' device).
        mem_mb: address-space budget per worker (CPU), as for the local pool.
        workers_per_gpu: persistent workers (and concurrent calls) per actor.
        address: the cluster (``"auto"``, ``"ray://head:10001"``); None: the running Ray
            instance, else a local one started here.
        actors: actors to start (default: one per GPU of the cluster, one without GPUs).
    Raises:
        RuntimeError: ray is not installed.
        ValueError: a CUDA pool on a cluster without GPUs.
    """

    def __init__(self, device: str = "cuda", mem_mb: int | None = None, workers_per_gpu: int = 8,
                 address: str | None = None, actors: int | None = None):
        try:
            import ray
        except ImportError as exc:
            raise RuntimeError("the ray verifier needs the ray package: pip install ray") from exc
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if device.startswith("cuda") and not gpus:
            raise ValueError("the Ray cluster offers no GPU")
        n = max(1, actors or gpus or 1)
        remote = ray.remote(num_gpus=1 if gpus else 0, num_cpus=1, max_restarts=0,
                            max_concurrency=workers_per_gpu)(VerifierActor)
        self.actors = [remote.remote(device, mem_mb, workers_per_gpu) for _ in range(n)]
        self.infos = [ray.get(a.info.remote()) for a in self.actors]
        self.workers = n * workers_per_gpu
        self.per_actor = workers_per_gpu
        self.device = device
        self._lock = threading.Lock()
        self._busy = [0] * n
        self._seen: list[set[str]] = [set() for _ in range(n)]
        self._alive = set(range(n))
        #: calls answered per actor
        self.calls_per_actor = [0] * n

    def _pick(self, key: str) -> int | None:
        with self._lock:
            free = [a for a in self._alive if self._busy[a] < self.per_actor]
            pool = [a for a in free if key in self._seen[a]] or free or list(self._alive)
            if not pool:
                return None
            a = min(pool, key=lambda k: self._busy[k])
            self._busy[a] += 1
            return a

    def verify(self, reference_code: str, candidate_code: str, cfg: dict[str, Any], timeout_s: float,
               problem_key: str) -> VerifyResult:
        """As :meth:`curate.verify.pool.VerifierPool.verify`, on an actor
        (``details["gpu_slot"]`` is the actor's number)."""
        ray = self._ray
        while True:
            a = self._pick(problem_key)
            if a is None:
                return VerifyResult(False, False, reason="crash: no verifier actor left in the Ray cluster")
            try:
                result = ray.get(self.actors[a].verify.remote(reference_code, candidate_code, cfg,
                                                              timeout_s, problem_key))
            except ray.exceptions.RayActorError:
                with self._lock:
                    self._alive.discard(a)
                    self._busy[a] -= 1
                continue
            with self._lock:
                self._busy[a] -= 1
                self._seen[a].add(problem_key)
                self.calls_per_actor[a] += 1
            result.details["gpu_slot"] = a
            return result

    def close(self) -> None:
        for h in self.actors:
            try:
                self._ray.kill(h)
            except Exception:
                pass
        self._alive.clear()


_RAY_POOLS: dict[tuple, RayVerifierPool] = {}
_RAY_LOCK = threading.Lock()


def shared_ray_pool(device: str, mem_mb: int | None, workers: int | None,
                    address: str | None) -> RayVerifierPool:
    """This process's Ray verifier pool (made on first use; ``workers`` per GPU, default 8)."""
    key = (device, mem_mb, workers, address)
    with _RAY_LOCK:
        pool = _RAY_POOLS.get(key)
        if pool is None:
            pool = _RAY_POOLS[key] = RayVerifierPool(device, mem_mb, workers or 8, address)
        return pool
