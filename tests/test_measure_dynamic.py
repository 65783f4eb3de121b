"""TorchInductor with a dynamic batch: a base problem's shape variants share one compiled graph.

Real Inductor compiles on the CPU (slow: one cold compile, then cache lookups), in a fresh
cache folder: the first variant misses Inductor's FX-graph cache, the second (another batch
size) hits it, and both are timed through a graph whose batch is symbolic.
"""

from __future__ import annotations

import pytest
import torch

from curate.measure.core import mark_batch_dynamic, measure_problem, unmark_dynamic
from curate.problem import assemble

CODE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 64)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)) * 2.0 + 1.0
"""


def spec(batch: int) -> list[dict]:
    return [{"kind": "tensor", "shape": [batch, 32], "dtype": "float32"}]


def test_marks_only_batched_tensors_and_unmarks():
    a, b, c = torch.ones(4, 3), torch.ones(1, 3), torch.tensor(2.0)
    assert mark_batch_dynamic([a, b, c, 5])
    assert getattr(a, "_dynamo_weak_dynamic_indices", None) == {0}
    assert not hasattr(b, "_dynamo_weak_dynamic_indices")  # a batch of one stays static
    assert not hasattr(c, "_dynamo_weak_dynamic_indices")
    unmark_dynamic([a, b, c])
    assert not hasattr(a, "_dynamo_weak_dynamic_indices")
    assert not mark_batch_dynamic([b, c])


@pytest.mark.slow
def test_shape_variants_share_one_compiled_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    opts = dict(device="cpu", inductor=True, trials=3, warmup=1, checks_on=False, conform=False,
                dynamic_batch=True)
    first = measure_problem(assemble(CODE, spec(8), []), spec(8), [], **opts)
    second = measure_problem(assemble(CODE, spec(24), []), spec(24), [], **opts)
    for res in (first, second):
        assert res["reason"] is None, res["detail"]
        assert res["compile_dynamic_batch"] is True
        assert res["compile_max_abs_diff"] < 1e-4
    assert first["compile_cache"]["miss"] >= 1 and first["compile_cache"]["hit"] == 0
    assert second["compile_cache"]["hit"] >= 1 and second["compile_cache"]["miss"] == 0
    static = measure_problem(assemble(CODE, spec(40), []), spec(40), [], **{**opts, "dynamic_batch": False})
    assert static["reason"] is None and static["compile_dynamic_batch"] is False
    assert static["compile_cache"]["miss"] >= 1  # a static graph of its own
