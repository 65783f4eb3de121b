"""Verification memory: a verification that runs out of memory beside other workers on its GPU
is verified again alone there (simulated on the CPU: two workers share one slot, as on one GPU);
a persistent worker's per-shape caches keep judging constant references on later calls."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from curate.verify import make_config
from curate.verify.pool import VerifierPool
from verify_fixtures import SMALL_SPEC, candidate, kernelbench

RELU = kernelbench("19_ReLU")
ONE_GPU = [{"CUDA_VISIBLE_DEVICES": "0"}]


def _oom_once(marker, log) -> str:
    """relu_triton, except that its first forward raises the error CUDA's allocator raises
    when the GPU is full; a retry finds the marker and runs. Logs when each forward ran."""
    code = candidate("relu_triton").replace(
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        import os, time\n"
        f"        with open({str(log)!r}, 'a') as f:\n"
        "            f.write(f'oom-candidate {time.time()}\\n')\n"
        f"        if not os.path.exists({str(marker)!r}):\n"
        f"            open({str(marker)!r}, 'w').close()\n"
        "            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 96.00 GiB')\n")
    assert code != candidate("relu_triton")
    return code


def _slow(log, marker) -> str:
    """relu_triton whose forward waits until ``marker`` exists (the other candidate's first
    forward has run, beside this one), then a moment more, and logs when it ends."""
    return candidate("relu_triton").replace(
        "        x = x.contiguous()\n",
        "        import os, time\n"
        "        t0 = time.time()\n"
        f"        while not os.path.exists({str(marker)!r}) and time.time() - t0 < 120:\n"
        "            time.sleep(0.05)\n"
        "        time.sleep(0.5)\n"
        f"        with open({str(log)!r}, 'a') as f:\n"
        "            f.write(f'slow-end {time.time()}\\n')\n"
        "        x = x.contiguous()\n")


def test_out_of_memory_beside_others_is_verified_again_alone(tmp_path):
    log = tmp_path / "log"
    pool = VerifierPool(workers=2, device="cpu", mem_mb=8192, slots=ONE_GPU, memory_alone=True)
    cfg = make_config(input_spec=SMALL_SPEC, device="cpu", time_it=False)
    oom = _oom_once(tmp_path / "marker", log)
    try:
        with ThreadPoolExecutor(2) as ex:
            slow = ex.submit(pool.verify, RELU, _slow(log, tmp_path / "marker"), cfg, 240, "relu")
            first = ex.submit(pool.verify, RELU, oom, cfg, 240, "relu")
            slow_res, res = slow.result(), first.result()
    finally:
        pool.close()
    assert slow_res.correct
    assert res.correct, res.reason  # the retry's verdict is the one returned
    assert "out of memory" in res.details["memory_retried_alone"]["first_reason"]
    assert pool.memory_retried == 1
    events = [line.split() for line in log.read_text().splitlines()]
    oom_runs = [float(t) for e, t in events if e == "oom-candidate"]
    slow_ends = [float(t) for e, t in events if e == "slow-end"]
    # the first forward ran beside the slow call, the retry only once that call had ended
    assert oom_runs[0] < min(slow_ends) <= oom_runs[-1]


def test_out_of_memory_without_sharing_is_the_verdict(tmp_path):
    pool = VerifierPool(workers=1, device="cpu", mem_mb=8192, slots=ONE_GPU)
    assert not pool.memory_alone  # the CPU default: no GPU shared, nothing to wait for
    cfg = make_config(input_spec=SMALL_SPEC, device="cpu", time_it=False)
    try:
        res = pool.verify(RELU, _oom_once(tmp_path / "marker", tmp_path / "log"), cfg, 120, "relu")
    finally:
        pool.close()
    assert not res.correct and "out of memory" in res.reason
    assert "memory_retried_alone" not in res.details and pool.memory_retried == 0
    cuda = VerifierPool(workers=16, device="cuda", slots=[{}, {}])
    assert cuda.memory_alone and not VerifierPool(workers=2, device="cuda", slots=[{}, {}]).memory_alone


def test_verify_many_runs_out_of_memory_jobs_again_after_the_rest(tmp_path):
    from curate.verify import verify_many

    log = tmp_path / "log"
    jobs = [(RELU, _slow(log, tmp_path / "marker"), {}), (RELU, _oom_once(tmp_path / "marker", log), {})]
    got = dict(verify_many(jobs, workers=2, timeout_s=240, memory_alone=True, input_spec=SMALL_SPEC,
                           device="cpu", time_it=False))
    assert got[0].correct and got[1].correct, got[1].reason
    assert "out of memory" in got[1].details["memory_retried_alone"]["first_reason"]
    events = [line.split() for line in log.read_text().splitlines()]
    oom_runs = [float(t) for e, t in events if e == "oom-candidate"]
    # the retry's forwards all ran after the slow job had ended
    assert oom_runs[0] < float(next(t for e, t in events if e == "slow-end")) < oom_runs[1]
    # the default: on the CPU (no GPU shared) the verdict stands
    (tmp_path / "marker").unlink()
    again = dict(verify_many(jobs[1:], workers=2, timeout_s=120, input_spec=SMALL_SPEC, device="cpu",
                             time_it=False))
    assert not again[0].correct and "out of memory" in again[0].reason


CONSTANT_LOSS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A loss that is 3 whatever its inputs."""

    def forward(self, input, target):
        return (input * 0).sum() + (target * 0).sum() + 3.0


def get_inputs():
    return [torch.randn(8, 16), torch.randn(8, 16)]


def get_init_inputs():
    return []
'''


def test_a_persistent_worker_keeps_judging_constant_references_after_caching_its_margin():
    """A worker keeps each trial's reference output a second time only until it has the
    constant-answer margin of the shape; later calls reuse the margin, and a kernel that writes
    the constant still gets no speedup credit on every call."""
    pool = VerifierPool(workers=1, device="cpu", mem_mb=8192)
    cfg = make_config(device="cpu", time_it=True)
    answer = candidate("loss_constant").replace("VALUE = 0.0", "VALUE = 3.0")
    try:
        first, second = (pool.verify(CONSTANT_LOSS, answer, dict(cfg, seed=s), 120, "constant") for s in (1, 2))
    finally:
        pool.close()
    for res in (first, second):
        assert res.correct and res.speedup_vs_eager is None, res.reason
        assert res.details["constant_answer_margin"] == first.details["constant_answer_margin"] <= 1
    assert second.details["worker_call"] == 2  # the same worker, its margin cached
