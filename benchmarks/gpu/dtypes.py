"""Precision variants on a GPU (issue 36): a sample of the default run's problems diversified
and measured in float32 and bfloat16, KernelBench's softmax and cross-entropy measured in
both, and the reward on honest and dishonest candidates in each precision.

On the CPU machine, once, from a finished default run (``curate run pipelines/default.yaml
--out runs/default``)::

    python benchmarks/gpu/dtypes.py prepare runs/default/dedup runs/gpu-dtypes 36

writes ``runs/gpu-dtypes/dedup`` (36 base problems drawn with a fixed seed, and torch's ReLU
and MSELoss for the reward checks). On the GPU machine, from the repository root, with that
folder and the polars wheels carried in ``.whl`` (``bash benchmarks/gpu/dtypes.sh``, at most
8 minutes on one H200)::

    python3 benchmarks/gpu/dtypes.py run runs/gpu-dtypes

runs, each phase in a process group of its own cut at its time limit:

1. ``diversify --device cuda --dtypes fp32,bf16`` (the default pipeline's other options, the
   band aimed at the GPU it runs on), then ``measure --device cuda`` (the stage's CUDA
   defaults: eager, TorchInductor, conformance, the constant-answer test, rows held to the
   band);
2. KernelBench level 1 ``23_Softmax`` and ``95_CrossEntropyLoss`` at KernelBench's own sizes,
   in float32 and bfloat16 (rows with a ``dtype`` column), through ``measure --from``;
3. the reward (:func:`curate.reward.compute_score`, as a trainer calls it with the verl view's
   ``extra_info``) on: the honest Triton ReLU and softmax (``tests/candidates``) against
   bfloat16 and float32 problems, ``relu_fp16`` (a ReLU computed in float16 inside) against
   the float32 ReLU, and, on the sample's rows, the honest ReLU against the exported bfloat16
   ReLU row and a constant answer against the exported bfloat16 loss rows.

Files in ``$OUT`` (six at most): ``dtypes-summary.json`` (the figures of
``benchmarks/h200-dtypes.md``), ``candidates.json``, ``rows.parquet`` (measure's kept and
rejected rows without code, and KernelBench's), ``diversify-rejected.parquet`` and ``run.log``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(os.environ.get("OUT", "out-gpu"))
#: ``DTYPES_SMOKE=1`` runs the same code on the CPU (float16 for bfloat16, which Triton's
#: interpreter computes wrongly; small candidate shapes; KernelBench's softmax at 16 rows): a
#: check of this script before a device call, not a measurement.
SMOKE = os.environ.get("DTYPES_SMOKE") == "1"
DEVICE, HALF = ("cpu", "float16") if SMOKE else ("cuda", "bfloat16")
SHORT = {"bfloat16": "bf16", "float16": "fp16"}[HALF]
#: Seconds each phase may take: with the reward checks (about a minute) the call stays under
#: 8 minutes, within a device call's 10.
LIMITS = {"diversify": 170, "measure": 140, "kernelbench": 110}
SEED = 36


#: Problems the sample always holds besides its draw: the reward checks score an honest ReLU
#: and a constant loss on their exported bfloat16 rows.
ALWAYS = ("torch.ReLU", "torch.MSELoss")


def prepare(dedup: str, run: str, n: int) -> None:
    """``n`` base problems of a dedup table drawn with :data:`SEED`, and those of
    :data:`ALWAYS`, into ``run/dedup``."""
    import polars as pl

    from curate.table import read_problems, write_stage

    df = read_problems(Path(dedup))
    ids = sorted(df.filter(~pl.col("name").is_in(ALWAYS))["problem_id"].to_list())
    random.Random(SEED).shuffle(ids)
    part = df.filter(pl.col("problem_id").is_in(ids[:n]) | pl.col("name").is_in(ALWAYS))
    empty = part.clear().with_columns(pl.lit("").alias("reject_stage"), pl.lit("").alias("reject_reason"),
                                      pl.lit("").alias("reject_detail"))
    write_stage(Path(run), "dedup", part, empty, part.height, 0.0)
    print(f"{part.height} problems -> {run}/dedup")


STAGES = """import os
import sys
import types
from pathlib import Path
try:
    import rich.progress  # noqa: F401
