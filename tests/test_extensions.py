"""Candidates' C++/CUDA extensions build each in a folder of their own (curate.verify.extensions)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
import uuid
from pathlib import Path

import pytest
import torch

from curate.reward import compute_score_batch
from curate.verify import extensions
from verify_fixtures import SMALL_SPEC, candidate, kernelbench, reply


def _fake_loader(log: list):
    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                    build_directory=None, verbose=False):
        log.append((name, build_directory))
        Path(build_directory, f"{name}.so").write_text(cpp_sources)
        return f"module {name} from {build_directory}"
    return load_inline


def test_build_folder_follows_the_code_not_the_name(tmp_path, monkeypatch):
    monkeypatch.setenv(extensions.ROOT_ENV, str(tmp_path))
    log: list = []
    load = extensions.isolated(_fake_loader(log), "load_inline")
    load("fused_ops", "int f() { return 1; }", functions=["f"])
    load(name="fused_ops", cpp_sources="int f() { return 2; }", functions=["f"])
    load("fused_ops", "int f() { return 1; }", functions=["f"], build_directory="/tmp/shared")
    load("fused_ops", "int f() { return 1; }", functions=["f"], extra_cflags=["-O3"])
    names = {n for n, _ in log}
    folders = [d for _, d in log]
    assert names == {"fused_ops"}  # the module keeps its name
    assert folders[0] != folders[1]  # same name, other code: another folder
    assert folders[2] == folders[0]  # same code: same folder, whatever build_directory it asked for
    assert folders[3] not in folders[:3]  # other flags: another folder
    assert all(Path(d).parent == tmp_path and Path(d, extensions.DONE).exists() for d in folders)


def test_leftovers_of_a_killed_build_are_cleared(tmp_path, monkeypatch):
    monkeypatch.setenv(extensions.ROOT_ENV, str(tmp_path))
    log: list = []
    load = extensions.isolated(_fake_loader(log), "load_inline")
    load("fused_ops", "int f();")
    folder = Path(log[0][1])
    (folder / extensions.DONE).unlink()  # as if its builder died before finishing
    (folder / "half_written.o").write_text("garbage")
    (folder / "lock").write_text("")  # torch's own lock file, left by the dead builder
    load("fused_ops", "int f();")
    assert not (folder / "half_written.o").exists() and not (folder / "lock").exists()
    assert (folder / extensions.DONE).exists()


def _slow_build(root: str, delay: float, queue) -> None:
    os.environ[extensions.ROOT_ENV] = root

    def load_inline(name, cpp_sources, build_directory=None):
        marker = Path(build_directory, "building")
        if marker.exists():  # another process is inside this folder's build right now
            queue.put("overlap")
        marker.write_text(str(os.getpid()))
        time.sleep(delay)
        marker.unlink()
        queue.put("built")
        return build_directory

    extensions.isolated(load_inline, "load_inline")("fused_ops", "same code")


def test_builds_of_the_same_code_wait_for_one_another(tmp_path):
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_slow_build, args=(str(tmp_path), 0.3, queue)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    events = [queue.get(timeout=5) for _ in range(4)]
    assert events == ["built"] * 4  # never two builders in one folder at once


def _same_named_replies_at_once(right: str, wrong: str, marker: str, device: str, spec: list,
                                 n: int = 8) -> None:
    """``n`` replies verified at once, every one building an extension named "fused_ops" with a
    function "fused_ops_cuda", half right and half wrong. A run-unique comment after ``marker``
    makes the two sources new to the build cache, so both really compile, side by side."""
    nonce = uuid.uuid4().hex

    def tagged(code: str) -> str:
        return code.replace(marker, f"{marker}\n// run {nonce}", 1)

    replies = [reply(tagged(right) if i % 2 == 0 else tagged(wrong)) for i in range(n)]
    relu = kernelbench("19_ReLU")
    info = {"init_args": "[]", "input_spec": json.dumps(spec)}
    scores = compute_score_batch(["curate/test"] * n, replies, [relu] * n, [info] * n,
                                 workers=n, time_it=False, device=device)
    verdicts = [s["correct"] for s in scores]
    assert verdicts == [True, False] * (n // 2), [s["reason"] for s in scores]
    assert all(s["compiled"] for s in scores), [s["reason"] for s in scores]
    root = Path(extensions.build_root())
    built = [d for d in root.glob("fused_ops-*") if d.is_dir()
             and any(nonce in f.read_text(errors="ignore") for f in d.glob("*.c*"))]
    assert len(built) == 2  # one build per distinct source, not one per reply


@pytest.mark.slow
def test_concurrent_same_named_cpp_extensions_get_their_own_verdicts():
    _same_named_replies_at_once(candidate("relu_cpp_fused_ops"), candidate("relu_cpp_fused_ops_wrong"),
                                'cpp_source = r"""', "cpu", SMALL_SPEC)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA and nvcc")
