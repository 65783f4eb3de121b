"""measure: the cap on TorchInductor's autotuning benchmarks, on Inductor's own benchmarker
class and through a real compile on the CPU."""

from __future__ import annotations

import pytest
import torch

from curate.measure import autotune, core
from curate.problem import assemble

SPEC = [{"kind": "tensor", "shape": [8, 256], "dtype": "float32"}]
GELU = assemble("import torch\nfrom torch import nn\n\n\nclass Model(nn.GELU):\n    pass\n", SPEC, [])


CALLS: list[dict] = []


def _recording_benchmark_gpu(self, _callable, estimation_iters=5, memory_warmup_iters=100,
                             benchmark_iters=100, max_benchmark_duration=25, **kwargs):
    CALLS.append({"memory_warmup_iters": memory_warmup_iters,
                  "max_benchmark_duration": max_benchmark_duration})
    return 1.0


def test_autotune_cap_reaches_inductors_benchmarker_and_is_undone(monkeypatch):
    from torch._inductor.runtime import benchmarking

    # Inductor's own benchmarker class, its method swapped for one that records its arguments
    cls = type(benchmarking.benchmarker)
    monkeypatch.setattr(cls, "benchmark_gpu", _recording_benchmark_gpu)
    monkeypatch.setattr(autotune, "_ORIGINAL", {})
    CALLS.clear()
    assert autotune.cap_benchmark_ms(5.0) is True
    benchmarking.benchmarker.benchmark_gpu(lambda: None)
    assert CALLS[-1] == {"memory_warmup_iters": autotune.CAPPED_WARMUP_ITERS,
                                   "max_benchmark_duration": 5.0}
    benchmarking.benchmarker.benchmark_gpu(lambda: None, max_benchmark_duration=40)
    assert CALLS[-1]["max_benchmark_duration"] == 40  # an explicit value wins
    assert autotune.cap_benchmark_ms(None) is False
    benchmarking.benchmarker.benchmark_gpu(lambda: None)
    assert CALLS[-1] == {"memory_warmup_iters": 100, "max_benchmark_duration": 25}
    with pytest.raises(ValueError):
        autotune.cap_benchmark_ms(0)


def test_installed_torch_benchmarker_takes_the_capped_arguments():
    import inspect

    from torch._inductor.runtime import benchmarking

    params = inspect.signature(type(benchmarking.benchmarker).benchmark_gpu).parameters
    assert "max_benchmark_duration" in params and "memory_warmup_iters" in params


def test_measure_applies_the_cap_per_task_and_undoes_it(monkeypatch):
    from torch._inductor.runtime import benchmarking

    cls = type(benchmarking.benchmarker)
    monkeypatch.setattr(autotune, "_ORIGINAL", {})
    monkeypatch.setattr(cls, "benchmark_gpu", cls.benchmark_gpu)  # restored after the test
    own = cls.benchmark_gpu
    res = core.measure_problem(GELU, SPEC, [], device="cpu", inductor=True, trials=3, warmup=1,
                               autotune_ms=5.0)
    assert res["reason"] is None, res["detail"]
    assert res["autotune_ms"] == 5.0 and res["compile"]["n"] >= 3
    assert cls.benchmark_gpu.__wrapped__ is own
    res = core.measure_problem(GELU, SPEC, [], device="cpu", inductor=True, trials=3, warmup=1)
    assert res["autotune_ms"] is None and cls.benchmark_gpu is own


# a one-dimensional pointwise kernel: Inductor gives it two configurations to autotune
# (torch 2.11 ``triton_heuristics.pointwise``); a softmax's persistent reduction got one
POINTWISE_SPEC = [{"kind": "tensor", "shape": [4096, 4096], "dtype": "float32"}]
POINTWISE = assemble("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
                     "    def forward(self, x):\n        return torch.relu(x) * 2.0 + 1.0\n",
                     POINTWISE_SPEC, [])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_inductors_own_autotuning_on_the_gpu_runs_under_the_cap(monkeypatch, tmp_path):
    from torch._inductor.runtime import benchmarking

    cls = type(benchmarking.benchmarker)
    real = cls.benchmark_gpu
    seen: list = []

    def spy(self, _callable, estimation_iters=5, memory_warmup_iters=100, benchmark_iters=100,
            max_benchmark_duration=25, **kwargs):
        seen.append((max_benchmark_duration, memory_warmup_iters))
        return real(self, _callable, estimation_iters=estimation_iters,
                    memory_warmup_iters=memory_warmup_iters, benchmark_iters=benchmark_iters,
                    max_benchmark_duration=max_benchmark_duration, **kwargs)

    monkeypatch.setattr(cls, "benchmark_gpu", spy)
    monkeypatch.setattr(autotune, "_ORIGINAL", {})
    # an empty cache: a kernel found autotuned in the cache is not benchmarked again
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    res = core.measure_problem(POINTWISE, POINTWISE_SPEC, [], device="cuda", inductor=True, trials=10,
                               warmup=2, autotune_ms=5.0)
    assert res["reason"] is None, res["detail"]
    assert seen, "Inductor autotuned nothing: the test's kernel no longer has several configurations"
    assert all(cap == (5.0, autotune.CAPPED_WARMUP_ITERS) for cap in seen)
