"""Pruning reference programs: the static pass on real library source, and a mined subset of
the default manifest whose pruned programs give bit-identical outputs in fresh interpreters."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch.nn.modules.activation as activation
import torch.nn.modules.conv as conv
import transformers.activations as hf_activations

from curate.export.prune import check_task, prune_source, table_entries
from curate.export.prune_table import prune_codes
from curate.export.prune_usage import prune_task, unused_entries
from curate.problem import INPUTS_MARKER, assemble
from curate.table import read_problems

ACTIVATION_SRC = inspect.getsource(activation)
# torch's conv.py, its package-relative imports made absolute so it runs as one file
CONV_SRC = inspect.getsource(conv).replace("from .", "from torch.nn.modules.")
HF_ACT_SRC = inspect.getsource(hf_activations)


def _problem(body: str, model: str) -> str:
    spec = [{"kind": "tensor", "shape": [4, 16], "dtype": "float32"}]
    return assemble(f'{body}\n\nclass Model({model}):\n    """Reference problem mined from torch: '
                    f'{model} (licence: BSD-3-Clause)."""\n', spec, [])


def test_unreached_definitions_docstrings_and_comments_go():
    code = _problem(ACTIVATION_SRC, "Hardswish")
    result = prune_source(code)
    assert not result.dynamic
    new = result.code
    assert "class Hardswish(Module):" in new and "class Model(Hardswish):" in new
    # everything else in torch's activation.py is unreachable from Hardswish
    for gone in ("class MultiheadAttention", "class Softmax(", "def _check_arg_device"):
        assert gone in code and gone not in new
    assert "MultiheadAttention" in result.removed and "Softmax" in result.removed
    assert '"""Reference problem mined from torch' in new  # the provenance line stays
    assert new.count('"""') == 2 and "#" not in new.partition(INPUTS_MARKER)[0]
    assert new.partition(INPUTS_MARKER)[2] == code.partition(INPUTS_MARKER)[2]
    assert len(new) < len(code) / 10
    compile(new, "<pruned>", "exec")


def test_dynamic_lookups_keep_every_definition():
    body = ACTIVATION_SRC + "\n\ndef _by_name(name):\n    return globals()[name]\n"
    code = _problem(body, "Hardswish").replace(
        "class Model(Hardswish):", "class Model(_by_name('Hardswish')):")
    result = prune_source(code)
    assert result.dynamic and not result.removed
    assert "class MultiheadAttention" in result.code and "def _by_name" in result.code


def test_names_in_strings_and_import_time_calls_are_kept():
    body = (ACTIVATION_SRC
            + "\n\n_REGISTRY = {}\n\ndef register(cls):\n    _REGISTRY[cls.__name__] = cls\n    return cls\n"
            + "\n@register\nclass Picked(Hardswish):\n    pass\n"
            + "\n\nclass Lookup(Module):\n    def __init__(self):\n        super().__init__()\n"
            + "        self.inner = _REGISTRY['Picked']()\n        self.act = getattr(sys.modules[__name__], 'ReLU', None)\n"
            + "    def forward(self, x):\n        return self.inner(x)\n")
    body = "import sys\n" + body
    result = prune_source(_problem(body, "Lookup"))
    # sys.modules is a dynamic lookup: nothing removed; without it the registering decorator
    # (a module-level function) keeps Picked
    assert result.dynamic
    body2 = body.replace("        self.act = getattr(sys.modules[__name__], 'ReLU', None)\n", "")
    result2 = prune_source(_problem(body2, "Lookup"))
    assert not result2.dynamic
    assert "class Picked(Hardswish):" in result2.code and "def register" in result2.code
    assert "class MultiheadAttention" not in result2.code


def test_doc_assignments_and_the_notes_they_format_go():
    # torch's Conv1d builds its __doc__ from convolution_notes and reproducibility_notes
    code = _problem(CONV_SRC, "Conv1d").replace('"shape": [4, 16]', '"shape": [2, 4, 16]').replace(
        "def get_init_inputs():\n    return []", "def get_init_inputs():\n    return [4, 8, 3]")
    assert "__doc__ = (" in code and "convolution_notes = {" in code
    new = prune_source(code).code
    head = new.partition(INPUTS_MARKER)[0]
    for gone in ("__doc__", "convolution_notes", "reproducibility_notes", "class ConvTranspose1d"):
        assert gone not in head
    assert "class Conv1d(_ConvNd):" in head and "def _conv_forward" in head
    assert check_task(code, new) == {"same": True, "detail": ""}
    # code that reads a docstring keeps the assignments that make it
    reads = code.replace("class Model(Conv1d):", "DOC = Conv1d.__doc__\n\n\nclass Model(Conv1d):")
    kept = prune_source(reads).code
    assert "__doc__ = (" in kept and "convolution_notes = {" in kept


def test_table_entries_of_a_real_activation_table():
    # transformers' ACT2CLS maps names to its activation classes (and to torch's)
    code = _problem(HF_ACT_SRC, "GELUActivation")
    entries = {e.key: e for e in table_entries(code) if e.table == "ACT2CLS"}
    assert entries["xielu"].refs == {"XIELUActivation"}
    assert entries["gelu_10"].refs == {"ClippedGELUActivation"}
    assert "relu" not in entries and "swish" not in entries  # torch's classes: nothing to follow
    drop = [("ACT2CLS", k) for k in ("xielu", "laplace", "relu2", "sqrtsoftplus", "gelu_10")]
    plain = prune_source(code)
    result = prune_source(code, drop + [("ACT2CLS", "no such key"), ("NOT_A_TABLE", "gelu")])
    assert "ACT2CLS['xielu']" in result.removed and "XIELUActivation" in result.removed
    for gone in ("class XIELUActivation", "class LaplaceActivation", "class ReLUSquaredActivation",
                 "class SqrtSoftplusActivation", "class ClippedGELUActivation", '"xielu":'):
        assert gone in plain.code and gone not in result.code
    for kept in ("class GELUActivation", '"gelu": GELUActivation,', '"relu": nn.ReLU,', "ACT2FN = "):
        assert kept in result.code
    compile(result.code, "<pruned>", "exec")


