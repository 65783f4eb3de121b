"""Coverage pruning on real library source: constructor-time branches no run entered are
replaced by a raise, a branch a variant's constructor takes is kept, conditions read from the
environment are never judged, conditions computed by pure functions of the program
(torch's ``_pair``) count as decided by the arguments, and on timm's create_conv2d path
(mined by the default manifest) the pruned program is shorter with identical outputs."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import polars as pl
import pytest
import torch.nn.modules.conv as conv
import torch.nn.modules.transformer as transformer
import torch.nn.modules.utils as torch_utils

from curate.export.prune import check_task, prune_source
from curate.export.prune_cover import (RAISE, _pure_functions, _static_globals, check_meta, cover_prune,
                                       trace)
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


def _mine_timm_file(tmp_path_factory, path: str, workers: int) -> Path:
    """A run folder whose mine stage holds what the default manifest mines from ``path`` of
    the timm 1.0.31 wheel."""
    from curate.mine import run

    out = tmp_path_factory.mktemp(Path(path).stem + "-subset")
    manifest = out / "manifest.yaml"
    manifest.write_text(
        "sources:\n"
        "  - kind: pypi\n"
        "    name: timm\n"
        '    version: "1.0.31"\n'
        f"    include: [{path}]\n")
    run(manifest=manifest, out=out, workers=workers, timeout_s=30)
    return out


@pytest.fixture(scope="module")
def cbam_subset(tmp_path_factory) -> Path:
    """timm's cbam.py as the default manifest mines it (its layers build their convolution
    through create_conv2d and their anti-aliasing through create_aa)."""
    return _mine_timm_file(tmp_path_factory, "timm/layers/cbam.py", workers=2)


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
    # create_conv2d_pad's is_dynamic comes from get_padding_value, a pure function of the
    # padding and kernel arguments: the Conv2dSame branch and its helpers go
    assert "class Conv2dSame" in code and "class Conv2dSame" not in pruned
    assert "def pad_same" not in pruned
    assert check_task(code, pruned)["same"]
    assert len(pruned) < 0.8 * len(prune_source(code).code)


# torch's nn/modules/utils.py: _pair = _ntuple(2, "_pair"), a closure over a literal
UTILS_SRC = inspect.getsource(torch_utils)


def _pure_of(src: str) -> frozenset[str]:
    tree = ast.parse(src)
    module_names, static = _static_globals(tree)
    return _pure_functions(tree, static, module_names)[0]


def test_pure_functions_of_real_torch_source():
    pure = _pure_of(UTILS_SRC)
    # _ntuple's body defines a pure closure; _pair is that closure made from literals;
    # repeat comes from itertools
    assert {"_ntuple", "_pair", "_single", "repeat"} <= pure
    # an import inside the body and a call of torch: not judged pure
    assert "_list_with_default" not in pure
    assert "_reverse_repeat_tuple" not in pure  # calls reversed, outside the pure builtins
    # a function reading the environment is never pure, nor one calling it
    env = UTILS_SRC + ("\n\nimport torch\n\ndef _fast():\n    return torch.cuda.is_available()\n\n"
                       "def _pick(k):\n    return _pair(k)[0] > 1 and _fast()\n")
    pure = _pure_of(env)
    assert "_fast" not in pure and "_pick" not in pure and "_pair" in pure


def _pair_problem(init: list) -> str:
    body = (UTILS_SRC + "\n\nimport torch\nimport torch.nn as nn\n\n\n"
            "class Model(nn.Module):\n"
            "    def __init__(self, width, kernel):\n"
            "        super().__init__()\n"
            "        k = _pair(kernel)\n"
            "        if k[0] == k[1]:\n"
            "            self.conv = nn.Conv2d(4, width, k, padding=k[0] // 2)\n"
            "        else:\n"
            "            pad = (k[0] // 2, k[1] // 2)\n"
            "            self.conv = nn.Conv2d(4, width, k, padding=pad)\n"
            "\n    def forward(self, x):\n        return self.conv(x)\n")
    return assemble(body, [{"kind": "tensor", "shape": [2, 4, 12, 12], "dtype": "float32"}], init)


def test_a_branch_decided_by_a_pure_function_of_the_arguments_is_replaced():
    code = _pair_problem([8, 3])
    result = prune_task(code, [], seed=0)
    assert result["same"] and result["cover"]["branches"] >= 1, result
    # the condition reads k = _pair(kernel): decided by the constructor's argument
    assert "pad = (k[0] // 2, k[1] // 2)" not in result["pruned"] and RAISE in result["pruned"]
    assert check_task(code, result["pruned"])["same"]


def test_a_branch_a_variant_takes_through_a_pure_function_is_kept():
    code = _pair_problem([8, 3])
    wide = replace_inputs(code, [{"kind": "tensor", "shape": [2, 4, 12, 12], "dtype": "float32"}], [8, [3, 5]])
    result = prune_task(code, [wide], seed=0)
    assert result["same"], result
    assert "pad = (k[0] // 2, k[1] // 2)" in result["pruned"]
    assert "padding=k[0] // 2" in result["pruned"]


@pytest.fixture(scope="module")
def attention_subset(tmp_path_factory) -> Path:
    """timm's attention.py as the default manifest mines it (AttentionRope's forward takes
    ``rope``, ``attn_mask`` and ``is_causal`` after the input, all defaulted)."""
    return _mine_timm_file(tmp_path_factory, "timm/layers/attention.py", workers=1)


def _rope_code(subset: Path) -> str:
    mined = read_problems(subset / "mine")
    rows = mined.filter(pl.col("code").str.contains("class Model(AttentionRope)", literal=True))
    assert rows.height, mined["name"].to_list()
    code = rows.row(0, named=True)["code"]
    assert "if rope is not None:" in code and "def apply_rot_embed_cat" in code
    return code


@pytest.mark.slow
def test_forward_branch_on_a_never_passed_parameter_is_pruned(attention_subset: Path):
    code = _rope_code(attention_subset)
    result = prune_task(code, [], seed=0)
    assert result["same"] and result["cover"].get("branches"), result
    pruned = result["pruned"]
    # the harness passes x alone: rope stays None, its branch and the rotary helpers go
    lines = pruned.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip() == "if rope is not None:")
    assert lines[at + 1].strip() == RAISE
    assert "def apply_rot_embed_cat" not in pruned and "def rope_rotate_half" not in pruned
    # conditions on self or on the input are not decided by the defaults: kept
    assert "if self.fused_attn:" in pruned and "if gate is not None:" in pruned
    assert check_task(code, pruned)["same"]


@pytest.mark.slow
def test_forward_branch_on_a_passed_parameter_is_kept(attention_subset: Path):
    code = _rope_code(attention_subset)
    # get_inputs passes rope (as None): the branch is not entered, but not decided either
    x_line = "        torch.randn((8, 128, 64)),\n"
    assert x_line in code
    passed = code.replace(x_line, x_line + "        None,\n")
    cov = trace(passed, [])
    assert not cov.failed and cov.entries and all(n == 2 for _, _, n in cov.entries)
    edited = cover_prune(passed, cov)
    assert "def apply_rot_embed_cat" in edited.code
    lines = edited.code.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip() == "if rope is not None:")
    assert lines[at + 1].strip() != RAISE


@pytest.mark.slow
def test_forward_of_a_submodule_is_not_judged_by_its_defaults(attention_subset: Path):
    code = _rope_code(attention_subset)
    head, marker, tail = code.partition("class Model(AttentionRope):")
    # Model wraps the layer: AttentionRope.forward is called by Model.forward, not the harness
    wrapped = head + ("class Model(nn.Module):\n"
                      "    def __init__(self, dim, attn_head_dim):\n"
                      "        super().__init__()\n"
                      "        self.attn = AttentionRope(dim=dim, attn_head_dim=attn_head_dim)\n\n"
                      "    def forward(self, x):\n"
                      "        return self.attn(x)\n\n\n")
    wrapped += "# ---- curate" + tail.split("# ---- curate", 1)[1]
    cov = trace(wrapped, [])
    assert not cov.failed, cov.failed
    edited = cover_prune(wrapped, cov)
    assert "def apply_rot_embed_cat" in edited.code
    lines = edited.code.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip() == "if rope is not None:")
    assert lines[at + 1].strip() != RAISE
