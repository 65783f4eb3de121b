"""Timing protocol and statistics: summaries against numpy/scipy, trial planning, CPU timing
of real torch ops, and (on a GPU machine) CUDA-event timing with the L2 flush and the
persistent CUDA worker. This file imports only torch, numpy and pytest besides curate's
GPU-side modules, so it also runs on the GPU machine (which lacks polars)."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from curate.measure import timing
from curate.measure.stats import geomean, median, ranks, spearman
from curate.measure.worker import PersistentWorker
from curate.problem import assemble


def test_summarize_matches_numpy():
    rng = random.Random(7)
    for n in (1, 2, 5, 100, 101):
        xs = [rng.lognormvariate(0, 1) for _ in range(n)]
        s = timing.summarize(xs)
        assert s["n"] == n
        assert s["median_ms"] == pytest.approx(float(np.median(xs)))
        assert s["mean_ms"] == pytest.approx(float(np.mean(xs)))
        assert s["std_ms"] == pytest.approx(float(np.std(xs)))
        assert s["p10_ms"] == pytest.approx(float(np.percentile(xs, 10)))
        assert s["p90_ms"] == pytest.approx(float(np.percentile(xs, 90)))
        assert s["min_ms"] == min(xs)
    with pytest.raises(ValueError):
        timing.summarize([])


def test_plan_trials_fits_the_budget():
    assert timing.plan_trials(None, 100, 1.0) == 100
    assert timing.plan_trials(1.0, 100, 1.0) == 100  # 100 x 1 ms fits in 1 s
    assert timing.plan_trials(50.0, 100, 1.0) == 20
    assert timing.plan_trials(5000.0, 100, 1.0) == timing.MIN_TRIALS  # never below the minimum
    assert timing.plan_trials(5000.0, 2, 1.0) == 2  # nor above what was asked


def test_time_calls_on_cpu_with_a_real_op():
    a = torch.randn(128, 128)
    calls = []

    def fn():
        calls.append(1)
        return a @ a

    s = timing.time_calls(fn, "cpu", trials=7, warmup=2)
    assert s["n"] == 7 and len(calls) == 9  # warm-ups are not timed
    assert 0 < s["min_ms"] <= s["median_ms"] <= s["p90_ms"]
    assert s["timed_ms_total"] >= s["n"] * s["min_ms"]
    assert s["early_stop"] == 0.0

    # a call slower than twice max_ms stops after the warm-up
    calls.clear()
    s = timing.time_calls(fn, "cpu", trials=50, warmup=2, max_ms=1e-9)
    assert s["early_stop"] == 1.0 and s["n"] == 1 and len(calls) == 2


def test_ranks_and_spearman_with_ties():
    x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    assert ranks(x) == [4.0, 1.5, 5.0, 1.5, 6.0, 8.0, 3.0, 7.0]
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = random.Random(3)
    for _ in range(5):
        a = [rng.choice([1.0, 2.0, 3.0, rng.random()]) for _ in range(30)]
        b = [v + rng.gauss(0, 1) for v in a]
        assert spearman(a, b) == pytest.approx(scipy_stats.spearmanr(a, b).statistic)
    assert math.isnan(spearman([1.0, 1.0], [2.0, 3.0]))
    assert median([3.0, 1.0, 2.0, 10.0]) == 2.5
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_events_with_l2_flush():
    flush = timing.L2Flush("cuda")
    assert flush.nbytes >= timing.FLUSH_BYTES
    a = torch.randn(2048, 2048, device="cuda")
    s = timing.time_calls(lambda: a @ a, "cuda", trials=20, warmup=3, flush=flush)
    assert s["n"] == 20 and s["min_ms"] > 0
    raw = timing.time_cuda(lambda: a @ a, 10, None, "cuda")
    assert len(raw) == 10 and min(raw) > 0


def _t(*shape):
    return {"kind": "tensor", "shape": list(shape), "dtype": "float32"}


LINEAR = "import torch\nfrom torch import nn\n\n\nclass Model(nn.Linear):\n    pass\n"
OOB_INDEX = ("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
             "    def forward(self, x):\n"
             "        return x[torch.full((4,), 10**9, dtype=torch.long, device=x.device)]\n")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_worker_times_inductor_and_recovers_from_a_device_assert():
    spec = [_t(256, 1024)]
    task = dict(code=assemble(LINEAR, spec, [1024, 1024]), input_spec=spec, init_args=[1024, 1024],
                device="cuda", inductor=True, trials=20, warmup=3)
    bad = dict(task, code=assemble(OOB_INDEX, [_t(8, 64)], []), input_spec=[_t(8, 64)], init_args=[],
               inductor=False)
    w = PersistentWorker(device="cuda")
    try:
        first, crash, again = [w.measure(t, timeout_s=300) for t in (task, bad, task)]
    finally:
        w.close()
    assert first["reason"] is None, first["detail"]
    assert first["gpu"] and first["device"].startswith("cuda")
    assert first["eager"]["n"] == 20 and first["compile"]["median_ms"] > 0
    assert first["compile_s"] > 0 and first["peak_mem_mb"] > 0
    # the device assert is caught in the worker as a CUDA error, which poisons the context
    assert crash["reason"] == "cuda_error" and crash["fatal"], crash
    assert again["reason"] is None and again["eager"]["median_ms"] > 0
    assert len(w.start_seconds) == 2  # the device assert cost one fresh worker


def test_spread_decides_a_retime_and_one_outlier_does_not():
    s = timing.summarize([1.0, 1.0, 3.0, 3.0])
    assert s["cv"] == pytest.approx(float(np.std([1, 1, 3, 3]) / np.mean([1, 1, 3, 3])))
    q75, q25 = np.percentile([1, 1, 3, 3], [75, 25])
    assert s["spread"] == pytest.approx(float((q75 - q25) / np.median([1, 1, 3, 3])))
    one_slow = timing.summarize([1.0] * 19 + [9.0])  # a context switch in one trial
    assert one_slow["cv"] > 0.1 and one_slow["spread"] == 0.0
    import time as _time

    calls = []

    def jumpy():  # every other call 5 ms slower: a coefficient of variation near 1
        calls.append(1)
        if len(calls) % 2:
            _time.sleep(0.005)

    s = timing.time_calls(jumpy, "cpu", trials=6, warmup=0, spread_max=0.1)
    assert s["retimed"] == 1.0 and s["spread_first"] > 0.1 and len(calls) == 12
    assert s["timed_ms_total"] > 5 * 6  # both runs counted
    calls.clear()
    steady = timing.time_calls(lambda: calls.append(1), "cpu", trials=6, warmup=0)
    assert steady["retimed"] == 0.0 and len(calls) == 6  # the CPU default never re-times


def test_timed_section_runs_inside_the_lock():
    events = []

    class Recorder:
        def __enter__(self):
            events.append("enter")

        def __exit__(self, *exc):
            events.append("exit")

    timing.time_calls(lambda: events.append("call"), "cpu", trials=3, warmup=2, lock=Recorder)
    assert events == ["enter"] + ["call"] * 5 + ["exit"]


def test_early_warm_ups_run_under_the_shared_lock_and_one_under_the_exclusive():
    events = []

    def recorder(name):
        class Rec:
            def __enter__(self):
                events.append(f"{name}+")

            def __exit__(self, *exc):
                events.append(f"{name}-")
        return Rec

    timing.time_calls(lambda: events.append("call"), "cpu", trials=3, warmup=3,
                      lock=recorder("excl"), warm_lock=recorder("shared"))
    # two warm-ups beside other work, then one warm-up and three trials held alone
    assert events == ["shared+", "call", "call", "shared-", "excl+"] + ["call"] * 4 + ["excl-"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_side_stream_work_is_inside_the_timed_interval_and_graph_replay():
    a = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()

    def hidden():  # queue the work on another stream and return at once
        with torch.cuda.stream(side):
            a @ a

    seen = timing.time_calls(hidden, "cuda", trials=20, warmup=3)
    naive = timing.time_calls(hidden, "cuda", trials=20, warmup=3, sync_all=False)
    plain = timing.time_calls(lambda: a @ a, "cuda", trials=20, warmup=3)
    assert seen["median_ms"] > 0.8 * plain["median_ms"]  # the side stream's matmul is counted
    assert naive["median_ms"] < 0.5 * plain["median_ms"]  # which events alone would miss
    x = torch.randn(64, device="cuda")
    graph = timing.time_cuda_graph(lambda: (x * 2).relu_(), 20)
    assert len(graph) == 20 and min(graph) > 0
    # a failed capture spoils the process's CUDA generator, so it runs in a child process
    code = ("import torch, pytest\nfrom curate.measure import timing\n"
            "x = torch.randn(64, device='cuda')\n"
            "with pytest.raises(RuntimeError, match='capture failed'):\n"
            "    timing.time_cuda_graph(lambda: x.sum().item(), 5)\nprint('raised')\n")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "raised" in child.stdout, child.stderr[-2000:]


def test_library_kernel_names():
    from curate.measure.profile import is_library_kernel

    library = ["sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1",
               "ampere_sgemm_128x64_nn", "nvjet_tst_128x64_64x8_1x1_v_bz_TNT",
               "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
               "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>",
               "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false>",
               "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>"]
    other = ["void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
             "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps>>",
             "triton_poi_fused_convolution_relu_0", "triton_red_fused__softmax_1",
             "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>"]
    assert all(is_library_kernel(n) for n in library), [n for n in library if not is_library_kernel(n)]
    assert not any(is_library_kernel(n) for n in other), [n for n in other if is_library_kernel(n)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_library_share_of_a_matmul_and_an_elementwise_op():
    from curate.measure.profile import library_share

    a = torch.randn(2048, 2048, device="cuda")
    mm = library_share(lambda: a @ a)
    ew = library_share(lambda: (a * 2).relu())
    assert mm["library_share"] > 0.9 and mm["kernels"] >= 1
    assert ew["library_share"] == 0.0 and ew["kernels"] == 2
