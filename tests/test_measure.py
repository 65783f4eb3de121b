"""measure: CPU timing of real torch modules, the sanity filters on deliberately bad
problems, the persistent worker's crash/timeout recovery, resume, Inductor, and the
benchmark script's CPU path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch

from curate.bench import export_jsonl
from curate.bench.measure import compare_with_loop, load_problems, run_bench
from curate.measure import run
from curate.measure.core import measure_problem
from curate.journal import Journal
from curate.measure.worker import PersistentWorker
from curate.problem import assemble
from curate.table import read_problems, read_rejected, source_struct, write_stage
from verify_fixtures import kernelbench


def _t(*shape):
    return {"kind": "tensor", "shape": list(shape), "dtype": "float32"}


def _module(base: str) -> str:
    return f"import torch\nfrom torch import nn\n\n\nclass Model({base}):\n    pass\n"


def _custom(body: str, init: str = "") -> str:
    return ("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
            + (f"    def __init__(self):\n        super().__init__()\n        {init}\n\n" if init else "")
            + f"    def forward(self, x):\n        {body}\n")


GOOD = {
    "linear": (_module("nn.Linear"), [64, 32], [_t(16, 64)]),
    "conv": (_module("nn.Conv2d"), [3, 8, 3], [_t(2, 3, 16, 16)]),
    "gelu": (_module("nn.GELU"), [], [_t(8, 256)]),
}
BAD = {
    "dropout": (_custom("return self.drop(x)", "self.drop = nn.Dropout(0.5)"), [], [_t(8, 64)]),
    "zeros": (_custom("return torch.zeros_like(x)"), [], [_t(8, 64)]),
    "inf": (_custom("return x / 0.0"), [], [_t(8, 64)]),
    "hang": (_custom("while True:\n            pass"), [], [_t(8, 64)]),
    "syntax": ("import torch\nclass Model(:\n    pass\n", [], [_t(8, 64)]),
    "raises": (_custom("return x @ torch.ones(3, 3)"), [], [_t(8, 64)]),
}
EXPECTED = {"dropout": "non_deterministic", "zeros": "input_insensitive", "inf": "non_finite_output",
            "hang": "timeout", "syntax": "load_error", "raises": "forward_fails"}


def _rows(problems: dict) -> pl.DataFrame:
    rows = []
    for name, (src, init, spec) in problems.items():
        rows.append({"problem_id": f"p_{name}", "name": f"test.{name}", "code": assemble(src, spec, init),
                     "init_args": json.dumps(init), "input_spec": json.dumps(spec),
                     "source": source_struct(kind="test", name="t", class_name=name)})
    return pl.DataFrame(rows)


def _diversified(tmp_path, df: pl.DataFrame):
    empty = df.clear().with_columns(pl.lit("").alias("reject_stage"), pl.lit("").alias("reject_reason"),
                                    pl.lit("").alias("reject_detail"))
    write_stage(tmp_path, "diversify", df, empty, df.height, 0.0)
    return tmp_path


def test_stage_times_good_problems_and_rejects_bad_ones(tmp_path):
    df = _rows({**GOOD, **BAD})
    df = pl.concat([df, _rows({"badspec": GOOD["gelu"]}).with_columns(pl.lit("{oops").alias("input_spec"))])
    out = _diversified(tmp_path, df)
    # measure's own checks (the harness check before them has its reasons, see test_conform)
    stats = run(out, device="cpu", trials=10, warmup=2, timeout_s=8, workers=2, conform=False)

    assert stats["in"] == df.height == stats["kept"] + stats["rejected"]
    kept = read_problems(out / "measure")
    rej = read_rejected(out / "measure")
    assert sorted(kept["problem_id"]) == sorted(f"p_{n}" for n in GOOD)
    reasons = dict(zip(rej["problem_id"], rej["reject_reason"]))
    assert reasons == {**{f"p_{k}": v for k, v in EXPECTED.items()}, "p_badspec": "bad_input_spec"}
    assert stats["rejected_by_reason"]["timeout"] == 1

    for row in kept.iter_rows(named=True):
        assert row["eager_ms"] > 0 and row["eager_std_ms"] >= 0
        assert row["eager_p10_ms"] <= row["eager_ms"] <= row["eager_p90_ms"]
        assert 3 <= row["trials"] <= 10
        assert row["device"] == "cpu" and row["gpu"] is None
        assert row["torch_version"] == torch.__version__
        assert row["compile_ms"] is None and row["inductor_speedup"] is None
        assert row["peak_mem_mb"] >= 0
    # the original columns travel with the new ones
    assert {"code", "input_spec", "source", "eager_ms", "compile_s"} <= set(kept.columns)
    assert not (out / "measure" / "_journal.jsonl").exists()


def test_gpu_busy_share_marks_host_bound_rows():
    from curate.measure.stage import result_columns

    def result(gpu_us, eager_ms):
        prof = None if gpu_us is None else {"library_share": 0.0, "kernels": 40, "gpu_us": gpu_us,
                                            "library_us": 0.0, "top": []}
        return {"eager": {"median_ms": eager_ms, "n": 20}, "profile": prof}

    # 0.2 ms of kernels in a 1 ms forward: host-bound
    assert result_columns(result(200.0, 1.0))["gpu_busy_share"] == pytest.approx(0.2)
    # the profiled call runs with a warm L2, the timed ones after a flush: capped at 1
    assert result_columns(result(1500.0, 1.0))["gpu_busy_share"] == 1.0
    assert result_columns(result(None, 1.0))["gpu_busy_share"] is None
    # a CPU run has no profile: the column is empty, not zero
    res = measure_problem(*_problem_args("gelu"), device="cpu", trials=3, warmup=1)
    assert res["profile"] is None and result_columns(res)["gpu_busy_share"] is None


def _problem_args(name):
    src, init, spec = GOOD[name]
    return assemble(src, spec, init), spec, init


def test_runtime_band(tmp_path):
    out = _diversified(tmp_path, _rows({"gelu": GOOD["gelu"]}))
    s = run(out, device="cpu", trials=5, min_ms=1e6, timeout_s=60)
    assert s["rejected_by_reason"] == {"too_fast": 1}
    rej = read_rejected(out / "measure")
    assert rej["eager_ms"][0] > 0  # the measured time is kept on the rejected row
    s = run(out, device="cpu", trials=5, max_ms=1e-9, timeout_s=60)
    assert s["rejected_by_reason"] == {"too_slow": 1}


def test_checks_in_process_on_real_modules():
    # RReLU samples its slopes in training mode: two calls differ
    code = assemble(_module("nn.RReLU"), [_t(4, 64)], [])
    r = measure_problem(code, [_t(4, 64)], [], trials=3, warmup=1)
    assert r["reason"] == "non_deterministic" and r["eager"] is None
    # softmax over 200k entries: every output ~5e-6, within KernelBench's elementwise 1e-4 of
    # zeros, but no constant passes the verifier's relative-L2 bound: kept, with its margin
    code = assemble(_custom("return torch.softmax(x, dim=-1)"), [_t(2, 200_000)], [])
    r = measure_problem(code, [_t(2, 200_000)], [], trials=3, warmup=1)
    assert r["reason"] is None and r["constant_margin"] > 100
    # softmax over a size-1 axis outputs ones whatever the input: a constant passes
    code = assemble(_custom("return torch.softmax(x, dim=1)"), [_t(8, 1, 4)], [])
    r = measure_problem(code, [_t(8, 1, 4)], [], trials=3, warmup=1)
    assert r["reason"] == "input_insensitive" and r["constant_margin"] == 0
    assert "margin 0" in r["detail"]
    # KernelBench level 2 #23: mean(GroupNorm(x)) is rounding noise around zero, judged by the
    # verifier's elementwise test alone, where zeros pass: input_insensitive, and says why
    code = kernelbench("23_Conv3d_GroupNorm_Mean", level=2)
    r = measure_problem(code, [_t(4, 3, 6, 8, 8)], [3, 8, 3, 4], trials=3, warmup=1)
    assert r["reason"] == "input_insensitive" and "rounding noise" in r["detail"], r["detail"]
    # with stop_on_reject=False the problem is still timed and every failed check is listed
    code = assemble(_custom("return torch.full_like(x, float('inf'))"), [_t(4, 8)], [])
    r = measure_problem(code, [_t(4, 8)], [], trials=3, warmup=1, stop_on_reject=False, min_ms=1e6)
    assert r["flags"] == ["non_finite_output", "input_insensitive", "too_fast"]
    assert r["reason"] == "non_finite_output" and r["eager"]["n"] == 3
    # without an input spec the problem's own get_inputs() is used
    code = assemble(_module("nn.Linear"), [_t(16, 64)], [64, 32])
    r = measure_problem(code, None, None, trials=3, warmup=1)
    assert r["reason"] is None and r["eager"]["median_ms"] > 0


SEGFAULT = _custom("import ctypes\n        ctypes.string_at(0)")


def test_persistent_worker_survives_crashes_and_hangs():
    good = assemble(*GOOD["linear"][:1], GOOD["linear"][2], GOOD["linear"][1])
    task = dict(code=good, input_spec=GOOD["linear"][2], init_args=GOOD["linear"][1], device="cpu",
                trials=3, warmup=1)
    crash = dict(task, code=assemble(SEGFAULT, [_t(8, 64)], []), input_spec=[_t(8, 64)], init_args=[])
    hang = dict(task, code=assemble(*BAD["hang"][:1], [_t(8, 64)], []), input_spec=[_t(8, 64)],
                init_args=[])
    # a problem that changes process-wide torch state must not change the next problem
    dtype_src = "import torch\ntorch.set_default_dtype(torch.float64)\n" + _module("nn.GELU")
    dtype = dict(task, code=assemble(dtype_src, [_t(8, 64)], []), input_spec=[_t(8, 64)], init_args=[])
    w = PersistentWorker(device="cpu")
    try:
        results = [w.measure(t, timeout_s=20 if t is not hang else 4)
                   for t in (task, crash, task, hang, dtype, task)]
    finally:
        w.close()
    assert [r["reason"] for r in results] == [None, "crash", None, "timeout", None, None]
    assert "SIGSEGV" in results[1]["detail"]
    assert all(r["eager"]["median_ms"] > 0 for r in results[::2])
    assert len(w.start_seconds) == 3  # first start + one fresh worker after each failure


def test_journal_resumes_only_with_the_same_settings(tmp_path):
    p = tmp_path / "j.jsonl"
    j = Journal(p, {"trials": 10})
    j.add("a", {"reason": None, "x": 1.5})
    j.add("b", {"reason": "timeout"})
    with p.open("a") as f:
        f.write('{"key": "c", "val')  # a write cut short by a kill
    again = Journal(p, {"trials": 10})
    assert again.resumed == 2 and again.get("a") == {"reason": None, "x": 1.5} and "c" not in again
    other = Journal(p, {"trials": 20})
    assert other.resumed == 0 and "a" not in other
    other.remove()
    assert not p.exists()


@pytest.mark.slow
def test_inductor_on_cpu_fills_compile_columns(tmp_path):
    out = _diversified(tmp_path, _rows({"gelu": GOOD["gelu"]}))
    stats = run(out, device="cpu", inductor=True, trials=5, warmup=1, timeout_s=240)
    assert stats["kept"] == 1, read_rejected(out / "measure")["reject_detail"].to_list()
    row = read_problems(out / "measure").row(0, named=True)
    assert row["compile_ms"] > 0 and row["compile_s"] > 0
    assert row["inductor_speedup"] == pytest.approx(row["eager_ms"] / row["compile_ms"])
    assert row["compile_error"] is None


def test_export_and_bench_on_cpu(tmp_path):
    out = _diversified(tmp_path, _rows({k: GOOD[k] for k in ("linear", "gelu")}))
    run(out, device="cpu", trials=5, warmup=1, timeout_s=60)
    path = tmp_path / "problems.jsonl"
    assert export_jsonl(out / "measure", path) == 2
    rows = load_problems(path)
    assert [r["input_spec"] for r in rows] == [GOOD["linear"][2], GOOD["gelu"][2]]
    assert all(r["eager_ms"] > 0 for r in rows)
    # pretend the measure stage's own figures are the published ones: the bench must find them
    baseline = {"level1": {r["problem_id"]: {"eager_ms": r["eager_ms"], "compile_ms": None} for r in rows}}
    for r in rows:
        r["kernelbench_name"] = r["problem_id"]
    summary = run_bench(rows, tmp_path / "bench", baseline, "cpu", 1, inductor=False, trials=5,
                        warmup=1, budget_s=None, timeout_s=60, checks=True, verbose=False)
    lines = [json.loads(x) for x in (tmp_path / "bench" / "results.jsonl").read_text().splitlines()]
    assert [x["problem_id"] for x in sorted(lines, key=lambda x: x["problem_id"])] == ["p_gelu", "p_linear"]
    assert summary["timed"] == 2 and summary["eager"]["n"] == 2
    assert summary["throughput"]["overhead_seconds_per_problem"] > 0
    assert summary["throughput"]["problems_per_hour_eager_path"] > 0
    assert summary["throughput"]["problems_per_hour_end_to_end"] > 0
    assert "test.linear" in (tmp_path / "bench" / "table.txt").read_text()
    # a plain loop's records for the same problems: 10% slower on one, equal on the other
    results = [x for x in lines]
    loop = {x["name"]: {"name": x["name"], "median_ms": x["eager"]["median_ms"] * f, "wall_seconds": 5.0}
            for x, f in zip(results, (1 / 1.1, 1.0))}
    cmp = compare_with_loop(results, loop, wall_s=2.0)
    assert cmp["n"] == 2 and cmp["median_abs_deviation"] == pytest.approx(0.05)
    assert cmp["within_5pct"] == 0.5
    assert cmp["throughput_ratio"] == pytest.approx((3600 * 2 / 2.0) / (3600 * 2 / 10.0))


def test_gpu_side_modules_import_only_torch_and_stdlib():
    """The GPU machine lacks polars, datasets, libcst...: the worker, the benchmark script and
    diversify's planning and calibration tasks must not pull them in."""
    code = ("import sys, curate.bench.measure, curate.bench.kernelbench_loop, curate.measure.core, "
            "curate.measure.worker, curate.measure.compile_ahead, curate.measure.gpu_lock, "
            "curate.measure.profile, curate.verify.worker, curate.diversify.plan, "
            "curate.diversify.calibrate, curate.diversify.calibrate_pool, curate.measure.torch_state, "
            "curate.bench.multigpu, curate.measure.cluster, curate.verify.pool, "
            "curate.verify.cluster\n"
            "bad = {'polars', 'datasets', 'libcst', 'datasketch', 'typer', 'rich', 'yaml', 'pyarrow'}\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & bad))")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)}, check=True)
    assert out.stdout.strip() == "[]"


