"""TorchInductor with dynamic shapes: a base problem's shape variants share one compiled graph.

Real Inductor compiles on the CPU (slow: one cold compile, then cache lookups), in a fresh
cache folder: the first variant misses Inductor's FX-graph cache, the second (another batch
size and sequence length) hits it, and both are timed through a graph with symbolic sizes.
"""

from __future__ import annotations

import pytest
import torch

from curate.measure.core import mark_dynamic, measure_problem, unmark_dynamic
from curate.measure.variants import dynamic_dims_by_row, varying_dims
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


def spec(batch: int, seq: int = 16) -> list[dict]:
    return [{"kind": "tensor", "shape": [batch, seq, 32], "dtype": "float32"}]


def test_marks_the_given_dimensions_and_unmarks():
    a, b, c = torch.ones(4, 3, 5), torch.ones(1, 3), torch.tensor(2.0)
    assert mark_dynamic([a, b, c, 5], [[0, 0], [0, 2], [1, 0], [2, 0], [3, 0], [7, 0], [0, 9]])
    assert getattr(a, "_dynamo_weak_dynamic_indices", None) == {0, 2}
    assert not hasattr(b, "_dynamo_weak_dynamic_indices")  # a size of one stays static
    assert not hasattr(c, "_dynamo_weak_dynamic_indices")
    unmark_dynamic([a, b, c])
    assert not hasattr(a, "_dynamo_weak_dynamic_indices")
    assert not mark_dynamic([b, c], [[0, 0], [1, 0]])


def test_varying_dims_of_shape_variants():
    scalar = {"kind": "int", "value": 3}
    assert varying_dims([spec(8), spec(24, 64), spec(8, 16)]) == [[0, 0], [0, 1]]
    assert varying_dims([spec(8), spec(8)]) is None  # nothing differs
    assert varying_dims([spec(8), spec(8) + [scalar]]) is None  # another signature
    assert varying_dims([spec(8) + [scalar], spec(9) + [{**scalar, "value": 4}]]) is None
    assert varying_dims([spec(8) + [scalar], spec(9) + [scalar]]) == [[0, 0]]
    half = [{**spec(9)[0], "dtype": "float16"}]
    assert varying_dims([spec(8), half]) is None
    # rows of one base problem built alike share dims; another constructor does not
    import json
    rows = [{"base_problem_id": "a", "init_args": "[]", "input_spec": json.dumps(spec(8))},
            {"base_problem_id": "a", "init_args": "[]", "input_spec": json.dumps(spec(16, 32))},
            {"base_problem_id": "b", "init_args": "[1]", "input_spec": json.dumps(spec(8))},
            {"base_problem_id": "b", "init_args": "[2]", "input_spec": json.dumps(spec(16))},
            {"problem_id": "alone", "input_spec": json.dumps(spec(4))}]
    assert dynamic_dims_by_row(rows) == {0: [[0, 0], [0, 1]], 1: [[0, 0], [0, 1]]}


@pytest.mark.slow
def test_shape_variants_share_one_compiled_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    opts = dict(device="cpu", inductor=True, trials=3, warmup=1, checks_on=False, conform=False,
                dynamic_dims=[[0, 0], [0, 1]])
    first = measure_problem(assemble(CODE, spec(8), []), spec(8), [], **opts)
    second = measure_problem(assemble(CODE, spec(24, 40), []), spec(24, 40), [], **opts)
    for res in (first, second):
        assert res["reason"] is None, res["detail"]
        assert res["compile_dynamic"] is True
        assert res["compile_max_abs_diff"] < 1e-4
    assert first["compile_cache"]["miss"] >= 1 and first["compile_cache"]["hit"] == 0
    assert second["compile_cache"]["hit"] >= 1 and second["compile_cache"]["miss"] == 0
    static = measure_problem(assemble(CODE, spec(40), []), spec(40), [], **{**opts, "dynamic_dims": None})
    assert static["reason"] is None and static["compile_dynamic"] is False
    assert static["compile_cache"]["miss"] >= 1  # a static graph of its own
