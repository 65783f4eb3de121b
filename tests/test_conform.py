"""Problems mined from real torch and torchvision source run under a plain-exec,
KernelBench-style harness; the pipeline's own check (curate.conform) names what fails."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from curate.bench.conformance import harness_task
from curate.conform import check, check_task, checked_torch
from curate.mine import default_cache
from curate.mine import run as mine_run
from curate.mine.closure import Resolver
from curate.mine.sources import Source, resolve
from curate.mine.stage import _base_row, problem_id, unique_names
from curate.mine.synthesize import EXEC_SAFE_LINE, synthesize_task
from curate.mine.torch_api import public_closure
from curate.sandbox import Sandbox
from curate.table import read_problems, read_rejected

REPO = Path(__file__).resolve().parents[1]

#: (file under torch/nn/modules, class): lazy weights, instance norm, integer class targets,
#: a loss whose first guessed target broadcasts, a norm whose private base changed in 2.13.
TORCH_CLASSES = [("linear.py", "LazyLinear"), ("instancenorm.py", "InstanceNorm1d"),
                 ("loss.py", "CrossEntropyLoss"), ("loss.py", "MSELoss"), ("batchnorm.py", "BatchNorm2d")]
#: torchvision 0.29.1: GoogLeNet returns a named tuple in training mode, DropBlock2d's
#: functional form calls _log_api_usage_once on itself (a function: None __module__ under exec).
TORCHVISION_CLASSES = [("torchvision.models.googlenet", "GoogLeNet"), ("torchvision.ops.drop_block", "DropBlock2d")]


def _problem(body: str, inputs: str, init: str = "[]") -> str:
    return (textwrap.dedent(body) + "\n\ndef get_inputs():\n    return " + inputs
            + "\n\n\ndef get_init_inputs():\n    return " + init + "\n")


# ------------------------------------------------------------------ the check's reasons
LSTM = _problem("""
    import torch
    from torch import nn

    class Model(nn.LSTM):
        pass
""", "[torch.randn(4, 8, 16)]", "[16, 32]")

LAZY_UNMATERIALIZED = _problem("""
    import torch
    from torch import nn

    class Model(nn.LazyLinear):
        pass
""", "[torch.randn(8, 64)]", "[32]")

BROADCAST_TARGET = _problem("""
    import torch
    from torch import nn

    class Model(nn.MSELoss):
        pass
""", "[torch.randn(64, 8, 8, 64), torch.randn(8, 64)]")

FUNCTION_MODULE = _problem("""
    import torch
    from torch import nn

    def scale(x):
        assert scale.__module__.startswith("b")  # reads __module__ like torchvision
        return x * 2

    class Model(nn.Module):
        def forward(self, x):
            return scale(x)
""", "[torch.randn(4, 4)]")

EMBEDDING = _problem("""
    import torch
    from torch import nn

    class Model(nn.Embedding):
        pass
""", "[torch.randint(0, 100, (8, 16))]", "[100, 32]")


DEPRECATIONS = _problem("""
    import torch
    from torch import nn
    import torch.nn.functional as F
    from warnings import warn

    class Model(nn.Module):
        def __init__(self, legacy=True):
            super().__init__()
            if legacy:  # a library deprecating its own parameter: its business, not a misuse
                warn("legacy=True is deprecated", DeprecationWarning)

        def forward(self, x):
            return F.FN(x, scale_factor=2)
