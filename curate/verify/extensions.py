"""C++/CUDA extensions of candidates, each built in a folder of its own.

Models name their extensions alike (``fused_ops``, ``custom_kernel``), and
``torch.utils.cpp_extension.load_inline``/``load`` build every extension of a name in one
folder of torch's build root. Verifications running at once (every sample of one prompt under
RL) then overwrite each other's sources mid-build, load a half-written ``.so``, or load
*another* candidate's build: a wrong candidate can be scored with a right one's kernel.

:func:`isolated` wraps those two functions so that each build goes to
``<root>/<name>-<digest>``, where the digest covers everything that shapes the build (the
sources' text, function list, compiler and linker flags, CUDA/SYCL switches, torch, Python
and the target architectures). So:

- different code never shares a folder, whatever its name;
- the same code built again (a reply repeated across samples) finds the finished build and
  pays no compiler;
- builds of the same code at once wait for one another on an ``flock`` lock (released by the
  kernel when a builder dies, unlike torch's own lock file, which a killed builder leaves
  behind for others to wait on forever);
- a folder is used only once a build in it has finished (a marker file): the leftovers of a
  builder that was killed are cleared before the next build.

Builds run quiet whatever the candidate asked (``verbose=False``), so torch's error carries
the compiler's output; :func:`build_error` cuts it to the first diagnostics, which the verdict
quotes (``Error building extension 'fused_ops': cuda.cu(12): error: identifier "x" is
undefined``) instead of a bare "Error building extension".

The module keeps its name (a candidate's own ``PYBIND11_MODULE(fused_ops, m)`` still loads);
two builds of one name from different folders load as separate modules, since Python keys
extension modules by file as well as name. At most :data:`MAX_BUILDS` finished folders are
kept (the least recently used go first). Imports only the standard library (torch lazily).
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import shutil
import sys
import time
from typing import Any, Callable

#: Finished build folders kept under the root; older ones are removed after a new build.
MAX_BUILDS = 256
#: The file whose presence says a folder's build finished.
DONE = ".curate-built"
#: Environment variable naming the root (default: ``<torch's extension root>/curate-candidates``).
ROOT_ENV = "CURATE_EXTENSIONS_DIR"


def build_root() -> str:
    """The folder the isolated builds live in (created when missing)."""
    root = os.environ.get(ROOT_ENV)
    if not root:
        from torch.utils.cpp_extension import get_default_build_root

        root = os.path.join(get_default_build_root(), "curate-candidates")
    os.makedirs(root, exist_ok=True)
    return root


def _source_text(paths: Any) -> list[str]:
    """The text of ``load``'s source files (a path or a list of paths), in order."""
    out = []
    for p in [paths] if isinstance(paths, str) else list(paths or []):
        try:
            with open(p, "rb") as f:
                out.append(hashlib.sha256(f.read()).hexdigest())
        except OSError:
            out.append(f"missing:{p}")
    return out


def _targets() -> dict[str, Any]:
    """What else decides the binary: torch, Python, the CUDA architectures built for."""
    import torch

    arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if arch is None and torch.cuda.is_available() and torch.cuda.is_initialized():
        arch = ".".join(map(str, torch.cuda.get_device_capability()))
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version,
            "arch": arch, "cxx": os.environ.get("CXX"), "cc": os.environ.get("CC")}


def build_key(kind: str, arguments: dict[str, Any]) -> str:
    """The digest (hex, 16 characters) naming the folder of one build.

    Args:
        kind: ``"load_inline"`` or ``"load"``.
        arguments: the call's arguments by name (``load``'s ``sources`` are file paths,
            hashed by content).
    """
    args = {k: v for k, v in arguments.items() if k not in ("build_directory", "verbose")}
    if kind == "load":
        args["sources"] = _source_text(args.get("sources"))
    blob = json.dumps({"kind": kind, "args": args, "targets": _targets()}, sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _safe(name: Any) -> str:
    text = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(name))[:64]
    return text or "extension"


