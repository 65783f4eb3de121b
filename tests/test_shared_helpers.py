"""Helpers several stages share: :mod:`curate.outputs` (the tensors of a forward's output,
used by mine's output checks and the verifier's workers) and :mod:`curate.scoped` (mapping
entries set for a block: dedup's worker environment, mine's blocked imports)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from curate.outputs import output_tensors
from curate.scoped import scoped_items


def test_output_tensors_of_real_module_outputs():
    """nn.LSTM returns ``(out, (h, c))``; MultiheadAttention ``(out, weights)`` or
    ``(out, None)``; a dataclass output (as transformers' ModelOutput-like classes) is
    walked in field order; non-tensors hold none."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    out, (h, c) = lstm = nn.LSTM(8, 4, batch_first=True)(x)
    assert [t is s for t, s in zip(output_tensors(lstm), (out, h, c))] == [True] * 3
    attn = nn.MultiheadAttention(8, 2, batch_first=True)
    assert len(output_tensors(attn(x, x, x, need_weights=False))) == 1

    @dataclass
    class Output:
        logits: torch.Tensor
        hidden: tuple
        note: str = "x"

    o = Output(out, ({"a": h, "b": None}, [c, 3]))
    got = output_tensors(o)
    assert len(got) == 3 and got[0] is out and got[1] is h and got[2] is c
    assert output_tensors(Output) == [] and output_tensors(None) == [] and output_tensors("t") == []


def test_scoped_items_restores_environ_and_modules_even_on_error():
    key, absent = "CURATE_SCOPED_TEST", "CURATE_SCOPED_ABSENT"
    os.environ[key] = "before"
    os.environ.pop(absent, None)
    with pytest.raises(RuntimeError):
        with scoped_items(os.environ, {key: "inside", absent: "1"}):
            assert os.environ[key] == "inside" and os.environ[absent] == "1"
            raise RuntimeError("the block fails")
    assert os.environ.pop(key) == "before" and absent not in os.environ

    # a blocked module looks absent inside; a module imported meanwhile stays imported
    sys.modules.pop("colorsys", None)
    with scoped_items(sys.modules, {"json": None}):
        with pytest.raises(ImportError):
            import json  # noqa: F401
        import colorsys  # noqa: F401
    import json  # noqa: F401,F811

    assert sys.modules["json"] is json and "colorsys" in sys.modules
