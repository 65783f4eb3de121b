"""Coverage pruning on real library source: constructor-time branches no run entered are
replaced by a raise, a branch a variant's constructor takes is kept, conditions read from the
environment are never judged, and on timm's create_conv2d path (mined by the default
manifest) the pruned program is shorter with identical outputs."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import polars as pl
import pytest
import torch.nn.modules.conv as conv
import torch.nn.modules.transformer as transformer

from curate.export.prune import check_task, prune_source
from curate.export.prune_cover import RAISE, check_meta, cover_prune, trace
from curate.export.prune_usage import prune_task
from curate.problem import assemble, replace_inputs
from curate.table import read_problems

# torch's own constructor-time factory: relu / gelu chosen by a constructor argument
ACT_FN_SRC = inspect.getsource(transformer._get_activation_fn)
# torch's conv.py, package-relative imports made absolute so it runs as one file
CONV_SRC = inspect.getsource(conv).replace("from .", "from torch.nn.modules.")
SPEC = [{"kind": "tensor", "shape": [4, 16], "dtype": "float32"}]


def _factory_problem(init: list, env_guard: bool = False) -> str:
    guard = ("        if torch.cuda.is_available():\n            self.act = F.silu\n"
             if env_guard else "")
    body = (f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
            f"from typing import Callable\nfrom torch import Tensor\n\n\n{ACT_FN_SRC}\n\n"
            "class Model(nn.Module):\n"
            "    def __init__(self, width, activation):\n"
            "        super().__init__()\n"
            "        self.lin = nn.Linear(16, width)\n"
            "        self.act = _get_activation_fn(activation)\n"
            f"{guard}"
            "\n    def forward(self, x):\n        return self.act(self.lin(x))\n")
    return assemble(body, SPEC, init)


def test_unreached_constructor_branch_is_replaced_and_outputs_match():
    code = _factory_problem([8, "relu"])
    result = prune_task(code, [], seed=0)
    assert result["same"] and result["cover"]["branches"] >= 1, result
    assert "F.gelu" not in result["pruned"] and RAISE in result["pruned"]
    assert "return F.relu" in result["pruned"]
    assert check_task(code, result["pruned"])["same"]


def test_a_branch_a_variant_takes_is_kept():
    code = _factory_problem([8, "relu"])
    gelu = replace_inputs(code, SPEC, [32, "gelu"])  # a wider variant built with gelu
    cov = trace(code, [gelu])
    assert not cov.failed and not cov.partial
    edited = cover_prune(code, cov)
    assert "return F.gelu" in edited.code and "return F.relu" in edited.code
    assert RAISE not in edited.code
    # the proof's variant half rejects a body pruned without the variant
    alone = cover_prune(code, trace(code, []))
    assert RAISE in alone.code
    marker = "# ---- curate"
    broken = alone.code.partition(marker)[0] + marker + gelu.partition(marker)[2]
    check = check_meta([(gelu, broken)])
    assert not check["same"] and "NotImplementedError" in check["detail"]
    kept = edited.code.partition(marker)[0] + marker + gelu.partition(marker)[2]
    assert check_meta([(gelu, kept)])["same"]


def test_conditions_read_from_the_environment_are_not_judged():
    code = _factory_problem([8, "relu"], env_guard=True)
    cov = trace(code, [])
    assert not cov.failed
    edited = cover_prune(code, cov)
    # on this CPU machine the cuda branch never ran, but a GPU would take it: kept
    assert "self.act = F.silu" in edited.code
    assert "F.gelu" not in edited.code


def test_unused_methods_of_real_torch_classes_go_overrides_stay():
    # torch's Conv1d: _ConvNd's __setstate__ (dunder) and extra_repr-like overrides of
    # nn.Module methods are kept unless repr-only; Conv2d's and Conv3d's classes are not built
    body = CONV_SRC + "\n\nclass Model(Conv1d):\n    pass\n"
    code = assemble(body, [{"kind": "tensor", "shape": [2, 4, 16], "dtype": "float32"}], [4, 8, 3])
    cov = trace(code, [])
    assert not cov.failed, cov.failed
    edited = cover_prune(code, cov)
    assert "_ConvNd.extra_repr" in edited.methods
    assert "def __setstate__" in edited.code  # a dunder: pickling calls it
    assert "def _conv_forward" in edited.code  # ran
    result = prune_task(code, [], seed=0)
    assert result["same"], result
    assert len(result["pruned"]) < len(prune_source(code).code)


@pytest.fixture(scope="module")
def cbam_subset(tmp_path_factory) -> Path:
    """timm's cbam.py as the default manifest mines it (its layers build their convolution
    through create_conv2d and their anti-aliasing through create_aa)."""
    from curate.mine import run

    out = tmp_path_factory.mktemp("cbam-subset")
    manifest = out / "manifest.yaml"
    manifest.write_text(
        "sources:\n"
        "  - kind: pypi\n"
        "    name: timm\n"
        '    version: "1.0.31"\n'
        "    include: [timm/layers/cbam.py]\n")
    run(manifest=manifest, out=out, workers=2, timeout_s=30)
    return out


@pytest.mark.slow
def test_timm_create_conv2d_path_is_pruned_with_identical_outputs(cbam_subset: Path):
    mined = read_problems(cbam_subset / "mine")
    rows = mined.filter(pl.col("code").str.contains("class Model(SpatialAttn)", literal=True))
    assert rows.height, mined["name"].to_list()
    row = rows.row(0, named=True)
    code = row["code"]
    assert "class CondConv2d" in code and "class MixedConv2d" in code and "class BlurPool2d" in code
    init = json.loads(row["init_args"])
    wider = replace_inputs(code, json.loads(row["input_spec"]), init)
    result = prune_task(code, [wider], seed=0)
    assert result["same"] and result["cover"].get("branches"), result
    pruned = result["pruned"]
    # create_conv2d's list-kernel and CondConv branches, create_aa's body: never entered
    assert "class CondConv2d" not in pruned and "class MixedConv2d" not in pruned
    assert "class BlurPool2d" not in pruned
    assert check_task(code, pruned)["same"]
    assert len(pruned) < 0.8 * len(prune_source(code).code)
