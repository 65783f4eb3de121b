"""Repairs of forward-input guesses from the error (or misuse warning) a guess raised.

Each repair is a :class:`Rule`: a name, the error-message pattern it targets and a function
from the failed guess's input specs (the JSON dicts :func:`curate.problem.build_inputs`
takes: ``kind``, ``shape``, ``dtype``, ...) and the pattern's match to new guesses.
:func:`_repair_specs` applies :data:`RULES` in order (the order is the order guesses are
tried in), :func:`_warning_repairs` applies :data:`WARNING_RULES` to misuse warnings.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable

import torch
from torch import nn

from curate.mine.forward_analysis import _einops_rank, _rank_shape, _spec_rank_ch
from curate.mine.guess import MAX_INPUT_BYTES, SEQ, B, is_int
from curate.mine.inputs import call, in_place_of
from curate.problem import build_inputs

Specs = list[dict]
Repair = Callable[[Specs, re.Match, nn.Module], list[Specs]]


@dataclasses.dataclass(frozen=True)
class Rule:
    """One repair: ``repair(specs, match, module)`` gives new input specs for an error message
    that ``pattern`` matches (and ``also``, when set, matches too); ``[]`` when the guess
    offers nothing to change."""

    name: str
    pattern: re.Pattern
    repair: Repair
    also: re.Pattern | None = None

    def match(self, msg: str) -> re.Match | None:
        """The pattern's match in ``msg``, or None when the rule does not apply to it."""
        m = self.pattern.search(msg)
        if m is None or (self.also is not None and not self.also.search(msg)):
            return None
        return m


_COMPLEX = re.compile(r"must be complex|non-complex dtype|expected a complex|complex tensors? (?:is )?(?:expected|"
                      r"required)|only supported for complex|is not complex|input should be complex")


def _mask_shapes(x: list[int]) -> list[list[int]]:
    """Mask shapes that broadcast against input ``x`` or the attention scores built from it,
    for a mask whose [batch, length] guess did not: [B, 1, T] beside a [B, C, T] input
    (VITS' ``x_mask``), [B, T, 1] beside [B, T, C], [B, 1, 1, T] and [B, 1, T, T] against
    [B, heads, T, T] scores, [B, 1, H, W] beside an image."""
    if len(x) == 3:
        b, t, c = x
        return [[b, 1, c], [b, t, 1], [b, 1, 1, t], [b, 1, t, t], [b, t, t], [b, 1, 1, c]]
    if len(x) == 4:
        return [[x[0], 1, *x[2:]], list(x[:1] + x[2:])]
    return []


def _element_count_repairs(specs: list[dict], target: list[int], size: int) -> list[list[dict]]:
    """Input specs for a ``view``/``reshape`` to ``target`` that failed on ``size`` elements.

    A fixed target (``[8, 11, 11, 2304]``: a token count that must be a square, or a width
    that must be heads x head size) scales the one input axis whose size makes the counts
    equal (128 tokens -> 121, 64 features -> 512). A target with -1 (``[-1, 128]`` of
    transformers' multiple-choice heads, which flatten [batch, choices, seq] ids) adds a
    choices axis of 4 after the batch axis of inputs whose second axis is the other size.
    """
    out: list[list[dict]] = []
    if -1 in target:
        rest = math.prod(d for d in target if d != -1)
        if len(target) == 2 and rest > 1:
            new = [{**s, "shape": s["shape"][:1] + [4] + s["shape"][1:]}
                   if s["kind"] in ("tensor", "index", "mask") and len(s.get("shape", [])) in (2, 3)
                   and s["shape"][1] == rest else s for s in specs]
            if new != specs:
                out.append(new)
        return out
    want = math.prod(target)
    if not size or want == size:
        return out
    for i, s in enumerate(specs):
        shape = s.get("shape", [])
        if s["kind"] != "tensor" or math.prod(shape) != size:
            continue
        for d in range(1, len(shape)):
            v, r = divmod(shape[d] * want, size)
            if not r and 2 <= v <= 4096 and v != shape[d]:
                out.append([{**t, "shape": shape[:d] + [v] + shape[d + 1:]} if j == i else t
                            for j, t in enumerate(specs)])
    return out[:3]


#: NotImplementedError messages of torch's own ops about their input (a rank, a dtype), not a
#: method left to subclasses: the inputs are repaired as for any other error
_INPUT_NOT_IMPLEMENTED = re.compile(r"needs \dD input|is not supported for \dD input|input Tensors supported|"
                                    r"not implemented for '|Could not run '")


def _tensors(specs: Specs) -> list[int]:
    return [i for i, s in enumerate(specs) if s["kind"] in ("tensor", "index", "mask")]


