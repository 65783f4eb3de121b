"""measure on many GPUs, simulated on the CPU: one measure worker per GPU slot (the slots come
from ``gpu_slots`` with the device count patched; their workers time on the CPU device). A
worker SIGKILLed mid-row has that row finished by the other worker; a problem that kills every
worker it meets is rejected ``crash`` after one retry; every row gets exactly one result, in
the pool and in the stage's tables. The same stage on a local Ray instance with two fake GPU
resources: one actor per GPU, the same tables."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import polars as pl
import pytest
import torch

from curate.measure import stage as measure_stage
from curate.measure.worker import WorkerPool, gpu_slots
from curate.problem import assemble
from curate.table import read_problems, read_rejected, source_struct, write_stage

from conftest import forward_problem as _forward, tensor_spec as _t


GOOD = {
    "linear": ("import torch\nfrom torch import nn\n\n\nclass Model(nn.Linear):\n    pass\n",
               [64, 32], [_t(16, 64)]),
    "conv": ("import torch\nfrom torch import nn\n\n\nclass Model(nn.Conv2d):\n    pass\n",
             [3, 8, 3], [_t(2, 3, 16, 16)]),
    "gelu": ("import torch\nfrom torch import nn\n\n\nclass Model(nn.GELU):\n    pass\n", [], [_t(8, 256)]),
    "softplus": (_forward("return torch.nn.functional.softplus(x) * 2.0"), [], [_t(32, 128)]),
}
# kills whichever process runs its forward, every time
KILLS_EVERY_WORKER = _forward("os.kill(os.getpid(), signal.SIGKILL)\n        return x",
                              "import os\nimport signal")
# the first forward in a process sleeps (long enough to be killed from outside mid-row)
SLOW_ONCE = _forward("if not hasattr(builtins, 'curate_test_slept'):\n"
                     "            builtins.curate_test_slept = True\n"
                     "            time.sleep(4)\n"
                     "        return torch.tanh(x)", "import builtins\nimport time")


def _kills_once(marker) -> str:
    """Kills the first process that runs it (a marker file remembers), then behaves."""
    return _forward(f"if not os.path.exists({str(marker)!r}):\n"
                    f"            open({str(marker)!r}, 'w').close()\n"
                    "            os.kill(os.getpid(), signal.SIGKILL)\n"
                    "        return torch.relu(x) + 1.0", "import os\nimport signal")


def _task(src, init, spec):
    return dict(code=assemble(src, spec, init), input_spec=spec, init_args=init, device="cpu",
                trials=3, warmup=1)


@pytest.fixture
def two_gpus(monkeypatch):
    """Two GPU slots as a 2-GPU host gives them (CUDA_VISIBLE_DEVICES 0 and 1)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    slots = gpu_slots()
    assert slots == [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]
    return slots


def test_a_worker_killed_mid_row_has_its_row_finished_by_the_other(two_gpus):
    tasks = [_task(*GOOD[k]) for k in GOOD]
    slow = len(tasks)
    tasks.append(_task(SLOW_ONCE, [], [_t(8, 64)]))
    killer = len(tasks)
    tasks.append(_task(KILLS_EVERY_WORKER, [], [_t(8, 64)]))
    tasks += [_task(*GOOD[k]) for k in ("gelu", "linear")]
    pool = WorkerPool(two_gpus, device="cpu", timeout_s=60, pin_cpus=False)
    killed: list[tuple[int, int]] = []

    def kill_the_slow_row() -> None:  # SIGKILL the worker measuring the slow row, once
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for g, (i, pid) in pool.running().items():
                if i == slow:
                    time.sleep(1.0)  # well inside its 4 s sleep
                    os.kill(pid, signal.SIGKILL)
                    killed.append((g, pid))
                    return
            time.sleep(0.05)

    killer_thread = threading.Thread(target=kill_the_slow_row)
    killer_thread.start()
    try:
        got = list(pool.map(tasks))
    finally:
        killer_thread.join()
        pool.close()
    assert sorted(i for i, _ in got) == list(range(len(tasks)))  # each row exactly once
    res = dict(got)
    assert len(killed) == 1
    g_killed = killed[0][0]
    assert res[slow]["reason"] is None and res[slow]["died_on"] == [g_killed]
    assert res[slow]["worker"] == 1 - g_killed and "worker_died" in res[slow]["notes"]
    assert res[killer]["reason"] == "crash" and "SIGKILL" in res[killer]["detail"]
    assert sorted(res[killer]["died_on"]) == [0, 1]  # tried once on each worker, then given up
    assert "not retried again" in res[killer]["detail"]
    for i, r in res.items():
        if i not in (slow, killer):
            assert r["reason"] is None and r["eager"]["median_ms"] > 0 and "died_on" not in r
    assert pool.retried == 2 and sum(pool.per_worker) == len(tasks)
    assert all(n > 0 for n in pool.per_worker)  # both GPUs took rows


