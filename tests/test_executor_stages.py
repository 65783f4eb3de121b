"""``--executor ray`` for dedup, diversify, rank and export: on a local Ray instance (2 CPUs),
each writes the table its local run writes. (mine on Ray: tests/test_executor.py; measure on Ray,
CPU device: tests/test_measure_multigpu.py.)"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import polars as pl
import pytest
import torch
from typer.testing import CliRunner

from curate.cli import app
from curate.data import kernelbench_problems
from curate.problem import assemble, dumps
from curate.table import Rejections, read_problems, read_rejected, source_struct, write_stage
from verify_fixtures import SMALL_SPEC, candidate, kernelbench, reply, torch_relu_problem

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_local():
    from curate.executor import RayExecutor

    ex = RayExecutor(num_cpus=2)  # a local instance the stages join (they do not shut it down)
    yield ex
    ex.close()


def _t(*shape):
    return {"kind": "tensor", "shape": list(shape), "dtype": "float32"}


def _write(out: Path, stage: str, rows: list[dict]) -> Path:
    df = pl.DataFrame(rows)
    write_stage(out, stage, df, Rejections(stage).frame(like=df), df.height, 0.0)
    return out


def _torch_module(cls, init: list, spec: list[dict]) -> str:
    """A mined-style problem from torch's own source of ``cls``."""
    body = ("import torch\nimport torch.nn.functional as F\nfrom torch import Tensor\n"
            "from torch.nn import Module\nfrom torch.nn.parameter import Parameter\n"
            "from torch.nn import init\nimport math\n\n\n"
            + inspect.getsource(cls) + f"\n\nModel = {cls.__name__}\n")
    return assemble(body, spec, init)


def _row(pid: str, code: str, init: list, spec: list[dict]) -> dict:
    return {"problem_id": pid, "name": f"test.{pid}", "code": code, "init_args": dumps(init),
            "input_spec": dumps(spec), "source": source_struct(kind="test", name="torch", class_name=pid)}


