"""Compile-ahead: a compile-ahead worker's TorchInductor compile turns the measure worker's
compile of the same problem into a cache hit (here on the CPU, with a private cache folder)."""

from __future__ import annotations

from curate.measure.worker import WorkerPool
from curate.problem import assemble

MLP = """import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x))) + x
"""


def test_measure_worker_hits_the_cache_the_compile_ahead_worker_filled(tmp_path):
    spec = [{"kind": "tensor", "shape": [8, 32], "dtype": "float32"}]
    task = dict(code=assemble(MLP, spec, [32]), input_spec=spec, init_args=[32], device="cpu",
                inductor=True, trials=3, warmup=1, name="mlp")
    plain = dict(task, inductor=False, name="plain")
    pool = WorkerPool([{}], device="cpu", timeout_s=600, compile_workers=1,
                      inductor_cache=str(tmp_path / "cache"), pin_cpus=False)
    try:
        results = dict(pool.map([task, plain]))
    finally:
        pool.close()
    res = results[0]
    assert res["reason"] is None, res["detail"]
    assert res["precompile"]["status"] == "ok", res["precompile"]["detail"]
    assert res["precompile"]["cache"]["miss"] >= 1  # the compile-ahead worker compiled it ...
    assert res["compile_cache"]["hit"] >= 1 and res["compile_cache"]["miss"] == 0  # ... the measure worker loaded it
    assert res["compile"]["median_ms"] > 0 and res["compile_max_abs_diff"] < 1e-4
    assert pool.compile_ahead == {"ok": 1}
    assert "precompile" not in results[1]  # no Inductor asked: no compile-ahead
