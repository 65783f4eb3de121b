"""Worker isolation: time, memory, crashes and exits end the task, not the run."""

from __future__ import annotations

import os

import pytest

from curate.sandbox import CRASH, ERROR, FILESYSTEM, MEMORY, NETWORK, OK, PROCESS, TIMEOUT, Sandbox


def _square_sum(n):
    import torch

    return float((torch.arange(n, dtype=torch.float64) ** 2).sum())


def _hang():
    while True:
        pass


def _segfault():
    import ctypes

    ctypes.string_at(0)


def _huge():
    import torch

    return torch.empty(10**11).sum()


def _exit():
    raise SystemExit(3)


def _cwd_is_private():
    return os.getcwd()


def test_outcomes_by_failure_kind():
    sb = Sandbox(workers=2, timeout_s=3, mem_mb=1024)
    assert sb.run(_square_sum, 4).value == 14.0
    assert sb.run(_hang).status == TIMEOUT
    assert sb.run(_segfault).status == CRASH and "SIGSEGV" in sb.run(_segfault).error
    assert sb.run(_huge).status == MEMORY
    out = sb.run(_exit)
    assert out.status == ERROR and "SystemExit" in out.error
    assert "curate-task-" in sb.run(_cwd_is_private).value


def test_map_keeps_going_after_failures():
    sb = Sandbox(workers=2, timeout_s=3, mem_mb=1024)
    calls = [((i,), {}) for i in range(6)]
    fns = dict(sb.map(_square_sum, calls))
    assert sorted(fns) == list(range(6))
    assert all(o.status == OK for o in fns.values())
    assert fns[3].value == 0 + 1 + 4.0


# --------------------------------------------------------------------------- the guard
def _connect_quietly():
    import socket

    try:  # mined code that swallows the refusal is still reported
        socket.socket().connect(("127.0.0.1", 9))
    except Exception:
        pass
    return "carried on"


def _dns_lookup():
    import urllib.request

    try:
        urllib.request.urlopen("http://example.com/weights.pt", timeout=2)
    except Exception:
        pass
    return "carried on"


def _write(path):
    try:
        with open(path, "w") as f:
            f.write("leaked")
    except Exception:
        pass
    return "carried on"


def _remove(path):
    import shutil

    try:
        shutil.rmtree(path)
    except Exception:
        pass
    return "carried on"


def _shell(path):
    import subprocess

    return subprocess.run(["touch", path]).returncode


def _private_files():
    """Writing, renaming and removing inside the working folder, temp files and folders under
    the home directory (the working folder, for the task) are allowed."""
    import tempfile

    import torch

    with open("a.txt", "w") as f:
        f.write("x")
    os.rename("a.txt", "b.txt")
    os.mkdir("sub")
    os.remove("b.txt")
    with tempfile.NamedTemporaryFile(suffix=".pt", delete=False) as f:
        torch.save(torch.ones(3), f.name)
    # a library's log folder under the home directory (super-gradients' ~/sg_logs)
    os.makedirs(os.path.join(os.path.expanduser("~"), "sg_logs"))
    return os.getcwd(), f.name


def _torch_and_triton_work():
    """torch and Triton paths mined code and the verifier touch, run under the guard."""
    os.environ["TRITON_INTERPRET"] = "1"  # read when a kernel is decorated: run it on CPU tensors
    import torch
    import torch.nn.functional as F
    import triton
    import triton.language as tl
    from torch import nn

    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.GELU(), nn.Flatten(), nn.LazyLinear(4))
    y = m(torch.randn(2, 3, 16, 16))
    q = torch.randn(1, 2, 8, 16)
    z = F.scaled_dot_product_attention(q, q, q)
    scripted = torch.jit.script(nn.Linear(4, 4))
    traced = torch.fx.symbolic_trace(nn.Linear(4, 4))

    @triton.jit
    def add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(o_ptr + i, tl.load(x_ptr + i, mask=i < n) + tl.load(y_ptr + i, mask=i < n), mask=i < n)

    a, b, o = torch.randn(1000), torch.randn(1000), torch.empty(1000)
    add[(4,)](a, b, o, 1000, BLOCK=256)
    return (list(y.shape), list(z.shape), scripted(torch.ones(4)).shape[0], traced(torch.ones(4)).shape[0],
            float((o - a - b).abs().max()))


def test_guard_reports_network_filesystem_and_process_use_even_when_caught(tmp_path):
    sb = Sandbox(workers=2, timeout_s=30, mem_mb=2048, guard=True)
    net = sb.run(_connect_quietly)
    assert net.status == NETWORK and "socket.connect" in net.error and "127.0.0.1" in net.error
    dns = sb.run(_dns_lookup)
    assert dns.status == NETWORK and "example.com" in dns.error

    outside = tmp_path / "leak.txt"  # pytest's tmp_path is in the shared temp folder: refused too
    fs = sb.run(_write, str(outside))
    assert fs.status == FILESYSTEM and str(outside) in fs.error
    assert not outside.exists()
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "data.txt").write_text("precious")
    rm = sb.run(_remove, str(keep))
    assert rm.status == FILESYSTEM and (keep / "data.txt").read_text() == "precious"

    proc = sb.run(_shell, str(tmp_path / "touched"))
    assert proc.status == PROCESS and "subprocess.Popen" in proc.error
    assert not (tmp_path / "touched").exists()


