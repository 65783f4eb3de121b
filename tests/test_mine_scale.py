"""Mining at scale: the fast index agrees with libcst's, the prefilter keeps the accounting,
and hostile code ends as rejected rows through `curate mine`, killed or not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from curate.executor import LocalExecutor
from curate.mine.index import index_source, index_source_ast, may_define_class
from curate.mine.index_cst import index_source_cst
from curate.mine.scan import scan
from curate.mine.sources import resolve
from curate.table import read_problems, read_rejected, read_stats

TRICKY = '''\
# header comment
"""Module docstring."""
from __future__ import annotations
import os, sys as system  # trailing
from . import sibling
from .pkg.mod import thing as other
from .star import *
x = 1; y: int = 2; import json
a, (b, *c) = 1, (2, 3, 4)
__all__ = ["A"]
counter += 1

# comment before the class
@decorator(arg=CONST)
class A(Base, metaclass=Meta):  # trailing
    attr: Annotated = None
    def method(self, p: Hint = DEFAULT, *args, key=KW_DEFAULT, **kw) -> Ret:
        global G
        try:
            return [v for v in p if v] + other.attr
        except Error as err:
            raise Wrapped(err) from None
        f"{fmt!r:>{width}}"
        lambda q=LAMBDA_DEFAULT: q + free
    # indented footer comment

# dedented comment owned by the class footer

    # indented again: the footer reaches here

if TYPE_CHECKING:
    from typing import Hidden
elif OTHER:
    pass
try:
    import fast as impl
except ImportError:
    impl = None
    def fallback(): return True
else:
    class Extra(object): pass
finally:
    done = True
if cond:
    import a.b.c
else:
    if nested:
        w = 1
    # trailing comment of the else block
for i in range(3):
    side = i
def last(
    z,
):
    match z:
        case Point(x=0, y=yy):
            return yy
        case [1, *rest] | {"k": rest}:
            return rest
        case {"k": kv, **others} if kv is not None:
            return others
  # a comment less indented than the body goes to the module
'''


def test_ast_index_equals_libcst_index_on_tricky_source():
    a = asdict(index_source_ast(TRICKY, "pkg.mod"))
    b = asdict(index_source_cst(TRICKY, "pkg.mod"))
    assert a == b
    idx = index_source_ast(TRICKY, "pkg.mod")
    assert idx.classes["A"].bases == ["Base"] and idx.classes["A"].line == 14
    assert "# indented again: the footer reaches here" in idx.stmts[idx.classes["A"].stmt].code


def test_ast_index_equals_libcst_index_on_torch_source():
    """Every file of torch.nn and torch.distributions (real, varied code): the same index."""
    source = resolve({"kind": "package", "name": "torch",
                      "include": ["torch/nn/**/*.py", "torch/distributions/*.py"]}, Path("."))
    files = source.files()
    assert len(files) > 100
    for f in files:
        text = f.read_text()
        assert asdict(index_source_ast(text, "m")) == asdict(index_source_cst(text, "m")), f


def test_index_falls_back_to_libcst_and_reports_unparsable_files():
    import libcst

    with pytest.raises(libcst.ParserSyntaxError):
        index_source("class Broken(nn.Module:\n    pass\n", "m")
    assert may_define_class(b"import x\nclass A(B):\n    pass\n")
    assert may_define_class(b"@dec\nclass A[T](B):\n    pass\n")
    assert not may_define_class(b"def f():\n    class Inner(B):\n        pass\nclass Plain:\n    pass\n")


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_prefilter_skips_files_without_classes_but_closures_still_find_their_helpers(tmp_path: Path):
    src = tmp_path / "repo"
    _write(src, "pkg/__init__.py", "from .base import Base\n")  # a re-export: no class here
    _write(src, "pkg/base.py", """
        from torch import nn
        class Base(nn.Module):
            def forward(self, x):
                return self.scale(x)
    """)
    _write(src, "pkg/helpers.py", """
        import torch
        FACTOR = 2.0
        def scale(x):
            return torch.tanh(x) * FACTOR
    """)
    _write(src, "pkg/layers.py", """
        from pkg import Base
        from .helpers import scale as _scale
        class Scaled(Base):
            def scale(self, x):
                return _scale(x)
    """)
    _write(src, "pkg/notes.py", "def unfinished(:\n")  # broken but cannot hold a class: not a row
    _write(src, "pkg/broken.py", "class Broken(nn.Module:\n    pass\n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"sources:\n  - {{kind: dir, name: repo, path: {src}}}\n")

    found = scan(resolve({"kind": "dir", "name": "repo", "path": str(src)}, tmp_path), LocalExecutor(1))
    assert sorted(found.skipped) == ["pkg/__init__.py", "pkg/helpers.py", "pkg/notes.py"]
    assert found.broken[0][0] == "pkg/broken.py"
    assert [c for _, _, c in found.candidates] == ["Base", "Scaled"]
    assert found.indexed_on_demand == 1  # pkg/__init__.py, to resolve Scaled's base

    from curate.mine import run

    stats = run(manifest=manifest, out=tmp_path / "out", workers=2, timeout_s=30, mem_mb=2048)
    assert stats["in"] == stats["kept"] + stats["rejected"] == 3  # two classes + the broken file
    per = stats["sources"]["repo"]
    assert per["files"] == 6 and per["prefilter_skipped"] == 3 and per["syntax_errors"] == 1
    assert per["indexed_on_demand"] >= 2  # helpers.py came in for the closure
    kept = read_problems(tmp_path / "out" / "mine")
    code = kept.filter(kept["name"] == "repo.Scaled")["code"][0]
    # the closure defines an imported function under the name the importing file reads it by
    assert "FACTOR = 2.0" in code and "def _scale(x)" in code and "class Base(nn.Module)" in code
    assert set(stats["phase_seconds"]) >= {"resolve", "prefilter", "index", "classes", "closure", "synthesize"}


# --------------------------------------------------------------------------- hostile code via the CLI
def _hostile_repo(root: Path, outside: Path) -> Path:
    src = root / "repo"
    _write(src, "pkg/__init__.py", "")
    _write(src, "pkg/good.py", """
        from torch import nn
        class Doubler(nn.Module):
            def __init__(self, features: int):
                super().__init__()
                self.proj = nn.Linear(features, features)
            def forward(self, x):
                return 2 * self.proj(x)
    """)
    _write(src, "pkg/hostile.py", f"""
        import os, shutil, socket, subprocess, sys, urllib.request
        import torch
        from torch import nn

        class HangsInInit(nn.Module):
            def __init__(self):
                super().__init__()
                while True:
                    pass
            def forward(self, x):
                return x

        class HangsInForward(nn.Module):
            def forward(self, x):
                while True:
                    x = x + 1

        class Exits(nn.Module):
            def __init__(self):
                super().__init__()
                sys.exit(3)
            def forward(self, x):
                return x

        class Huge(nn.Module):
            def forward(self, x):
                return torch.empty(10**12) + 1

        class Downloads(nn.Module):
            def __init__(self):
                super().__init__()
                try:  # the refusal must not be swallowed
                    urllib.request.urlopen("http://example.com/weights.pt", timeout=2)
                except Exception:
                    pass
            def forward(self, x):
                return x

        class Connects(nn.Module):
            def forward(self, x):
                try:
                    socket.socket().connect(("127.0.0.1", 9))
                except OSError:
                    pass
                return x

        class WritesOutside(nn.Module):
            def forward(self, x):
                try:
                    with open({str(outside / "leak.txt")!r}, "w") as f:
                        f.write("leaked")
                except OSError:
                    pass
                return x

        class Wipes(nn.Module):
            def __init__(self):
                super().__init__()
                try:
                    shutil.rmtree({str(outside / "precious")!r})
                except OSError:
                    pass
            def forward(self, x):
                return x

        class ShellsOut(nn.Module):
            def forward(self, x):
                subprocess.run(["touch", {str(outside / "touched")!r}])
                return x
    """)
    _write(src, "pkg/missing.py", """
        import not_a_real_package_xyz
        from torch import nn
        class NeedsMissing(nn.Module):
            def forward(self, x):
                return not_a_real_package_xyz.f(x)
    """)
    _write(src, "pkg/broken.py", "class Broken(nn.Module:\n    pass\n")
    return src


EXPECTED = {"repo.HangsInInit": {"timeout"}, "repo.HangsInForward": {"timeout"},
            "repo.Exits": {"constructor_failed"}, "repo.Huge": {"no_runnable_inputs", "memory"},
            "repo.Downloads": {"network"}, "repo.Connects": {"network"},
            "repo.WritesOutside": {"filesystem"}, "repo.Wipes": {"filesystem"},
            "repo.ShellsOut": {"process"}, "repo.NeedsMissing": {"import_missing"},
            "repo:pkg/broken.py": {"syntax_error"}}
MINE = [sys.executable, "-m", "curate.cli", "mine"]
FLAGS = ["--executor", "local", "--workers", "2", "--timeout-s", "8", "--mem-mb", "2048"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """An uninterrupted `curate mine` over the hostile repository."""
    root = tmp_path_factory.mktemp("hostile")
    outside = root / "outside"
    (outside / "precious").mkdir(parents=True)
    (outside / "precious" / "data.txt").write_text("keep me")
    src = _hostile_repo(root, outside)
    manifest = root / "m.yaml"
    manifest.write_text(f"sources:\n  - {{kind: dir, name: repo, path: {src}}}\n")
    out = root / "out"
    p = subprocess.run([*MINE, str(manifest), "--out", str(out), *FLAGS], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return {"root": root, "outside": outside, "manifest": manifest, "out": out, "stdout": p.stdout}


def test_hostile_code_ends_as_rejected_rows_with_the_right_reason(hostile):
    stats = read_stats(hostile["out"] / "mine")
    assert json.loads(hostile["stdout"].splitlines()[0])["in"] == stats["in"]
    assert stats["in"] == stats["kept"] + stats["rejected"] == len(EXPECTED) + 1
    assert read_problems(hostile["out"] / "mine")["name"].to_list() == ["repo.Doubler"]
    rej = read_rejected(hostile["out"] / "mine")
    reasons = dict(zip(rej["name"], rej["reject_reason"]))
    assert {n: r for n, r in reasons.items() if r not in EXPECTED[n]} == {}
    assert "example.com" in rej.filter(rej["name"] == "repo.Downloads")["reject_detail"][0]
    outside = hostile["outside"]
    assert not (outside / "leak.txt").exists() and not (outside / "touched").exists()
    assert (outside / "precious" / "data.txt").read_text() == "keep me"


def test_a_killed_parallel_run_resumes_to_the_uninterrupted_table(hostile, tmp_path: Path):
    out = tmp_path / "out"
    journal = out / "mine" / "_journal.jsonl"
    proc = subprocess.Popen([*MINE, str(hostile["manifest"]), "--out", str(out), *FLAGS],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) > 3:
            break
        time.sleep(0.1)
    assert proc.poll() is None, "mine finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "mine" / "stats.json").exists()

    p = subprocess.run([*MINE, str(hostile["manifest"]), "--out", str(out), *FLAGS], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert read_stats(out / "mine")["resumed"] >= 3
    cols = ["problem_id", "name", "code", "init_args", "input_spec"]
    assert read_problems(out / "mine").select(cols).equals(read_problems(hostile["out"] / "mine").select(cols))
    rej = ["problem_id", "name", "reject_reason"]
    assert read_rejected(out / "mine").select(rej).equals(read_rejected(hostile["out"] / "mine").select(rej))


def test_small_sources_closures_built_a_source_per_worker_equal_the_serial_ones(tmp_path: Path):
    """Sources too small to spread over the workers are built a whole source per task, so many
    small sources use every core; the closures equal those built one by one."""
    from curate.mine.scan import closure_of
    from curate.mine.stage import small_source_closures

    scans = []
    for f in ("activation", "linear", "pixelshuffle"):
        source = resolve({"kind": "package", "name": "torch", "include": [f"torch/nn/modules/{f}.py"]},
                         tmp_path / "cache")
        scans.append(scan(source, LocalExecutor(1), source.files(), []))
    chosen = [s.candidates for s in scans]
    with LocalExecutor(2) as ex:
        ready = small_source_closures(scans, chosen, ex)
    assert sorted(ready) == [0, 1, 2]
    for k, s in enumerate(scans):
        assert ready[k] == [closure_of(s.resolver, c) for c in chosen[k]]
        assert all(status == "ok" for status, _ in ready[k]) and len(ready[k]) >= 2
