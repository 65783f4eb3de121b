"""The rank stage: pass@k, difficulty, and end-to-end runs with real candidates."""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from math import comb

import polars as pl
import pytest

from curate.problem import dumps
from curate.rank import run
from curate.rank.difficulty import difficulty
from curate.rank.passk import pass_at_k
from curate.table import Rejections, read_problems, read_rejected, read_stats, source_struct, write_stage
from verify_fixtures import SMALL_SPEC, candidate, kernelbench, reply, torch_relu_problem


# ---- pass@k --------------------------------------------------------------------------------

def test_pass_at_k_hand_cases():
    assert pass_at_k(5, 5, 1) == 1.0 and pass_at_k(5, 5, 5) == 1.0  # n == c
    assert pass_at_k(5, 0, 1) == 0.0 and pass_at_k(5, 0, 3) == 0.0  # c == 0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)                # pass@1 = c / n
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)               # 1 - C(2,2)/C(3,2)
    assert pass_at_k(4, 3, 2) == 1.0                                 # n - c < k
    assert pass_at_k(2, 1, 3) is None                                # fewer samples than k
    for bad in ((3, 4, 1), (3, -1, 1), (3, 1, 0)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_pass_at_k_matches_subset_enumeration():
    for n in range(1, 8):
        for c in range(n + 1):
            correct = set(range(c))
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(range(n), k))
                hits = sum(1 for s in subsets if correct.intersection(s))
                assert len(subsets) == comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(hits / len(subsets)), (n, c, k)


def test_difficulty_buckets():
    assert difficulty(None, 0, None, True) == "unranked"
    assert difficulty(0.0, 0, None, True) == "unsolved"
    assert difficulty(0.25, 1, None, False) == "hard"
    assert difficulty(0.5, 2, None, False) == "medium"
    assert difficulty(1.0, 4, 0.5, False) == "easy"      # CPU speedups are not used
    assert difficulty(1.0, 4, 0.5, True) == "medium"     # correct but slower than eager on GPU
    assert difficulty(1.0, 4, 3.5, True) == "trivial"    # saturates the reward's speedup cap
    assert difficulty(0.2, 1, 0.5, True) == "hard"


# ---- a small mined-like table ----------------------------------------------------------------

def _row(pid: str, code: str | None, spec, name: str) -> dict:
    return {"problem_id": pid, "name": name, "code": code, "init_args": "[]",
            "input_spec": spec if isinstance(spec, str) else dumps(spec),
            "source": source_struct(kind="test", name=name, class_name="Model"),
            "eager_ms": 0.01}


def _table(out) -> None:
    rows = [
        _row("kb-19-relu", kernelbench("19_ReLU"), SMALL_SPEC, "kernelbench.19_ReLU"),
        _row("torch-relu", torch_relu_problem(), [{"kind": "tensor", "shape": [3, 333]}], "torch.ReLU"),
        _row("kb-21-sigmoid", kernelbench("21_Sigmoid"), SMALL_SPEC, "kernelbench.21_Sigmoid"),
        _row("no-code", None, SMALL_SPEC, "broken.NoCode"),
        _row("bad-spec", kernelbench("19_ReLU"), "{oops", "broken.BadSpec"),
    ]
    df = pl.DataFrame(rows)
    write_stage(out, "measure", df, Rejections("measure").frame(like=df), df.height, 1.0)


def _by_id(out) -> dict[str, dict]:
    return {r["problem_id"]: r for r in read_problems(out / "rank").iter_rows(named=True)}


def test_rank_with_completions_end_to_end(tmp_path):
    _table(tmp_path)
    lines = [("kb-19-relu", reply(candidate("relu_triton"))),
             ("kb-19-relu", reply(candidate("relu_torch"))),
             ("kb-19-relu", candidate("relu_off_by_one")),       # a bare program, no Markdown
             ("torch-relu", reply(candidate("relu_triton"))),
             ("torch-relu", reply(candidate("relu_triton"), "Same again.")),
             ("not-in-table", reply(candidate("relu_triton")))]
    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps({"problem_id": p, "completion": c}) + "\n" for p, c in lines))

    stats = run(out=tmp_path, solver="completions", completions=path, k=2, workers=2, timeout_s=120)
    assert (stats["in"], stats["kept"], stats["rejected"]) == (5, 3, 2)
    assert stats["rejected_by_reason"] == {"missing_code": 1, "bad_input_spec": 1}
    assert stats["candidates_verified"] == 5 and stats["verifications_cached"] == 0
    rows = _by_id(tmp_path)
    kb = rows["kb-19-relu"]
    assert (kb["n_candidates"], kb["n_correct"]) == (3, 1)
    assert kb["pass_rate"] == pytest.approx(1 / 3)
    assert kb["pass_at_k"] == pytest.approx(pass_at_k(3, 1, 2)) == pytest.approx(2 / 3)
    assert kb["difficulty"] == "medium" and kb["solver"] == "completions:completions.jsonl"
    assert kb["best_speedup"] > 0 and kb["rank_error"] is None
    # each candidate's verdict is kept with the row: one correct, two for their own reasons
    why = json.loads(kb["verify_reasons"])
    assert sum(why.values()) == 3 and why.get("correct") == 1, why
    tr = rows["torch-relu"]
    assert (tr["n_correct"], tr["pass_rate"], tr["pass_at_k"], tr["difficulty"]) == (2, 1.0, 1.0, "easy")
    sig = rows["kb-21-sigmoid"]
    # no completion for it: no pass rate, but a bucket from the predictor
    assert sig["pass_rate"] is None and "no completions" in sig["rank_error"]
    assert sig["difficulty_signal"] == "predicted" and sig["difficulty"] in ("easy", "medium", "hard")
    assert sig["headroom_signal"] == "static" and sig["speedup_headroom"] is not None
    assert (sig["level"], sig["category"]) == (1, "elementwise")
    assert kb["difficulty_signal"] == "pass_rate" and kb["difficulty_score"] == pytest.approx(2 / 3)
    assert rows["kb-19-relu"]["eager_ms"] == 0.01  # earlier columns are kept
    rej = read_rejected(tmp_path / "rank")
    assert sorted(rej["reject_reason"].to_list()) == ["bad_input_spec", "missing_code"]

    # started again, nothing is verified twice and the table is the same
    again = run(out=tmp_path, solver="completions", completions=path, k=2, workers=2)
    assert again["verifications_cached"] == 5
    assert _by_id(tmp_path)["kb-19-relu"]["pass_at_k"] == kb["pass_at_k"]
    assert sum(read_stats(tmp_path / "rank")["difficulty"].values()) == 3