def test_guard_allows_the_private_folder_torch_and_triton():
    sb = Sandbox(workers=1, timeout_s=120, mem_mb=4096, guard=True)
    out = sb.run(_private_files)
    assert out.status == OK, out.error
    cwd, saved = out.value
    assert "curate-task-" in cwd and saved.startswith(cwd)  # temp files land in the private folder
    assert not os.path.exists(cwd)  # removed after the task
    work = sb.run(_torch_and_triton_work)
    assert work.status == OK, work.error
    assert work.value[:4] == ([2, 4], [1, 2, 8, 16], 4, 4) and work.value[4] < 1e-5


def _read_host_file_quietly(path):
    try:
        with open(path) as f:
            return len(f.read())
    except Exception:
        return -1


def _environment_and_own_files():
    """What a guarded task may still read: its installation's files, its own status."""
    import inspect

    import torch

    with open("/proc/self/status") as f:
        status = f.readline()
    # filelock (torch's dependency) reads the boot id when its identity module is imported
    boot = _read_host_file_quietly("/proc/sys/kernel/random/boot_id")
    return sorted(os.environ), len(inspect.getsource(torch.nn.Linear)), status.split(":")[0], boot


def test_guard_refuses_reading_host_files_and_hides_the_host_environment(tmp_path):
    host = tmp_path / "secret.txt"  # outside the task's folder and the Python installation
    host.write_text("host-specific")
    sb = Sandbox(workers=2, timeout_s=60, mem_mb=4096, guard=True)
    passwd = sb.run(_read_host_file_quietly, "/etc/passwd")
    assert passwd.status == FILESYSTEM and "/etc/passwd" in passwd.error and "read" in passwd.error
    secret = sb.run(_read_host_file_quietly, str(host))
    assert secret.status == FILESYSTEM and str(host) in secret.error
    own = sb.run(_environment_and_own_files)
    assert own.status == OK, own.error
    keys, source_chars, first, boot = own.value
    assert source_chars > 1000 and first == "Name"
    assert boot == (-1 if not os.path.exists("/proc/sys/kernel/random/boot_id") else 37)
    from curate.sandbox import ENV_KEPT, ENV_KEPT_PREFIXES

    assert keys and all(k in ENV_KEPT or k.startswith(ENV_KEPT_PREFIXES) for k in keys), keys


def test_unguarded_tasks_keep_their_old_freedom(tmp_path):
    """The verifier compiles (Triton and C++ caches, compiler processes): no guard by default."""
    out = Sandbox(workers=1, timeout_s=30).run(_write, str(tmp_path / "ok.txt"))
    assert out.status == OK and (tmp_path / "ok.txt").read_text() == "leaked"


def _note_pid_then_hang(path):
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    while True:
        pass


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # a zombie is dead
    except FileNotFoundError:
        return False


def test_tasks_end_with_a_run_killed_by_sigkill(tmp_path):
    # the run and its fork server die at once (the process group, as a kill of the job does);
    # the task lives in its own session and must not spin on without its time limit
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    pid_file = tmp_path / "task.pid"
    prog = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from curate.sandbox import Sandbox\nfrom test_sandbox import _note_pid_then_hang\n"
            f"Sandbox(workers=1, timeout_s=600).run(_note_pid_then_hang, {str(pid_file)!r})\n")
    run = subprocess.Popen([sys.executable, "-c", prog], start_new_session=True)
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and run.poll() is None, "the task never started"
        time.sleep(0.1)
    task = int(pid_file.read_text())
    assert _running(task)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 30
    while _running(task) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _running(task)
    if alive:
        os.kill(task, signal.SIGKILL)
    assert not alive, "the task outlived its run"


def test_guarded_task_reads_curate_source_when_curate_is_not_on_the_import_path(tmp_path):
    """An installed curate (an editable install is found through an import hook, not
    ``sys.path``) run from another folder: a task whose error traceback reads curate's own
    source is an ``error`` with that traceback, not a ``filesystem`` refusal (as every mined
    class was in `curate run` from a fresh clone before the package folder was readable)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from curate.sandbox import Sandbox\n"
        "from curate.problem import load_problem\n"
        "if __name__ == '__main__':\n"
        "    out = Sandbox(workers=1, timeout_s=60, guard=True).run(load_problem, 'raise ValueError(1)')\n"
        "    print(out.status, '|', out.error)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    in_path = subprocess.run([sys.executable, "-c", "import curate, sys, os; print(any(os.path.realpath(p or '.') "
                              "== os.path.realpath(os.path.dirname(os.path.dirname(curate.__file__))) "
                              "for p in sys.path))"], cwd=tmp_path, env=env, capture_output=True, text=True)
    if in_path.stdout.strip() != "False":
        pytest.skip("curate is on the import path here (not an installed copy)")
    assert res.returncode == 0, res.stderr[-2000:]
    status, _, error = res.stdout.strip().partition(" | ")
    assert status == "error" and "ProblemLoadError" in error, res.stdout
