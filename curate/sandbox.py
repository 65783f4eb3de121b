"""Run untrusted code (mined modules, candidate kernels) in worker processes with limits.

Each task runs in its own process forked from a *sandbox server* that has already imported
torch: a program of our own (:mod:`curate.sandbox_server`, one per calling process, started
on first use), so a task starts in milliseconds instead of paying torch's import again, a
crash, hang or runaway allocation ends that task's process only, and no task ever imports
the caller's ``__main__`` (a training script without a main guard, a notebook, a Ray actor
or a trainer's reward worker can all call the sandbox). A task's function must therefore
live in an importable module: one defined in ``__main__`` ends with status ``error``.

Limits per task:

- time: wall-clock seconds; the process is killed (SIGKILL) when it runs over;
- memory: the address-space limit (``RLIMIT_AS``) is set to the size the process has at
  start plus ``mem_mb`` MiB, so an allocation past the budget fails inside the task;
- working directory: a fresh temporary directory, removed afterwards;
- output: the task's stdout/stderr go to /dev/null (mined code prints);
- lifetime: everything the sandbox starts dies with its caller, however the caller dies
  (SIGKILL included): the server ends, killing its tasks' process groups, when the caller's
  end of its socket pair closes or its parent changes, and each task has Linux's
  parent-death signal set against the server;
- guard (``guard=True``): an audit hook (:pep:`578`) refuses network use (connect, bind,
  send, DNS lookups), filesystem changes outside the task's working directory (opening for
  writing, remove, rename, mkdir, rmtree, chmod, ...; ``TMPDIR`` points into that
  directory, so torch's temporary files land there, and so does ``HOME``: a library's
  ``~/.cache`` or log folder) and starting or signalling other
  processes, and reading files outside the task's working directory, the Python
  installation and the import path (``/etc/passwd``, a user's dotfiles, another project:
  a problem whose output depends on the host's files is no problem); the environment is
  cut down to the variables that configure the runtime (:data:`ENV_KEPT`), so code that
  reads ``os.environ`` sees no host's settings. The first refused action ends the task with
  status ``network``, ``filesystem`` or ``process`` even when the task's own code catches
  the exception: the violation is reported before anything else runs. The hook sees what
  Python code does through the standard library; it is a tripwire for mined code that
  downloads weights, writes caches or shells out, not a barrier against native code
  (ctypes, C extensions): the process boundary and its limits are.

A CUDA task must not rely on ``RLIMIT_AS`` (the CUDA driver reserves huge address ranges):
pass ``mem_mb=None`` and enforce GPU memory inside the task.

The task function must be importable (a module-level function) since it is pickled by
reference. :meth:`Sandbox.start_worker` keeps a task process alive across requests (the
verifier's persistent workers). Only the standard library is imported here, so GPU machines
can use it.
"""

from __future__ import annotations

import importlib.util
import multiprocessing.connection as mpc
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from curate.cpus import cpu_count
from curate.isolation import die_with_parent, limit_address_space

#: Outcome statuses.
OK, ERROR, TIMEOUT, MEMORY, CRASH = "ok", "error", "timeout", "memory", "crash"
#: Outcome statuses of a guarded task that tried a refused action.
NETWORK, FILESYSTEM, PROCESS = "network", "filesystem", "process"

_MEMORY_MARKERS = ("can't allocate memory", "out of memory", "MemoryError", "std::bad_alloc")


@dataclass
class Outcome:
    """What one isolated task produced.

    Attributes:
        status: ``ok``, ``error`` (the task raised), ``timeout``, ``memory`` (allocation past
            the limit), ``crash`` (the process died, e.g. a segfault or ``os._exit``), or,
            under a guard, ``network``, ``filesystem`` or ``process`` (a refused action).
        value: the task's return value when ``status == "ok"``.
        error: ``"ExcType: message"`` or a description of the death.
        seconds: wall-clock seconds from start to result.
    """

    status: str
    value: Any = None
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == OK


_TCACHE_OFF = "glibc.malloc.tcache_count=0"