def _table(out, problems: dict):
    rows = [{"problem_id": f"p_{name}", "name": f"test.{name}", "code": assemble(src, spec, init),
             "init_args": json.dumps(init), "input_spec": json.dumps(spec),
             "source": source_struct(kind="test", name="t", class_name=name)}
            for name, (src, init, spec) in problems.items()]
    df = pl.DataFrame(rows)
    empty = df.clear().with_columns(pl.lit("").alias("reject_stage"), pl.lit("").alias("reject_reason"),
                                    pl.lit("").alias("reject_detail"))
    write_stage(out, "diversify", df, empty, df.height, 0.0)
    return out


def _accounted_once(out, n: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    kept, rej = read_problems(out / "measure"), read_rejected(out / "measure")
    ids = kept["problem_id"].to_list() + rej["problem_id"].to_list()
    assert len(ids) == n and len(set(ids)) == n
    return kept, rej


def test_the_stage_on_two_gpus_retries_a_dead_worker_s_row_once(tmp_path, two_gpus, monkeypatch):
    monkeypatch.setattr(measure_stage, "resolve_device", lambda d: "cuda")
    monkeypatch.setattr(measure_stage, "_gpu_workers", lambda dev, workers: (gpu_slots(workers), "cpu"))
    problems = {**GOOD, "kills_once": (_kills_once(tmp_path / "marker"), [], [_t(8, 64)]),
                "kills_all": (KILLS_EVERY_WORKER, [], [_t(8, 64)])}
    out = _table(tmp_path, problems)
    stats = measure_stage.run(out, inductor=False, trials=5, warmup=1, timeout_s=60, profile=False,
                              conform=False)
    kept, rej = _accounted_once(out, len(problems))
    assert stats["workers"] == 2 and stats["executor"] == "local"
    assert sum(stats["rows_per_worker"]) == len(problems) and min(stats["rows_per_worker"]) > 0
    assert stats["retried_after_worker_death"] == 2
    assert sorted(kept["problem_id"]) == sorted(f"p_{k}" for k in [*GOOD, "kills_once"])
    notes = dict(zip(kept["problem_id"], kept["measure_notes"]))
    assert "worker_died" in notes["p_kills_once"]
    assert all(not (notes[f"p_{k}"] or "").count("worker_died") for k in GOOD)
    assert rej["reject_reason"].to_list() == ["crash"]
    assert "not retried again" in rej["reject_detail"][0]


@pytest.fixture
def ray_two_gpus():
    ray = pytest.importorskip("ray")
    import sys

    path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    # fake GPU resources: Ray schedules the actors on them and sets CUDA_VISIBLE_DEVICES
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()


def test_the_stage_on_ray_runs_one_actor_per_gpu_into_the_same_tables(tmp_path, ray_two_gpus):
    problems = {k: GOOD[k] for k in ("linear", "gelu", "softplus")}
    problems["kills_once"] = (_kills_once(tmp_path / "marker"), [], [_t(8, 64)])
    out = _table(tmp_path / "ray", problems)
    stats = measure_stage.run(out, device="cpu", trials=5, warmup=1, timeout_s=60, executor="ray")
    kept, rej = _accounted_once(out, len(problems))
    assert stats["executor"] == "ray" and stats["workers"] == 2 and stats["actors_lost"] == 0
    assert sorted(a["visible_devices"] for a in stats["actors"]) == ["0", "1"]
    assert stats["retried_after_worker_death"] == 1 and rej.height == 0
    notes = dict(zip(kept["problem_id"], kept["measure_notes"]))
    assert "worker_died" in notes["p_kills_once"]
    assert kept["eager_ms"].null_count() == 0 and set(kept["device"]) == {"cpu"}
    # the local CPU path writes the same columns
    local = _table(tmp_path / "local", {k: GOOD[k] for k in ("linear",)})
    measure_stage.run(local, device="cpu", trials=5, warmup=1, timeout_s=60)
    assert set(read_problems(local / "measure").columns) <= set(kept.columns)


def test_the_multigpu_benchmark_dry_run_on_simulated_gpus(tmp_path):
    """``python -m curate.bench.multigpu`` on two fake slots: both phases that need no CUDA
    report every row once, and the killed worker's row finished on the other slot."""
    from curate.bench.multigpu import main

    kb = tmp_path / "kb.jsonl"
    with kb.open("w") as f:
        for k in range(3):
            for name, (src, init, spec) in GOOD.items():
                f.write(json.dumps({"level": 1, "name": f"{k}_{name}", "code": assemble(src, spec, init)}) + "\n")
    out = tmp_path / "out"
    assert main(["--kernelbench", str(kb), "--device", "cpu", "--simulate-gpus", "2", "--phase",
                 "scale,kill", "--limit", "8", "--trials", "5", "--warmup", "1", "--kill-after", "2",
                 "--out", str(out)]) == 0
    rep = json.loads((out / "multigpu.json").read_text())
    assert rep["scale"]["one_gpu"]["ok"] == rep["scale"]["all_gpus"]["ok"] == 8
    assert rep["scale"]["all_gpus"]["rows_per_worker"][0] > 0 and rep["scale"]["ratio"] > 0
    kill = rep["kill"]
    assert kill["each_row_once"] and kill["journal_each_row_once"] and len(kill["killed"]) == 1
    assert kill["finished_elsewhere"] and len(kill["killed_rows"]) == 1


def test_default_measure_workers_per_gpu_keep_two_cores_for_timing():
    from curate.measure.stage import default_workers_per_gpu

    assert default_workers_per_gpu(1, cores=16) == 14  # one H100 host of 16 cores
    assert default_workers_per_gpu(8, cores=128) == 14
    assert default_workers_per_gpu(2, cores=12) == 1  # 6 cores a GPU: one timing worker
    assert default_workers_per_gpu(1, cores=2) == 1


def test_a_row_refused_memory_beside_workers_sharing_a_gpu_is_measured_again_alone(monkeypatch):
    """Two workers on one GPU slot (CPU device, each process capped in address space): a row
    that runs out of memory is held back, measured once more after the others by itself, and
    still yields exactly one result; a pool with one worker per GPU does not measure it again."""
    big = _forward("return x + torch.empty(1 << 34).sum()")  # 64 GiB, past any cap here
    tasks = [_task(*GOOD["linear"]), _task(big, [], [_t(8, 64)]), _task(*GOOD["gelu"])]
    shared = WorkerPool([{"CUDA_VISIBLE_DEVICES": "0"}] * 2, device="cpu", timeout_s=60,
                        pin_cpus=False, mem_mb=4096, compile_workers=0)
    try:
        got = list(shared.map_memory_alone(tasks))
    finally:
        shared.close()
    assert shared.shares_gpus and shared.memory_retried == 1
    assert sorted(i for i, _ in got) == [0, 1, 2]
    assert [i for i, _ in got][-1] == 1  # held back until the rest were done
    res = dict(got)
    assert res[1]["reason"] == "memory" and res[0]["reason"] is None and res[2]["reason"] is None

    alone = WorkerPool([{"CUDA_VISIBLE_DEVICES": "0"}], device="cpu", timeout_s=60,
                       pin_cpus=False, mem_mb=4096, compile_workers=0)
    try:
        got = dict(alone.map_memory_alone(tasks))
    finally:
        alone.close()
    assert not alone.shares_gpus and alone.memory_retried == 0 and got[1]["reason"] == "memory"
