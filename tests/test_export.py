"""The export stage on a small but real run folder built from torch's own nn module source."""

from __future__ import annotations

import importlib.metadata as md
import inspect
import json
import math
from pathlib import Path

import polars as pl
import pytest
import torch
import torch.nn as nn
import yaml

from curate.export import run
from curate.export.card import dataset_license, licence_id, size_category
from curate.export.prompt import build_prompt
from curate.export.tokens import count_tokens
from curate.export.split import SPLITS, add_split, assign_splits, split_groups
from curate.export.columns import normalize
from curate.problem import (INPUTS_MARKER, assemble, dumps, load_problem, plain_input_spec,
                            plain_shape_variants)
from curate.table import Rejections, read_problems, source_struct, write_stage

HEADER = """\
import math
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Module, Parameter, init
"""

# (torch class, constructor args, base input shape, dedup cluster): Mish/Hardswish and
# ELU/CELU are put in one cluster each, as near-duplicates would be.
MODULES = [
    (nn.Mish, [], [16, 256], "c-smooth"),
    (nn.Hardswish, [], [16, 256], "c-smooth"),
    (nn.GELU, ["tanh"], [8, 1024], "c-gelu"),
    (nn.Softplus, [1.0, 20.0], [32, 128], "c-softplus"),
    (nn.LeakyReLU, [0.1], [4, 64, 32], "c-leaky"),
    (nn.Linear, [64, 32], [128, 64], "c-linear"),
    (nn.ELU, [1.0], [16, 512], "c-elu"),
    (nn.CELU, [0.5], [16, 512], "c-elu"),
]
GPU = "NVIDIA H100 80GB HBM3"


def torch_licence() -> str:
    meta = md.metadata("torch")
    return meta.get("License-Expression") or meta.get("License") or "BSD-3-Clause"


def module_source(cls: type) -> str:
    """The class's real source from the installed torch, exposed as ``Model``."""
    return f"{HEADER}\n\n{inspect.getsource(cls)}\n\nclass Model({cls.__name__}):\n    pass\n"


def mine_rows(licence: str) -> list[dict]:
    rows = []
    for cls, init_args, shape, _ in MODULES:
        spec = [{"kind": "tensor", "shape": shape, "dtype": "float32"}]
        path = inspect.getsourcefile(cls).split("site-packages/")[-1]
        rows.append({
            "problem_id": f"torch-{cls.__name__.lower()}",
            "name": f"torch.{cls.__name__}",
            "code": assemble(module_source(cls), spec, init_args),
            "init_args": dumps(init_args),
            "input_spec": dumps(spec),
            "source": source_struct(kind="package", name="torch", uri="torch",
                                    version=torch.__version__, path=path,
                                    class_name=cls.__name__, licence=licence),
        })
    return rows


def _variants(row: dict, k: int) -> list[dict]:
    from curate.problem import replace_inputs

    spec = json.loads(row["input_spec"])
    init_args = json.loads(row["init_args"])
    out = []
    for v in range(k):
        s = [dict(spec[0], shape=[spec[0]["shape"][0] * 2**v, *spec[0]["shape"][1:]])]
        numel = math.prod(s[0]["shape"])
        out.append(dict(row, problem_id=f"{row['problem_id']}-v{v}", variant=v,
                        base_problem_id=row["problem_id"], input_spec=dumps(s),
                        code=replace_inputs(row["code"], s, init_args),
                        est_flops=float(numel), est_bytes=8 * numel,
                        shape_variants=dumps([[dict(spec[0], shape=[spec[0]["shape"][0] * 2**j,
                                                                    *spec[0]["shape"][1:]])]
                                              for j in range(k)])))
    return out