def tcache_off_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``GLIBC_TUNABLES`` for a process whose every new host allocation the verifier poisons.

    The verifier fills new allocations with a poison byte (glibc's ``M_PERTURB``, see
    :mod:`curate.verify.poison`); blocks reused from glibc's per-thread cache (tcache) skip
    the fill, and from glibc 2.38 on torch's aligned allocations come from that cache too.
    The tunable is read once, at process start; other tunables in ``environ`` are kept.
    """
    current = (os.environ if environ is None else environ).get("GLIBC_TUNABLES", "")
    if "glibc.malloc.tcache_count" in current:
        return {"GLIBC_TUNABLES": current}
    return {"GLIBC_TUNABLES": f"{current}:{_TCACHE_OFF}" if current else _TCACHE_OFF}


# Audit events the guard refuses, by category; for file events, the positions of path
# arguments (an action is refused when one of them lies outside the writable folders).
_NETWORK_EVENTS = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                             "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                             "socket.getnameinfo"})
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                             "os.fork", "os.forkpty", "os.kill", "os.killpg", "pty.spawn"})
_FILE_EVENTS = {"open": (0,), "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,),
                "os.rename": (0, 1), "os.symlink": (1,), "os.link": (1,), "os.truncate": (0,),
                "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,), "os.setxattr": (0,),
                "os.removexattr": (0,), "os.chflags": (0,), "os.lchflags": (0,),
                "shutil.rmtree": (0,), "shutil.copyfile": (1,), "shutil.copytree": (1,),
                "shutil.move": (0, 1)}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
#: Reading events (path argument positions) refused outside the readable folders.
_READ_EVENTS = {"open": (0,), "os.listdir": (0,), "os.scandir": (0,)}
#: Device and process files any runtime reads (random bytes, its own status).
#: Host paths a guarded task may read beside its folders: the random devices, its own /proc
#: entries, and the kernel's boot id, which filelock (a torch dependency) reads when its
#: process-identity module is first imported (without it a problem that takes a file lock, as
#: torch's caches do, is refused at that import).
_READABLE_FILES = (os.devnull, "/dev/urandom", "/dev/random", "/dev/shm", "/proc/self",
                   "/proc/sys/kernel/random/boot_id")
#: Environment variables a guarded task keeps (exact names, then prefixes): the ones that
#: configure Python, torch and the math libraries, not the host's or its user's settings.
ENV_KEPT = ("PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH",
            "GLIBC_TUNABLES", "VIRTUAL_ENV")
ENV_KEPT_PREFIXES = ("LC_", "PYTHON", "TORCH", "PYTORCH_", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "CUDA_",
                     "NVIDIA_", "TRITON_", "CUBLAS_", "CUDNN_", "NCCL_")


def _readable_roots(writable: tuple[str, ...]) -> tuple[str, ...]:
    """Folders a guarded task may read: its writable ones, the Python installation (standard
    library, site-packages), every folder on the import path when the guard starts, and the
    folder curate itself is imported from (an editable install is found through an import
    hook, not the import path; tracebacks and ``inspect`` read curate's own source)."""
    import site
    import sysconfig

    found = list(writable) + [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    found += [p for p in sysconfig.get_paths().values() if p]
    try:
        found += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # a virtualenv's old site module
        pass
    found += [p or os.getcwd() for p in sys.path]
    found.append(os.path.dirname(os.path.abspath(__file__)))  # the curate package
    out = []
    for p in found:
        r = os.path.realpath(p)
        if r != os.sep and r not in out:
            out.append(r)
    return tuple(out)


def _scrub_environment() -> None:
    for key in list(os.environ):
        if key not in ENV_KEPT and not key.startswith(ENV_KEPT_PREFIXES):
            del os.environ[key]


def _install_guard(conn, writable: tuple[str, ...]) -> None:
    """Add the audit hook (it cannot be removed) that reports the first refused action over
    ``conn`` and ends the process: mined code cannot swallow the refusal. The environment
    is cut down to :data:`ENV_KEPT` first."""
    roots = tuple(os.path.realpath(w) for w in writable)
    readable = _readable_roots(roots) + tuple(os.path.realpath(f) for f in _READABLE_FILES)
    _scrub_environment()
    me = os.getpid()
    busy = []

    def outside(path, within: tuple[str, ...] = roots) -> bool:
        if isinstance(path, int) or path is None:
            return False  # an already open descriptor
        p = os.path.realpath(os.fsdecode(path))
        return p != os.devnull and not any(p == r or p.startswith(r + os.sep) for r in within)

    def refuse(category: str, detail: str) -> None:
        try:
            conn.send((category, None, detail[:2000]))
        finally:
            os._exit(0)

    def hook(event: str, args: tuple) -> None:
        if busy:
            return
        if event in _NETWORK_EVENTS:
            busy.append(1)
            refuse(NETWORK, f"{event}{_short(args)}")
        elif event in _PROCESS_EVENTS:
            if event == "os.kill" and args and args[0] == me:
                return  # signalling itself ends only the task
            busy.append(1)
            refuse(PROCESS, f"{event}{_short(args)}")
        elif event in _FILE_EVENTS or event in _READ_EVENTS:
            writes = event != "open" and event in _FILE_EVENTS
            if event == "open":
                flags = args[2] if len(args) > 2 else None
                mode = args[1] if len(args) > 1 else None
                writes = (flags & _WRITE_FLAGS) if isinstance(flags, int) else \
                    isinstance(mode, str) and any(c in mode for c in "wax+")
            if not writes:
                busy.append(1)
                try:
                    bad = [args[i] for i in _READ_EVENTS[event] if i < len(args) and args[i] != "." and
                           outside(args[i], readable)]
                except Exception:
                    bad = []
                if bad:
                    refuse(FILESYSTEM, f"{event} (read) outside the working directory and the Python "
                                       f"installation: {bad[0]!r}")
                busy.pop()
                return
            busy.append(1)
            try:
                bad = [args[i] for i in _FILE_EVENTS[event] if i < len(args) and outside(args[i])]
            except Exception:
                bad = []
            if bad:
                refuse(FILESYSTEM, f"{event} outside the working directory: {bad[0]!r}")
            busy.pop()

    sys.addaudithook(hook)


def _short(args: tuple) -> str:
    return "(" + ", ".join(repr(a)[:120] for a in args if not hasattr(a, "fileno")) + ")"


def _child(conn, fn: Callable, args: tuple, kwargs: dict, mem_mb: int | None, quiet: bool,
           workdir: str, guard: bool, serve: bool = False) -> None:
    """A task process's body (never returns). ``serve``: a persistent worker, run as
    ``fn(conn, *args, **kwargs)``: it reads its requests from ``conn`` and answers there."""
    os.setsid()  # own process group: a kill reaches whatever the task spawned
    die_with_parent()
    os.chdir(workdir)
    if quiet:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    if mem_mb is not None:
        limit_address_space(mem_mb)
    try:
        import torch

        torch.set_num_threads(1)
        if guard:
            sys.dont_write_bytecode = True  # a first import must not write __pycache__ files
            # temporary files (torch's included) go to the private folder, so the shared
            # temp folder can stay closed to the task
            os.environ["TMPDIR"] = tempfile.tempdir = workdir
            # so do a library's folders under the home directory (super-gradients' ~/sg_logs)
            os.environ["HOME"] = os.environ["XDG_CACHE_HOME"] = workdir
            _install_guard(conn, (workdir,))
        value = fn(conn, *args, **kwargs) if serve else fn(*args, **kwargs)
        conn.send((OK, value, ""))
    except MemoryError as exc:
        conn.send((MEMORY, None, f"MemoryError: {exc}"))
    except BaseException as exc:  # untrusted code: SystemExit and KeyboardInterrupt included
        msg = f"{type(exc).__name__}: {exc}"
        status = MEMORY if any(m in msg for m in _MEMORY_MARKERS) else ERROR
        tb = traceback.format_exc(limit=-3)
        try:
            conn.send((status, None, msg[:4000] + "\n" + tb[-2000:]))
        except Exception:
            conn.send((status, None, msg[:4000]))
    finally:
        conn.close()
        os._exit(0)


def death_reason(exitcode: int | None) -> str:
    """Why a process that sent no result ended: ``killed by SIGSEGV`` or ``exited with code N``."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode} without a result"


class Sandbox:
    """A pool running tasks in isolated processes, ``workers`` at a time.

    Args:
        workers: concurrent task processes (default: CPU count).
        timeout_s: wall-clock limit per task (seconds).
        mem_mb: address-space budget per task on top of its start size (MiB); None: no limit.
        quiet: silence the task's stdout/stderr.
        guard: refuse network use, writes outside the working and temp folders and other
            processes (see the module docstring); for mined code. Off for work that must
            compile (Triton and C++ caches, compiler processes).
        preload: which server forks the tasks (a key of :data:`PRELOADS`): ``"full"``
            preloads TorchInductor's front end too; ``"verify"`` only what verification
            imports, so a reward's first worker starts seconds sooner.
    """

    def __init__(self, workers: int | None = None, timeout_s: float = 60.0,
                 mem_mb: int | None = 4096, quiet: bool = True, guard: bool = False,
                 preload: str = "full"):
        if preload not in PRELOADS:
            raise ValueError(f"unknown preload {preload!r}: use one of {', '.join(PRELOADS)}")
        self.preload = preload
        self.workers = max(1, workers or cpu_count())
        self.timeout_s = timeout_s
        self.mem_mb = mem_mb
        self.quiet = quiet
        self.guard = guard

    def run(self, fn: Callable, *args: Any, **kwargs: Any) -> Outcome:
        """Run one task and wait for its outcome."""
        return next(iter(self.map(fn, [(args, kwargs)])))[1]

    def map(self, fn: Callable, calls: Iterable[tuple[tuple, dict]]) -> Iterator[tuple[int, Outcome]]:
        """Run ``fn(*args, **kwargs)`` for each ``(args, kwargs)``; yield ``(index, Outcome)``
        in completion order. Safe to call from several threads at once."""
        pending = iter(enumerate(calls))
        running: dict[int, _Task] = {}
        exhausted = False
        try:
            while True:
                while not exhausted and len(running) < self.workers:
                    try:
                        idx, (args, kwargs) = next(pending)
                    except StopIteration:
                        exhausted = True
                        break
                    running[idx] = _Task(fn, args, kwargs, self.mem_mb, self.quiet, self.guard,
                                         preload=self.preload)
                if not running:
                    return
                now = time.monotonic()
                wait_s = max(0.0, min(t.start + self.timeout_s - now for t in running.values()))
                ready = set(mpc.wait([h for t in running.values() for h in t.handles()], timeout=wait_s))
                for idx in list(running):
                    task = running[idx]
                    outcome = task.poll(ready, self.timeout_s)
                    if outcome is not None:
                        task.close()
                        del running[idx]
                        yield idx, outcome
        finally:  # a consumer that stops early (or an error) leaves no task running
            for task in running.values():
                task.close()

    def start_worker(self, fn: Callable, *args: Any, **kwargs: Any) -> "Worker":
        """Start a persistent worker running ``fn(conn, *args, **kwargs)`` (a module-level
        function that reads requests with ``conn.recv()`` and answers each with
        ``conn.send((status, value, error))`` until it receives None). The worker has this
        sandbox's memory limit, quiet and guard settings; :meth:`Worker.call` has its
        ``timeout_s``."""
        return Worker(_Task(fn, args, kwargs, self.mem_mb, self.quiet, self.guard, serve=True,
                            preload=self.preload), self.timeout_s)


class Worker:
    """A persistent task process (see :meth:`Sandbox.start_worker`). One call at a time."""

    def __init__(self, task: "_Task", timeout_s: float):
        self._task = task
        self.timeout_s = timeout_s
        self.calls = 0

    @property
    def alive(self) -> bool:
        return self._task is not None and self._task.exitcode is _RUNNING

    def call(self, request: Any, timeout_s: float | None = None) -> Outcome:
        """Send ``request``; wait for the answer. A timeout kills the worker (status
        ``timeout``); a worker that dies answers ``crash`` (or ``memory``); either way the
        worker is closed and :attr:`alive` is False afterwards.

        Raises:
            RuntimeError: the worker is closed.
        """
        task = self._task
        if task is None:
            raise RuntimeError("worker is closed")
        limit = self.timeout_s if timeout_s is None else timeout_s
        task.start = time.monotonic()
        task.result = None
        self.calls += 1
        try:
            task.data.send(request)
        except (OSError, ValueError):
            pass  # it died: the control socket says how
        while True:
            left = task.start + limit - time.monotonic()
            ready = set(mpc.wait(task.handles(), timeout=max(0.0, left)))
            outcome = task.poll(ready, limit)
            if outcome is not None:
                if outcome.status in (TIMEOUT, CRASH) or task.exitcode is not _RUNNING:
                    self.close()
                return outcome

    def close(self) -> None:
        """Ask the worker to stop, then kill what is left of it (idempotent)."""
        task, self._task = self._task, None
        if task is None:
            return
        if task.exitcode is _RUNNING:
            try:
                task.data.send(None)
            except (OSError, ValueError):
                pass
        task.close(grace_s=1.0)


_RUNNING = object()  # a task's exit code before the server has reaped it


class _Task:
    """One task process forked by the sandbox server: its control and data sockets."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, mem_mb: int | None, quiet: bool,
                 guard: bool, serve: bool = False, preload: str = "full"):
        import pickle

        self.workdir = tempfile.mkdtemp(prefix="curate-task-")  # made here: removed even after a kill
        self.start = time.monotonic()
        self.result: tuple | None = None
        self.exitcode: Any = _RUNNING
        self.ctl = self.data = None
        try:
            payload = pickle.dumps({
                "sys_path": [p or os.getcwd() for p in sys.path],
                "call": pickle.dumps(fn), "args": pickle.dumps((args, kwargs)),
                "mem_mb": mem_mb, "quiet": quiet, "workdir": self.workdir, "guard": guard,
                "serve": serve})
        except Exception as exc:
            self.result = (ERROR, None, f"task not transferable to the sandbox: {type(exc).__name__}: {exc}")
            self.exitcode = None
            return
        try:
            self.ctl, self.data = _server(preload).open_task(payload)
        except OSError:  # the server died since it was last used: start another
            self.ctl, self.data = _server(preload, restart=True).open_task(payload)
        self.start = time.monotonic()  # the server's own start is not the task's time

    def handles(self) -> list:
        return [c for c in (self.ctl, self.data) if c is not None and not c.closed]

    def poll(self, ready: set, timeout_s: float) -> Outcome | None:
        """The outcome when the task has one (a result, a death, its time is up), else None."""
        now = time.monotonic()
        if self.data is not None and not self.data.closed and (self.data in ready or self.ctl in ready):
            try:
                while self.result is None and self.data.poll():
                    self.result = _loads(self.data.recv_bytes())
            except (EOFError, OSError):
                self.data.close()  # the task's end is closed: it has died
        if self.ctl is not None and not self.ctl.closed and self.ctl in ready and self.result is None:
            try:
                msg = self.ctl.recv()
                self.exitcode = msg[1] if isinstance(msg, tuple) and msg[:1] == (_EXIT_TAG,) else None
            except (EOFError, OSError):
                self.exitcode = None  # the server itself is gone
            if self.data is not None and not self.data.closed:
                try:  # a result sent just before the end is already buffered
                    if self.data.poll():
                        self.result = _loads(self.data.recv_bytes())
                except (EOFError, OSError):
                    pass
        if self.result is not None:
            status, value, err = self.result
            return Outcome(status, value, err, now - self.start)
        if self.exitcode is not _RUNNING:
            reason = death_reason(self.exitcode) if self.exitcode is not None else "sandbox server ended"
            return Outcome(CRASH, None, reason, now - self.start)
        if now - self.start >= timeout_s:
            return Outcome(TIMEOUT, None, f"timed out after {timeout_s:.0f} s", now - self.start)
        return None

    def close(self, grace_s: float = 0.0) -> None:
        """Kill the task's process group (unless it has ended) and wait until the server has
        reaped it, then remove its working folder."""
        ctl = self.ctl
        if ctl is not None and not ctl.closed:
            if self.exitcode is _RUNNING and grace_s and ctl.poll(grace_s):
                self._read_exit(ctl)
            if self.exitcode is _RUNNING:
                try:
                    ctl.send_bytes(b"K")
                except OSError:
                    pass
                deadline = time.monotonic() + 10
                while self.exitcode is _RUNNING and time.monotonic() < deadline:
                    if not ctl.poll(deadline - time.monotonic()):
                        break
                    self._read_exit(ctl)
            ctl.close()
        if self.data is not None and not self.data.closed:
            self.data.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _read_exit(self, ctl) -> None:
        try:
            msg = ctl.recv()
            if isinstance(msg, tuple) and msg[:1] == (_EXIT_TAG,):
                self.exitcode = msg[1]
        except (EOFError, OSError):
            self.exitcode = None


def _loads(data: bytes) -> tuple:
    import pickle

    try:
        return pickle.loads(data)
    except Exception as exc:  # an unpicklable result
        return (ERROR, None, f"result not transferable: {exc}")


_EXIT_TAG = "\0exit"
#: What each server imports before it forks tasks (triton too, when installed). torch._dynamo:
#: a TorchDispatchMode (FlopCounterMode in diversify) or torch.compile imports it on first use,
#: about 1 s per task otherwise; the verifier's modes and profiler are kept from importing it,
#: so the reward's server skips those seconds.
PRELOADS = {
    "full": ["torch", "torch.nn.functional", "torch._dynamo", "curate.problem"],
    "verify": ["torch", "torch.nn.functional", "curate.problem", "curate.verify.worker"],
}
#: Seconds the server may take to start (it imports torch and triton).
SERVER_START_TIMEOUT_S = 300.0


class _ServerHandle:
    """The calling process's sandbox server (``python -m curate.sandbox_server``)."""

    def __init__(self, preload_key: str = "full"):
        import socket
        import subprocess

        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        preload = list(PRELOADS[preload_key])
        if importlib.util.find_spec("triton") is not None:
            preload.append("triton")
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.update(tcache_off_env(env))
        # its own session: a Ctrl-C in the caller's terminal is the caller's to handle; the
        # server ends when the caller's end of the socket pair closes, however it dies
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "curate.sandbox_server", str(theirs.fileno()), ",".join(preload)],
            pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        self.sock = mine
        self.pid = os.getpid()
        mine.settimeout(SERVER_START_TIMEOUT_S)
        started = time.monotonic()
        try:
            ready = mine.recv(16)
        except OSError:
            ready = b""
        mine.settimeout(None)
        self.start_s = time.monotonic() - started  # its imports: torch, torch._dynamo, triton
        if ready != b"ready":
            self.close()
            raise RuntimeError(f"the sandbox server did not start (exit code {self.proc.poll()})")

    def usable(self) -> bool:
        if self.pid == os.getpid():
            return self.proc.poll() is None
        # a forked child of the caller (verl's prime manager forks a process pool) shares
        # the caller's server: the socket pair is inherited and each request is one message
        try:
            os.kill(self.proc.pid, 0)
            return True
        except OSError:
            return False

    def open_task(self, payload: bytes) -> tuple[mpc.Connection, mpc.Connection]:
        import socket

        ctl_mine, ctl_theirs = socket.socketpair()
        data_mine, data_theirs = socket.socketpair()
        try:
            with _LOCK:
                socket.send_fds(self.sock, [b"T"], [ctl_theirs.fileno(), data_theirs.fileno()])
        finally:
            ctl_theirs.close()
            data_theirs.close()
        ctl = mpc.Connection(ctl_mine.detach())
        ctl.send_bytes(payload)
        return ctl, mpc.Connection(data_mine.detach())

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(10)
        except Exception:
            self.proc.kill()


