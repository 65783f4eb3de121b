"""The reward's verification workers on many GPUs, simulated on the CPU: each worker is pinned
to one GPU slot (its CUDA_VISIBLE_DEVICES, reported by the worker itself), and concurrent
calls, from threads or from compute_score_batch, are spread over every slot."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from curate.reward import compute_score_batch
from curate.verify import make_config
from curate.verify import pool as verify_pool
from verify_fixtures import SMALL_SPEC, candidate, kernelbench, reply

RELU = kernelbench("19_ReLU")
SLOTS = [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]


def test_concurrent_verifications_run_on_every_gpu_slot(monkeypatch):
    pool = verify_pool.VerifierPool(workers=2, device="cpu", mem_mb=8192, slots=SLOTS)
    cfg = make_config(input_spec=SMALL_SPEC, device="cpu", time_it=False)
    codes = [candidate("relu_triton"), candidate("relu_zeros")] * 2
    try:
        with ThreadPoolExecutor(4) as ex:
            results = list(ex.map(lambda c: pool.verify(RELU, c, cfg, 120, "relu"), codes))
    finally:
        pool.close()
    assert [r.correct for r in results] == [True, False, True, False]
    for r in results:  # the worker saw the GPU of the slot it was started for
        assert r.details["visible_devices"] == SLOTS[r.details["gpu_slot"]]["CUDA_VISIBLE_DEVICES"]
    assert {r.details["gpu_slot"] for r in results} == {0, 1}
    assert sum(pool.calls_per_slot) == 4 and min(pool.calls_per_slot) > 0

    # the batch entry point's shared pool takes the host's GPU slots the same way
    monkeypatch.setattr(verify_pool, "_POOLS", {})
    monkeypatch.setattr(verify_pool, "device_slots", lambda device: SLOTS)
    info = {"init_args": "[]", "input_spec": json.dumps(SMALL_SPEC)}
    replies = [reply(candidate("relu_triton"))] * 4
    out = compute_score_batch(["curate/test"] * 4, replies, [RELU] * 4, [info] * 4, time_it=False,
                              workers=2, device="cpu")  # the simulation, on a GPU host too
    assert [o["correct"] for o in out] == [True] * 4
    shared = verify_pool.shared_pool("cpu", 8192, 2)
    try:
        assert shared.slots == SLOTS and min(shared.calls_per_slot) > 0
    finally:
        shared.close()


def test_compute_score_on_ray_uses_one_verifier_actor_per_gpu(monkeypatch):
    ray = __import__("pytest").importorskip("ray")
    import os
    import sys

    from curate.verify import cluster

    path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    # two fake GPUs: Ray places one actor on each and sets its CUDA_VISIBLE_DEVICES
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    monkeypatch.setattr(cluster, "_RAY_POOLS", {})
    try:
        info = {"init_args": "[]", "input_spec": json.dumps(SMALL_SPEC)}
        replies = [reply(candidate("relu_triton")), reply(candidate("relu_zeros"))] * 2
        out = compute_score_batch(["curate/test"] * 4, replies, [RELU] * 4, [info] * 4, time_it=False,
                                  workers=1, executor="ray")
        assert [o["correct"] for o in out] == [True, False, True, False]
        pool = cluster.shared_ray_pool("cpu", 8192, 1, None)
        assert sorted(i["visible_devices"] for i in pool.infos) == ["0", "1"]
        assert sum(pool.calls_per_actor) == 4 and min(pool.calls_per_actor) > 0
        pool.close()
    finally:
        ray.shutdown()