def build_run(out: Path, licence: str | None = None, stages: tuple[str, ...] = (
        "mine", "dedup", "diversify", "measure", "rank"), missing_code: bool = True) -> Path:
    """A run folder with each stage's problems/rejected/stats.json written by write_stage."""
    licence = licence or torch_licence()
    rows = mine_rows(licence)
    rej = Rejections("mine")
    rej.add(dict(rows[0], problem_id="torch-broken", name="torch.Broken", code=None),
            "synthesis_failed", "RuntimeError: expected 4D input")
    df = pl.DataFrame(rows)
    write_stage(out, "mine", df, rej.frame(like=df), df.height + 1, 1.0)
    if "dedup" in stages:
        cluster = {f"torch-{c.__name__.lower()}": cl for c, _, _, cl in MODULES}
        first = {}
        for pid, cl in cluster.items():
            first.setdefault(cl, pid)
        df = df.with_columns(
            pl.col("problem_id").replace_strict(cluster).alias("dedup_cluster"),
            pl.col("problem_id").is_in(list(first.values())).alias("is_representative"),
            # KernelBench level 1 has a GELU problem (26_GELU_): flagged, as dedup would
            pl.when(pl.col("problem_id") == "torch-gelu").then(pl.lit("kernelbench:1/26_GELU_"))
            .otherwise(None).alias("contaminated_by"))
        write_stage(out, "dedup", df, Rejections("dedup").frame(like=df), df.height, 0.5)
    if "diversify" in stages:
        variant_rows = [v for r in df.iter_rows(named=True) for v in _variants(r, 3)]
        bases = df.height
        df = pl.DataFrame(variant_rows)
        write_stage(out, "diversify", df, Rejections("diversify").frame(like=df), bases, 2.0,
                    kept_in=bases)
    if "measure" in stages:
        rej = Rejections("measure")
        keep = []
        for r in df.iter_rows(named=True):
            ms = r["est_bytes"] / 2.0e6  # bytes / (2 GB/s ... ) in ms: plausible, not measured
            if r["problem_id"] == "torch-mish-v0":
                rej.add(r, "below_min_ms", f"eager {ms:.4f} ms")
                continue
            keep.append(dict(r, eager_ms=ms, compile_ms=ms / 1.2, inductor_speedup=1.2,
                             gpu=GPU, device="cuda", torch_version="2.11.0",
                             peak_mem_mb=r["est_bytes"] / 2**20))
        rows_in = df.height
        df = pl.DataFrame(keep)
        write_stage(out, "measure", df, rej.frame(like=df), rows_in, 30.0)
    if "rank" in stages:
        ranked = []
        for i, r in enumerate(df.iter_rows(named=True)):
            n_correct = i % 5
            ranked.append(dict(r, pass_rate=n_correct / 4 if n_correct < 5 else 1.0,
                               pass_at_k=float(n_correct > 0), n_candidates=4,
                               n_correct=min(n_correct, 4), best_speedup=0.9 + 0.1 * i,
                               difficulty=["hard", "medium", "medium", "easy", "easy"][n_correct],
                               solver="inductor"))
        if missing_code:
            ranked.append(dict(ranked[0], problem_id="torch-lost-v0", code=None,
                               base_problem_id="torch-lost", dedup_cluster="c-lost"))
        df = pl.DataFrame(ranked)
        write_stage(out, "rank", df, Rejections("rank").frame(like=df), df.height, 5.0)
    return out


def test_fixture_code_is_real_kernelbench_problems(tmp_path):
    """The run's problems load and run: the export is tested on real programs."""
    build_run(tmp_path, stages=("mine", "dedup", "diversify"))
    df = read_problems(tmp_path / "diversify")
    for row in df.head(6).iter_rows(named=True):
        ns = load_problem(row["code"], row["problem_id"])
        model = ns["Model"](*ns["get_init_inputs"]())
        y = model(*ns["get_inputs"]())
        assert y.shape[0] == json.loads(row["input_spec"])[0]["shape"][0]


def read_card(path: Path) -> tuple[dict, str]:
    text = path.read_text()
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


