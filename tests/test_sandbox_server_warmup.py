"""The sandbox server's Triton driver warm-up: started beside the preload, never waited for."""

from __future__ import annotations

import os
import time

from curate import sandbox_server


def test_warmup_runs_only_with_triton_and_an_nvidia_driver(tmp_path, monkeypatch):
    flag = tmp_path / "built"
    monkeypatch.setattr(sandbox_server, "_TRITON_DRIVER_WARMUP",
                        f"import time; time.sleep(0.5); open({str(flag)!r}, 'w').close()")
    real_exists = os.path.exists

    monkeypatch.setattr(sandbox_server.os.path, "exists",
                        lambda p: False if p == "/dev/nvidiactl" else real_exists(p))
    sandbox_server._warm_triton_driver(["torch", "triton"])
    time.sleep(1.5)
    assert not flag.exists()  # no NVIDIA driver: nothing started

    monkeypatch.setattr(sandbox_server.os.path, "exists",
                        lambda p: True if p == "/dev/nvidiactl" else real_exists(p))
    sandbox_server._warm_triton_driver(["torch"])
    time.sleep(1.5)
    assert not flag.exists()  # no triton in the preload: nothing started

    t = time.perf_counter()
    sandbox_server._warm_triton_driver(["torch", "triton"])
    assert time.perf_counter() - t < 0.4  # started, not waited for
    deadline = time.monotonic() + 20
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert flag.exists()