_LOCK = __import__("threading").Lock()
_SERVERS: dict[str, _ServerHandle] = {}  # preload key -> this process's server


def _after_fork_in_child() -> None:
    global _LOCK
    _LOCK = __import__("threading").Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork_in_child)


def _server(preload: str = "full", restart: bool = False) -> _ServerHandle:
    """The running server for ``preload``, started on first use (and again after it died, or
    in a forked child of the process that started it)."""
    with _LOCK:
        server = _SERVERS.get(preload)
        if server is None or restart or not server.usable():
            server = _SERVERS[preload] = _ServerHandle(preload)
        return server


def server_pid(preload: str | None = None) -> int | None:
    """The process id of this process's sandbox server for ``preload`` (None: the first one
    started); None before the first task."""
    servers = [_SERVERS.get(preload)] if preload else list(_SERVERS.values())
    live = [s for s in servers if s is not None and s.usable()]
    return live[0].proc.pid if live else None


def server_start_s(preload: str) -> float | None:
    """Seconds the server for ``preload`` took to start (its imports); None if none runs."""
    server = _SERVERS.get(preload)
    return server.start_s if server is not None else None


def kill_tree(p) -> None:
    """SIGKILL a process started in its own session, with whatever it spawned, and reap it."""
    if p.is_alive():
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            p.kill()
    p.join(5)
    if p.is_alive():
        p.kill()
        p.join(5)
