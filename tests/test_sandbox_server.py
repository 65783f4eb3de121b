"""The sandbox server's kill handling when a task's file descriptor number is reused."""

from __future__ import annotations

import multiprocessing.connection as mpc
import os
import socket
import subprocess
import sys
import threading

from curate.sandbox_server import _Server


def _server(by_fd: dict[int, int], tasks: dict[int, mpc.Connection]) -> _Server:
    srv = _Server.__new__(_Server)  # no signal handlers: only the bookkeeping is exercised
    srv.by_fd, srv.tasks = dict(by_fd), dict(tasks)
    return srv


def _returns_within(fn, seconds: float = 5.0) -> bool:
    """Whether ``fn()`` returns within ``seconds`` (its exception, if any, is raised here)."""
    errors: list[BaseException] = []

    def call():
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    if errors:
        raise errors[0]
    return not t.is_alive()


def test_an_fd_reused_by_a_new_task_is_not_read_as_a_kill_request():
    # select saw fd X readable for task A (finished); A was reaped, its fd freed, and the next
    # task B was given the same number before the ready list was handled
    old_mine, old_theirs = socket.socketpair()
    fd = old_mine.fileno()
    watched = {fd: 111}
    old_mine.close()
    old_theirs.close()
    new_mine, new_theirs = socket.socketpair()
    if new_mine.fileno() != fd:
        os.dup2(new_mine.fileno(), fd)
        new_mine.close()
        new_mine = socket.socket(fileno=fd)
    task_b = mpc.Connection(new_mine.detach())
    srv = _server({fd: 222}, {222: task_b})
    # before the fix this read task B's control connection and waited for a kill request
    assert _returns_within(lambda: srv.kill_requested([fd], watched))
    assert srv.by_fd == {fd: 222}  # B is still watched
    task_b.close()
    new_theirs.close()


def test_a_kill_request_of_the_task_select_saw_is_honoured():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        mine, theirs = socket.socketpair()
        conn = mpc.Connection(mine.detach())
        caller = mpc.Connection(theirs.detach())
        caller.send_bytes(b"K")
        srv = _server({conn.fileno(): child.pid}, {child.pid: conn})
        assert _returns_within(lambda: srv.kill_requested([conn.fileno()], dict(srv.by_fd)))
        assert child.wait(10) != 0 and srv.by_fd == {}
    finally:
        child.kill()
