"""Shared fixtures: a small real mining run over torch's own nn modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from curate.data import KERNELBENCH_PROBLEMS

REPO = Path(__file__).resolve().parents[1]
# KernelBench levels 1-3 ship with the package; CURATE_KERNELBENCH may point at another copy
KERNELBENCH_JSONL = Path(os.environ.get("CURATE_KERNELBENCH") or KERNELBENCH_PROBLEMS)


def tensor_spec(*shape) -> dict:
    """An fp32 tensor entry of an input spec."""
    return {"kind": "tensor", "shape": list(shape), "dtype": "float32"}


def forward_problem(body: str, head: str = "") -> str:
    """A module whose ``Model.forward(self, x)`` runs ``body`` (``head``: code above the class)."""
    return (f"import torch\nfrom torch import nn\n{head}\n\nclass Model(nn.Module):\n"
            f"    def forward(self, x):\n        {body}\n")


@pytest.fixture(scope="session")
def mined_run(tmp_path_factory) -> Path:
    """A run folder whose ``mine`` stage holds problems mined from torch's installed source
    (``torch/nn/modules/{activation,linear,pixelshuffle,flatten}.py``)."""
    from curate.mine import run

    out = tmp_path_factory.mktemp("mined")
    manifest = out / "manifest.yaml"
    manifest.write_text(
        "sources:\n"
        "  - kind: package\n"
        "    name: torch\n"
        "    include: [torch/nn/modules/activation.py, torch/nn/modules/linear.py,\n"
        "              torch/nn/modules/pixelshuffle.py, torch/nn/modules/flatten.py]\n"
    )
    run(manifest=manifest, out=out, workers=2, timeout_s=30)
    return out
