"""Real problems and candidate files shared by the verifier, reward and rank tests."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import torch

from curate.data import KERNELBENCH_PROBLEMS
from curate.problem import assemble

HERE = Path(__file__).resolve().parent
CANDIDATES = HERE / "candidates"
# KernelBench levels 1-3 ship with the package; CURATE_KERNELBENCH may point at another copy
KERNELBENCH_JSONL = Path(os.environ.get("CURATE_KERNELBENCH") or KERNELBENCH_PROBLEMS)

# KernelBench's own inputs for 19_ReLU are 4096 x 393216 floats (6 GB): the tests pass a
# small spec instead, 1,000 elements so the last 256-wide block is partial. randn, unlike
# KernelBench's torch.rand, gives negative values, so ReLU is not the identity here.
SMALL_SPEC = [{"kind": "tensor", "shape": [4, 250], "dtype": "float32"}]


def kernelbench(name: str, level: int = 1) -> str:
    """The code of one KernelBench problem from the package's JSONL copy."""
    with KERNELBENCH_JSONL.open() as f:
        for line in f:
            rec = json.loads(line)
            if rec["level"] == level and rec["name"] == name:
                return rec["code"]
    raise KeyError(name)


def candidate(name: str) -> str:
    return (CANDIDATES / f"{name}.py").read_text()


def torch_relu_problem(spec: list[dict] | None = None) -> str:
    """A mined-style problem: torch's own ``nn.ReLU`` source, made self-contained and
    assembled with curate.problem.assemble (``Model`` is an alias of the class)."""
    body = ("import torch\nimport torch.nn.functional as F\nfrom torch import Tensor\n"
            "from torch.nn import Module\n\n\n" + inspect.getsource(torch.nn.ReLU) + "\n\nModel = ReLU\n")
    return assemble(body, spec or [{"kind": "tensor", "shape": [3, 333], "dtype": "float32"}], [])


def reply(code: str, prose: str = "Here is a faster version.") -> str:
    """A model reply in Markdown: prose, a sketch block, then the final program."""
    return (f"{prose}\n\n```python\n# sketch\nx = 1\n```\n\nFinal answer:\n\n"
            f"```python\n{code}\n```\n")