def test_completions_file_errors_name_the_line(tmp_path):
    _table(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem_id": "x", "completion": "y"}) + "\n{not json\n")
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        run(out=tmp_path, solver="completions", completions=bad)
    with pytest.raises(ValueError, match="needs --completions"):
        run(out=tmp_path, solver="completions")


# ---- the openai solver against a local HTTP server --------------------------------------------

class _Canned(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/chat/completions that answers from a script."""

    received: list[dict] = []
    served = 0
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        refuse = "torch.sigmoid" in prompt
        with self.lock:
            type(self).received.append(dict(body, path=self.path, auth=self.headers.get("Authorization")))
            type(self).served += not refuse
            nth = type(self).served
        if refuse:
            self.send_response(400)
            self.end_headers()
            self.wfile.write(b'{"error": "model refuses"}')
            return
        # alternate a correct kernel and one that writes zeros (whatever the request order)
        code = candidate("relu_triton") if nth % 2 else candidate("relu_zeros")
        payload = {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply(code)}}]}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    _Canned.received, _Canned.served = [], 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_solver_over_http_with_cache(tmp_path, endpoint, monkeypatch):
    _table(tmp_path)
    monkeypatch.setenv("TEST_KEY", "sk-local")
    src = tmp_path / "one"
    df = read_problems(tmp_path / "measure").filter(pl.col("problem_id").is_in(["kb-19-relu", "kb-21-sigmoid"]))
    write_stage(src, "measure", df, Rejections("measure").frame(like=df), df.height, 1.0)
    kw = dict(out=tmp_path, source=src / "measure", solver="openai", base_url=endpoint,
              model="canned-model", api_key_env="TEST_KEY", temperature=0.5, k=2, concurrency=4,
              workers=2, timeout_s=120)

    stats = run(**kw)
    # 2 samples for relu; sigmoid's 400 is not retried (a client error), 2 samples = 2 requests
    assert stats["requests_sent"] == 4 and len(_Canned.received) == 4
    first = _Canned.received[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-local"
    assert first["model"] == "canned-model" and first["temperature"] == 0.5
    relu_prompts = [r["messages"][0]["content"] for r in _Canned.received if "torch.relu" in r["messages"][0]["content"]]
    assert len(relu_prompts) == 2 and "ModelNew" in relu_prompts[0]
    assert kernelbench("19_ReLU").strip() in relu_prompts[0]
    rows = _by_id(tmp_path)
    relu = rows["kb-19-relu"]
    assert (relu["n_candidates"], relu["n_correct"]) == (2, 1)
    assert relu["pass_rate"] == 0.5 and relu["pass_at_k"] == 1.0 and relu["solver"] == "openai:canned-model"
    sig = rows["kb-21-sigmoid"]
    assert sig["difficulty_signal"] == "predicted" and "HTTP 400" in sig["rank_error"]

    # the completions are cached: a second run sends only the requests that failed
    again = run(**kw)
    assert again["requests_sent"] == 2 and again["verifications_cached"] == 2
    assert _by_id(tmp_path)["kb-19-relu"]["pass_rate"] == 0.5


# ---- the offline Inductor baseline (one cold TorchInductor compile: ~20-30 s on 2 cores) ----

@pytest.mark.slow
def test_rank_inductor_baseline_with_max_problems(tmp_path):
    _table(tmp_path)
    stats = run(out=tmp_path, solver="inductor", max_problems=1, workers=1, timeout_s=300)
    assert stats["ranked"] == 1 and stats["kept"] == 3
    rows = _by_id(tmp_path)
    kb = rows["kb-19-relu"]
    assert kb["solver"] == "inductor" and (kb["n_candidates"], kb["n_correct"]) == (1, 1)
    assert kb["pass_rate"] == 1.0 and kb["pass_at_k"] == 1.0
    # Inductor passes what it compiles: its pass rate is recorded, the predictor sets the difficulty
    assert kb["difficulty_signal"] == "predicted" and kb["difficulty_score"] == 1 - kb["predicted_pass_rate"]
    assert rows["torch-relu"]["difficulty_signal"] == "predicted" and rows["torch-relu"]["pass_rate"] is None