except ImportError:  # off a terminal the stages' progress prints plain lines and never uses rich
    stub = types.ModuleType("rich.progress")
    for n in ("BarColumn", "MofNCompleteColumn", "Progress", "TextColumn", "TimeElapsedColumn",
              "TimeRemainingColumn"):
        setattr(stub, n, None)
    sys.modules["rich"], sys.modules["rich.progress"] = types.ModuleType("rich"), stub
if __name__ == "__main__":
    phase, run, gpu, device, half = sys.argv[1:6]
    if phase == "diversify":
        from curate.diversify import run as diversify
        diversify(run, variants=3, band_ms=[0.5, 10.0], target_gpu=gpu, mem_budget_mb=4096,
                  device=device, dtypes="fp32," + half)
    elif phase == "measure":
        from curate.measure import run as measure
        measure(run, device=device)
    else:
        from curate.measure import run as measure
        measure(run, source=Path(run) / "kb.parquet", device=device)
"""


def _phase(name: str, args: list[str], log) -> dict:
    """Run one phase in its own process group, killed at its limit."""
    t = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", STAGES, name, *args, DEVICE, HALF], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc = proc.wait(timeout=LIMITS[name])
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rc = "timeout"
    return {"rc": rc, "seconds": round(time.monotonic() - t, 1)}


def _stats(d: Path) -> dict:
    p = d / "stats.json"
    return json.loads(p.read_text()) if p.exists() else {}


def _slim(df):
    return df.drop([c for c in ("code",) if c in df.columns])


def _kernelbench_rows(run: Path) -> None:
    """KernelBench level 1 #23 and #95 as a measure input: one row per precision, the
    problems' own code and inputs (no input spec)."""
    import polars as pl

    from curate.data import KERNELBENCH_PROBLEMS

    rows = []
    for line in open(KERNELBENCH_PROBLEMS):
        rec = json.loads(line)
        if rec["level"] == 1 and rec["problem_id"] in (23, 95):
            if SMOKE:  # 6.4 GB of softmax input is past a CPU worker's 8 GiB
                rec["code"] = rec["code"].replace("batch_size = 4096", "batch_size = 16")
            for d in ("float32", HALF):
                rows.append({"problem_id": f"kb1_{rec['problem_id']}" + ("" if d == "float32" else "~" + SHORT),
                             "name": rec["name"], "code": rec["code"], "dtype": d,
                             "base_problem_id": f"kb1_{rec['problem_id']}",
                             "input_spec": None, "init_args": None})  # the problems' own inputs
    pl.DataFrame(rows, schema_overrides={"input_spec": pl.String, "init_args": pl.String}).write_parquet(
        run / "kb.parquet")


def _best_constant(code: str, r: dict) -> float | None:
    """The mean of a loss row's reference output over 8 draws in bfloat16 on the GPU: the
    best constant a policy could learn (None for an output of more than one element)."""
    import torch

    from curate.problem import build_inputs, cast_floating, load_problem

    ns = load_problem(code)
    init = json.loads(r["init_args"] or "[]")
    outs = []
    for k in range(8):
        torch.manual_seed(100 + k)
        model = ns["Model"](*init).to(DEVICE).to(getattr(torch, HALF))
        with torch.no_grad():
            out = model(*cast_floating(build_inputs(json.loads(r["input_spec"]), DEVICE, seed=200 + k), HALF))
        if not isinstance(out, torch.Tensor) or out.numel() != 1:
            return None
        outs.append(float(out))
    return sum(outs) / len(outs)