def test_interrupted_stage_resumes_from_its_journal(tmp_path):
    """Ctrl-C during the third problem (a hang), then a restart: the two finished problems are
    taken from the journal, not measured again, and every row is accounted for."""
    import signal
    import time

    out = _diversified(tmp_path, _rows({"gelu": GOOD["gelu"], "linear": GOOD["linear"],
                                        "hang": BAD["hang"]}))
    root = Path(__file__).resolve().parents[1]
    script = ("from curate.measure import run\n"
              f"run({str(out)!r}, device='cpu', trials=5, warmup=1, timeout_s=6)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=root, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(root)})
    journal = out / "measure" / "_journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 3:  # header + 2 results
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    assert not (out / "measure" / "stats.json").exists()
    before = {json.loads(x)["value"]["eager"]["median_ms"] for x in journal.read_text().splitlines()[1:]}
    assert len(before) == 2

    stats = run(out, device="cpu", trials=5, warmup=1, timeout_s=6)
    assert stats["resumed"] == 2
    assert stats["in"] == 3 and stats["kept"] == 2 and stats["rejected_by_reason"] == {"timeout": 1}
    assert set(read_problems(out / "measure")["eager_ms"]) == before
    assert not journal.exists()


def test_bench_times_a_kernelbench_problem_against_published_figures(tmp_path):
    from conftest import KERNELBENCH_JSONL

    from curate.bench.measure import load_kernelbench, main

    if not KERNELBENCH_JSONL.exists():
        pytest.skip("KernelBench data not present")
    baseline_path = KERNELBENCH_JSONL.parent / "baseline_times_h100.json"
    rows = load_kernelbench(KERNELBENCH_JSONL, 3, ["4_LeNet5"])
    assert len(rows) == 1 and rows[0]["input_spec"] is None  # inputs come from get_inputs()
    rc = main(["--kernelbench", str(KERNELBENCH_JSONL), "--baseline", str(baseline_path),
               "--level", "3", "--names", "4_LeNet5", "--out", str(tmp_path), "--device", "cpu",
               "--trials", "3", "--warmup", "1", "--no-inductor", "--quiet"])
    assert rc == 0
    rec = json.loads((tmp_path / "results.jsonl").read_text())
    published = json.loads(baseline_path.read_text())["level3"]["4_LeNet5"]
    assert rec["published"] == published
    assert rec["reason"] is None and rec["eager"]["n"] == 3
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["eager"]["n"] == 1
    assert summary["eager"]["median_ratio_mean_to_published"] == pytest.approx(
        rec["eager"]["mean_ms"] / published["eager_ms"])


TRITON_PROBLEM = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


class Model(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        _double[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
        return out


def get_inputs():
    return [torch.randn(100)]


def get_init_inputs():
    return []
'''


def test_a_problem_with_a_triton_kernel_loads_and_runs_from_its_code_string():
    # Triton's @jit (compiled mode, as on a GPU) reads the kernel's source with inspect; code
    # executed from a string has none unless the loader registers it (on the H100 this was a
    # load_error). Decorating needs no GPU; running it here needs the interpreter.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    compiled_mode = subprocess.run(
        [sys.executable, "-c", "import sys; from curate.problem import load_problem\n"
         "ns = load_problem(sys.stdin.read(), 'triton_double'); print(type(ns['_double']).__name__)"],
        input=TRITON_PROBLEM, capture_output=True, text=True, timeout=300, env=env)
    assert compiled_mode.stdout.strip() == "JITFunction", compiled_mode.stderr[-2000:]
    child = subprocess.run(
        [sys.executable, "-c",
         "import sys, torch; from curate.problem import load_problem\n"
         "ns = load_problem(sys.stdin.read(), 'triton_double')\n"
         "x = ns['get_inputs']()[0]\n"
         "assert torch.equal(ns['Model']()(x), x * 2)\nprint('ok')\n"],
        input=TRITON_PROBLEM, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TRITON_INTERPRET": "1"})
    assert child.stdout.strip() == "ok", child.stderr[-2000:]


def test_a_base_problem_left_with_too_few_shapes_loses_its_rows():
    """Rows a measurement keeps, whose base problem lost its primary shape or fell under the
    shapes wanted, are rejected too_few_shapes, not exported as an incomplete problem."""
    from curate.measure.stage import _hold_to_shapes
    from curate.table import Rejections

    def row(base, v):
        return {"problem_id": f"{base}~v{v}", "base_problem_id": base, "variant": v,
                "shape_role": "primary" if v == 0 else "spread"}

    rows = [row(b, v) for b in ("full", "short", "headless") for v in range(3)] + [{"problem_id": "plain"}]
    kept = [r for r in rows if r["problem_id"] not in ("short~v2", "headless~v0")]
    rej = Rejections("measure")
    out = _hold_to_shapes(kept, rows, rej, 3)
    assert [r["problem_id"] for r in out] == ["full~v0", "full~v1", "full~v2", "plain"]
    frame = rej.frame()
    assert sorted(frame["problem_id"]) == ["headless~v1", "headless~v2", "short~v0", "short~v1"]
    assert set(frame["reject_reason"]) == {"too_few_shapes"}
    assert _hold_to_shapes(kept, rows, Rejections("measure"), 2) != out  # two shapes and a primary do


def test_shape_variants_at_their_mined_shape_share_one_measurement(tmp_path):
    """On the CPU, GPU-sized shape variants are all run at the base problem's mined shape: one
    program at one shape, measured once, its result given to every variant row."""
    src, init, spec = GOOD["gelu"]
    rows = []
    for v, batch in enumerate((4096, 8192, 16384)):
        big = [_t(batch, 256)]
        rows.append({"problem_id": f"gelu~v{v}", "base_problem_id": "gelu", "variant": v,
                     "shape_role": "primary" if v == 0 else "spread", "name": "test.gelu",
                     "code": assemble(src, big, init), "init_args": json.dumps(init),
                     "input_spec": json.dumps(big), "shape_source": "estimated",
                     "mined_input_spec": json.dumps(spec), "mined_init_args": json.dumps(init),
                     "source": source_struct(kind="test", name="t", class_name="gelu")})
    out = _diversified(tmp_path, pl.DataFrame(rows))
    stats = run(out, device="cpu", trials=5, warmup=1, timeout_s=30, workers=1)
    assert stats["kept"] == 3 and stats["rows_sharing_a_measurement"] == 2
    kept = read_problems(out / "measure")
    assert kept["eager_ms"].n_unique() == 1  # the same measurement, not three
    assert all("timed_at_mined_shape" in notes for notes in kept["measure_notes"])
