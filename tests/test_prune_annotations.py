"""Annotation stripping on real torch source: parameter and return annotations of functions go
under ``from __future__ import annotations`` (and the imports only they used go with the static
pass), nothing changes without that import or where annotations may be read at run time, and
the pruned program computes the same as the original."""

from __future__ import annotations

import ast
import inspect

import torch.nn.modules.transformer as transformer

from curate.export.prune import check_task, prune_source
from curate.export.prune_annotations import strip_annotations
from curate.problem import assemble

FUTURE = "from __future__ import annotations\n"
TRANSFORMER_SRC = inspect.getsource(transformer).replace("from .", "from torch.nn.modules.")
ACT_FN_SRC = inspect.getsource(transformer._get_activation_fn)
SPEC = [{"kind": "tensor", "shape": [4, 16], "dtype": "float32"}]


def _annotated(code: str) -> list[str]:
    out = []
    for fn in ast.walk(ast.parse(code)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = fn.args
            out += [f"{fn.name}:{p.arg}" for p in a.posonlyargs + a.args + a.kwonlyargs if p.annotation]
            out += [f"{fn.name}->"] if fn.returns is not None else []
    return out


def test_torch_transformer_module_loses_function_annotations():
    code = FUTURE + TRANSFORMER_SRC
    assert _annotated(code)
    new, n = strip_annotations(code)
    assert n > 20
    assert len(new.splitlines()) == len(code.splitlines())
    compile(new, "<stripped>", "exec")
    # what is left spans lines in the source; everything single-line went
    left = _annotated(new)
    assert len(left) < len(_annotated(code)) // 10, left
    tree = ast.parse(new)
    layer = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "TransformerEncoderLayer")
    fwd = next(m for m in layer.body if isinstance(m, ast.FunctionDef) and m.name == "forward")
    assert [p.annotation for p in fwd.args.args] == [None] * 5 and fwd.returns is None
    assert [ast.literal_eval(d) for d in fwd.args.defaults] == [None, None, False]
    assert "src_mask=None," in new


def test_nothing_changes_without_future_import_or_with_introspection():
    assert strip_annotations(TRANSFORMER_SRC) == (TRANSFORMER_SRC, 0)
    reads = FUTURE + "import typing\n" + TRANSFORMER_SRC + "\nHINTS = typing.get_type_hints(_get_activation_fn)\n"
    assert strip_annotations(reads) == (reads, 0)
    kernel = FUTURE + "import triton\nimport triton.language as tl\n\n\n" \
        "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n    pass\n"
    assert strip_annotations(kernel) == (kernel, 0)


def _act_problem() -> str:
    body = (f"{FUTURE}import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
            f"from typing import Callable\nfrom torch import Tensor\n\n\n{ACT_FN_SRC}\n\n"
            "class Model(nn.Module):\n"
            "    def __init__(self, width: int, activation: str) -> None:\n"
            "        super().__init__()\n"
            "        self.lin = nn.Linear(16, width)\n"
            "        self.act = _get_activation_fn(activation)\n"
            "\n    def forward(self, x: Tensor) -> Tensor:\n        return self.act(self.lin(x))\n")
    return assemble(body, SPEC, [8, "gelu"])


def test_imports_only_annotations_used_go_and_outputs_match():
    code = _act_problem()
    pruned = prune_source(code)
    assert pruned.annotations == 7  # activation, width, activation, x and three returns
    assert "Callable" in pruned.removed and "Tensor" in pruned.removed
    assert "def _get_activation_fn(activation):" in pruned.code
    assert "def forward(self, x):" in pruned.code
    assert check_task(code, pruned.code)["same"]
