"""measure: problems whose forward segfaults, hangs, allocates past the limit or (on a GPU)
raises a CUDA error (a device-side assert) end as rejected rows with that reason, and the other
problems' results do not change. Runs through the stage on the CPU here and, on a GPU
machine, on CUDA with TorchInductor twice: with the default measure workers sharing the GPU,
and with one timing worker fed by compile-ahead workers (a hostile problem there meets a
compile-ahead worker first)."""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch

from curate.measure import run
from curate.problem import assemble
from curate.table import read_problems, read_rejected, source_struct, write_stage

from conftest import forward_problem as _forward, tensor_spec as _t

GPU = torch.cuda.is_available()


# on a GPU at the sizes the pipeline aims rows at (0.3-3 ms on an H100): a launch-bound call
# of a few microseconds is timed by how fast the timing core launches, which moves by more
# than the tolerance below from one lock hand-over to the next, neighbours or none
GOOD = {
    "linear": ("import torch\nfrom torch import nn\n\n\nclass Model(nn.Linear):\n    pass\n",
               [4096, 4096] if GPU else [256, 512], [_t(4096, 4096) if GPU else _t(64, 256)]),
    "conv": ("import torch\nfrom torch import nn\n\n\nclass Model(nn.Conv2d):\n    pass\n",
             [64, 64, 3] if GPU else [16, 32, 3], [_t(32, 64, 128, 128) if GPU else _t(8, 16, 32, 32)]),
    "softplus": (_forward("return torch.nn.functional.softplus(x) * 2.0"), [],
                 [_t(16384, 8192) if GPU else _t(32, 1024)]),
}
HOSTILE = {
    "segfault": (_forward("import ctypes\n        ctypes.string_at(0)\n        return x"), "crash"),
    "hang": (_forward("while True:\n            pass"), "timeout"),
    # past the worker's limit: the address space on the CPU; on CUDA more than the whole GPU
    # (a row refused memory beside other workers is measured again alone, with more of it)
    "huge_alloc": (_forward(
        "n = torch.cuda.get_device_properties(x.device).total_memory * 3 // 10 if x.is_cuda else 1 << 38\n"
        "        return x + torch.empty(n, device=x.device).sum()"), "memory"),
}
if GPU:
    # an index a terabyte past the tensor: the indexing kernel's device-side assert leaves the
    # CUDA context unusable. (A Triton kernel would do it too, but a reference that defines
    # one fails a plain exec() loader before it runs: rejected exec_fails, as it should be.)
    HOSTILE["device_assert"] = (_forward(
        "return x.view(-1)[torch.full((1,), 1 << 40, dtype=torch.long, device=x.device)]"),
        "cuda_error")


def _table(tmp_path, problems: dict):
    rows = []
    for name, (src, init, spec) in problems.items():
        rows.append({"problem_id": f"p_{name}", "name": f"test.{name}",
                     "code": assemble(src, spec, init), "init_args": json.dumps(init),
                     "input_spec": json.dumps(spec),
                     "source": source_struct(kind="test", name="t", class_name=name)})
    df = pl.DataFrame(rows)
    empty = df.clear().with_columns(pl.lit("").alias("reject_stage"), pl.lit("").alias("reject_reason"),
                                    pl.lit("").alias("reject_detail"))
    write_stage(tmp_path, "diversify", df, empty, df.height, 0.0)
    return tmp_path


def _measure(out, mode: str):
    if GPU and mode == "compile_ahead":
        return run(out=out, device="cuda", inductor=True, timeout_s=30, workers=1, compile_workers=2)
    if GPU:
        return run(out=out, device="cuda", inductor=True, timeout_s=30)
    return run(out=out, device="cpu", timeout_s=8, mem_mb=2048)


@pytest.mark.parametrize("mode", ["default", "compile_ahead"] if GPU else ["default"])
def test_hostile_problems_are_rejected_and_the_rest_is_unchanged(tmp_path, mode):
    alone = _measure(_table(tmp_path / "alone", GOOD), mode)
    mixed_problems = dict(GOOD)
    for name, (src, _) in HOSTILE.items():
        mixed_problems[name] = (src, [], [_t(8, 64)])
    # hostile rows first, so the good ones are measured by replacement workers
    order = list(HOSTILE) + list(GOOD)
    mixed = _measure(_table(tmp_path / "mixed", {k: mixed_problems[k] for k in order}), mode)

    assert alone["kept"] == len(GOOD) and alone["rejected"] == 0
    assert mixed["kept"] == len(GOOD) and mixed["rejected"] == len(HOSTILE)
    rej = read_rejected(tmp_path / "mixed" / "measure")
    reasons = dict(zip(rej["name"], rej["reject_reason"]))
    assert reasons == {f"test.{k}": why for k, (_, why) in HOSTILE.items()}, rej["reject_detail"].to_list()

    a = read_problems(tmp_path / "alone" / "measure").sort("problem_id")
    m = read_problems(tmp_path / "mixed" / "measure").sort("problem_id")
    assert a["problem_id"].to_list() == m["problem_id"].to_list()
    if GPU:
        # same GPU, same settings: the medians agree to within timing noise
        for ea, em in zip(a["eager_ms"], m["eager_ms"]):
            assert em == pytest.approx(ea, rel=0.25)
        assert m["compile_ms"].null_count() == 0
