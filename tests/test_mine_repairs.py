"""The input-repair rules (:mod:`curate.mine.repairs`), each against the error message it targets.

Messages are real: raised here by torch (and the einops stand-in) on a wrong guess, or kept
verbatim from a mining run of the default manifest (a reject's last error). Each case checks
that its rule matches the message and that the repaired guess is among what
:func:`_repair_specs` (or :func:`_warning_repairs`) proposes.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from curate.mine.repairs import RULES, WARNING_RULES, _repair_specs, _warning_repairs


def _raised(fn) -> str:
    """``"Type: message"`` of the exception ``fn`` raises (as synthesis records an error)."""
    try:
        fn()
    except Exception as exc:  # the message is what the test is after
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError("expected an error")


def _warned(fn) -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return str(caught[0].message)


def _einops_error(shape: tuple[int, ...] = (8, 64), pattern: str = "b c h w -> b (h w) c", **axes) -> str:
    """The einops stand-in's message for ``rearrange`` of a tensor of ``shape`` by ``pattern``."""
    path = Path(__file__).resolve().parents[1] / "curate" / "mine" / "shims" / "einops.py"
    spec = importlib.util.spec_from_file_location("einops_stand_in", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return _raised(lambda: mod.rearrange(torch.randn(*shape), pattern, **axes))


def T(*shape, **kw) -> dict:
    return {"kind": "tensor", "shape": list(shape), "dtype": "float32", **kw}


def I(*shape, high: int) -> dict:
    return {"kind": "index", "shape": list(shape), "high": high, "dtype": "int64"}


def M(*shape) -> dict:
    return {"kind": "mask", "shape": list(shape), "dtype": "bool"}


def rank(n: int):
    """A check that every tensor input of a repaired guess has rank ``n``."""
    return lambda specs: all(len(s["shape"]) == n for s in specs if s["kind"] == "tensor")


# (rule, message, guess that failed, the repaired guess expected or a check of one)
CASES = [
    ("complex_input", lambda: _raised(lambda: torch.view_as_real(torch.randn(2, 2)))),
    ("channels", "RuntimeError: Given groups=1, weight of size [4, 64, 1, 1], expected input[8, 4, 32, 32] to "
                 "have 64 channels, but got 4 channels instead"),
    ("flattened_size", lambda: _raised(lambda: _lenet()(torch.randn(8, 1, 28, 28)))),
    ("recurrent_width", lambda: _raised(lambda: nn.GRU(32, 16, batch_first=True)(torch.randn(8, 128, 64)))),
    ("vector_per_sample", lambda: _raised(lambda: nn.Linear(512, 64)(torch.randn(8, 64, 32, 32)))),
    ("matmul_width", "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1024x4096 and 64x64)"),
    ("norm_channels", lambda: _raised(lambda: F.batch_norm(torch.randn(8, 4, 32, 32), torch.zeros(64),
                                                           torch.ones(64)))),
    ("norm_weight_channels", lambda: _raised(lambda: F.group_norm(torch.randn(8, 4, 32, 32), 2,
                                                                  weight=torch.ones(64)))),
    ("normalized_shape", "RuntimeError: Given normalized_shape=[64], expected input with shape [*, 64], but got "
                         "input of size[8, 64, 32, 32]"),
    ("mask_shape", "RuntimeError: The size of tensor a (128) must match the size of tensor b (4096) at "
                   "non-singleton dimension 3"),
    ("broadcast_sizes", "RuntimeError: The size of tensor a (256) must match the size of tensor b (64) at "
                        "non-singleton dimension 1"),
    ("square_image", lambda: _raised(lambda: torch.randn(8, 1024, 64) + torch.randn(1, 196, 64))),
    ("index_axis", lambda: _raised(lambda: torch.randn(2, 8)[3])),
    ("op_rank", lambda: _raised(lambda: F.interpolate(torch.randn(8, 64), scale_factor=2.0))),
    ("expected_rank", "RuntimeError: Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of "
                      "size: [4096]"),
    ("named_shape", lambda: _raised(lambda: _quantized_conv3d()(torch.randn(8, 64)))),
    ("einops_rank", _einops_error),
    # lumiere-pytorch's '(b t) c h w -> b h w t c' with t given, on a batch of 8 images
    ("einops_divisible", lambda: _einops_error((8, 64, 32, 32), "(b t) c h w -> b h w t c", t=64)),
    # taylor-series-linear-attention's ViT feedforward: 'b (h w) c -> b c h w', h = w = 11
    ("einops_group", lambda: _einops_error((8, 128, 64), "b (h w) c -> b c h w", h=11, w=11)),
    # torch-spatiotemporal's TCN: rearrange(x, 'b s n c -> b c n s') before a Conv2d
    ("channels_last", lambda: _raised(lambda: nn.Conv2d(128, 64, (1, 3))(torch.randn(8, 128, 32, 32)
                                                                          .permute(0, 3, 2, 1)))),
    ("unpack_rank", "ValueError: not enough values to unpack (expected 4, got 3)"),
    ("dim_out_of_range", lambda: _raised(lambda: torch.randn(8, 64).transpose(1, 2))),
    ("too_many_indices", "IndexError: too many indices for tensor of dimension 1"),
    ("permute_rank", lambda: _raised(lambda: torch.randn(8, 64).permute(0, 2, 1))),
    ("integer_indices", lambda: _raised(lambda: nn.Embedding(10, 4)(torch.randn(8, 4)))),
    ("longer_signals", lambda: _raised(lambda: torch.stft(torch.randn(8, 64), n_fft=1024,
                                                          window=torch.hann_window(1024), return_complex=True))),
    ("larger_images", "RuntimeError: Padding length should be less than or equal to two times the input "
                      "dimension but got padding length 4 and input of dimension 1"),
    ("class_target", lambda: _raised(lambda: F.nll_loss(torch.randn(8, 10), torch.randn(8)))),
    ("target_shape", lambda: _raised(lambda: F.nll_loss(torch.randn(8, 64, 32, 32), torch.randint(0, 64, (8, 64))))),
    ("index_broadcast", lambda: _raised(lambda: torch.randn(8, 64)[torch.arange(8), torch.randint(0, 64, (8, 64))])),
    ("last_axis_size", lambda: _raised(lambda: torch.view_as_complex(torch.randn(8, 64)))),
    ("index_range", lambda: _raised(lambda: nn.Embedding(10, 4)(torch.randint(0, 10, (8, 64)) + 1))),
    ("number_argument", lambda: _raised(lambda: torch.multinomial(torch.rand(8), torch.randn(8, 64)))),
    ("float_target", lambda: _raised(lambda: F.cross_entropy(torch.randn(8, 10), torch.randn(8, 10).int()))),
    ("float_values", lambda: _raised(lambda: torch.mean(torch.randint(0, 10, (8, 64))))),
    ("batch_statistics", lambda: _raised(lambda: nn.BatchNorm1d(4).train()(torch.randn(1, 4)))),
    ("element_count", lambda: _raised(lambda: torch.randn(8, 128, 64).view(8, 11, 11, 64))),
    ("numbers_not_tensors", lambda: _raised(lambda: torch.arange(torch.randn(8, 64) - torch.randn(8, 64),
                                                                 torch.randn(8, 64)))),
    ("numbers_compared", lambda: _raised(lambda: bool(torch.randn(8, 64) >= torch.randn(8, 64)))),
    ("unit_values", lambda: _raised(lambda: F.binary_cross_entropy(torch.randn(8, 64), torch.rand(8, 64)))),
    # piq 0.8.0's multi-scale SSIM, from the manifest's mining run
    ("least_size", "ValueError: Invalid size of the input images, expected at least 161x161."),
    # piq 0.8.0's input check, from the manifest's mining run
    ("unit_values", "AssertionError: Expected values to be greater or equal to 0, got -4.583080768585205"),
]

GUESSES = {
    "complex_input": ([T(8, 64)], [{**T(8, 64), "dtype": "complex64"}]),
    "channels": ([T(8, 4, 32, 32)], [T(8, 64, 32, 32)]),
    "flattened_size": ([T(8, 1, 28, 28)], [T(8, 1, 32, 32)]),
    "recurrent_width": ([T(8, 128, 64)], [T(8, 128, 32)]),
    "vector_per_sample": ([T(8, 64, 32, 32), T(8, 64, 32, 32)], [T(8, 64, 32, 32), T(8, 512)]),
    "matmul_width": ([T(8, 128, 4096)], [T(8, 128, 64)]),
    "norm_channels": ([T(8, 16, 32, 32)], [T(8, 4, 32, 32)]),
    "norm_weight_channels": ([T(8, 4, 32, 32)], [T(8, 64, 32, 32)]),
    "normalized_shape": ([T(8, 64, 32, 32)], [T(8, 64, 32, 64)]),
    "mask_shape": ([T(8, 128, 64), M(8, 128)], [T(8, 128, 64), M(8, 1, 64)]),
    "broadcast_sizes": ([T(8, 256, 32, 32)], [T(8, 64, 32, 32)]),
    "square_image": ([T(8, 64, 32, 32)], [T(8, 64, 14, 14)]),
    "index_axis": ([T(2, 8, 64)], [T(3 + 1, 8, 64)]),
    "op_rank": ([T(8, 64)], rank(3)),
    "expected_rank": ([T(4096)], rank(3)),
    "named_shape": ([T(8, 64)], rank(5)),
    "einops_rank": ([T(8, 64)], rank(4)),
    "einops_divisible": ([T(8, 64, 32, 32)], [T(64, 64, 16, 16)]),
    "einops_group": ([T(8, 128, 64)], [T(8, 121, 64)]),
    "channels_last": ([T(8, 128, 32, 32)], [T(8, 128, 32, 128)]),
    "unpack_rank": ([T(8, 128, 64)], rank(4)),
    "dim_out_of_range": ([T(8, 64)], rank(3)),
    "too_many_indices": ([T(8)], rank(2)),
    "permute_rank": ([T(8, 64)], rank(3)),
    "integer_indices": ([T(8, 4)], [{"kind": "index", "shape": [8, 4], "high": 10, "dtype": "int64"}]),
    "longer_signals": ([T(8, 64), {"kind": "index", "shape": [8], "high": 10, "dtype": "int64"}],
                       [T(8, 1, 4096), T(8, 1, 4096)]),
    "larger_images": ([T(8, 3, 32, 32)], [T(8, 3, 64, 64)]),
    "class_target": ([T(8, 10), T(8, 10)], [T(8, 10), {"kind": "index", "shape": [8], "high": 10, "dtype": "int64"}]),
    "target_shape": ([T(8, 64, 32, 32), I(8, 64, high=64)], [T(8, 64, 32, 32), I(8, 32, 32, high=64)]),
    "index_broadcast": ([T(8, 64), I(8, 64, high=64)], [T(8, 64), I(8, high=64)]),
    "last_axis_size": ([T(8, 64)], [T(8, 2)]),
    "index_range": ([I(8, 64, high=10)], [I(8, 64, high=9)]),
    "number_argument": ([T(8, 64)], [{"kind": "value", "value": 128}]),
    "float_target": ([T(8, 10), {"kind": "index", "shape": [8, 10], "high": 2, "dtype": "int64"}],
                     [T(8, 10), T(8, 10)]),
    "float_values": ([T(8, 64), {"kind": "index", "shape": [8], "high": 10, "dtype": "int64"}], [T(8, 64), T(8)]),
    "batch_statistics": ([T(1, 4)], [T(8, 4, 4, 4)]),
    "element_count": ([T(8, 128, 64)], [T(8, 121, 64)]),
    "numbers_not_tensors": ([T(8, 64), T(8, 64)], [{"kind": "value", "value": 128}, {"kind": "value", "value": 128}]),
    "least_size": ([T(8, 3, 64, 64, unit_interval=True), T(8, 3, 64, 64, unit_interval=True)],
                   [T(8, 3, 161, 161, unit_interval=True), T(8, 3, 161, 161, unit_interval=True)]),
    "unit_values": ([T(8, 64, 32, 32), T(8, 64, 32, 32)],
                    [T(8, 64, 32, 32, unit_interval=True), T(8, 64, 32, 32, unit_interval=True)]),
    "numbers_compared": ([T(8, 64), T(8, 64, arg="j")],
                         [{"kind": "value", "value": 128}, {"kind": "value", "value": 128, "arg": "j"}]),
}


def _quantized_conv3d() -> nn.Module:
    """torch's quantized ``ConvReLU3d``, which checks its input's rank in words:
    ``Input shape must be `(N, C, D, H, W)`!``."""
    from torch.ao.nn.intrinsic.quantized import ConvReLU3d

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensor creation's deprecation
        return ConvReLU3d(3, 3, 3)


def test_a_shape_spelled_out_by_axis_names_gives_the_rank_and_the_sizes_written():
    """nnAudio's ``Griffin_Lim`` asserts ``Please make sure your input is in the shape of
    (batch, freq_bins, timesteps)`` (read from its source); a detector's ``expects images [1,
    3, H, W]`` writes sizes; a list of numbers alone is some tensor's size, not a description."""
    from curate.mine import default_cache
    from curate.mine.sources import resolve

    root = resolve({"kind": "pypi", "name": "nnAudio", "version": "0.3.4"}, default_cache()).root
    text = (root / "nnAudio" / "features" / "griffin_lim.py").read_text()
    said = re.search(r'"(Please make sure your input is in the shape of [^"]+)"', text).group(1)
    assert any(rank(3)(s) for s in _repair_specs([T(8, 64, 32, 32)], f"AssertionError: {said}", nn.Identity()))
    out = _repair_specs([T(8, 64)], "ValueError: Wrapper expects images [1, 3, H, W].", nn.Identity())
    assert out and out[0][0]["shape"][:2] == [1, 3] and len(out[0][0]["shape"]) == 4
    rule = next(r for r in RULES if r.name == "named_shape")
    for msg in ("RuntimeError: Expected size for first two dimensions of batch2 tensor to be: [1024, 4] but got: "
                "[1024, 64].", "RuntimeError: shape '[4096, 1]' is invalid for input of size 16777216"):
        m = rule.match(msg)
        assert m is None or rule.repair([T(8, 64)], m, nn.Identity()) == []


def _lenet() -> nn.Module:
    """LeNet-5 as torch's layers build it: its first Linear takes the 16 x 5 x 5 features of a
    32 x 32 image (28 x 28 gives 16 x 4 x 4)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 10))


def _module_for(name: str) -> nn.Module:
    if name == "flattened_size":  # the rule probes the network for the size its Linear takes
        return _lenet()
    return nn.Embedding(10, 4) if name == "integer_indices" else nn.Identity()


@pytest.mark.parametrize("name,message", CASES, ids=[c[0] for c in CASES])
def test_rule_repairs_the_message_it_targets(name, message):
    msg = message() if callable(message) else message
    rule = next(r for r in RULES if r.name == name)
    m = rule.match(msg)
    assert m is not None, f"{name} does not match {msg!r}"
    specs, want = GUESSES[name]
    module = _module_for(name)
    mine = rule.repair(specs, m, module)
    every = _repair_specs(specs, msg, module)
    found = [s for s in mine if (want(s) if callable(want) else s == want)]
    assert found, f"{name}: {mine} lacks {want}"
    assert all(s in every for s in mine)  # the table applies the rule


def test_every_rule_has_a_case():
    assert {r.name for r in RULES} == {c[0] for c in CASES} == set(GUESSES)
    assert len({r.name for r in RULES + WARNING_RULES}) == len(RULES + WARNING_RULES)


def test_rules_apply_in_table_order():
    # one message two rules match: a mask is tried before the input axis it disagrees with
    msg = ("RuntimeError: The size of tensor a (128) must match the size of tensor b (4096) at "
           "non-singleton dimension 3")
    specs = [T(8, 128, 64), M(8, 128)]
    out = _repair_specs(specs, msg, nn.Identity())
    assert out[0] == [T(8, 128, 64), M(8, 1, 64)]
    assert [T(8, 4096, 64), M(8, 128)] in out[1:]


@pytest.mark.parametrize("layer", [nn.RNN, nn.GRU, nn.LSTM])
def test_a_recurrent_layer_given_an_image_gets_a_sequence(layer):
    """torch's recurrent layers word their rank check as "Expected input to be 2D or 3D, got 4D"
    (the batched rank last); the repaired guess is a [batch, length, features] sequence."""
    msg = _raised(lambda: layer(32, 16, batch_first=True)(torch.randn(8, 64, 32, 32)))
    assert next(r for r in RULES if r.name == "expected_rank").match(msg), msg
    assert any(rank(3)(s) for s in _repair_specs([T(8, 64, 32, 32)], msg, nn.Identity()))


def test_a_message_no_rule_targets_gives_no_repair():
    assert _repair_specs([T(8, 64)], "RuntimeError: CUDA error: device-side assert triggered", nn.Identity()) == []


def test_warning_rules():
    msg = ("ValueError: Using a target size (torch.Size([8, 64])) that is different to the input size "
           "(torch.Size([8, 64, 32, 32])) is deprecated. Please ensure they have the same size.")
    specs = [T(8, 64, 32, 32), T(8, 64)]
    assert [T(8, 64, 32, 32), T(8, 64, 32, 32)] in _warning_repairs(specs, msg, nn.Identity())
    norm = nn.InstanceNorm1d(64)
    msg = _warned(lambda: norm(torch.randn(8, 4, 32)))
    assert next(r for r in WARNING_RULES if r.name == "num_features").match(msg)
    assert _warning_repairs([T(4, 32)], msg, norm) == [[T(8, 64, 32)]]


def test_an_einops_pattern_of_another_rank_reshapes_the_input_it_met_alone():
    """open-flamingo's cross-attention counts ``media_locations`` (an optional [batch, text
    length] input) and rearranges the count by ``'b i -> b 1 i 1'``; a guess that gave it the
    [batch, length, width] shape of the text features fails there. The input of exactly the
    met shape is repaired alone, keeping its leading sizes, before every input is; the text
    features, of the same shape, keep theirs in that guess."""
    msg = _einops_error((8, 128, 64), "b i -> b 1 i 1")
    specs = [T(8, 128, 64), T(8, 64, 32, 64), T(8, 128, 64, arg="media_locations")]
    out = _repair_specs(specs, msg, nn.Identity())
    assert out[0] == [T(8, 128, 64), T(8, 64, 32, 64), T(8, 128, arg="media_locations")]
    assert out[1] == [T(8, 128), T(8, 64, 32, 64), T(8, 128, 64, arg="media_locations")]
    assert any(rank(2)(s) for s in out[2:])  # every input at the pattern's rank, as before


def test_an_einops_axis_length_counts_a_class_token():
    """TimeSformer-pytorch's token shift splits the class token off a [batch, 1 + frames x
    patches, dim] input before ``'b (f n) d -> b f n d'``: the stand-in sees 127 of the 128
    tokens. The axis one longer than the failing length keeps its extra token."""
    msg = _einops_error((8, 127, 64), "b (f n) d -> b f n d", f=64)
    out = _repair_specs([T(8, 128, 64)], msg, nn.Identity())
    assert [T(8, 129, 64)] in out


def test_a_class_target_is_the_integer_input_and_a_norm_of_integers_asks_for_reals():
    """A loss of (scores, features, target) whose target, guessed as integers like the scores,
    reads as class probabilities (``Expected floating point type for target with class
    probabilities, got Long``): the integer input becomes the class target and the features
    stay real; a norm layer given integer ids (``mixed dtype (CPU)``) gets real values."""
    msg = _raised(lambda: F.cross_entropy(torch.randn(8, 64), torch.randint(0, 64, (8, 64))))
    specs = [T(8, 64), T(8, 64), I(8, 64, high=64)]
    assert [T(8, 64), T(8, 64), I(8, high=64)] in _repair_specs(specs, msg, nn.Identity())
    msg = _raised(lambda: nn.LayerNorm(64)(torch.randint(0, 10, (8, 64))))
    assert [T(8, 64)] in _repair_specs([I(8, 64, high=10)], msg, nn.Identity())


def test_inputs_guessed_alike_are_resized_together():
    """Rotary tables ``cos`` and ``sin`` guessed like ``x`` ([8, 128, 512]) where the head's
    rotary width (32) is wanted: both change in one guess (each alone fails on ``cos, sin must
    have same shape``), before each alone."""
    msg = _raised(lambda: torch.randn(8, 4, 128, 32) * torch.randn(8, 1, 128, 512))
    specs = [T(8, 128, 512), T(8, 128, 512), T(8, 128, 512)]
    out = _repair_specs(specs, msg, nn.Identity())
    assert out[0] == [T(8, 128, 512), T(8, 128, 32), T(8, 128, 32)], out[:3]
    assert [T(8, 128, 512), T(8, 128, 32), T(8, 128, 512)] in out
