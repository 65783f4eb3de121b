"""The sandbox's task server: a program of its own that forks every sandboxed task.

Started by :mod:`curate.sandbox` as ``python -m curate.sandbox_server FD PRELOAD`` (one per
calling process, on first use). It imports torch (and the other ``PRELOAD`` modules, comma
separated) once, then forks one process per task, so a task starts in milliseconds. Being a
program of its own, it never imports the caller's ``__main__`` (the standard library's
forkserver does, which re-runs a training script without a main guard in every task).

Protocol. ``FD`` is this server's end of a ``SOCK_SEQPACKET`` socket pair; the caller sends
one message per task: ``b"T"`` with two socket descriptors attached (``SCM_RIGHTS``), the
task's *control* and *data* sockets. On the control socket the caller then sends the task
(a pickled payload this server never unpickles: the task process does) and later, at most,
``b"K"`` (kill); the server answers ``("\\0exit", exit code)`` once the task process has been
reaped (negative: the signal that killed it). The data socket is the task's own: it sends its
result there (and a persistent worker reads its requests from it).

Lifetime. The server ends, killing every task's process group, when the caller's end of the
socket pair closes (the caller died, however) or when its parent process changes; a task ends
(SIGKILL to its process group) when the caller asks, or closes the task's control socket.
Each task also has Linux's parent-death signal set (:func:`curate.isolation.die_with_parent`),
so nothing it runs outlives the server. Imports only the standard library until the preload.
"""

import importlib
import multiprocessing.connection as mpc
import os
import pickle
import select
import signal
import socket
import sys

EXIT_TAG = "\0exit"
_POLL_S = 0.5  # how often the parent is checked when nothing else happens


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


class _Server:
    def __init__(self, ctl: socket.socket, parent: int):
        self.ctl = ctl
        self.parent = parent
        self.tasks: dict[int, mpc.Connection] = {}  # pid -> control connection
        self.by_fd: dict[int, int] = {}  # control fd -> pid
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)

    def serve(self) -> None:
        while True:
            if os.getppid() != self.parent:
                self.shutdown()
            watched = dict(self.by_fd)  # what each ready fd meant when select saw it
            fds = [self.ctl.fileno(), self.wake_r] + list(watched)
            try:
                ready, _, _ = select.select(fds, [], [], _POLL_S)
            except InterruptedError:
                ready = []
            if self.wake_r in ready:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            self.reap()
            if self.ctl.fileno() in ready:
                try:
                    msg, fds_in, _, _ = socket.recv_fds(self.ctl, 16, 4)
                except OSError:
                    msg, fds_in = b"", []
                if not msg:
                    self.shutdown()  # the caller is gone
                self.spawn(fds_in)
            self.kill_requested(ready, watched)
            self.reap()

    def kill_requested(self, ready: list[int], watched: dict[int, int]) -> None:
        """Kill the tasks whose control connection was readable at the select (a kill request,
        or the caller closed it). A task reaped since then freed its fd, and a task spawned since
        may have been given the same number: only an fd that still belongs to the task it
        belonged to at the select is read (reading the new task's would block until the caller
        asks to kill it, while the caller waits to send its next task: both stuck)."""
        for fd in ready:
            pid = watched.get(fd)
            if pid is None or self.by_fd.get(fd) != pid:
                continue
            del self.by_fd[fd]  # watched no more: one kill, then the reaping reports
            try:
                self.tasks[pid].recv_bytes()  # b"K": kill
            except (EOFError, OSError):
                pass  # the caller closed the task: kill it too
            _kill_group(pid)

    def spawn(self, fds_in: list[int]) -> None:
        if len(fds_in) != 2:
            for fd in fds_in:
                os.close(fd)
            return
        ctl_fd, data_fd = fds_in
        conn = mpc.Connection(ctl_fd)
        try:
            payload = conn.recv_bytes() if conn.poll(60) else None
        except (EOFError, OSError):
            payload = None
        if payload is None:
            conn.close()
            os.close(data_fd)
            return
        pid = os.fork()
        if pid == 0:
            self._in_child(conn, data_fd, payload)
        os.close(data_fd)
        self.tasks[pid] = conn
        self.by_fd[conn.fileno()] = pid

    def _in_child(self, conn: mpc.Connection, data_fd: int, payload: bytes) -> None:
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            # a task sees no other task's sockets: it could not forge their results
            for c in self.tasks.values():
                c.close()
            conn.close()
            self.ctl.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            run_payload(data_fd, payload)
        finally:
            os._exit(1)

    def reap(self) -> None:
        while self.tasks:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.tasks.pop(pid, None)
            if conn is None:
                continue
            self.by_fd.pop(conn.fileno(), None)
            try:
                conn.send((EXIT_TAG, os.waitstatus_to_exitcode(status)))
            except OSError:
                pass
            conn.close()

    def shutdown(self) -> None:
        for pid in list(self.tasks):
            _kill_group(pid)
        os._exit(0)


def run_payload(data_fd: int, payload: bytes) -> None:
    """In a fresh task process: unpickle the task (its function is imported here, by its
    module's name) and run it through :func:`curate.sandbox._child` (which never returns)."""
    data = mpc.Connection(data_fd)
    try:
        spec = pickle.loads(payload)
        sys.path[:] = spec["sys_path"]
        fn = pickle.loads(spec["call"])
        args, kwargs = pickle.loads(spec["args"])
    except BaseException as exc:  # e.g. a function of the caller's __main__, never importable here
        data.send(("error", None, f"task not loadable in the sandbox: {type(exc).__name__}: {exc} "
                   "(sandboxed functions must live in an importable module, not in __main__)"))
        os._exit(0)
    from curate import sandbox

    sandbox._child(data, fn, args, kwargs, spec["mem_mb"], spec["quiet"], spec["workdir"],
                   spec["guard"], spec.get("serve", False))


#: Builds (or finds in Triton's cache) the C helpers of Triton's CUDA driver, in a process of
#: its own: about 0.7 s of compiling on a cold cache, which the first Triton kernel of the
#: first task would otherwise wait for (H100 machine, ``benchmarks/h100-reward.md``). It needs
#: neither torch nor a CUDA context, so it runs beside this server's own torch import.
_TRITON_DRIVER_WARMUP = "from triton.backends.nvidia.driver import CudaUtils; CudaUtils()"


def _warm_triton_driver(names: list[str]) -> None:
    """Start :data:`_TRITON_DRIVER_WARMUP` when the preload has triton and the machine an
    NVIDIA driver; never waits for it (the serve loop reaps it) and never fails."""
    if "triton" not in names or not os.path.exists("/dev/nvidiactl"):
        return
    import subprocess

    try:
        subprocess.Popen([sys.executable, "-c", _TRITON_DRIVER_WARMUP], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ctl = socket.socket(fileno=int(argv[0]))
    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides when we end
    names = argv[1].split(",") if len(argv) > 1 and argv[1] else []
    _warm_triton_driver(names)
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # a preload is an optimisation only
            pass
    try:
        ctl.send(b"ready")
    except OSError:
        os._exit(0)
    _Server(ctl, parent).serve()


if __name__ == "__main__":
    main()
