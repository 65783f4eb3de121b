"""KernelBench-format files as problems with their own inputs (curate.mine.kernelbench), on
KernelBench's own files shipped in curate/data/kernelbench: inputs read on the meta device
(gigabytes cost nothing), a CPU-sized shape, and the stages after mine."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
import torch

from curate.data import kernelbench_problems
from curate.mine.kernelbench import (CPU_FLOPS, CPU_PEAK_BYTES, input_spec_of, is_kernelbench_file,
                                     kernelbench_task, module_body)
from curate.problem import build_inputs, load_problem, parse_input_spec, render_inputs, spec_bytes
from curate.table import read_problems, read_rejected, read_stats

KB = {r["name"]: r for r in kernelbench_problems()}


def _spec(name: str) -> list[dict]:
    return input_spec_of(load_problem(KB[name]["code"])["get_inputs"])


def test_input_specs_read_on_meta():
    # 4096 x 4096 fp32 inputs of torch.rand: uniform, 64 MiB each, never allocated here
    sq = _spec("1_Square_matrix_multiplication_")
    assert sq == [{"kind": "tensor", "shape": [4096, 4096], "dtype": "float32", "unit_interval": True}] * 2
    assert _spec("13_Matmul_for_symmetric_matrices")[0]["then"] == [["symmetric"], ["mul", 0.5]]
    assert _spec("14_Matmul_for_upper_triangular_matrices")[0]["then"] == [["triu", 0]]
    cumsum = _spec("93_masked_cumsum")
    assert cumsum[1] == {"kind": "mask", "shape": cumsum[0]["shape"], "dtype": "bool"}
    kl = _spec("98_KLDivLoss")
    assert kl[0]["then"] == [["mul_rand"], ["softmax", -1]] and kl[1]["then"] == [["softmax", -1]]
    hinge = _spec("100_HingeLoss")
    assert hinge[1]["kind"] == "index" and hinge[1]["high"] == 2
    assert hinge[1]["then"] == [["float"], ["mul", 2.0], ["add", -1.0]]
    # the gigabytes the files ask for
    assert spec_bytes(cumsum) > 2**30


def test_then_steps_build_and_render_the_same_inputs():
    spec = [{"kind": "tensor", "shape": [6, 6], "unit_interval": True, "then": [["symmetric"], ["mul", 0.5]]},
            {"kind": "tensor", "shape": [5, 5], "then": [["triu", 0]]},
            {"kind": "tensor", "shape": [3, 7], "unit_interval": True, "then": [["mul_rand"], ["softmax", -1]]},
            {"kind": "index", "shape": [50], "high": 2, "then": [["float"], ["mul", 2.0], ["add", -1.0]]}]
    sym, up, probs, sign = build_inputs(spec, seed=0)
    assert torch.equal(sym, sym.T) and torch.equal(up, torch.triu(up))
    assert torch.allclose(probs.sum(-1), torch.ones(3)) and set(sign.unique().tolist()) <= {-1.0, 1.0}
    assert [s.to_dict() for s in parse_input_spec(spec)] == spec  # the JSON round trip keeps them
    ns: dict = {}
    exec("import torch\n" + render_inputs(spec, []), ns)
    r_sym, r_up, r_probs, r_sign = ns["get_inputs"]()
    assert torch.equal(r_sym, r_sym.T) and torch.equal(r_up, torch.triu(r_up))
    assert torch.allclose(r_probs.sum(-1), torch.ones(3)) and set(r_sign.unique().tolist()) <= {-1.0, 1.0}
    # on meta: shapes only, no generator needed
    assert [tuple(x.shape) for x in build_inputs(spec, "meta", seed=0)] == [(6, 6), (5, 5), (3, 7), (50,)]
    with pytest.raises(ValueError, match="unknown 'then' step"):
        parse_input_spec([{"kind": "tensor", "shape": [2], "then": [["exp"]]}])
    with pytest.raises(ValueError, match="number"):
        parse_input_spec([{"kind": "tensor", "shape": [2], "then": [["mul"]]}])


def test_file_shape_and_module_body():
    code = KB["19_ReLU"]["code"]
    assert is_kernelbench_file(code) and not is_kernelbench_file(code.replace("def get_init_inputs", "def other"))
    body = module_body(code)
    assert "class Model" in body and "def get_inputs" not in body and "def get_init_inputs" not in body


@pytest.mark.parametrize("name", ["2_Standard_matrix_multiplication_", "93_masked_cumsum",
                                  "1_Conv2D_ReLU_BiasAdd"])
def test_kernelbench_task_keeps_the_file_sizes_and_finds_a_cpu_shape(name):
    from curate.sandbox import Sandbox

    # in a sandbox of 3 GiB: the file's inputs (up to 4 GiB) are never built on the CPU
    outcome = Sandbox(workers=1, timeout_s=120, mem_mb=3072, guard=True).run(kernelbench_task, KB[name]["code"], 90.0)
    assert outcome.ok, outcome
    out = outcome.value
    assert out["ok"], out
    assert out["input_spec"] == _spec(name)
    small = out["mined_input_spec"]
    assert spec_bytes(small) < spec_bytes(out["input_spec"]) and spec_bytes(small) <= CPU_PEAK_BYTES
    assert out["cpu_shape"]["fits"] and out["cpu_shape"]["flops"] <= CPU_FLOPS
    assert out["checked_torch"].endswith("@cpu")
    ns = load_problem(out["code"])
    assert json.loads(json.dumps(out["init_args"])) == ns["get_init_inputs"]()


def _kb_folder(root: Path, names: list[str]) -> Path:
    for n in names:
        r = KB[n]
        path = root / f"level{r['level']}" / f"{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(r["code"])
    (root / "level1" / "helpers.py").write_text("import torch\n\ndef scale(x):\n    return 2 * x\n")
    (root / "level1" / "broken.py").write_text(KB["19_ReLU"]["code"].replace("def get_init_inputs", "def init"))
    return root


@pytest.fixture(scope="module")
def kb_run(tmp_path_factory) -> Path:
    """``curate mine`` over a folder of three KernelBench files, a helper and a broken file."""
    from curate.mine import run

    out = tmp_path_factory.mktemp("kbrun")
    folder = _kb_folder(out / "problems", ["19_ReLU", "2_Standard_matrix_multiplication_",
                                           "12_Gemm_Multiply_LeakyReLU"])
    (out / "manifest.yaml").write_text(f"sources:\n  - {{kind: kernelbench, name: mykb, path: {folder}}}\n")
    run(manifest=out / "manifest.yaml", out=out, workers=2, timeout_s=30)
    return out


def test_mine_takes_a_kernelbench_folder(kb_run: Path):
    stats = read_stats(kb_run / "mine")
    assert (stats["in"], stats["kept"], stats["rejected"]) == (4, 3, 1)
    assert stats["sources"]["mykb"]["prefilter_skipped"] == 1  # the helper: no problem in it
    rej = read_rejected(kb_run / "mine").row(0, named=True)
    assert rej["reject_reason"] == "exec_fails" and "get_init_inputs" in rej["reject_detail"]
    kept = {r["name"]: r for r in read_problems(kb_run / "mine").iter_rows(named=True)}
    mm = kept["mykb/level1/2_Standard_matrix_multiplication_"]
    assert mm["shape_source"] == "source" and mm["source"]["kind"] == "kernelbench"
    assert json.loads(mm["input_spec"]) == _spec("2_Standard_matrix_multiplication_")
    assert spec_bytes(json.loads(mm["mined_input_spec"])) <= CPU_PEAK_BYTES
    gemm = kept["mykb/level2/12_Gemm_Multiply_LeakyReLU"]
    assert json.loads(gemm["init_args"]) == load_problem(KB["12_Gemm_Multiply_LeakyReLU"]["code"])["get_init_inputs"]()


def test_kernelbench_files_recognized_in_a_dir_source(tmp_path: Path):
    from curate.mine import run

    folder = _kb_folder(tmp_path / "src", ["19_ReLU"])
    (tmp_path / "m.yaml").write_text(f"sources:\n  - {{kind: dir, name: plain, path: {folder}}}\n")
    stats = run(manifest=tmp_path / "m.yaml", out=tmp_path, workers=1, timeout_s=30)
    kept = read_problems(tmp_path / "mine")
    assert stats["sources"]["plain"]["kernelbench_files"] == 1
    assert "plain/level1/19_ReLU" in kept["name"].to_list()
    # the broken file (no get_init_inputs) is not of that shape: its Model is a name conflict
    assert "name_conflict" in read_stats(tmp_path / "mine")["rejected_by_reason"]


def test_stages_after_mine_on_kernelbench_files(kb_run: Path, tmp_path: Path):
    from curate.dedup import run as dedup
    from curate.measure import run as measure
    from curate.rank import run as rank

    # decontamination still flags KernelBench's own problems
    dd = dedup(out=tmp_path / "d", source=kb_run / "mine", workers=1)
    assert dd["kept"] == 0 and dd["rejected_by_reason"] == {"contaminated": 3}
    # measure on the CPU runs each at its CPU shape, rank gives both columns to every row
    ms = measure(out=tmp_path, source=kb_run / "mine", trials=3, warmup=1)
    assert ms["kept"] == 3
    notes = read_problems(tmp_path / "measure")["measure_notes"].to_list()
    assert all("timed_at_mined_shape" in (n or "") for n in notes)
    rk = rank(out=tmp_path, workers=2)
    rows = read_problems(tmp_path / "rank")
    assert rk["kept"] == 3 and "unranked" not in rk["difficulty"]
    assert set(rows["difficulty_signal"]) == {"predicted"} and set(rows["headroom_signal"]) == {"static"}
    assert rows["difficulty_score"].is_between(0, 1).all() and rows["speedup_headroom"].is_between(0, 1).all()
    assert (rows["difficulty_score"] == 1 - rows["predicted_pass_rate"]).all()
    assert set(rows["level"]) == {1, 2}
    assert rows.filter(pl.col("name").str.contains("19_ReLU"))["category"].item() == "elementwise"


def test_rank_completions_of_published_kernels(kb_run: Path, tmp_path: Path):
    """Published model-written kernels for KernelBench problems (tests/data/model_kernels), named
    by KernelBench's level and problem, verified by curate's verifier on the mined rows at each
    file's CPU shape. Every published Triton kernel falls back to torch when its input is not on
    a GPU (``if x.is_cuda``), so on the CPU the verifier finds no kernel of its own: their
    verdicts need the GPU (benchmarks/gpu/kernelbench_rank.sh completions). An honest Triton
    ReLU named the same way passes under the interpreter."""
    from curate.rank import run as rank
    from verify_fixtures import candidate

    records = [json.loads(x) for x in (Path(__file__).parent / "data" / "model_kernels" / "kernels.jsonl")
               .read_text().splitlines() if x.strip()]
    relu = [r for r in records if r["problem_name"] == "19_ReLU" and r["level"] == 1 and r["backend"] == "triton"]
    assert relu and all(r["published"]["correct"] and "is_cuda" in r["code"] for r in relu)
    lines = [{"level": r["level"], "problem_name": r["problem_name"], "code": r["code"]} for r in relu]
    lines.append({"level": 1, "problem_id": 19, "completion": "```python\n" + candidate("relu_triton") + "```"})
    path = tmp_path / "published.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    stats = rank(out=tmp_path, source=kb_run / "mine", solver="completions", completions=path, workers=2,
                 timeout_s=300, device="cpu")
    rows = {r["name"].split("/")[-1]: r for r in read_problems(tmp_path / "rank").iter_rows(named=True)}
    got = rows["19_ReLU"]
    assert (got["n_candidates"], got["n_correct"]) == (len(relu) + 1, 1)
    assert stats["verify_reasons"].get("no custom kernel launched") == len(relu)
    assert got["difficulty_signal"] == "pass_rate" and got["difficulty_score"] == pytest.approx(len(relu) / (len(relu) + 1))
    # problems without a completion keep the predicted difficulty
    other = rows["2_Standard_matrix_multiplication_"]
    assert other["pass_rate"] is None and other["difficulty_signal"] == "predicted"


def test_predictor_parameters_match_the_features():
    """The shipped parameters read exactly the features curate.rank.features makes, and the
    predictor ranks every problem, code that does not parse included."""
    from curate.rank import predict
    from curate.rank.features import code_features, features
    from curate.structure import structure_task

    model = predict.load_model()
    code = KB["1_Square_matrix_multiplication_"]["code"]
    st = structure_task(code)
    assert set(model["full"]["features"]) == set(features(code, st))
    assert set(model["code_only"]["features"]) == set(code_features(code))
    p, how = predict.predict(code, st)
    assert how == "predicted" and 0 < p < 1 and predict.bucket(p, how) in ("easy", "medium", "hard")
    q, how = predict.predict("def broken(:\n", {"ok": False})
    assert how == "predicted_code" and 0 < q < 1
    # the published results: a single matmul is solved far more often than a single convolution
    conv = KB["63_conv_standard_2D__square_input__square_kernel"]["code"]
    assert p > predict.predict(conv, structure_task(conv))[0]



def test_level2_ordered_by_the_structural_score():
    """A level-2 problem's regression part comes from the structural score (library share and
    kernels traced), a higher score lower, blended with the trees; the other levels use the
    regression itself."""
    from curate.rank import predict
    from curate.rank.difficulty import static_score
    from curate.rank.features import features
    from curate.structure import structure_task

    full = predict.load_model()["full"]
    rule = full["level2_static"]
    got = []
    for name in ("12_Gemm_Multiply_LeakyReLU", "1_Conv2D_ReLU_BiasAdd", "100_ConvTranspose3d_Clamp_Min_Divide"):
        code = KB[name]["code"]
        st = structure_task(code)
        assert st["level"] == 2, (name, st.get("level"))
        p, how = predict.predict(code, st)
        part = predict.level2_probability(st["library_share"], st["kernels"], rule)
        assert part != predict.pass_probability(features(code, st), full)
        assert how == "predicted"
        assert p == predict.blend(part, predict.trees_probability(features(code, st), full["trees"]))
        got.append((static_score(st["library_share"], st["kernels"]), part))
    got.sort()
    assert [p for _, p in got] == sorted((p for _, p in got), reverse=True), got
    # level 1 takes the regression's own prediction
    code = KB["1_Square_matrix_multiplication_"]["code"]
    st = structure_task(code)
    x = features(code, st)
    assert predict.predict(code, st)[0] == predict.blend(predict.pass_probability(x, full),
                                                         predict.trees_probability(x, full["trees"]))


def test_shipped_trees_give_scikit_learn_probabilities():
    """The exported trees, evaluated in plain Python, give what scikit-learn's fitted classifier
    gave for the problems the fit recorded (features and probability written by the fit)."""
    from curate.rank import predict

    trees = predict.load_model()["full"]["trees"]
    assert len(trees["check"]) >= 3
    for c in trees["check"]:
        assert predict.trees_probability(c["features"], trees) == pytest.approx(c["pass_probability"], abs=1e-12)
    probs = [c["pass_probability"] for c in trees["check"]]
    assert max(probs) - min(probs) > 0.1  # the checks are not all one leaf's answer


def test_trees_probability_rules():
    """Left when the value is at most the threshold, a missing feature where the node says, a
    model indicator 1 for the model evaluated only, and the mean of the models' probabilities."""
    from curate.rank import predict

    trees = {"features": ["a", "b"], "models": ["m0", "m1"], "baseline": 0.5, "trees": [
        [[0, 1.0, False, 1, 2], [1.0], [-1.0]],               # a <= 1 -> +1, else -1; a missing -> right
        [[3, 0.5, True, 1, 2], [0.0], [2.0]],                 # model m1 -> +2
        [[1, 0.0, True, 1, 2], [0.25], [0.0]],                 # b <= 0 or missing -> +0.25
    ]}
    sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731

    def expected(first, third):
        return (sig(0.5 + first + 0.0 + third) + sig(0.5 + first + 2.0 + third)) / 2

    assert predict.trees_probability({"a": 1.0, "b": 3.0}, trees) == pytest.approx(expected(1.0, 0.0))
    assert predict.trees_probability({"a": 1.5, "b": 0.0}, trees) == pytest.approx(expected(-1.0, 0.25))
    assert predict.trees_probability({"b": math.nan}, trees) == pytest.approx(expected(-1.0, 0.25))
    assert predict.blend(0.5, 0.5) == pytest.approx(0.5)
    assert predict.blend(0.9, 0.1) == pytest.approx(0.5)
    assert predict.blend(sig(1.0), sig(3.0)) == pytest.approx(sig(2.0))