def _prune(root: str, keep: str) -> None:
    """Remove the least recently used finished folders beyond :data:`MAX_BUILDS`; a folder
    whose lock another process holds is skipped."""
    try:
        entries = [e for e in os.scandir(root) if e.is_dir() and os.path.exists(os.path.join(e.path, DONE))]
    except OSError:
        return
    if len(entries) <= MAX_BUILDS:
        return
    entries.sort(key=lambda e: os.path.getmtime(os.path.join(e.path, DONE)))
    for e in entries[:len(entries) - MAX_BUILDS]:
        if e.path == keep:
            continue
        with open(e.path + ".lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            shutil.rmtree(e.path, ignore_errors=True)


def isolated(original: Callable, kind: str) -> Callable:
    """``original`` (``cpp_extension.load_inline`` or ``load``) building in a folder of its
    own per build key (see the module docstring); same signature and result.

    Args:
        original: the function to wrap.
        kind: ``"load_inline"`` or ``"load"`` (how ``sources`` are read for the key).
    """
    signature = inspect.signature(original)

    def load(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)  # torch raises its own error for bad arguments
        arguments = dict(bound.arguments)
        name = arguments.get("name")
        folder = os.path.join(build_root(), f"{_safe(name)}-{build_key(kind, arguments)}")
        bound.arguments["build_directory"] = folder
        # quiet builds: torch then puts the compiler's output in its error, which the verdict
        # can quote (a verbose build prints it to the worker's stdout, where nobody reads it)
        if "verbose" in signature.parameters:
            bound.arguments["verbose"] = False
        with open(folder + ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # waits for a build of the same code; freed on death
            try:
                done = os.path.join(folder, DONE)
                if not os.path.exists(done):
                    shutil.rmtree(folder, ignore_errors=True)  # a killed builder's leftovers
                os.makedirs(folder, exist_ok=True)
                # torch's own lock file: only stale here, since we hold the folder's lock
                try:
                    os.unlink(os.path.join(folder, "lock"))
                except FileNotFoundError:
                    pass
                _forget_version(name)
                try:
                    module = original(*bound.args, **bound.kwargs)
                except RuntimeError as exc:
                    raise RuntimeError(build_error(str(exc), folder)) from None
                with open(done, "w") as f:
                    f.write(f"{time.time()}\n")
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        _prune(build_root(), folder)
        return module

    load.__wrapped__ = original
    load.__name__ = getattr(original, "__name__", kind)
    load.__doc__ = original.__doc__
    return load


#: Compiler lines quoted from a failed build, and the characters kept of each.
ERROR_LINES, ERROR_CHARS = 3, 300


def build_error(message: str, folder: str = "") -> str:
    """torch's build error made short enough for a verdict: ``Error building extension
    'name'`` and the first :data:`ERROR_LINES` distinct compiler diagnostics of its output
    (lines with ``error``; the build folder's path dropped), or that head alone where the
    output holds none. Other errors pass through unchanged."""
    head, sep, output = message.partition(": ")
    if not head.startswith("Error building extension") or not sep:
        return message
    picked: list[str] = []
    for line in output.splitlines():
        line = line.replace(folder + os.sep, "").strip() if folder else line.strip()
        low = line.lower()
        if "error" not in low or low.startswith(("ninja: build stopped", "failed:")) or line in picked:
            continue
        picked.append(line[:ERROR_CHARS])
        if len(picked) == ERROR_LINES:
            break
    return f"{head}: {' | '.join(picked)}" if picked else head


def _forget_version(name: Any) -> None:
    """Make torch build ``name`` under its own name: its versioner renames an extension
    whose sources changed within a process to ``name_v1``..., which a candidate that spells
    its module's name in its C++ (``PYBIND11_MODULE(fused_ops, m)``) cannot load, and which
    our per-code folders make unneeded."""
    try:
        from torch.utils.cpp_extension import JIT_EXTENSION_VERSIONER

        JIT_EXTENSION_VERSIONER.entries.pop(name, None)
    except (ImportError, AttributeError):
        pass
