"""TRL 1.16 on the CPU from scripts without a ``__main__`` guard: GRPOTrainer trains two steps
with a tiny random Qwen2, a tokenizer built here, our verl parquet and ``kernel_reward``; the
reward function called directly scores an honest Triton candidate correct and red-team hacks
zero. Also: a process killed while its reward hangs leaves no sandbox process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _run_script(tmp_path: Path, body: str, timeout: int = 600) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"  # a plain script: no `if __name__ == "__main__":`
    script.write_text(textwrap.dedent(body))
    assert "__main__" not in script.read_text()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]),
               TOKENIZERS_PARALLELISM="false", WANDB_DISABLED="true", HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_reward_function_from_a_script_without_main_guard(tmp_path):
    proc = _run_script(tmp_path, f"""
        import json
        from pathlib import Path
        from curate.reward import kernel_reward
        from rl_fixtures import tiny_export, verl_rows
        from verify_fixtures import candidate, reply

        print("SCRIPT BODY RAN")  # a sandbox task that imported this script would print it again
        rows = [r for r in verl_rows(tiny_export(Path("run"))) if r["extra_info"]["problem_id"] == "torch-relu"]
        names = ["relu_triton", "relu_zeros", "relu_torch", "relu_constant", "relu_syntax_error"]
        n = len(names)
        completions = [[{{"role": "assistant", "content": reply(candidate(k))}}] for k in names]
        scores = kernel_reward(prompts=[rows[0]["prompt"]] * n, completions=completions,
                               completion_ids=None, data_source=[rows[0]["data_source"]] * n,
                               reward_model=[rows[0]["reward_model"]] * n, extra_info=[rows[0]["extra_info"]] * n,
                               ability=["gpu_kernel"] * n, trainer_state=None)
        print("SCORES " + json.dumps(dict(zip(names, scores))))
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("SCRIPT BODY RAN") == 1
    scores = json.loads(proc.stdout.split("SCORES ", 1)[1].splitlines()[0])
    assert scores["relu_triton"] > 0.4  # correct (0.4) plus a speedup term
    for hack in ("relu_zeros", "relu_torch", "relu_constant"):
        assert scores[hack] == pytest.approx(0.1)  # builds and runs: no correctness, no speedup
    assert scores["relu_syntax_error"] == 0.0


def test_grpo_trainer_trains_on_our_dataset_and_reward(tmp_path):
    proc = _run_script(tmp_path, """
        import json
        from pathlib import Path
        import torch
        from datasets import load_dataset
        from transformers import Qwen2Config, Qwen2ForCausalLM
        from trl import GRPOConfig, GRPOTrainer
        from curate.reward import kernel_reward
        from rl_fixtures import local_tokenizer, tiny_export, verl_rows

        export = tiny_export(Path("run"))
        rows = verl_rows(export)
        tok = local_tokenizer([r["prompt"][0]["content"] for r in rows])
        train = load_dataset("parquet", data_files=str(export / "verl" / "train.parquet"), split="train")
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                             max_position_embeddings=8192, pad_token_id=tok.pad_token_id,
                                             eos_token_id=tok.eos_token_id, bos_token_id=None))
        seen = []

        def logged_reward(prompts, completions, **columns):
            scores = kernel_reward(prompts=prompts, completions=completions, **columns)
            seen.append({"n": len(completions), "scores": scores,
                         "columns": sorted(k for k in columns if k not in ("trainer_state", "log_extra", "log_metric"))})
            return scores

        args = GRPOConfig(output_dir="out", max_steps=2, per_device_train_batch_size=2, num_generations=2,
                          max_completion_length=8, learning_rate=1e-4, logging_steps=1, report_to=[],
                          use_cpu=True, save_strategy="no", bf16=False, dataloader_num_workers=0)
        trainer = GRPOTrainer(model=model, reward_funcs=logged_reward, args=args, train_dataset=train,
                              processing_class=tok)
        trainer.train()
        print("SEEN " + json.dumps(seen))
    """)
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.split("SEEN ", 1)[1].splitlines()[0])
    assert len(seen) >= 2 and all(s["n"] == 2 for s in seen)
    assert {"reward_model", "extra_info", "data_source"} <= set(seen[0]["columns"])
    # a random tiny model writes no program: every reply scores 0 for a reason, not a crash
    assert all(score == 0.0 for s in seen for score in s["scores"])


def _sandbox_processes(root: int) -> list[int]:
    """Processes whose ancestry leads to ``root`` (alive, not zombies)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat[0] not in ("Z", "X"):
                parents[int(entry)] = int(stat[1])
    out = []
    for pid in parents:
        p, seen = pid, set()
        while p in parents and p not in seen:
            seen.add(p)
            if parents[p] == root:
                out.append(pid)
                break
            p = parents[p]
    return out


def test_sigkilled_caller_leaves_no_sandbox_process(tmp_path):
    """A trainer's reward worker killed while a hanging candidate runs: the server, the
    verification worker and the candidate all end within seconds."""
    hang = "import torch\\nclass ModelNew(torch.nn.Module):\\n    def forward(self, x):\\n        while True:\\n            pass\\n"
    script = tmp_path / "score.py"
    script.write_text(textwrap.dedent(f"""
        import os
        from curate.reward import compute_score
        from verify_fixtures import torch_relu_problem
        from curate import sandbox
        import threading, time

        def note():
            while sandbox.server_pid() is None:
                time.sleep(0.05)
            open("server.pid", "w").write(str(sandbox.server_pid()))
        threading.Thread(target=note, daemon=True).start()
        compute_score("curate/test", "```python\\n{hang}```", torch_relu_problem(), None, device="cpu", timeout_s=600)
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    caller = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env)
    deadline = time.monotonic() + 180
    server = None
    while time.monotonic() < deadline:
        pid_file = tmp_path / "server.pid"
        if server is None and pid_file.exists() and pid_file.read_text():
            server = int(pid_file.read_text())
        if server and any(_busy(p) for p in _sandbox_processes(server)):
            break  # the candidate is spinning
        assert caller.poll() is None, "the scoring script ended early"
        time.sleep(0.2)
    assert server, "the sandbox server never started"
    procs = [server] + _sandbox_processes(server)
    assert len(procs) >= 2  # the server and the verification worker running the candidate
    time.sleep(6.0)  # past the worker's start and the reference: the candidate's forward spins
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and [p for p in procs if _alive(p)]:
        time.sleep(0.1)
    left = [p for p in procs if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"sandbox processes outlived their caller: {left}"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _busy(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
    except OSError:
        return False