def _with_dim(specs: Specs, i: int, dim: int, value: int) -> list[Specs]:
    """``specs`` with axis ``dim`` of input ``i`` set to ``value`` (none when it has no such axis)."""
    new = [dict(s) for s in specs]
    s = new[i]
    if s["kind"] in ("tensor", "index", "mask") and -len(s["shape"]) <= dim < len(s["shape"]):
        shape = list(s["shape"])
        shape[dim] = value
        s["shape"] = shape
        return [new]
    return []


def _with_rank(specs: Specs, nd: int) -> list[Specs]:
    """``specs`` with every tensor input of rank ``nd`` (the first input's channels kept)."""
    tensors = _tensors(specs)
    if not tensors:
        return []
    shape = _rank_shape(nd, _spec_rank_ch(specs[tensors[0]].get("shape", [])))
    if shape:
        return [[{**s, "shape": shape} if s["kind"] == "tensor" else s for s in specs]]
    return []


def _dim_of_all(dim: int, group: int) -> Repair:
    """Axis ``dim`` of every tensor input set to the number the match's ``group`` names."""
    return lambda specs, m, module: [new for i in _tensors(specs)
                                     for new in _with_dim(specs, i, dim, int(m.group(group)))]


def _rank_from(pick: Callable[[re.Match], int | None]) -> Repair:
    """Every tensor input of the rank ``pick`` reads off the match (none when it reads None)."""
    def repair(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
        nd = pick(m)
        return _with_rank(specs, nd) if nd else []
    return repair


def _complex(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # a spectrum (ESPnet's enhancement front ends take STFT frames)
    return [[{**s, "dtype": "complex64"} if s["kind"] == "tensor" and s.get("dtype", "float32") == "float32"
             else s for s in specs]]


def _normalized_shape(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    dims = [int(d) for d in m.group(1).split(",")]
    out = []
    for i, s in enumerate(specs):
        if s["kind"] == "tensor":
            new = [dict(x) for x in specs]
            new[i] = {**s, "shape": list(s["shape"][: max(1, len(s["shape"]) - len(dims))]) + dims}
            out.append(new)
    return out


def _mask_first(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # a mask first: its [batch, length] guess is the usual culprit
    tensors = _tensors(specs)
    if not tensors or specs[tensors[0]]["kind"] != "tensor":
        return []
    return [[{**s, "shape": shape} if j == i else t for j, t in enumerate(specs)]
            for i, s in enumerate(specs) if s["kind"] == "mask"
            for shape in _mask_shapes(specs[tensors[0]]["shape"]) if shape != s["shape"]]


def _broadcast_sizes(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """An axis of one size where the other is wanted: inputs guessed alike (a rotary ``cos`` and
    ``sin`` beside ``x``, which must keep one shape) changed together first, then each input's
    axis alone."""
    a, b = int(m.group(1)), int(m.group(2))
    out = []
    later = [i for i in _tensors(specs)[1:] if specs[i]["kind"] == "tensor"]
    for i in later:
        alike = [j for j in later if specs[j]["shape"] == specs[i]["shape"]]
        if len(alike) < 2 or alike[0] != i:
            continue
        for d, v in enumerate(specs[i]["shape"]):
            for old, new in ((a, b), (b, a)):
                if v == old and new > 1:
                    shape = specs[i]["shape"][:d] + [new] + specs[i]["shape"][d + 1:]
                    out.append([{**t, "shape": shape} if j in alike else t for j, t in enumerate(specs)])
    for i, s in enumerate(specs):
        for d, v in enumerate(s.get("shape", [])):
            if v == a and b > 1:
                out += _with_dim(specs, i, d, b)
            if v == b and a > 1:
                out += _with_dim(specs, i, d, a)
    return out


def _square_image(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # a flattened height * width that must equal a fixed token count: a square image of that many
    a, b = (int(g) for g in m.groups() if g)
    out = []
    for i, s in enumerate(specs):
        shape = s.get("shape", [])
        if s["kind"] == "tensor" and len(shape) >= 4 and shape[-1] == shape[-2]:
            for x, y in ((a, b), (b, a)):
                side = math.isqrt(y)
                if shape[-1] ** 2 == x and side * side == y and 4 <= side <= 256:
                    new = [dict(t) for t in specs]
                    new[i] = {**s, "shape": shape[:-2] + [side, side]}
                    out.append(new)
    return out


def _index_axis(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # qkv[2] of a stacked [3, ...] input, a small axis read at a fixed index: that axis grows to fit
    k, d, size = (int(g) for g in m.groups())
    return [new for i in _tensors(specs) if k < 16 and d < len(specs[i]["shape"]) and specs[i]["shape"][d] == size
            for new in _with_dim(specs, i, d, k + 1)]


def _dim_out_of_range(m: re.Match) -> int:
    have, want = int(m.group(1)), int(m.group(2))
    return max(have + 1, want + 1 if want >= 0 else -want)


def _unpacked(m: re.Match) -> int | None:
    nd = int(m.group(1) or m.group(3))
    return nd if 1 <= nd <= 6 else None


def _indices(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    out = []
    for i, s in enumerate(specs):
        if s["kind"] == "tensor":
            new = [dict(x) for x in specs]
            shape = s["shape"][:2] if i == 0 else [s["shape"][0]]
            high = next((e.num_embeddings for e in module.modules() if isinstance(e, nn.Embedding)), 10)
            new[i] = {"kind": "index", "shape": list(shape), "high": high, "dtype": "int64"}
            out.append(new)
    return out


def _larger_images(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    new = []
    for s in specs:
        shape = list(s.get("shape", []))
        if s["kind"] == "tensor" and len(shape) in (3, 4, 5) and max(shape[2:]) < 384:
            size = next(v for v in (64, 128, 224, 299, 384) if v > max(shape[2:]))
            shape[2:] = [size] * len(shape[2:])
            if size >= 224 or math.prod(shape) * 4 > MAX_INPUT_BYTES:
                shape[0] = 2  # large images: a smaller batch keeps the problem's memory in bounds
        new.append({**s, "shape": shape} if "shape" in s else s)
    return [new]


#: A least image size the message names: piq's ``Invalid size of the input images, expected
#: at least 161x161``, pytorch-msssim's ``Image size should be larger than 160``
_LEAST_SIZE = re.compile(r"(?i)(?:image|input|spatial|resolution)[^\n]{0,60}?\b(at least|no (?:smaller|less) than|"
                         r"(?:larger|greater|bigger) than)\s+(\d+)(?:\s*[x\u00d7]\s*(\d+))?")


def _least_size(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """Images (tensors of rank 4 or 5) whose height and width are the least size the message
    names (one more for "larger than"), with a batch of 2 where the images grow past 224."""
    side = int(m.group(2)) + (1 if "than" in m.group(1).lower() and "no " not in m.group(1).lower() else 0)
    new = []
    for s in specs:
        shape = list(s.get("shape", []))
        if s["kind"] == "tensor" and len(shape) in (4, 5) and min(shape[-2:]) < side <= 1024:
            shape[-2:] = [side, side]
            if side >= 224:
                shape[0] = min(shape[0], 2)
        new.append({**s, "shape": shape} if "shape" in s else s)
    return [new] if new != specs and sum(math.prod(s.get("shape", [0])) * 4 for s in new) <= MAX_INPUT_BYTES else []


def _longer_signals(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """Signals long enough for the padding a short-time transform adds (``stft`` pads by half
    its window: ``padding (512, 512) at dimension 2 of input [1, 1024, 64]``): the last axis
    of every input at four times the padding (a power of two), as [batch, 1, time],
    [batch, time] and [batch, channels, time] (mono first: a transform per channel is slow);
    a target given as class indices becomes a signal too (a loss between two signals)."""
    pad = int(m.group(1)) + int(m.group(2))
    length = 1 << max(4 * pad - 1, 1).bit_length()
    tensors = [i for i, s in enumerate(specs) if s["kind"] in ("tensor", "index")]
    if not tensors:
        return []
    first = specs[tensors[0]].get("shape", [])
    out = []
    for shape in ([B, 1, length], [B, length], [*first[:-1], length] if len(first) >= 2 else None):
        if shape is None or math.prod(shape) * 4 * len(tensors) > MAX_INPUT_BYTES:
            continue
        new = [dict(s) for s in specs]
        for i in tensors:
            new[i] = in_place_of({"kind": "tensor", "shape": list(shape), "dtype": "float32"}, specs[i])
        out.append(new)
    return out


#: A message spelling out the input shape it wants, by axis names: ``Input shape must be
#: `(N, C, D, H, W)```, ``expects images [1, 3, H, W]``, ``in the shape of (batch, freq_bins,
#: timesteps)``, ``we expect BxCxHxW``; at least one axis is a name (a list of numbers alone is
#: some tensor's size, not a description).
_NAMED_SHAPE = re.compile(r"(?:shape|expects?|expected|must be)\b[^()\[\]\n]{0,40}?[`'\"]?[(\[]\s*"
                          r"((?:[A-Za-z_]\w*|\d+)(?:\s*,\s*(?:[A-Za-z_]\w*|\d+))+)\s*,?\s*[)\]]|"
                          r"\bexpects?\s+([A-Z](?:x[A-Z])+)\b")


def _named_shape(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """Every tensor input of the rank the message's axis names give, with the sizes it writes
    as numbers (``[1, 3, H, W]``: batch 1, 3 channels)."""
    axes = [a.strip() for a in m.group(1).split(",")] if m.group(1) else m.group(2).split("x")
    if all(a.isdigit() for a in axes) or len(axes) > 6:
        return []
    out = []
    for new in _with_rank(specs, len(axes)):
        for i in _tensors(new):
            if new[i]["kind"] == "tensor":
                new[i] = {**new[i], "shape": [int(a) if a.isdigit() else d for a, d in zip(axes, new[i]["shape"])]}
        out.append(new)
    return out


def _scores_and_target(specs: Specs) -> tuple[list[int], list[int]] | None:
    """A loss's tensor inputs and the shape of the first (the scores, [batch, classes, ...]),
    or None where there is no second tensor to be the target or the scores have no class axis."""
    tensors = _tensors(specs)
    if len(tensors) < 2 or len(specs[tensors[0]]["shape"]) < 2:
        return None
    return tensors, specs[tensors[0]]["shape"]


def _class_target(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    found = _scores_and_target(specs)
    if found is None:
        return []
    tensors, x = found
    t = {"kind": "index", "shape": [x[0]] + x[2:], "high": x[1], "dtype": "int64"}
    # the input guessed as integers after the scores is the target, else the one after them
    # (``loss(logits, features, target)``: the features stay real)
    ints = [i for i in tensors[1:] if specs[i]["kind"] == "index" and i != tensors[1]][:1]
    return [[in_place_of(t, s) if i == j else s for i, s in enumerate(specs)]
            for j in ints + [tensors[1]]]


def _target_shapes(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """A loss's class target shaped wrong for the scores beside it (``Expected targets of shape
    B, got (8, 64)``, ``only batches of spatial targets supported (3D tensors)``, ``Expected
    input batch_size (8) to match target batch_size (4096)``, ``Expected target size [8, 64]``):
    the target (the first integer input after the scores, else the last input) as class indices
    of the size the message writes, then [batch, *spatial] below the scores' axis-1 count (torch's
    [N, C, d1, ...] convention), then one class per sample [batch]."""
    found = _scores_and_target(specs)
    if found is None:
        return []
    tensors, x = found
    t = next((i for i in tensors[1:] if specs[i]["kind"] == "index"), tensors[-1])
    shapes: list[tuple[list[int], int]] = []
    said = re.search(r"target size \[([\d, ]+)\]", m.string)
    if said:
        shapes.append(([int(d) for d in said.group(1).split(",")], x[1]))
    if len(x) >= 3:
        shapes.append(([x[0]] + x[2:], x[1]))
    shapes.append(([x[0]], x[-1] if len(x) == 3 else x[1]))
    out = []
    for shape, high in shapes:
        target = in_place_of({"kind": "index", "shape": shape, "high": high, "dtype": "int64"}, specs[t])
        new = [target if i == t else s for i, s in enumerate(specs)]
        if new != specs and new not in out:
            out.append(new)
    return out


def _index_broadcast(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # ``x[arange(batch), target]``: an integer input of one listed shape takes the other
    a, b = ([int(d) for d in g.split(",") if d.strip()] for g in m.groups())
    return [[{**s, "shape": list(new)} if j == i else s for j, s in enumerate(specs)]
            for i, s in enumerate(specs) if s["kind"] == "index"
            for old, new in ((b, a), (a, b)) if s["shape"] == old]


def _index_range(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """Token ids out of an embedding's range once the forward shifts them (``text = text + 1``
    before ``self.embed(text)``, the id 0 kept for padding): every integer input's upper bound
    one lower, then half as high."""
    ints = [i for i, s in enumerate(specs) if s["kind"] == "index" and s.get("high", 0) > 2]
    return [[{**s, "high": new(s["high"])} if i in ints else s for i, s in enumerate(specs)]
            for new in (lambda h: h - 1, lambda h: h // 2)] if ints else []


def _float_target(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    tensors = _tensors(specs)
    if len(tensors) < 2:
        return []
    x = specs[tensors[0]]
    return [[{**x} if i == tensors[1] else s for i, s in enumerate(specs)]]


def _float_values(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """Integer inputs where the forward computes with real values (``torch.mean`` of a
    signal guessed as class indices: ``Input dtype must be either a floating point or complex
    dtype. Got: Long``): each such input a float tensor of its shape, all of them, then one
    at a time."""
    ints = [i for i, s in enumerate(specs) if s["kind"] == "index"]

    def floated(which: list[int]) -> Specs:
        return [in_place_of({"kind": "tensor", "shape": list(s["shape"]), "dtype": "float32"}, s)
                if i in which else s for i, s in enumerate(specs)]
    out = [floated(ints)] if ints else []
    return out + [floated([i]) for i in ints if len(ints) > 1]


#: A check that the inputs' values lie in [0, 1] (images and probabilities): piq's
#: ``Expected values to be greater or equal to 0, got -4.58``, "must be non-negative",
#: "in the range [0, 1]", "between 0 and 1", "lower or equal to 1.0"
_UNIT_VALUES = re.compile(r"(?i)(?:greater (?:than )?or equal to|>=|at least|not less than) 0(?:\.0*)?\b|"
                          r"non-?negative|(?:lower|less) (?:than )?or equal to 1(?:\.0*)?\b|"
                          r"\b(?:in|within) (?:the )?(?:range|interval) [\[(]0(?:\.0*)?, ?1(?:\.0*)?[\])]|"
                          r"between 0(?:\.0*)? and 1(?:\.0*)?\b")


def in_unit_interval(specs: Specs) -> Specs:
    """``specs`` with every floating-point tensor input drawn in [0.01, 0.99] (``unit_interval``,
    :mod:`curate.problem`)."""
    return [{**s, "unit_interval": True} if s["kind"] == "tensor" and s.get("dtype", "float32").startswith(
        ("float", "bfloat")) else s for s in specs]


def _unit_values(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """The inputs in the unit interval (:func:`in_unit_interval`): the forward checks its
    inputs are images or probabilities."""
    new = in_unit_interval(specs)
    return [new] if new != specs else []


def _batch_statistics(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    return [[{**s, "shape": [B] + s["shape"][1:] + ([4, 4] if len(s["shape"]) == 2 else [])}
             if s["kind"] == "tensor" else s for s in specs]]


def _numbers(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """A factory op (``arange``, ``zeros``) given tensors where it takes numbers: the forward's
    inputs are sizes or positions (x-transformers' ``RelativePositionBias.forward(i, j)``
    calls ``arange(j - i, j)``), or compared in a condition (``assert j >= i``: a tensor's
    truth value is ambiguous). Every tensor input becomes the int ``SEQ`` (equal sizes keep
    ``j - i`` valid), then only the first one, for a forward that takes a tensor beside a size."""
    tensors = _tensors(specs)
    if not tensors:
        return []

    def number(s: dict) -> dict:
        return in_place_of({"kind": "value", "value": SEQ}, s)
    every = [number(s) if i in tensors else s for i, s in enumerate(specs)]
    first = [number(s) if i == tensors[0] else s for i, s in enumerate(specs)]
    return [every] + ([first] if first != every else [])


_MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")


def _vector_per_sample(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """A conditioning input guessed like the image beside it where a ``Linear`` projects one
    vector per sample (diffusers' ``ResnetBlock2D(input_tensor, temb)`` runs
    ``time_emb_proj(temb)``: ``mat1 and mat2 shapes cannot be multiplied (16384x32 and 512x64)``,
    the rows being every position of the [8, 64, 32, 32] guess): that input, after the first,
    becomes [batch, in_features]."""
    rows, got, want = int(m.group(1)), int(m.group(2)), int(m.group(3))
    out = []
    for i in _tensors(specs)[1:]:
        shape = specs[i]["shape"]
        if specs[i]["kind"] == "tensor" and len(shape) >= 3 and shape[-1] == got and math.prod(shape[:-1]) == rows:
            out.append([{**s, "shape": [shape[0], want]} if j == i else s for j, s in enumerate(specs)])
    return out


def _flattened_width(module: nn.Module, specs: Specs, i: int, side: int) -> int | None:
    """The width the first flattened ``Linear`` got when input ``i`` has spatial size ``side``
    (batch 2), 0 when that input runs, None when it fails otherwise."""
    shape = specs[i]["shape"]
    trial = [{**s, "shape": [2, shape[1]] + [side] * (len(shape) - 2)} if j == i else s
             for j, s in enumerate(specs)]
    try:
        with torch.no_grad():
            call(module, trial, build_inputs(trial, seed=0))
        return 0
    except Exception as exc:  # noqa: BLE001 - mined code: any error says this size is not it
        m = _MATMUL.search(str(exc))
        return int(m.group(2)) if m and int(m.group(1)) == 2 else None


def _flattened_size(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """An image (or signal) flattened into a ``Linear`` sized for one input size (a LeNet's
    ``Linear(16 * 5 * 5, 120)``, MTCNN's 48-pixel ``ONet``): ``mat1 and mat2 shapes cannot be
    multiplied (8x480 and 400x120)``, the rows being the batch. The flattened width grows as
    the spatial size to the power of the spatial rank, so two probes of the network (batch 2)
    give the size whose width is the Linear's; sizes beside it are probed too (pooling
    rounds). Inputs of rank 3 to 5 with equal spatial axes; at most 10 probes."""
    rows, got, want = int(m.group(1)), int(m.group(2)), int(m.group(3))
    tensors = _tensors(specs)
    cand = [i for i in tensors if specs[i]["kind"] == "tensor" and 3 <= len(specs[i]["shape"]) <= 5
            and specs[i]["shape"][0] == rows and len(set(specs[i]["shape"][2:])) == 1]
    if got == want or not cand:
        return []
    i = cand[0]
    shape = specs[i]["shape"]
    p, s0 = len(shape) - 2, shape[2]
    s1 = s0 * 2 if s0 < 128 else s0 // 2
    w1 = _flattened_width(module, specs, i, s1)
    if not w1 or w1 == got:
        return [] if w1 != 0 else [[{**s, "shape": shape[:2] + [s1] * p} if j == i else s
                                    for j, s in enumerate(specs)]]
    r0, r1, rw = got ** (1 / p), w1 ** (1 / p), want ** (1 / p)
    est = round(s0 + (rw - r0) * (s1 - s0) / (r1 - r0))
    for side in sorted(range(est - 4, est + 5), key=lambda v: abs(v - est))[:8]:
        if not 4 <= side <= 512 or math.prod(shape[:2]) * side ** p * 4 > MAX_INPUT_BYTES:
            continue
        if _flattened_width(module, specs, i, side) == 0:
            return [[{**s, "shape": shape[:2] + [side] * p} if j == i else s for j, s in enumerate(specs)]]
    return []


def _element_count(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    return _element_count_repairs(specs, [int(d) for d in m.group(1).split(",")], int(m.group(2)))


def _channels_last(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # the input already had the channels on axis 1, yet the convolution saw another count: the code
    # moves the last axis to the channels (``rearrange(x, 'b s n c -> b c n s')``, ``permute(0, 3, 1, 2)``)
    want = int(m.group(1))
    out = []
    for i in _tensors(specs):
        shape = specs[i]["shape"]
        if specs[i]["kind"] == "tensor" and len(shape) >= 3 and shape[1] == want and shape[-1] != want:
            out += _with_dim(specs, i, -1, want)
    return out


def _einops_rank_inputs(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    """An einops pattern of another rank than the tensor it met: first each input of exactly that
    tensor's shape alone (the last first: an optional input just given, shaped like the first
    input) at the pattern's rank, a lower rank keeping its leading sizes (``'b i -> b 1 i 1'``
    on a [batch, seq, width] guess of positions: [batch, seq]); then every input at that rank."""
    nd = _einops_rank(m.group(1))
    if not nd:
        return []
    met = [int(d) for d in m.group(2).split(",") if d.strip()]
    out = []
    for i in reversed(_tensors(specs)):
        if specs[i].get("shape") != met:
            continue
        new = met[:nd] if nd < len(met) else _rank_shape(nd, _spec_rank_ch(met))
        if new:
            out.append([{**s, "shape": list(new)} if j == i else s for j, s in enumerate(specs)])
    return out + _with_rank(specs, nd)


def _with_axis_values(specs: Specs, old: int, new: Callable[[int], int]) -> list[Specs]:
    """Guesses with one tensor input's axis of size ``old`` (or ``old + 1``: a class token the
    code splits off first) set to ``new(offset)``; each input and axis alone, the last axis first.
    An image's batch or channel axis grown more than twofold comes first with its height and
    width halved (to 16 at least) as often as keeps it within twice the elements it had: a
    [8, 64, 32, 32] batch of 64 frames runs as [64, 64, 16, 16], not eight times as long."""
    out = []
    for i in _tensors(specs):
        s = specs[i]
        if s["kind"] != "tensor":
            continue
        shape = s["shape"]
        for d in reversed(range(len(shape))):
            if shape[d] - old in (0, 1) and (v := new(shape[d] - old)) != shape[d] and v > 0:
                grown = shape[:d] + [v] + shape[d + 1:]
                smaller = list(grown)
                while len(smaller) >= 4 and d < len(smaller) - 2 and min(smaller[-2:]) >= 32 \
                        and math.prod(smaller) > 2 * math.prod(shape):
                    smaller[-2:] = [smaller[-2] // 2, smaller[-1] // 2]
                for got in ([smaller] if smaller != grown else []) + [grown]:
                    if math.prod(got) * 4 <= MAX_INPUT_BYTES:
                        out.append([{**t, "shape": got} if j == i else t for j, t in enumerate(specs)])
    return out[:4]


def _einops_divisible(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # '(b t) c h w' with t given: an axis of the input (or one more, a class token) is made a
    # multiple of the length given (the nearest, at least the length itself)
    size, k = int(m.group(1)), int(m.group(2))
    if not k:
        return []
    return _with_axis_values(specs, size, lambda off: k * max(1, round(size / k)) + off)


def _einops_group(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # 'b (h w) c' with h and w given: the axis (or one more, a class token) takes their product
    size, want = int(m.group(1)), int(m.group(2))
    return _with_axis_values(specs, size, lambda off: want + off)


_BROADCAST = r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)"

#: The repairs of an error message, in the order their guesses are tried.
RULES: tuple[Rule, ...] = (
    Rule("complex_input", _COMPLEX, _complex),
    Rule("channels", re.compile(r"to have (\d+) channels, but got (\d+) channels"), _dim_of_all(1, 1)),
    Rule("channels_last", re.compile(r"to have (\d+) channels, but got (\d+) channels"), _channels_last),
    Rule("vector_per_sample", _MATMUL, _vector_per_sample),
    Rule("flattened_size", _MATMUL, _flattened_size),
    # torch's recurrent layers: "input.size(-1) must be equal to input_size. Expected 32, got 64"
    # torch.view_as_complex: "Tensor must have a last dimension of size 2"
    Rule("last_axis_size", re.compile(r"last dim(?:ension)? (?:of size|to be(?: of size)?|(?:must )?(?:be|equal to)) "
                                      r"(\d+)\b"), _dim_of_all(-1, 1)),
    Rule("recurrent_width", re.compile(r"input\.size\(-1\) must be equal to input_size\. Expected (\d+)"),
         _dim_of_all(-1, 1)),
    Rule("matmul_width", _MATMUL, _dim_of_all(-1, 3)),
    Rule("norm_channels", re.compile(r"running_mean should contain (\d+) elements"), _dim_of_all(1, 1)),
    Rule("norm_weight_channels", re.compile(r"Expected weight to be a vector of size equal to the number of channels "
                                             r"in input, but got weight of shape \[(\d+)\]"), _dim_of_all(1, 1)),
    Rule("normalized_shape", re.compile(r"normalized_shape=\[([\d, ]+)\]"), _normalized_shape),
    Rule("mask_shape", re.compile("size of tensor a"), _mask_first),
    Rule("broadcast_sizes", re.compile(_BROADCAST), _broadcast_sizes),
    Rule("square_image", re.compile(_BROADCAST + r"|subscript \w+ has size (\d+) for operand \d+ which does not "
                                    r"broadcast with previously seen size (\d+)"), _square_image),
    Rule("index_axis", re.compile(r"index (\d+) is out of bounds for dimension (\d+) with size (\d+)"), _index_axis),
    # torch's NotImplementedError for a rank its op does not take (see _INPUT_NOT_IMPLEMENTED)
    Rule("op_rank", re.compile(r"needs (\d)D input|Padding size (\d+) is not supported for \dD input|"
                               r"Only (\d)D(?:, \dD)* and \dD input Tensors supported"),
         _rank_from(lambda m: int(m.group(1) or m.group(3)) if not m.group(2) else int(m.group(2)) // 2 + 2)),
    Rule("expected_rank", re.compile(r"Expected (\d)D.* input|expected (\d)D input|Expected (\d)-dimensional|"
                                     r"Expected \d+D \(unbatched\) or (\d)D \(batched\)|expected (\d)D or \dD input|"
                                     r"got (\d)D input|Expected input batch_size|expected (\d)D tensor|"
                                     r"Expected input to be \dD or (\d)D"),
         _rank_from(lambda m: int(next(g for g in m.groups() if g)) if any(m.groups()) else None)),
    Rule("named_shape", _NAMED_SHAPE, _named_shape),
    Rule("einops_rank", re.compile(r"einops pattern '([^']*)' does not match a tensor of shape \(([\d, ]*)\)"),
         _einops_rank_inputs),
    Rule("einops_divisible", re.compile(r"einops: dimension (\d+) is not divisible by (\d+)"), _einops_divisible),
    Rule("einops_group", re.compile(r"einops: axis group \[[^\]]*\] has length (\d+), expected (\d+)"),
         _einops_group),
    Rule("unpack_rank", re.compile(r"not enough values to unpack \(expected (\d+), got (\d+)\)|"
                                   r"too many values to unpack \(expected (\d+)\)"), _rank_from(_unpacked)),
    Rule("dim_out_of_range", re.compile(r"Dimension out of range \(expected to be in range of \[-(\d+), \d+\], "
                                        r"but got (-?\d+)\)"), _rank_from(_dim_out_of_range)),
    Rule("too_many_indices", re.compile(r"too many indices for tensor of dimension (\d+)"),
         _rank_from(lambda m: int(m.group(1)) + 1)),
    Rule("permute_rank", re.compile(r"input\.dim\(\) = (\d+) is not equal to len\(dims\) = (\d+)"),
         _rank_from(lambda m: int(m.group(2)))),
    Rule("integer_indices", re.compile(r"scalar type Long|expected scalar type Long|one of the following scalar types: "
                                       r"Long, Int|Expected tensor for argument #1 'indices'|must be Long|LongTensor|"
                                       r"index.*Float|dtype to be Long|tensors used as indices must be long"), _indices),
    Rule("index_range", re.compile(r"index out of range in self"), _index_range),
    Rule("longer_signals", re.compile(r"padding \((\d+), (\d+)\) at dimension \d+ of input"),
         _longer_signals),
    Rule("larger_images", re.compile(r"Kernel size can't be greater than actual input size|Output size is too small|"
                                     r"input image is smaller than kernel|Padding size should be less than|"
                                     r"should be less than or equal to two times the input dimension|too small"),
         _larger_images),
    Rule("least_size", _LEAST_SIZE, _least_size),
    Rule("class_target", re.compile(r"target", re.I), _class_target,
         also=re.compile(r"Long|Int\b|integer|class indices")),
    Rule("float_target", re.compile(r"Expected floating point type for target|target.*float|Float.*target"),
         _float_target),
    Rule("target_shape", re.compile(r"(?i)\btargets?\b[^\n]{0,80}?(?:shape|size|dimension|\bN\b)|"
                                    r"(?:shape|size|dimension)[^\n]{0,40}\btargets?\b|multi-target"), _target_shapes),
    Rule("index_broadcast", re.compile(r"indexing tensors could not be broadcast together with shapes "
                                       r"\[([\d, ]*)\], \[([\d, ]*)\]"), _index_broadcast),
    Rule("float_values", re.compile(r"dtype must be either a floating point or complex dtype\. Got: (?:Long|Int)|"
                                    r"only supports floating-point dtypes|must be a floating point|"
                                    r"is not implemented for ['\"]?(?:Long|Int)|mixed dtype \(CPU\)"), _float_values),
    Rule("batch_statistics", re.compile("Expected more than 1 value per channel"), _batch_statistics),
    Rule("unit_values", _UNIT_VALUES, _unit_values),
    # last: the rank and width repairs above explain most such errors
    Rule("element_count", re.compile(r"shape '\[([-\d, ]+)\]' is invalid for input of size (\d+)"), _element_count),
    Rule("numbers_not_tensors", re.compile(r"\(\) received an invalid combination of arguments - got \(Tensor[^)]*\), "
                                           r"but expected one of:\s*\* \((?:Number|int|SymInt)"), _numbers),
    # a size argument given a tensor by name: multinomial's ``num_samples``, linspace's ``steps=``
    Rule("number_argument", re.compile(r"argument '\w+' \(position \d+\) must be (?:int|float|Number|SymInt)\w*, "
                                       r"not Tensor|invalid combination of arguments - got \([^)]*\b\w+=Tensor\b"),
         _numbers),
    Rule("numbers_compared", re.compile("Boolean value of Tensor with more than one value is ambiguous"), _numbers),
)


def _repair_specs(specs: Specs, msg: str, module: nn.Module) -> list[Specs]:
    """New input specs suggested by an error message (paritybench-style repairs): those of
    every rule of :data:`RULES` that matches ``msg``, in order."""
    out: list[Specs] = []
    for rule in RULES:
        m = rule.match(msg)
        if m is not None:
            out += rule.repair(specs, m, module)
    return out


_SIZES = re.compile(r"target size \(torch\.Size\(\[([\d, ]*)\]\)\).*input size \(torch\.Size\(\[([\d, ]*)\]\)\)",
                    re.IGNORECASE)


def _target_like_input(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # a loss target shaped (and typed) like the input it broadcasts against, or the input like the target
    target, given = ([int(d) for d in g.split(",") if d.strip()] for g in m.groups())
    return [[{**{k: v for k, v in s.items() if k in ("arg",)}, "kind": "tensor", "shape": list(new),
              "dtype": "float32"} if s.get("shape") == old else s for s in specs]
            for old, new in ((target, given), (given, target))]


def _batch_before_features(specs: Specs, m: re.Match, module: nn.Module) -> list[Specs]:
    # an input whose channels disagree with the norm layer's num_features, given a batch axis before them
    nf = getattr(module, "num_features", None)
    if is_int(nf) and specs and specs[0].get("shape"):
        return [[{**specs[0], "shape": [B, nf, *specs[0]["shape"][1:]]}] + specs[1:]]
    return []


#: The repairs of a misuse warning the reference raised on a guess that ran.
WARNING_RULES: tuple[Rule, ...] = (
    Rule("target_size", _SIZES, _target_like_input),
    Rule("num_features", re.compile("does not match num_features"), _batch_before_features),
)


def _warning_repairs(specs: Specs, msg: str, module: nn.Module) -> list[Specs]:
    """Inputs that may stop the reference's misuse warning ``msg`` (:data:`WARNING_RULES`)."""
    out: list[Specs] = []
    for rule in WARNING_RULES:
        m = rule.match(msg)
        if m is not None:
            out += rule.repair(specs, m, module)
    return out