""", "[torch.randn(1, 2, 4, 4)]")


def test_torch_deprecations_are_misuse_a_library_s_own_are_not():
    upsample = check(DEPRECATIONS.replace("FN", "upsample"))  # torch warns with stacklevel=2
    assert upsample["reason"] == "reference_warns" and "upsample" in upsample["detail"]
    interp = check(DEPRECATIONS.replace("FN", "interpolate"))
    assert interp["reason"] is None and "legacy=True is deprecated" in interp["warnings"]


def test_what_the_compiler_says_of_the_source_text_is_not_misuse():
    """torchmd-net 3.1.0's ``SwiGLU`` (the manifest's ``torchmdnet/*.py``) has a docstring
    with ``\\c`` in it: compiling the problem file warns "invalid escape sequence"
    (a ``DeprecationWarning`` on Python 3.11, a ``SyntaxWarning`` from 3.12). The problem
    passes the check, and the warning is still reported."""
    source = resolve({"kind": "pypi", "name": "torchmd-net", "version": "3.1.0",
                      "include": ["torchmdnet/*.py"]}, default_cache())
    closure = Resolver(source.root, {}, source.importable).closure("torchmdnet.models.utils", "SwiGLU")
    assert "\\c" in closure.source
    got = synthesize_task(closure.source, "SwiGLU", "test", 60)
    assert got["ok"], got
    result = check(got["code"])
    assert result["reason"] is None and any("invalid escape sequence" in w for w in result["warnings"])


def test_check_names_what_a_harness_cannot_use():
    assert check(LSTM)["reason"] == "non_tensor_output"
    lazy = check(LAZY_UNMATERIALIZED)
    assert lazy["reason"] == "seed_unstable", lazy
    warned = check(BROADCAST_TARGET)
    assert warned["reason"] == "reference_warns" and "target size" in warned["detail"]
    assert check("import torch\nclass Model(torch.nn.Module):\n    pass\n")["reason"] == "exec_fails"
    assert check("raise ImportError('no such package')")["reason"] == "exec_fails"
    # a function's __module__ is None under exec(code, {}): .startswith fails
    assert check(FUNCTION_MODULE)["reason"] == "forward_fails"
    fixed = FUNCTION_MODULE.replace("import torch\n", f"import torch\n{EXEC_SAFE_LINE}\n", 1)
    assert check(fixed)["reason"] is None
    emb = check(EMBEDDING)
    assert emb["reason"] is None and emb["input_dtypes"] == ["int64"] and emb["all_float_inputs"] is False
    assert checked_torch([emb], "2.11.0@cuda") == f"2.11.0@cuda,{emb['torch']}@cpu"


def test_check_runs_in_a_sandbox_worker():
    outs = dict(Sandbox(workers=2, timeout_s=60).map(check_task, [((LSTM,), {}), ((EMBEDDING,), {})]))
    assert outs[0].ok and [r["reason"] for r in outs[0].value] == ["non_tensor_output"]
    assert outs[1].ok and outs[1].value[0]["reason"] is None


def test_measure_rejects_with_the_conformance_reason():
    from curate.measure.core import measure_problem

    res = measure_problem(LSTM, device="cpu", conform=True, trials=3, budget_s=0.05)
    assert res["reason"] == "non_tensor_output" and res["eager"] is None
    ok = measure_problem(EMBEDDING, device="cpu", conform=True, trials=3, budget_s=0.05)
    assert ok["reason"] is None and ok["conformance"]["reason"] is None and ok["eager"]["n"] >= 3


# ------------------------------------------------------------------ mined real source
@pytest.fixture(scope="module")
def torchvision_source(tmp_path_factory) -> Source:
    cache = tmp_path_factory.mktemp("cache")
    return resolve({"kind": "pypi", "name": "torchvision", "version": "0.29.1",
                    "include": ["torchvision/models/googlenet.py", "torchvision/models/inception.py",
                                "torchvision/ops/drop_block.py"]}, cache)


@pytest.fixture(scope="module")
def mined(torchvision_source) -> dict[str, dict]:
    """Synthesized problems of :data:`TORCH_CLASSES` and :data:`TORCHVISION_CLASSES`, each
    in a guarded sandbox worker as the mine stage runs them."""
    tasks = {c: (public_closure(f"torch/nn/modules/{f}", c), c) for f, c in TORCH_CLASSES}
    resolver = Resolver(torchvision_source.root, {}, torchvision_source.importable)
    for mod, c in TORCHVISION_CLASSES:
        tasks[c] = (resolver.closure(mod, c).source, c)
    names = list(tasks)
    calls = [((src, cls, f"doc of {cls}", 40.0), {}) for src, cls in tasks.values()]
    outs = dict(Sandbox(workers=2, timeout_s=60, guard=True).map(synthesize_task, calls))
    return {names[i]: (o.value if o.ok else {"ok": False, "reason": o.status, "detail": o.error})
            for i, o in outs.items()}


def test_mined_problems_pass_a_plain_exec_harness(mined):
    failed = {k: (v["reason"], v["detail"][:300]) for k, v in mined.items() if not v["ok"]}
    assert not failed
    outs = dict(Sandbox(workers=2, timeout_s=120).map(
        harness_task, [((v["code"],), {"trials": 3}) for v in mined.values()]))
    results = {name: outs[i].value for i, name in enumerate(mined)}
    assert all(r["reason"] is None for r in results.values()), results
    # the independent harness does reject what the pipeline's synthesis used to keep
    assert harness_task(LAZY_UNMATERIALIZED)["reason"] == "mismatch"
    assert harness_task(LSTM)["reason"] == "non_tensor_output"


def test_tuple_outputs_return_their_first_float_tensor(mined):
    code = mined["GoogLeNet"]["code"]
    assert "def _main_tensor(out):" in code and "return _main_tensor(super().forward(" in code
    ns: dict = {}
    exec(code, ns)
    import torch

    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    model.train()  # GoogLeNet returns GoogLeNetOutputs(logits, aux2, aux1) in training mode
    x = ns["get_inputs"]()
    with torch.no_grad():
        raw = type(model).__mro__[1].forward(model, *x)
        out = model(*x)
    assert type(raw).__name__ == "GoogLeNetOutputs" and torch.equal(out, raw.logits)
    # GoogLeNet's FutureWarning names the argument that silences it: the constructor sets it
    assert "init_weights" in str(mined["GoogLeNet"]["init_args"]) or "init_weights=" in code


def test_lazy_layers_are_materialized_while_built(mined):
    code = mined["LazyLinear"]["code"]
    assert "self(*get_inputs())" in code
    ns: dict = {}
    exec(code, ns)
    import torch

    torch.manual_seed(3)
    model = ns["Model"](*ns["get_init_inputs"]())
    assert not any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in model.parameters())


def test_torch_classes_are_written_through_the_public_api(mined):
    for _, cls in TORCH_CLASSES:
        code = mined[cls]["code"]
        assert f"from torch.nn import {cls}\n" in code and f"class Model({cls}):" in code
        assert "class _NormBase" not in code and "class _Loss" not in code
    assert public_closure("torch/nn/modules/batchnorm.py", "_NormBase") is None


def test_integer_inputs_are_kept_with_their_dtypes(mined):
    ce = mined["CrossEntropyLoss"]
    assert [s["kind"] for s in ce["input_spec"]] == ["tensor", "index"]
    assert ce["input_dtypes"] == ["float32", "int64"] and ce["all_float_inputs"] is False
    assert mined["BatchNorm2d"]["all_float_inputs"] is True


def test_a_broadcast_loss_target_is_repaired(mined):
    spec = mined["MSELoss"]["input_spec"]
    assert len(spec) == 2 and spec[0]["shape"] == spec[1]["shape"]
    assert spec[1]["dtype"] == "float32"


def test_torchvision_api_logging_survives_plain_exec(mined):
    code = mined["DropBlock2d"]["code"]
    assert "_log_api_usage_once(drop_block2d)" in code
    assert harness_task(code, trials=1)["reason"] is None
    assert EXEC_SAFE_LINE in code
    without = code.replace(EXEC_SAFE_LINE, "")
    assert harness_task(without, trials=1)["reason"] == "forward_fails"


# ------------------------------------------------------------------ host files, names, ids
def test_a_module_reading_host_files_is_rejected(tmp_path: Path):
    pkg = tmp_path / "repo" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "hostfile.py").write_text(textwrap.dedent("""
        import os
        import torch
        from torch import nn

        class PasswdScaled(nn.Module):
            def __init__(self, features: int):
                super().__init__()
                self.proj = nn.Linear(features, features)
                with open("/etc/passwd") as f:
                    self.scale = float(len(f.read()))

            def forward(self, x):
                return self.proj(x) * self.scale

        class Scaled(nn.Module):
            def __init__(self, features: int):
                super().__init__()
                self.proj = nn.Linear(features, features)

            def forward(self, x):
                return self.proj(x) * 2.0
    """))
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"sources:\n  - {{kind: dir, name: repo, path: {tmp_path / 'repo'}}}\n")
    out = tmp_path / "out"
    stats = mine_run(manifest=manifest, out=out, workers=2, timeout_s=20)
    row = read_rejected(out / "mine").to_dicts()[0]
    assert stats["rejected"] == 1 and row["name"] == "repo.PasswdScaled"
    assert row["reject_reason"] == "filesystem" and "/etc/passwd" in row["reject_detail"]
    kept = read_problems(out / "mine").to_dicts()[0]
    assert kept["name"] == "repo.Scaled" and kept["all_float_inputs"] is True
    assert json.loads(kept["input_dtypes"]) == ["float32"] and kept["checked_torch"].endswith("@cpu")


def test_names_are_unique_and_ids_do_not_depend_on_the_version(torchvision_source):
    newer = Source(torchvision_source.kind, torchvision_source.name, torchvision_source.uri, "0.30.0",
                   torchvision_source.licence, torchvision_source.root)
    rel = "torchvision/models/googlenet.py"
    assert problem_id(torchvision_source, rel, "BasicConv2d") == problem_id(newer, rel, "BasicConv2d")
    assert problem_id(torchvision_source, rel, "BasicConv2d") != problem_id(
        torchvision_source, "torchvision/models/inception.py", "BasicConv2d")
    rows = [_base_row(torchvision_source, f"torchvision/models/{f}.py", c)
            for f in ("googlenet", "inception") for c in ("BasicConv2d", "InceptionAux")]
    rows.append(_base_row(torchvision_source, "torchvision/models/googlenet.py", "GoogLeNet"))
    unique_names(rows)
    names = [r["name"] for r in rows]
    assert len(set(names)) == len(names)
    assert "torchvision.models.googlenet.BasicConv2d" in names and "torchvision.GoogLeNet" in names


def test_checker_cli_reports_pass_counts_and_reasons(mined, tmp_path: Path):
    rows = [{"problem_id": k, "name": k, "code": v["code"]} for k, v in mined.items()]
    rows.append({"problem_id": "lstm", "name": "torch.LSTM", "code": LSTM})
    (tmp_path / "problems").mkdir()
    pl.DataFrame(rows).write_parquet(tmp_path / "problems" / "part-00000.parquet")
    p = subprocess.run([sys.executable, "-m", "curate.bench.conformance", "--from", str(tmp_path),
                        "--trials", "2", "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=600, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"{len(mined)}/{len(rows)} rows pass" in p.stdout
    assert "non_tensor_output: 1  e.g. torch.LSTM" in p.stdout
    res = json.loads((tmp_path / "r.json").read_text())
    assert res["passed"] == len(mined)


NOISY = '''import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(32, 32)

    def forward(self, x):
        y = self.proj(x)
        return y + NOISE


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''


def test_last_bit_differences_pass_and_random_outputs_do_not():
    # a GPU kernel that accumulates with atomics differs run to run in its last bits: a harness
    # comparing within 1e-2 cannot tell; dropout left on changes whole elements
    atomics_like = check(NOISY.replace("NOISE", "1e-7 * torch.rand_like(y)"))
    assert atomics_like["reason"] is None, atomics_like
    dropout = check(NOISY.replace("NOISE", "torch.nn.functional.dropout(y, 0.5, training=True)"))
    assert dropout["reason"] == "non_deterministic", dropout
    assert "max abs diff" in dropout["detail"]
