"""Process-wide torch settings a problem's code may change (``torch.set_default_dtype``,
``cudnn.benchmark`` ...): a persistent measure worker saves them before a task and puts them
back after it, so one problem cannot change how the next is timed."""

from __future__ import annotations

from typing import Any


def torch_globals() -> dict[str, Any]:
    """Process-wide torch settings a problem's code may change (``torch.set_default_dtype``,
    ``cudnn.benchmark`` ...): a persistent worker restores them after each task so one
    problem cannot change how the next is timed."""
    import torch

    return {
        "dtype": torch.get_default_dtype(), "grad": torch.is_grad_enabled(),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "cudnn": (torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark,
                  torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32),
        "cuda_tf32": torch.backends.cuda.matmul.allow_tf32, "threads": torch.get_num_threads(),
    }


def restore_torch_globals(saved: dict[str, Any]) -> None:
    """Put back what :func:`torch_globals` saved, touching only settings that changed (the
    first ``use_deterministic_algorithms`` call alone costs about a second of lazy imports)."""
    import torch

    now = torch_globals()
    if now == saved:
        return
    if now["dtype"] != saved["dtype"]:
        torch.set_default_dtype(saved["dtype"])
    if now["grad"] != saved["grad"]:
        torch.set_grad_enabled(saved["grad"])
    if now["matmul_precision"] != saved["matmul_precision"]:
        torch.set_float32_matmul_precision(saved["matmul_precision"])
    if now["deterministic"] != saved["deterministic"]:
        torch.use_deterministic_algorithms(saved["deterministic"])
    cudnn = torch.backends.cudnn
    cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32 = saved["cudnn"]
    torch.backends.cuda.matmul.allow_tf32 = saved["cuda_tf32"]
    if now["threads"] != saved["threads"]:
        torch.set_num_threads(saved["threads"])