def test_gpu_concurrent_same_named_cuda_extensions_get_their_own_verdicts():
    _same_named_replies_at_once(candidate("relu_cuda_fused_ops"), candidate("relu_cuda_fused_ops_wrong"),
                                'cuda_src = r"""', "cuda", [{"kind": "tensor", "shape": [1000, 4001]}])


def test_builds_run_quiet_so_the_error_carries_the_compiler_output(tmp_path, monkeypatch):
    monkeypatch.setenv(extensions.ROOT_ENV, str(tmp_path))
    log: list = []

    def load_inline(name, cpp_sources, build_directory=None, verbose=False):
        log.append(verbose)
        return name

    extensions.isolated(load_inline, "load_inline")("fused_ops", "int f();", verbose=True)
    assert log == [False]


def test_build_error_quotes_the_first_compiler_diagnostics():
    folder = "/root/.cache/torch_extensions/curate-candidates/fused_ops-0123456789abcdef"
    log = (f"[1/2] c++ -MMD -MF main.o.d -c {folder}/main.cpp -o main.o\n"
           "FAILED: main.o\n"
           f"{folder}/main.cpp: In function 'at::Tensor f(at::Tensor)':\n"
           f"{folder}/main.cpp:4:12: error: 'undefined_thing' was not declared in this scope\n"
           f"{folder}/main.cpp:5:1: error: expected ';' before '}}' token\n"
           f"{folder}/main.cpp:4:12: error: 'undefined_thing' was not declared in this scope\n"
           "ninja: build stopped: subcommand failed.\n")
    msg = extensions.build_error(f"Error building extension 'fused_ops': {log}", folder)
    assert msg == ("Error building extension 'fused_ops': main.cpp:4:12: error: 'undefined_thing' was not "
                   "declared in this scope | main.cpp:5:1: error: expected ';' before '}' token")
    assert extensions.build_error("Error building extension 'fused_ops'") == "Error building extension 'fused_ops'"
    assert extensions.build_error("CUDA out of memory") == "CUDA out of memory"


@pytest.mark.slow
def test_a_cpp_extension_that_does_not_compile_fails_with_the_compiler_error():
    """A real C++ build on the CPU that fails (an undeclared identifier), asked to build
    verbosely as model-written code often does: the verdict names the compiler's error."""
    broken = candidate("relu_cpp_fused_ops").replace(
        "out[i] = in[i] > 0.f ? in[i] : 0.f;", f"out[i] = relu_{uuid.uuid4().hex[:8]}(in[i]);").replace(
        "verbose=False", "verbose=True")
    relu = kernelbench("19_ReLU")
    info = {"init_args": "[]", "input_spec": json.dumps(SMALL_SPEC)}
    (score,) = compute_score_batch(["curate/test"], [reply(broken)], [relu], [info], workers=1,
                                   time_it=False, device="cpu")
    assert not score["correct"]
    assert score["reason"].startswith("candidate failed to load: RuntimeError: Error building extension 'fused_ops': ")
    assert "error:" in score["reason"] and "relu_" in score["reason"], score["reason"]