def _datasets_log() -> list[str]:
    """Messages ``datasets`` logs from now on (it logs through its own logger, not warnings)."""
    import logging

    import datasets

    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    datasets.logging.set_verbosity_warning()
    datasets.logging.get_logger("datasets").addHandler(Keep(logging.WARNING))
    return messages


def test_export_end_to_end(tmp_path):
    import datasets

    out = build_run(tmp_path)
    stats = run(out=out, name="tiny-kernels", seed=0)
    rank = read_problems(out / "rank")
    exp = out / "export"

    # accountability: the one row without code is rejected, everything else kept
    assert stats["in"] == rank.height
    assert stats["rejected_by_reason"] == {"missing_code": 1}
    assert stats["kept"] == rank.height - 1
    assert sum(stats["rows_per_split"].values()) == stats["kept"]

    dd = datasets.load_from_disk(str(exp / "hf"))
    assert set(dd) == set(SPLITS)
    assert all(dd[s].num_rows > 0 for s in SPLITS)
    assert {s: dd[s].num_rows for s in SPLITS} == stats["rows_per_split"]
    clusters = {s: set(dd[s]["dedup_cluster"]) for s in SPLITS}
    bases = {s: set(dd[s]["base_problem_id"]) for s in SPLITS}
    for a in SPLITS:
        for b in SPLITS:
            if a < b:
                assert not clusters[a] & clusters[b], (a, b)
                assert not bases[a] & bases[b], (a, b)
    assert {s: len(c) for s, c in clusters.items()} == stats["clusters_per_split"]
    assert all(set(dd[s]["split"]) == {s} for s in SPLITS)
    # the HF dataset and the parquet copy hold the same rows; columns from every stage survive,
    # the trainer's in the default config and the internals in `measurements`
    ranked = {r["problem_id"]: r for r in rank.iter_rows(named=True)}
    for s in SPLITS:
        pq = pl.read_parquet(exp / "parquet" / f"{s}.parquet")
        ms = pl.read_parquet(exp / "measurements" / f"{s}.parquet")
        assert sorted(pq["problem_id"].to_list()) == sorted(dd[s]["problem_id"])
        assert ms["problem_id"].to_list() == pq["problem_id"].to_list()
        for col in ("code", "prompt", "prompt_tokens", "eager_ms", "difficulty", "shape_variants",
                    "input_spec", "init_args", "gpu", "source", "split"):
            assert col in pq.columns
        for col in ("is_representative", "pass_rate", "peak_mem_mb", "pruned"):
            assert col in ms.columns and col not in pq.columns
        # structured columns hold the same specs the rank stage had as JSON, and plain_*
        # turns them back into the form the verifier takes
        for row in dd[s]:
            src = ranked[row["problem_id"]]
            assert isinstance(row["input_spec"], list) and isinstance(row["shape_variants"], list)
            assert plain_input_spec(row["input_spec"]) == json.loads(src["input_spec"])
            assert [v["input_spec"] for v in plain_shape_variants(row["shape_variants"])] == \
                json.loads(src["shape_variants"])
            assert row["prompt"] == build_prompt(row["code"])
            assert row["prompt_tokens"] == count_tokens([row["prompt"]])[0] > 100
    # every config loads with datasets' own loader from the folder, sizes from the card intact
    messages = _datasets_log()
    for config, n_cols in (("default", None), ("measurements", None), ("verl", 5)):
        loaded = datasets.load_dataset(str(exp), config, cache_dir=str(tmp_path / "hf-cache"))
        assert {s: loaded[s].num_rows for s in SPLITS} == stats["rows_per_split"]
        assert all(loaded[s].info.splits[s].num_bytes > 0 for s in SPLITS)
        assert n_cols is None or len(loaded["train"].column_names) == n_cols
    assert not [m for m in messages if "dataset_info" in m or "split" in m.lower()], messages
    ranked_codes = {pid: r["code"] for pid, r in ranked.items()}
    exported_codes = {r["problem_id"]: r["code"] for s in SPLITS for r in dd[s]}
    # pruning: every base problem's program lost its docstrings and unreached definitions,
    # kept Model's provenance line and the inputs block, and was proven identical in a sandbox
    assert stats["prune"]["pruned"] == stats["prune"]["bodies"] == len(MODULES)
    for pid, code in exported_codes.items():
        assert len(code) < len(ranked_codes[pid])
        assert "Reference problem" not in code or "licence" in code
        assert code.partition(INPUTS_MARKER)[2] == ranked_codes[pid].partition(INPUTS_MARKER)[2]

    # the verl view
    for s in SPLITS:
        v = pl.read_parquet(exp / "verl" / f"{s}.parquet")
        assert v.columns == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        assert v.height == dd[s].num_rows
        for i, row in enumerate(v.iter_rows(named=True)):
            assert row["data_source"] == "curate/tiny-kernels"
            (msg,) = row["prompt"]
            assert set(msg) == {"role", "content"} and msg["role"] == "user"
            code = row["reward_model"]["ground_truth"]
            assert row["reward_model"]["style"] == "rule"
            info = row["extra_info"]
            assert code == exported_codes[info["problem_id"]]
            assert msg["content"] == build_prompt(code)
            assert info["prompt_tokens"] == count_tokens([msg["content"]])[0]
            assert code.strip() in msg["content"] and "ModelNew" in msg["content"]
            assert info["split"] == s and info["index"] == i
            assert json.loads(info["input_spec"])[0]["kind"] == "tensor"
            assert info["eager_ms"] > 0 and info["gpu"] == GPU
    # verl reads its parquet with datasets: the nested schema must load there too
    rl = datasets.load_dataset("parquet", data_files=str(exp / "verl" / "train.parquet"),
                               split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert rl[0]["prompt"][0]["role"] == "user"

    # the card
    meta, body = read_card(exp / "README.md")
    assert meta["license"] == dataset_license([torch_licence()])
    assert meta["task_categories"] == ["text-generation"]
    assert meta["size_categories"] == ["n<1K"]
    default = next(c for c in meta["configs"] if c["config_name"] == "default")
    assert {f["split"]: f["path"] for f in default["data_files"]} == {
        s: f"parquet/{s}.parquet" for s in SPLITS}
    for f in default["data_files"]:
        assert (exp / f["path"]).is_file()
    assert [c["config_name"] for c in meta["configs"]] == ["default", "measurements", "verl"]
    for info in meta["dataset_info"]:
        assert {x["name"]: x["num_examples"] for x in info["splits"]} == stats["rows_per_split"]
        assert all(x["num_bytes"] > 0 for x in info["splits"]), info
    t = stats["prompt_tokens"]
    assert t["tokenizer"] == "o200k_base" and t["median"] <= t["p90"] <= t["max"]
    assert f"median {t['median']:,}, 90th percentile {t['p90']:,}, max {t['max']:,}" in body
    # rows per stage and rejection reasons come from each stage's stats.json
    assert "| mine | 9 | 8 | 1 |" in body
    assert "| mine | synthesis_failed | 1 |" in body
    assert "| measure | below_min_ms | 1 |" in body
    assert "| export | missing_code | 1 |" in body
    n_gelu = sum(1 for pid in ranked_codes if pid.startswith("torch-gelu"))
    assert f"(`contaminated_by` set): {n_gelu}." in body
    assert GPU in body and "load_from_disk" in body and "custom_reward_function.path" in body
    n_torch = rank.height - 1
    assert f"| torch | package | {torch.__version__} |" in body and f"| {n_torch} |" in body


def test_export_after_skipped_stages(tmp_path):
    """Only mine ran: the export reads it, fills typed nulls and still splits by problem."""
    import datasets

    out = build_run(tmp_path, stages=("mine",))
    stats = run(out=out, val_fraction=0.2, test_fraction=0.2)
    assert stats["in"] == len(MODULES) and stats["rejected"] == 0
    assert stats["source"] == str(out / "mine")
    dd = datasets.load_from_disk(str(out / "export" / "hf"))
    train = dd["train"].to_polars()
    assert train["eager_ms"].dtype == pl.Float64 and train["eager_ms"].null_count() == train.height
    # without dedup/diversify each problem is its own cluster and base problem
    assert train["dedup_cluster"].to_list() == train["problem_id"].to_list()
    assert sum(stats["clusters_per_split"].values()) == len(MODULES)
    _, body = read_card(out / "export" / "README.md")
    assert "No runtimes" in body


def test_rerun_is_deterministic_and_seed_matters(tmp_path):
    out = build_run(tmp_path)
    run(out=out, seed=3)
    first = pl.read_parquet(out / "export" / "problems").select("problem_id", "split")
    run(out=out, seed=3)
    again = pl.read_parquet(out / "export" / "problems").select("problem_id", "split")
    assert first.equals(again)
    mapping = {s: assign_splits([f"k{i}" for i in range(200)], seed=s) for s in (3, 4)}
    assert mapping[3] != mapping[4]


def test_assign_splits_shares_stability_and_tiny_inputs():
    keys = [f"cluster-{i}" for i in range(4000)]
    a = assign_splits(keys, val_fraction=0.1, test_fraction=0.2, seed=7)
    share = {s: sum(v == s for v in a.values()) / len(keys) for s in SPLITS}
    assert abs(share["test"] - 0.2) < 0.03 and abs(share["validation"] - 0.1) < 0.03
    # adding clusters never moves the old ones (hash, not shuffle)
    b = assign_splits(keys + [f"new-{i}" for i in range(500)], 0.1, 0.2, seed=7)
    assert all(b[k] == a[k] for k in keys)
    for seed in range(30):
        tiny = assign_splits(["x", "y", "z"], seed=seed)
        assert set(tiny.values()) == set(SPLITS), (seed, tiny)
    assert set(assign_splits(["x", "y", "z"], val_fraction=0.0, seed=1).values()) == {"train", "test"}
    with pytest.raises(ValueError):
        assign_splits(keys, val_fraction=0.6, test_fraction=0.5)
    with pytest.raises(ValueError):
        assign_splits(keys, val_fraction=-0.1)


def test_split_groups_join_clusters_of_one_base_problem():
    df = normalize(pl.DataFrame({
        "problem_id": ["a-v0", "a-v1", "b-v0", "c-v0"],
        "code": ["x"] * 4,
        "base_problem_id": ["a", "a", "b", "c"],
        "dedup_cluster": ["k1", "k2", "k2", "k3"],
    }))
    groups = split_groups(df).to_list()
    assert groups == ["k1", "k1", "k1", "k3"]
    for seed in range(10):
        split = add_split(df, 0.3, 0.3, seed)["split"].to_list()
        assert split[0] == split[1] == split[2]


def test_build_prompt_holds_the_reference():
    code = mine_rows("MIT")[5]["code"]
    prompt = build_prompt(code)
    assert code.strip() in prompt
    assert "ModelNew" in prompt and "```python" in prompt and "Triton" in prompt
    with pytest.raises(ValueError):
        build_prompt("  \n")


def test_licences_and_sizes():
    assert licence_id("MIT") == "mit" and licence_id("BSD-3-Clause") == "bsd-3-clause"
    assert licence_id("Apache Software License") == "apache-2.0"
    assert licence_id("MIT AND BSD-3-Clause") is None and licence_id(None) is None
    assert dataset_license(["MIT", "mit", "MIT License"]) == "mit"
    assert dataset_license(["MIT", "Apache-2.0"]) == "other"
    assert dataset_license(["MIT", None]) == "other"
    assert [size_category(n) for n in (0, 999, 1000, 11_363)] == ["n<1K", "n<1K", "1K<n<10K",
                                                                  "10K<n<100K"]


def test_single_licence_run_card(tmp_path):
    out = build_run(tmp_path, licence="BSD-3-Clause", missing_code=False)
    stats = run(out=out)
    assert stats["rejected"] == 0
    meta, _ = read_card(out / "export" / "README.md")
    assert meta["license"] == "bsd-3-clause" and "license_name" not in meta


def test_bad_input_gives_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no stage output"):
        run(out=tmp_path)
    (tmp_path / "x").mkdir()
    pl.DataFrame({"foo": [1]}).write_parquet(tmp_path / "x" / "t.parquet")
    with pytest.raises(ValueError, match="problem_id"):
        run(out=tmp_path, source=tmp_path / "x" / "t.parquet")
    with pytest.raises(ValueError, match="fraction"):
        run(out=tmp_path, source=tmp_path / "x" / "t.parquet", test_fraction=1.0)


def test_max_prompt_tokens_rejects_long_prompts_with_a_reason(tmp_path):
    out = build_run(tmp_path, missing_code=False)
    full = run(out=out)
    tokens = sorted(pl.read_parquet(out / "export" / "problems")["prompt_tokens"].to_list())
    limit = tokens[len(tokens) // 2]
    stats = run(out=out, max_prompt_tokens=limit)
    over = sum(t > limit for t in tokens)
    assert 0 < over < len(tokens)
    assert stats["rejected_by_reason"] == {"prompt_too_long": over}
    assert stats["kept"] + stats["rejected"] == stats["in"] == full["kept"]
    rejected = pl.read_parquet(out / "export" / "rejected")
    assert set(rejected["reject_reason"]) == {"prompt_too_long"}
    assert all(f"> {limit}" in d for d in rejected["reject_detail"])
    kept = pl.read_parquet(out / "export" / "problems")
    assert kept["prompt_tokens"].max() <= limit
    # the second export reused the first one's proofs: no program ran again
    assert stats["prune"]["checked"] == 0 and stats["prune"]["pruned"] == full["prune"]["pruned"]
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        run(out=out, max_prompt_tokens=0)


class _FakeHub:
    """A Hugging Face Hub stand-in on 127.0.0.1: answers repo creation, card validation,
    pre-upload and commits, records every request; anything else gets 404."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.seen: list[tuple[str, str, bytes]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                hub.seen.append(("GET", self.path, b""))
                if self.path.split("?")[0] == "/api/datasets/user/kernels":
                    return self._reply(200, {"id": "user/kernels", "sha": "0" * 40, "private": False,
                                             "siblings": [{"rfilename": "README.md"}]})
                self._reply(404, {"error": "not found"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                hub.seen.append(("POST", self.path, body))
                if self.path == "/api/repos/create":
                    return self._reply(200, {"url": f"{hub.endpoint}/datasets/user/kernels"})
                if self.path == "/api/validate-yaml":
                    return self._reply(200, {"errors": [], "warnings": []})
                if "/preupload/" in self.path:
                    return self._reply(200, {"files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                        for f in json.loads(body)["files"]]})
                if "/commit/" in self.path:
                    return self._reply(200, {"commitUrl": f"{hub.endpoint}/datasets/user/kernels/commit/0",
                                             "commitOid": "0" * 40})
                self._reply(404, {"error": "not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_push_to_hub_goes_through_datasets_upload(tmp_path):
    """`curate export --push-to-hub` against a Hub stand-in on the loopback: the repository is
    created as a dataset, the card is committed, and datasets' own push_to_hub sends each
    split's parquet; the stand-in cannot serve the rest, so the command fails with one line."""
    import os
    import subprocess
    import sys

    out = build_run(tmp_path / "run")
    hub = _FakeHub()
    try:
        env = dict(os.environ, HF_ENDPOINT=hub.endpoint, HF_TOKEN="hf_not_a_real_token",
                   HF_HUB_DISABLE_TELEMETRY="1")
        env.pop("CURATE_DEBUG", None)
        proc = subprocess.run([sys.executable, "-m", "curate.cli", "export", "--out", str(out),
                               "--push-to-hub", "user/kernels", "--no-prune"],
                              env=env, capture_output=True, text=True, timeout=300,
                              cwd=Path(__file__).resolve().parents[1])
    finally:
        hub.close()
    assert proc.returncode == 2, proc.stderr
    assert "push to user/kernels failed" in proc.stderr
    assert (out / "export" / "README.md").is_file()  # the local export is complete anyway
    posts = [(p, b) for m, p, b in hub.seen if m == "POST"]
    create = [json.loads(b) for p, b in posts if p == "/api/repos/create"]
    assert create and create[0]["type"] == "dataset"
    assert (create[0]["organization"], create[0]["name"]) == ("user", "kernels")
    commits = [b for p, b in posts if p == "/api/datasets/user/kernels/commit/main"]
    assert any(b'"path": "README.md"' in b or b'"path":"README.md"' in b for b in commits)
    uploaded = {f["path"] for p, b in posts if p == "/api/datasets/user/kernels/preupload/main"
                for f in json.loads(b)["files"]}
    assert {f"data/{s}-00000-of-00001.parquet" for s in SPLITS} <= uploaded, uploaded


def test_card_runtime_section_gives_the_distribution_per_gpu():
    import polars as pl

    from curate.export.card import runtime_section

    t = pl.DataFrame({"eager_ms": [0.05, 0.7, 2.0, 2.5, 12.0, 0.2], "compile_ms": [None] * 6,
                      "inductor_speedup": [None] * 6, "gpu": ["NVIDIA H100 80GB HBM3"] * 4 + ["A100", None],
                      "device": ["cuda"] * 5 + ["cpu"], "torch_version": ["2.11"] * 6,
                      "band_lo_ms": [0.5] * 5 + [None], "band_hi_ms": [10.0] * 5 + [None],
                      "target_gpu": ["h100"] * 6,
                      "shape_source": ["calibrated"] * 5 + ["estimated"], "est_ms": [1.0] * 5 + [2.5]},
                     schema_overrides={"compile_ms": pl.Float64, "inductor_speedup": pl.Float64})
    text = runtime_section(t)
    hist = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in text.splitlines() if line.startswith("| NVIDIA H100") or line.startswith("| A100")
            or line.startswith("| cpu")}
    # bins 0-0.03, 0.03-0.1, 0.1-0.3, 0.3-0.5, 0.5-1, 1-3, 3-10, 10-30, ...
    assert hist["NVIDIA H100 80GB HBM3"][:7] == ["0", "1", "0", "0", "1", "2", "0"]
    assert hist["A100"][7] == "1" and hist["cpu"][2] == "1"
    # the A100 row and the CPU row say nothing about an H100 band
    assert "inside the band" in text and "3 of 4" in text
    assert "1 rows have shapes set from roofline estimates" in text


def test_card_says_how_far_the_predicted_difficulty_can_be_trusted():
    """Rows ranked by the predictor get the shipped model's own cross-validated figures in the
    card; rows ranked by a solver's verified pass rate do not."""
    from curate.export.card import difficulty_section
    from curate.rank.predict import load_model

    def split(signal: str) -> pl.DataFrame:
        return pl.DataFrame({"difficulty": ["easy", "hard"], "split": ["train", "train"],
                             "pass_rate": [None, None] if signal.startswith("predicted") else [0.9, 0.1],
                             "solver": ["none", "none"], "difficulty_score": [0.2, 0.8],
                             "speedup_headroom": [0.5, 0.4], "difficulty_signal": [signal, signal]},
                            schema_overrides={"pass_rate": pl.Float64})

    cv = load_model()["cross_validated"]["full"]
    predicted = difficulty_section({"train": split("predicted")})
    assert "How far to trust" in predicted and f"{cv['spearman']:.2f}" in predicted
    assert f"{cv['easy_over_hard']:.1f}x" in predicted
    assert "How far to trust" not in difficulty_section({"train": split("pass_rate")})
