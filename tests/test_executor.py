"""Executors: the same stage code on a local process pool and on a local Ray instance."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from curate.executor import LocalExecutor, RayExecutor, make_executor
from curate.mine.scan import closure_sources, index_file, scan
from curate.mine.sources import resolve
from curate.sandbox import NETWORK, OK, TIMEOUT
from curate.table import read_problems, read_rejected


def _torch_nn(tmp_path: Path):
    return resolve({"kind": "package", "name": "torch", "include": ["torch/nn/modules/*.py"]}, tmp_path)


def _scale(factor: float, x: int) -> float:
    return factor * x


def _fail(x: int) -> int:
    raise ValueError(f"bad item {x}")


def _hang() -> None:
    while True:
        pass


def _phone_home() -> str:
    import socket

    try:
        socket.socket().connect(("127.0.0.1", 9))
    except OSError:
        pass
    return "carried on"


def _square(x: int) -> int:
    return x * x


def test_local_pool_indexes_real_files_like_one_process(tmp_path: Path):
    source = _torch_nn(tmp_path)
    from curate.mine.closure import module_name

    items = [(str(f), *module_name(source.root, f)) for f in source.files()]
    assert len(items) >= 25
    serial = list(LocalExecutor(1).map(index_file, items))
    with LocalExecutor(2) as ex:
        pooled = list(ex.map(index_file, items, chunksize=5))
        seen = sorted(i for i, _ in ex.imap(index_file, items, chunksize=7))  # the same pool again
    assert pooled == serial  # same indexes, same order
    assert all(idx is not None for idx, _ in pooled)
    assert seen == list(range(len(items)))  # every item once


def test_local_pool_passes_shared_data_and_raises_task_errors():
    with LocalExecutor(2) as ex:
        assert list(ex.map(_scale, range(10), shared=0.5, chunksize=3)) == [0.5 * i for i in range(10)]
        with pytest.raises(ValueError, match="bad item"):
            list(ex.map(_fail, range(4)))
        assert list(ex.map(_square, range(5))) == [0, 1, 4, 9, 16]  # the pool survives a failed map
    with pytest.raises(ValueError, match="unknown executor"):
        make_executor("spark")


def test_parallel_closures_match_the_serial_ones(tmp_path: Path):
    """The resolver travels once per worker; closures come back in candidate order."""
    with LocalExecutor(2) as ex:
        found = scan(_torch_nn(tmp_path), ex)
        pooled = closure_sources(found, ex, found.candidates, min_parallel=0)
    assert len(found.candidates) > 100
    serial = closure_sources(found, LocalExecutor(1), found.candidates)
    assert pooled == serial
    assert sum(status == "ok" for status, _ in serial) > 100


# --------------------------------------------------------------------------- Ray
@pytest.fixture(scope="module")
def ray_ex():
    ex = RayExecutor(num_cpus=2)  # a local Ray instance, shut down after the module's tests
    yield ex
    ex.close()


def test_ray_runs_the_stage_functions_of_the_local_pool(ray_ex, tmp_path: Path):
    assert ray_ex.kind == "ray" and ray_ex.workers == 2
    assert list(ray_ex.map(_square, range(7), chunksize=2)) == [i * i for i in range(7)]
    assert list(ray_ex.map(_scale, range(5), shared=2.0)) == [2.0 * i for i in range(5)]
    found = scan(_torch_nn(tmp_path), ray_ex)
    local = scan(_torch_nn(tmp_path), LocalExecutor(1))
    assert found.candidates == local.candidates and found.broken == local.broken
    assert closure_sources(found, ray_ex, found.candidates, min_parallel=0) == \
        closure_sources(local, LocalExecutor(1), local.candidates)


def test_ray_tasks_sandbox_untrusted_calls(ray_ex):
    calls = [((3,), {}), ((), {}), ((), {})]
    fns = [_square, _hang, _phone_home]
    outcomes = {}
    for fn, call in zip(fns, calls):
        # each task's process imports this test module (and ray) to unpickle its function:
        # seconds on a loaded 2-core machine, so only the hang gets the short limit
        limit = 5 if fn is _hang else 60
        outcomes[fn.__name__] = dict(ray_ex.sandboxed(fn, [call], timeout_s=limit, mem_mb=2048, guard=True))[0]
    assert outcomes["_square"].status == OK and outcomes["_square"].value == 9
    assert outcomes["_hang"].status == TIMEOUT
    assert outcomes["_phone_home"].status == NETWORK


def test_mine_on_ray_writes_the_table_of_the_local_run(ray_ex, tmp_path: Path):
    from curate.mine import run

    src = tmp_path / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "helpers.py").write_text("SCALE = 3.0\n\ndef triple(x):\n    return x * SCALE\n")
    (src / "pkg" / "layers.py").write_text(textwrap.dedent("""
        import socket
        from torch import nn
        from .helpers import triple

        class Tripler(nn.Module):
            def __init__(self, features: int):
                super().__init__()
                self.proj = nn.Linear(features, features)
            def forward(self, x):
                return triple(self.proj(x))

        class Phones(nn.Module):
            def __init__(self):
                super().__init__()
                try:
                    socket.getaddrinfo("example.com", 443)
                except OSError:
                    pass
            def forward(self, x):
                return x
    """))
    (src / "pkg" / "broken.py").write_text("class Broken(nn.Module:\n    pass\n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"sources:\n  - {{kind: dir, name: repo, path: {src}}}\n")
    # by name, as the CLI and the pipeline YAML pass it: joins the Ray instance already running
    on_ray = run(manifest=manifest, out=tmp_path / "ray", timeout_s=20, mem_mb=2048, executor="ray")
    assert ray_ex._ray.is_initialized()  # not shut down by the run that did not start it
    local = run(manifest=manifest, out=tmp_path / "local", workers=2, timeout_s=20, mem_mb=2048)
    assert on_ray["executor"] == "ray" and local["executor"] == "local"
    assert on_ray["in"] == local["in"] == 3 and on_ray["kept"] == local["kept"] == 1
    cols = ["problem_id", "name", "code", "init_args", "input_spec"]
    assert read_problems(tmp_path / "ray" / "mine").select(cols).equals(
        read_problems(tmp_path / "local" / "mine").select(cols))
    rej = read_rejected(tmp_path / "ray" / "mine")
    assert dict(zip(rej["name"], rej["reject_reason"])) == {"repo.Phones": "network",
                                                             "repo:pkg/broken.py": "syntax_error"}
    assert rej.select(["problem_id", "reject_reason"]).equals(
        read_rejected(tmp_path / "local" / "mine").select(["problem_id", "reject_reason"]))


def _pid(_: int) -> int:
    import os
    import time

    time.sleep(0.2)  # long enough for both workers to take an item
    return os.getpid()


def test_pool_workers_end_with_a_parent_killed_by_sigkill(tmp_path):
    """A run killed with SIGKILL alone (not its process group: the OOM killer, ``kill -9``)
    leaves no idle pool workers behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from test_sandbox import _running

    pid_file = tmp_path / "workers"
    prog = (f"import sys, time; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from curate.executor import LocalExecutor\nfrom test_executor import _pid\n"
            "ex = LocalExecutor(2)\npids = set(ex.map(_pid, range(8)))\n"
            f"open({str(pid_file)!r}, 'w').write(' '.join(map(str, pids)))\ntime.sleep(600)\n")
    run = subprocess.Popen([sys.executable, "-c", prog], start_new_session=True)
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and run.poll() is None, "the map never finished"
        time.sleep(0.1)
    workers = [int(p) for p in pid_file.read_text().split()]
    assert workers and all(_running(p) for p in workers)
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 30
    while any(_running(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [p for p in workers if _running(p)]
    for p in alive:
        os.kill(p, signal.SIGKILL)
    os.killpg(run.pid, signal.SIGKILL) if alive else None
    assert not alive, "pool workers outlived their run"