def _tables(out: Path, stage: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    return read_problems(out / stage), read_rejected(out / stage)


def _same(a: Path, b: Path, stage: str, cols: list[str]) -> None:
    ka, ra = _tables(a, stage)
    kb, rb = _tables(b, stage)
    sort = ["problem_id"] + (["variant"] if "variant" in ka.columns else [])
    assert ka.select(cols).sort(sort).equals(kb.select(cols).sort(sort)), stage
    if ra.height or rb.height:
        assert ra.select("problem_id", "reject_reason").sort("problem_id").equals(
            rb.select("problem_id", "reject_reason").sort("problem_id")), stage


def test_dedup_on_ray_writes_the_local_table(ray_local, tmp_path: Path):
    """Exact and near duplicates and KernelBench copies (the screen travels to the Ray
    workers once) are found on Ray as here."""
    kb = {p["name"]: p["code"] for p in kernelbench_problems() if p["level"] == 1}
    relu = torch_relu_problem()
    rows = [_row("relu", relu, [], [_t(3, 333)]),
            _row("relu_copy", relu, [], [_t(3, 333)]),                       # exact duplicate
            _row("relu_renamed", relu.replace("inplace", "in_place"), [], [_t(3, 333)]),
            _row("kb_gelu", kb["26_GELU_"], [], SMALL_SPEC),                 # contaminated
            _row("linear", _torch_module(torch.nn.Linear, [64, 32], [_t(8, 64)]), [64, 32], [_t(8, 64)]),
            _row("flatten", _torch_module(torch.nn.Flatten, [], [_t(8, 4, 4)]), [], [_t(8, 4, 4)])]
    for out in (tmp_path / "local", tmp_path / "ray"):
        _write(out, "mine", rows)
    result = CliRunner().invoke(app, ["dedup", "--out", str(tmp_path / "ray"), "--executor", "ray",
                                      "--kernelbench", "auto", "--workers", "2"])
    assert result.exit_code == 0, result.output
    from curate.dedup import run

    run(tmp_path / "local", kernelbench="auto", workers=2)
    assert ray.is_initialized()  # the stage did not shut down an instance it did not start
    _same(tmp_path / "local", tmp_path / "ray", "dedup",
          ["problem_id", "code", "dedup_cluster", "is_representative", "contaminated_by"])
    reasons = set(read_rejected(tmp_path / "ray" / "dedup")["reject_reason"])
    assert {"exact_duplicate", "contaminated"} <= reasons, reasons
    stats = json.loads((tmp_path / "ray" / "dedup" / "stats.json").read_text())
    assert stats["chunks_in_workers"] >= 1


def test_diversify_on_ray_writes_the_local_table(ray_local, tmp_path: Path):
    from curate.diversify import run

    rows = [_row("linear", _torch_module(torch.nn.Linear, [64, 32], [_t(8, 64)]), [64, 32], [_t(8, 64)]),
            _row("gelu", _torch_module(torch.nn.GELU, [], [_t(8, 64, 32)]), [], [_t(8, 64, 32)]),
            _row("broken", "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
                 "    def forward(self, x):\n        return x @ torch.ones(3, 3)\n\n\n"
                 "def get_inputs():\n    return [torch.randn(8, 64)]\n\n\n"
                 "def get_init_inputs():\n    return []\n", [], [_t(8, 64)])]
    for out in (tmp_path / "local", tmp_path / "ray"):
        _write(out, "dedup", rows)
    on_ray = run(tmp_path / "ray", variants=2, device="cpu", workers=2, timeout_s=60, executor="ray")
    local = run(tmp_path / "local", variants=2, device="cpu", workers=2, timeout_s=60)
    assert (on_ray["in"], on_ray["kept"], on_ray["rejected"]) == (local["in"], local["kept"], local["rejected"])
    assert on_ray["kept"] >= 2 and on_ray["rejected"] >= 1
    _same(tmp_path / "local", tmp_path / "ray", "diversify",
          ["problem_id", "variant", "code", "init_args", "input_spec", "shape_role"])


def test_rank_on_ray_verifies_candidates_as_here(ray_local, tmp_path: Path):
    """Structure traces and verifications of a completions solver run as sandboxed Ray tasks."""
    from curate.rank import run

    rows = [dict(_row("kb-19-relu", kernelbench("19_ReLU"), [], SMALL_SPEC), eager_ms=0.01),
            dict(_row("torch-relu", torch_relu_problem(), [], [_t(3, 333)]), eager_ms=0.01)]
    lines = [("kb-19-relu", reply(candidate("relu_triton"))),
             ("kb-19-relu", candidate("relu_off_by_one")),
             ("torch-relu", reply(candidate("relu_triton")))]
    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps({"problem_id": p, "completion": c}) + "\n" for p, c in lines))
    for out in (tmp_path / "local", tmp_path / "ray"):
        _write(out, "measure", rows)
    common = dict(solver="completions", completions=path, k=1, workers=2, timeout_s=120, device="cpu")
    on_ray = run(tmp_path / "ray", executor="ray", **common)
    run(tmp_path / "local", **common)
    assert on_ray["candidates_verified"] == 3
    _same(tmp_path / "local", tmp_path / "ray", "rank",
          ["problem_id", "n_candidates", "n_correct", "pass_rate", "level", "category", "difficulty"])
    got = {r["problem_id"]: r for r in read_problems(tmp_path / "ray" / "rank").iter_rows(named=True)}
    assert (got["kb-19-relu"]["n_candidates"], got["kb-19-relu"]["n_correct"]) == (2, 1)
    assert got["torch-relu"]["level"] == 1


def test_export_on_ray_prunes_as_here(ray_local, tmp_path: Path):
    """The pruning proofs run as sandboxed Ray tasks; the exported code, its split and the
    prune counts are the local run's."""
    rows = [_row(cls.__name__.lower(), _torch_module(cls, init, [_t(8, 64)]), init, [_t(8, 64)])
            for cls, init in ((torch.nn.Mish, []), (torch.nn.GELU, ["tanh"]), (torch.nn.ELU, [1.0]),
                              (torch.nn.Linear, [64, 32]))]
    for out in (tmp_path / "local", tmp_path / "ray"):
        _write(out, "mine", rows)
    result = CliRunner().invoke(app, ["export", "--out", str(tmp_path / "ray"), "--executor", "ray",
                                      "--workers", "2"])
    assert result.exit_code == 0, result.output
    from curate.export import run

    local = run(tmp_path / "local", workers=2)
    assert ray.is_initialized()
    on_ray = json.loads((tmp_path / "ray" / "export" / "stats.json").read_text())
    assert on_ray["prune"] == local["prune"]
    assert local["prune"]["pruned"] >= 1 and local["prune"]["checked"] == len(rows)
    _same(tmp_path / "local", tmp_path / "ray", "export",
          ["problem_id", "variant", "code", "pruned", "code_chars_unpruned", "split"])
