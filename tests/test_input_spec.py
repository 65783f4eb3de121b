"""The typed input spec (curate.problem.InputSpec): the JSON form round-trips unchanged, and
rendering and building from it match the dict form, on the specs of a real mining run."""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch

from curate.problem import (InputSpec, build_inputs, dumps, load_problem, parse_input_spec,
                            render_inputs, spec_bytes)


def _mined_specs(mined_run) -> list[tuple[str, list[dict], list]]:
    df = pl.read_parquet(mined_run / "mine" / "problems" / "*.parquet")
    return [(r["problem_id"], json.loads(r["input_spec"]), json.loads(r["init_args"]))
            for r in df.iter_rows(named=True)]


def test_mined_specs_round_trip_and_render_the_same(mined_run):
    specs = _mined_specs(mined_run)
    assert len(specs) >= 10
    kinds = set()
    for pid, spec, init in specs:
        typed = parse_input_spec(dumps(spec))
        kinds |= {s.kind for s in typed}
        assert dumps([s.to_dict() for s in typed]) == dumps(spec), pid  # the serialized form
        assert render_inputs(typed, init) == render_inputs(spec, init), pid
        assert spec_bytes(typed) == spec_bytes(spec)
        built_typed, built_dict = build_inputs(typed, seed=0), build_inputs(spec, seed=0)
        for a, b in zip(built_typed, built_dict):
            assert type(a) is type(b)
            if isinstance(a, torch.Tensor):
                assert a.dtype == b.dtype and torch.equal(a, b), pid
            else:
                assert a == b
    assert {"tensor"} <= kinds


def test_rendered_inputs_build_what_the_spec_says():
    spec = [{"kind": "tensor", "shape": [2, 3], "dtype": "float16"},
            {"kind": "index", "shape": [4], "low": 5, "high": 6, "dtype": "int64"},
            {"kind": "mask", "shape": [2, 2], "dtype": "bool"},
            {"kind": "value", "value": None, "arg": "scale"}]
    typed = parse_input_spec(spec)
    assert typed[3].extra == (("arg", "scale"),) and typed[3].to_dict() == spec[3]
    assert typed[0].nbytes == 12 and typed[1].numel == 4 and typed[3].nbytes == 0
    code = "import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n    pass\n\n\n" + render_inputs(typed, [])
    x, idx, mask, value = load_problem(code)["get_inputs"]()
    assert x.shape == (2, 3) and x.dtype == torch.float16
    assert idx.tolist() == [5, 5, 5, 5] and mask.dtype == torch.bool and value is None


def test_a_unit_interval_tensor_is_drawn_away_from_zero_and_one_in_the_file_and_on_a_device():
    """``"unit_interval": true``: the problem file's ``get_inputs()`` (what a KernelBench-style
    harness runs) and :func:`build_inputs` (what measure runs) both draw in [0.01, 0.99]."""
    spec = [{"kind": "tensor", "shape": [64, 64], "dtype": "float32", "unit_interval": True},
            {"kind": "tensor", "shape": [64, 64], "dtype": "float64", "unit_interval": True},
            {"kind": "tensor", "shape": [64, 64], "dtype": "float32"}]
    typed = parse_input_spec(spec)
    assert [t.unit_interval for t in typed] == [True, True, False]
    assert [t.to_dict() for t in typed] == spec
    code = "import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n    pass\n\n\n" + render_inputs(typed, [])
    for a, b, normal in (load_problem(code)["get_inputs"](), build_inputs(spec, seed=0)):
        for x in (a, b):
            assert 0.01 <= x.min() and x.max() <= 0.99 and x.max() - x.min() > 0.9
            assert torch.isfinite(torch.log(x)).all() and torch.isfinite(torch.atanh(x)).all()
        assert a.dtype == torch.float32 and b.dtype == torch.float64
        assert normal.min() < 0  # the other tensors stay normal


@pytest.mark.parametrize("bad,match", [
    ({"kind": "tensr", "shape": [2]}, "unknown input kind 'tensr'"),
    ({"kind": "tensor"}, "tensor input needs a shape"),
    ({"kind": "index", "shape": [3]}, "index input needs high"),
    ({"kind": "value"}, "value input needs value"),
    ("tensor", "must be a mapping"),
])
def test_malformed_entries_are_named(bad, match):
    with pytest.raises(ValueError, match=f"input 1: .*{match}"):
        parse_input_spec([{"kind": "value", "value": 1}, bad])
    with pytest.raises(ValueError, match=match):
        build_inputs([bad])