def test_unparsable_code_is_returned_unchanged():
    broken = "class Model(:\n    pass\n"
    assert prune_source(broken).code == broken and not prune_source(broken).changed


@pytest.fixture(scope="module")
def default_subset(tmp_path_factory) -> Path:
    """Problems mined as the default pipeline mines them (manifests/default.yaml's sources:
    torch nn modules and the timm wheel), a few files of each."""
    from curate.mine import run

    out = tmp_path_factory.mktemp("default-subset")
    manifest = out / "manifest.yaml"
    manifest.write_text(
        "sources:\n"
        "  - kind: package\n"
        "    name: torch\n"
        "    include: [torch/nn/modules/activation.py, torch/nn/modules/loss.py,\n"
        "              torch/nn/modules/normalization.py, torch/nn/modules/transformer.py]\n"
        "  - kind: pypi\n"
        "    name: timm\n"
        '    version: "1.0.31"\n'
        "    include: [timm/layers/cbam.py, timm/layers/mlp.py, timm/layers/squeeze_excite.py]\n")
    run(manifest=manifest, out=out, workers=2, timeout_s=30)
    return out


RUNNER = """
import json, sys, torch
from curate.problem import exec_source
codes = json.load(open(sys.argv[1]))
out = {}
for i, code in enumerate(codes):
    torch.manual_seed(0)
    ns = exec_source(code, f"prob{i}")
    model = ns["Model"](*ns["get_init_inputs"]())
    with torch.no_grad():
        y = model(*ns["get_inputs"]())
    ys = [y] if isinstance(y, torch.Tensor) else [t for t in y if isinstance(t, torch.Tensor)]
    out[i] = [t.detach() for t in ys] + [p.detach() for p in model.state_dict().values()]
torch.save(out, sys.argv[2])
"""


@pytest.mark.slow
def test_pruning_changes_no_output_on_mined_problems(default_subset: Path, tmp_path: Path):
    import torch

    mined = read_problems(default_subset / "mine")
    assert mined.height >= 40
    table, stats = prune_codes(mined, cache=tmp_path / "checks.jsonl", workers=2)
    assert stats["pruned"] >= 0.8 * stats["bodies"], stats
    # timm's layers build their activation through _ACT_LAYER_DEFAULT: the entries no run
    # used go, with the classes only they named
    assert stats["by_usage"] >= 3, stats
    se = table.filter(pl.col("code").str.contains("class SEModule"))
    assert se.height and all("_ACT_LAYER_DEFAULT" in c and "class GELUTanh" not in c for c in se["code"])
    # torch's own classes are mined as one-line subclasses of the public class (nothing to
    # prune); the timm closures carry most of what pruning removes
    assert stats["chars_after"] < 0.9 * stats["chars_before"], stats
    pruned = table.filter(pl.col("pruned"))
    before = mined.filter(pl.col("problem_id").is_in(pruned["problem_id"].to_list()))
    assert before["problem_id"].to_list() == pruned["problem_id"].to_list()
    assert all(a != b for a, b in zip(before["code"], pruned["code"]))
    # every pruned program against its original, each set in its own fresh interpreter
    results = []
    for name, codes in (("orig", before["code"].to_list()), ("pruned", pruned["code"].to_list())):
        (tmp_path / f"{name}.json").write_text(json.dumps(codes))
        subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path / f"{name}.json"),
                        str(tmp_path / f"{name}.pt")], check=True, timeout=600,
                       cwd=Path(__file__).resolve().parents[1])
        results.append(torch.load(tmp_path / f"{name}.pt"))
    orig, new = results
    assert orig.keys() == new.keys() and len(orig) == pruned.height
    for i in orig:
        assert len(orig[i]) == len(new[i]) > 0
        for a, b in zip(orig[i], new[i]):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(a.nan_to_num(), b.nan_to_num()) and torch.equal(a.isnan(), b.isnan())
    # rows that were not pruned kept their code byte for byte
    rest = table.filter(~pl.col("pruned"))
    orig_codes = dict(zip(mined["problem_id"], mined["code"]))
    assert all(orig_codes[p] == c for p, c in zip(rest["problem_id"], rest["code"]))


@pytest.mark.slow
def test_usage_pruning_keeps_what_a_timm_layer_builds(default_subset: Path):
    from curate.problem import replace_inputs

    mined = read_problems(default_subset / "mine")
    row = mined.filter(pl.col("code").str.contains("class Model(SEModule)", literal=True)).row(0, named=True)
    code = row["code"]  # the mine stage's rows are at their mined inputs
    # SEModule's gate is a sigmoid: that entry is used, the others are not
    unused = {k for t, k in unused_entries(code, []) if t == "_ACT_LAYER_DEFAULT"}
    assert "sigmoid" not in unused and {"gelu", "tanh", "hard_mish"} <= unused, unused
    # a variant built with other constructor arguments is recorded too (on the meta device)
    init = json.loads(row["init_args"])
    wider = replace_inputs(code, json.loads(row["input_spec"]), [2 * init[0], *init[1:]])
    assert wider != code
    assert {k for t, k in unused_entries(code, [wider]) if t == "_ACT_LAYER_DEFAULT"} == unused
    result = prune_task(code, [], seed=0)
    assert result["same"] and result["tables"], result
    assert check_task(code, result["pruned"])["same"]
    assert len(result["pruned"]) < len(prune_source(code).code)