def _reward_checks(run: Path, rows) -> list[dict]:
    """The reward on honest and dishonest candidates (the module docstring, step 3)."""
    sys.path.insert(0, "tests")
    from verify_fixtures import candidate, kernelbench, reply

    from curate.reward import compute_score

    def spec(shape, dtype):
        return json.dumps([{"kind": "tensor", "shape": shape, "dtype": dtype}])

    relu, softmax = kernelbench("19_ReLU"), kernelbench("23_Softmax")
    wide, rows_of = ([4, 250], [4, 1500]) if SMOKE else ([4096, 16384], [4096, 8192])
    # (candidate name, its text, problem, reference code, extra_info, correct expected)
    cases = []
    for d in (HALF, "float32"):
        cases += [("relu_triton", candidate("relu_triton"), f"19_ReLU {d}", relu,
                   {"input_spec": spec(wide, d), "dtype": d}, True),
                  ("softmax_triton", candidate("softmax_triton"), f"23_Softmax {d}", softmax,
                   {"input_spec": spec(rows_of, d), "dtype": d}, True)]
    cases.append(("relu_fp16", candidate("relu_fp16"), "19_ReLU float32", relu,
                  {"input_spec": spec(wide, "float32"), "dtype": "float32"}, False))
    if rows is not None:
        code = dict(_codes(run))
        kept = rows.filter(rows["reject_reason"].is_null() & (rows["dtype"] == HALF) & (rows["variant"] == 0))
        for r in kept.iter_rows(named=True):
            info = {k: r.get(k) for k in ("init_args", "input_spec", "shape_variants", "dtype", "eager_ms", "gpu")}
            short = r["name"].rsplit(".", 1)[-1]
            if short == "ReLU":
                cases.append(("relu_triton", candidate("relu_triton"), r["name"], code[r["problem_id"]], info, True))
            elif short.endswith("Loss") and len(json.loads(r["input_spec"])) == 2:
                value = _best_constant(code[r["problem_id"]], r)
                if value is not None:
                    text = candidate("loss_constant").replace("VALUE = 0.0", f"VALUE = {value!r}")
                    cases.append(("loss_constant", text, r["name"], code[r["problem_id"]], info, False))
    results = []
    for name, text, problem, ref, info, expect in cases:
        t = time.monotonic()
        try:
            got = compute_score("curate/dtypes", reply(text), ref, info)
        except Exception as exc:  # reported, not fatal: the other checks go on
            got = {"correct": None, "reason": f"{type(exc).__name__}: {exc}"}
        results.append({"candidate": name, "problem": problem, "dtype": info.get("dtype"),
                        "expected_correct": expect, "correct": got.get("correct"),
                        "as_expected": got.get("correct") == expect, "score": got.get("score"),
                        "speedup_vs_eager": got.get("speedup_vs_eager"), "reason": got.get("reason"),
                        "seconds": round(time.monotonic() - t, 1)})
        print(json.dumps(results[-1]), flush=True)
    return results


def _codes(run: Path):
    import polars as pl

    d = run / "measure" / "problems"
    for f in d.glob("*.parquet"):
        yield from pl.read_parquet(f).select("problem_id", "code").iter_rows()