USER_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A user's own problem: a gated tanh with a per-row log-magnitude offset."""

    def __init__(self, dim, eps):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, dim))
        self.eps = eps

    def forward(self, x, y):
        return torch.tanh(x) * self.w + torch.log1p(y.abs()).mean(-1, keepdim=True) * self.eps


batch, seq, dim = 64, 512, 1024


def get_inputs():
    return [torch.randn(batch, seq, dim), torch.rand(batch, seq, dim) * 3]


def get_init_inputs():
    return [dim, 1e-3]
'''


def test_whole_pipeline_on_a_users_kernelbench_folder(tmp_path: Path):
    """A user's own KernelBench-format problem through every stage with `curate run`: kept by
    dedup (not KernelBench's), sized by diversify from its CPU shape, measured, ranked with both
    difficulty columns and exported."""
    from typer.testing import CliRunner

    from curate.cli import app

    folder = tmp_path / "mine_problems"
    folder.mkdir()
    (folder / "gated_tanh.py").write_text(USER_PROBLEM)
    (tmp_path / "m.yaml").write_text(f"sources:\n  - {{kind: kernelbench, name: user, path: {folder}}}\n")
    (tmp_path / "p.yaml").write_text(f"mine: {{manifest: {tmp_path / 'm.yaml'}, timeout_s: 30}}\n"
                                     "dedup: {}\n"
                                     "diversify: {variants: 2}\n"
                                     "measure: {trials: 3, budget_s: 0.05}\n"
                                     "rank: {}\n"
                                     "export: {name: user}\n")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(tmp_path / "p.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for stage in ("mine", "dedup", "diversify", "measure", "rank", "export"):
        stats = read_stats(out / stage)
        assert stats["kept"] + stats["rejected"] == stats["in"] and stats["kept"] >= 1, (stage, stats)
    mined = read_problems(out / "mine").row(0, named=True)
    assert mined["shape_source"] == "source" and json.loads(mined["input_spec"])[1]["then"] == [["mul", 3.0]]
    ranked = read_problems(out / "rank")
    assert ranked["difficulty_score"].is_not_null().all() and ranked["speedup_headroom"].is_not_null().all()
    assert (ranked["shape_source"] == "estimated").all()  # diversify sized it from the CPU shape
    card = (out / "export" / "README.md").read_text()
    assert "speedup_headroom" in card and "difficulty_score" in card