def figures(run: Path, phases: dict, gpu: str) -> dict:
    """The report's figures from the stage tables."""
    import polars as pl

    div, mea = _stats(run / "diversify"), _stats(run / "measure")
    kb = _stats(run / "kb" / "measure") if (run / "kb").exists() else {}
    frames = []
    for stage in ("problems", "rejected"):
        for f in (run / "measure" / stage).glob("*.parquet"):
            frames.append(_slim(pl.read_parquet(f)))
    rows = pl.concat(frames, how="diagonal_relaxed") if frames else None
    out: dict = {"gpu": gpu, "phases": phases, "diversify": {k: div.get(k) for k in (
        "in", "problems_in", "kept", "rejected", "rows_out", "kept_by_dtype", "rejected_by_reason",
        "input_repairs", "seconds", "gpu")}, "measure": {k: mea.get(k) for k in (
            "in", "kept", "rejected", "rejected_by_reason", "seconds", "share_in_band", "per_gpu")}}
    if rows is not None:
        if "reject_reason" not in rows.columns:
            rows = rows.with_columns(pl.lit(None, dtype=pl.String).alias("reject_reason"))
        kept = rows.filter(pl.col("reject_reason").is_null())
        inband = kept.filter((pl.col("eager_ms") >= pl.col("band_lo_ms")) & (pl.col("eager_ms") <= pl.col("band_hi_ms")))
        bases = kept["base_problem_id"].n_unique()
        with_bf16 = inband.filter(pl.col("dtype") == HALF)["base_problem_id"].n_unique()
        out["export"] = {
            "base_problems": bases, "base_problems_with_bf16_in_band": with_bf16,
            "share_with_bf16_in_band": with_bf16 / bases if bases else None,
            "sampled_problems": div.get("problems_in"),
            "rows_per_dtype": {d: n for d, n in kept.group_by("dtype").len().iter_rows()},
            "rows_in_band_per_dtype": {d: n for d, n in inband.group_by("dtype").len().iter_rows()},
            "rejected_per_dtype_reason": [list(x) for x in rows.filter(pl.col("reject_reason").is_not_null())
                                          .group_by("dtype", "reject_reason").len().sort("len", descending=True)
                                          .iter_rows()],
            "eager_ms_median_per_dtype": {d: m for d, m in kept.group_by("dtype").agg(
                pl.col("eager_ms").median()).iter_rows()},
            "inductor_speedup_median_per_dtype": {d: m for d, m in kept.group_by("dtype").agg(
                pl.col("inductor_speedup").median()).iter_rows()},
            "constant_margin_min_per_dtype": {d: m for d, m in kept.group_by("dtype").agg(
                pl.col("constant_margin").min()).iter_rows()},
        }
        pairs = kept.filter(pl.col("variant") == 0).select("base_problem_id", "dtype", "eager_ms")
        wide = pairs.pivot(on="dtype", index="base_problem_id", values="eager_ms")
        if {"float32", HALF} <= set(wide.columns):
            both = wide.drop_nulls(["float32", HALF])
            out["export"]["primary_bf16_over_fp32_eager_ms_median"] = (
                (both[HALF] / both["float32"]).median() if both.height else None)
    kbrows = None
    if (run / "kb" / "measure").exists():
        fr = [pl.read_parquet(f) for s in ("problems", "rejected") for f in (run / "kb" / "measure" / s).glob("*.parquet")]
        if fr:
            kbrows = pl.concat([_slim(f) for f in fr], how="diagonal_relaxed")
            if "reject_reason" not in kbrows.columns:
                kbrows = kbrows.with_columns(pl.lit(None, dtype=pl.String).alias("reject_reason"))
            out["kernelbench"] = [{k: r.get(k) for k in ("problem_id", "name", "dtype", "reject_reason", "reject_detail",
                                                         "eager_ms", "compile_ms", "constant_margin")}
                                  for r in kbrows.iter_rows(named=True)]
    out["kernelbench_stats"] = {k: kb.get(k) for k in ("in", "kept", "rejected", "rejected_by_reason")}
    both = [f for f in (rows, kbrows) if f is not None]
    if both:
        pl.concat(both, how="diagonal_relaxed").write_parquet(OUT / "rows.parquet")
    rej = [pl.read_parquet(f) for f in (run / "diversify" / "rejected").glob("*.parquet")]
    if rej:
        _slim(pl.concat(rej, how="diagonal_relaxed")).write_parquet(OUT / "diversify-rejected.parquet")
    return out, rows


def run_all(run: str) -> None:
    import torch

    OUT.mkdir(parents=True, exist_ok=True)
    run_dir = Path(run)
    name = "cpu (smoke)" if SMOKE else torch.cuda.get_device_name(0)
    gpu = "h200" if "H200" in name else "a100" if "A100" in name else "h100"
    phases = {}
    for stage in ("diversify", "measure"):
        shutil.rmtree(run_dir / stage, ignore_errors=True)
    with open(OUT / "run.log", "a") as log:
        phases["diversify"] = _phase("diversify", [str(run_dir), gpu], log)
        if (run_dir / "diversify" / "stats.json").exists():
            phases["measure"] = _phase("measure", [str(run_dir), gpu], log)
        kb = run_dir / "kb"
        shutil.rmtree(kb, ignore_errors=True)
        kb.mkdir(parents=True)
        _kernelbench_rows(kb)
        phases["kernelbench"] = _phase("kernelbench", [str(kb), gpu], log)
    summary, rows = figures(run_dir, phases, name)
    (OUT / "dtypes-summary.json").write_text(json.dumps(summary, indent=1, default=str))
    t = time.monotonic()
    results = _reward_checks(run_dir, rows)
    phases["candidates"] = {"seconds": round(time.monotonic() - t, 1)}
    (OUT / "candidates.json").write_text(json.dumps(results, indent=1, default=str))
    summary["candidates_as_expected"] = sum(bool(r["as_expected"]) for r in results)
    summary["candidates"] = len(results)
    (OUT / "dtypes-summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({k: summary.get(k) for k in ("gpu", "phases", "export", "candidates_as_expected",
                                                  "candidates")}, indent=1, default=str))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) >= 2 and sys.argv[1] == "run":
        run_all(sys.argv[2] if len(sys.argv) > 2 else "runs/gpu-dtypes")
    else:
        sys.exit(__doc__)
