"""First guesses of a constructed module's forward inputs, as input specs (the JSON dicts
:func:`curate.problem.build_inputs` takes): shapes from its first layers and size-like
constructor arguments, declared input types, graph and routed inputs, optional inputs."""

from __future__ import annotations

import inspect
import itertools
import re
from typing import Any, Iterator

import torch
from torch import nn

from curate.mine.guess import HW, SEQ, B, C, ConfigArg, is_int


_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d,
           nn.Linear, nn.Embedding, nn.EmbeddingBag, nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d,
           nn.BatchNorm2d, nn.BatchNorm3d, nn.MultiheadAttention, nn.RNNBase, nn.InstanceNorm1d,
           nn.InstanceNorm2d)


def _first_layer(module: nn.Module) -> nn.Module | None:
    for m in module.modules():
        if isinstance(m, _LAYERS):
            return m
    return None


def _int_arg(kwargs: dict[str, Any], pattern: str) -> int | None:
    for k, v in kwargs.items():
        if is_int(v) and re.search(pattern, k.lower()):
            return v
    return None


def _shape_guesses(module: nn.Module, kwargs: dict[str, Any],
                   params: list[tuple[str, inspect.Parameter]]) -> list[list[int]]:
    """First-input shapes to try, most likely first; ``params`` are :func:`_forward_params`."""
    guesses: list[list[int]] = []
    img = _int_arg(kwargs, r"img_size|image_size|^resolution$|input_resolution|^input_size$")
    chans = _int_arg(kwargs, r"^in_chans$|^in_channels$|^channels$|^num_channels$|^in_ch$|^c_in$|^image_channels$")
    if img:
        guesses.append([B, chans or 3, img, img])
    layer = _first_layer(module)
    size = next((v for k in ("in_size", "input_size", "img_size", "image_size")
                 if isinstance(v := getattr(module, k, None), (tuple, list)) and len(v) == 2
                 and all(isinstance(d, int) and 0 < d <= 512 for d in v)), None)
    if size and isinstance(layer, nn.Conv2d):  # a network that records its input size (pytorchcv)
        guesses.append([2 if max(size) >= 224 else B, layer.in_channels, *size])
    guesses += _layer_shapes(layer)
    image = _image_guess(module)
    if image and _takes_image(params):
        guesses.insert(0, image)
    config = next((v for v in kwargs.values() if isinstance(v, ConfigArg)), None)
    hidden = getattr(module, "config", None)
    width = next((getattr(hidden, k) for k in ("hidden_size", "d_model", "n_embd", "embed_dim", "dim")
                  if isinstance(getattr(hidden, k, None), int)), None) if config is not None else None
    if width:
        guesses.insert(0, [B, SEQ, width])
    ch = _int_arg(kwargs, r"(in_|^dim$|^d$|channel|features|hidden|embed|d_model|^c$|planes|chs|width|^n_embd$)") or C
    guesses += [[B, ch, HW, HW], [B, SEQ, ch], [B, ch], [B, ch, SEQ], [2, ch, 8, 16, 16],
                [B, 3, 224, 224] if ch == 3 else [B, 3, 64, 64], [B * SEQ * 4]]
    if image:
        guesses.append(image)
    guesses += _layer_guesses(module)
    seen, out = set(), []
    for g in guesses:
        if tuple(g) not in seen:
            seen.add(tuple(g))
            out.append(g)
    return out


#: Attributes naming a network's input image size and channels, on the module, its
#: submodules or their configuration objects (transformers' ``config.image_size``, timm's
#: ``img_size``/``in_chans``).
_IMAGE_SIZE = ("image_size", "img_size", "input_resolution", "input_size")
_IMAGE_CHANNELS = ("num_channels", "in_chans", "in_channels", "image_channels")


def _hint_objects(module: nn.Module, limit: int = 24) -> Iterator[Any]:
    """The module, its first ``limit`` submodules, and the configuration objects they hold."""
    for m in itertools.islice(module.modules(), limit):
        yield m
        for name in ("config", "vision_config", "cfg"):
            obj = m.__dict__.get(name)
            if obj is not None and not isinstance(obj, (nn.Module, torch.Tensor, int, float, str, dict)):
                yield obj


def _image_guess(module: nn.Module) -> list[int] | None:
    """[batch, channels, height, width] from a recorded input image size (and channel count):
    a vision transformer's patch grid and position table fix the size its input must have."""
    for obj in _hint_objects(module):
        size = next((v for k in _IMAGE_SIZE if (v := _size2(getattr(obj, k, None)))), None)
        if size is None:
            continue
        ch = next((v for k in _IMAGE_CHANNELS if isinstance(v := getattr(obj, k, None), int)
                   and not isinstance(v, bool) and 0 < v <= 16), 3)
        return [2 if max(size) >= 224 else B, ch, *size]
    return None


def _size2(v: Any) -> tuple[int, int] | None:
    if is_int(v):
        v = (v, v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(
            is_int(d) and 8 <= d <= 1024 for d in v):
        return tuple(v)
    return None


def _takes_image(params: list[tuple[str, inspect.Parameter]]) -> bool:
    """The first forward parameter is named like an image (``pixel_values``, ``images``)."""
    return bool(params) and bool(re.search(r"pixel|image|img", params[0][0].lower()))


def _layer_shapes(layer: nn.Module | None) -> list[list[int]]:
    """Input shapes that fit ``layer`` when it is the first one forward runs (most likely first)."""
    if isinstance(layer, (nn.Conv2d, nn.ConvTranspose2d)):
        return [[B, layer.in_channels, HW, HW]]
    if isinstance(layer, (nn.Conv1d, nn.ConvTranspose1d)):
        return [[B, layer.in_channels, SEQ]]
    if isinstance(layer, (nn.Conv3d, nn.ConvTranspose3d)):
        return [[2, layer.in_channels, 8, 16, 16]]
    if isinstance(layer, nn.Linear):
        return [[B, SEQ, layer.in_features], [B, layer.in_features]]
    if isinstance(layer, nn.LayerNorm):
        return [[B, SEQ, *layer.normalized_shape]]
    if isinstance(layer, nn.GroupNorm):
        return [[B, layer.num_channels, HW, HW]]
    if isinstance(layer, (nn.BatchNorm2d, nn.InstanceNorm2d)):
        return [[B, layer.num_features, HW, HW]]
    if isinstance(layer, (nn.BatchNorm1d, nn.InstanceNorm1d)):
        return [[B, layer.num_features, SEQ], [B, layer.num_features]]
    if isinstance(layer, nn.BatchNorm3d):
        return [[2, layer.num_features, 8, 16, 16]]
    if isinstance(layer, nn.MultiheadAttention):
        return [[SEQ, B, layer.embed_dim] if not layer.batch_first else [B, SEQ, layer.embed_dim]]
    if isinstance(layer, nn.RNNBase):
        return [[SEQ, B, layer.input_size] if not layer.batch_first else [B, SEQ, layer.input_size]]
    return []


#: Layers :func:`_layer_guesses` takes a guess from (the others' guesses repeat these).
_GUESSED_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d,
                   nn.Linear, nn.LayerNorm, nn.GroupNorm, nn.BatchNorm2d)


def _layer_guesses(module: nn.Module, limit: int = 6) -> list[list[int]]:
    """Input shapes fitting each of the module's first distinct layers, for modules whose
    first-built layer is not the first one forward runs (a head built before the stem)."""
    out: list[list[int]] = []
    for m in module.modules():
        if not isinstance(m, _GUESSED_LAYERS) or isinstance(m, nn.LayerNorm) and len(m.normalized_shape) != 1:
            continue
        shape = _layer_shapes(m)[0]
        if shape not in out:
            out.append(shape)
            if len(out) >= limit:
                break
    return out


AUDIO_SAMPLES = 16000  # one second at 16 kHz
#: Sizes of a declared input's axes by kind (NeMo's ``AxisKind`` names); a channel or feature
#: axis takes the module's first layer's width.
_AXIS_SIZES = {"Batch": B, "Time": SEQ, "Sequence": SEQ, "Width": HW, "Height": HW, "Singleton": 1, "FlowGroup": 1}


def _declared_specs(module: nn.Module, params: list[tuple[str, inspect.Parameter]]) -> list[dict] | None:
    """Input specs from the types a module declares for its forward inputs: NeMo's
    ``input_types``, a dict of argument name -> ``NeuralType(axes, elements_type, optional)``
    whose axes name their kind (``('B', 'D', 'T')``) and, at times, their size. Lengths
    (``LengthsType``) are the full time length; optional inputs are left out. None when the
    module declares nothing usable."""
    try:
        declared = getattr(module, "input_types", None)
    except Exception:  # a property reading configuration the guess lacks
        return None
    names = {n for n, _ in params}
    if not isinstance(declared, dict) or not declared or not set(declared) <= names:
        return None
    shapes = _layer_shapes(_first_layer(module))
    width = shapes[0][1] if shapes and len(shapes[0]) > 2 else C
    specs = []
    length = SEQ
    for name, nt in declared.items():
        axes = getattr(nt, "axes", None)
        if getattr(nt, "optional", False):
            continue
        if axes is None:
            return None
        element = type(getattr(nt, "elements_type", None)).__name__
        shape = []
        for ax in axes:
            size = getattr(ax, "size", None)
            kind = getattr(getattr(ax, "kind", None), "name", "")
            if kind == "Time" and "Audio" in element:
                size = length = AUDIO_SAMPLES  # a waveform: codecs downsample it hundreds of times
            shape.append(size if isinstance(size, int) and size > 0 else _AXIS_SIZES.get(kind, width))
        if "Length" in element:
            spec = {"kind": "index", "shape": shape, "low": length, "high": length + 1, "dtype": "int64"}
        elif re.search(r"Label|Index|Token", element):
            spec = {"kind": "index", "shape": shape, "high": 2, "dtype": "int64"}
        elif "Mask" in element:
            spec = {"kind": "mask", "shape": shape, "dtype": "bool"}
        else:
            spec = {"kind": "tensor", "shape": shape, "dtype": "float32"}
        specs.append({**spec, "arg": name})
    return specs or None


def _forward_params(module: nn.Module) -> list[tuple[str, inspect.Parameter]]:
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return [("x", inspect.Parameter("x", inspect.Parameter.POSITIONAL_ONLY))]
    params = []
    for n, p in sig.parameters.items():
        if p.kind == p.VAR_KEYWORD or (p.kind == p.KEYWORD_ONLY and p.default is not inspect.Parameter.empty):
            continue
        if p.kind == p.VAR_POSITIONAL:
            if not params:
                params.append((n, p))
            continue
        if p.default is inspect.Parameter.empty:
            params.append((n, p))
    if not params and sig.parameters:
        first = next(iter(sig.parameters.items()))
        if first[1].kind not in (first[1].VAR_KEYWORD, first[1].KEYWORD_ONLY):
            params.append(first)
    return params


#: Optional forward parameters passed as a pair of tensors of shape [batch, seq, head size]:
#: the rotary (cos, sin) tables transformers' attention layers take from their model.
PAIRED = ("position_embeddings",)


def _paired_params(module: nn.Module) -> list[str]:
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return []
    return [n for n in PAIRED if n in sig.parameters and sig.parameters[n].default is None]


def _optional_inputs(specs: list[dict], msg: str, line: str, module: nn.Module,
                     outer: list[str] = ()) -> list[list[dict]]:
    """``'NoneType' object has no attribute ...`` (or a torch op given None) on a line reading an
    optional forward parameter left None (a cross-attention's ``encoder_hidden_states``): the guess again with
    that parameter given, shaped like the first input (a timestep or a length as such).

    The variable read is often a local copy under a shorter or longer name (``emb`` for
    ``temb``, ``timesteps`` for ``timestep``, ``encoder_query`` from
    ``encoder_hidden_states``): parameters named like it come first, then those sharing a
    word with it. A mask is given when the line reads it itself (``mask.float()``).

    ``outer``: the lines of the frames around the raising one, innermost first. When the raising
    line names no such parameter (it is inside a helper: einops' ``rearrange(tensor, ...)``
    reading ``tensor.shape``), the first outer line that passes one to a call
    (``mask = rearrange(mask, 'b n -> b () n')``) names it."""
    out = _optional_inputs_at(specs, msg, line, module, passed=False)
    for other in outer:
        if out or other == line:
            continue
        out = _optional_inputs_at(specs, msg, other, module, passed=True)
    return out


def _optional_inputs_at(specs: list[dict], msg: str, line: str, module: nn.Module, passed: bool) -> list[list[dict]]:
    """:func:`_optional_inputs` for one line; ``passed``: the names the line passes as arguments
    of a call are read (the line of a caller whose callee raised)."""
    # ``'NoneType' object has no attribute``, and torch's ops given None: ``but got NoneType``,
    # ``must be Tensor, not NoneType``, ``got (NoneType, Parameter, ...)``
    if "NoneType" not in msg or not line or not specs or specs[0].get("kind") not in ("tensor", "index"):
        return []
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return []
    given = {s.get("arg") for s in specs}
    words = set(re.findall(r"[A-Za-z_]\w*", line))
    m = re.search(r"has no attribute '(\w+)'", msg)
    read = set(re.findall(rf"([A-Za-z_]\w*)\s*\.\s*{m.group(1)}\b", line)) if m else set()
    read |= set(re.findall(r"([A-Za-z_]\w*)\s*\[", line)) if "subscriptable" in msg else set()
    if passed:  # f(mask, ...), f(x, mask = mask)
        read |= set(re.findall(r"[(,]\s*(?:\w+\s*=\s*)?([A-Za-z_]\w*)\s*(?=[,)])", line))
    ranked: list[tuple[float, str]] = []
    for name, p in sig.parameters.items():
        if p.default is not None or name in given or re.search(r"cache|past", name):
            continue
        if name in read or name in words and not re.search(r"mask", name):
            rank = 0
        elif re.search(r"mask", name):
            continue
        elif any(len(v) >= 3 and (v in name or name in v) for v in read):
            rank = 1 + min(abs(len(name) - len(v)) for v in read) / 100  # the closest name first
        elif any(set(v.split("_")) & set(name.split("_")) - {""} for v in read):
            rank = 2
        else:
            continue
        ranked.append((rank, name))
    out = []
    shape = specs[0]["shape"]
    for _, name in sorted(ranked)[:3]:
        spec = {**_spec_for(name, shape, module, first=False), "arg": name}
        out.append(specs + [spec])
        if spec["kind"] == "tensor" and len(shape) >= 3 and re.search(r"emb|cond", name):
            # an embedding vector per batch element (diffusers' ``temb`` [batch, channels])
            out.append(specs + [{**spec, "shape": [shape[0], shape[-1] if len(shape) == 3 else shape[1]]}])
    return out


#: An error naming a forward input that was left out: ```mem` must be provided when
#: init_hidden=False``, ``context must be passed in if cross_attend is set to True``.
_NAMED_INPUT = re.compile(r"`?\b(\w+)`? (?:must|should|has to|needs to) be "
                          r"(?:provided|given|passed|specified|supplied)")


def _named_inputs(specs: list[dict], msg: str, module: nn.Module) -> list[list[dict]]:
    """The guess again with the optional forward parameter an error says must be given (one
    defaulting to None and not given yet), shaped like the first input (a length, a timestep
    or a mask as :func:`_spec_for` shapes them)."""
    m = _NAMED_INPUT.search(msg)
    if not m or not specs or specs[0].get("kind") != "tensor":
        return []
    try:
        p = inspect.signature(module.forward).parameters.get(m.group(1))
    except (TypeError, ValueError):
        return []
    if p is None or p.default is not None or any(s.get("arg") == p.name for s in specs):
        return []
    return [specs + [{**_spec_for(p.name, specs[0]["shape"], module, first=False), "arg": p.name}]]


def _without_extras(specs: list[dict]) -> list[dict]:
    """``specs`` with every tensor input after the first passed as None: the optional
    conditioning many blocks take without a default (diffusers' ``temb``, a ``mask``)."""
    out = [dict(specs[0])]
    for s in specs[1:]:
        if s["kind"] in ("tensor", "mask") and not s.get("pair"):
            out.append({"kind": "value", "value": None, **({"arg": s["arg"]} if s.get("arg") else {})})
        else:
            out.append(dict(s))
    return out


def _router_choice(params: list[tuple[str, inspect.Parameter]], module: nn.Module) -> tuple[int, int] | None:
    """``(expert count, k)`` of a mixture-of-experts block that takes its router's choice
    (transformers' ``Experts.forward(hidden_states, top_k_index, top_k_weights)``), else None."""
    names = [n for n, _ in params]
    if len(names) != 3 or not re.search(r"index|indices|ids", names[1]) or not re.search(r"weight|prob|score", names[2]):
        return None
    experts = next((v for m in module.modules() for k in ("num_experts", "n_routed_experts", "num_local_experts")
                    if isinstance(v := getattr(m, k, None), int) and v > 0), None)
    if experts is None:
        experts = next((len(m) for m in module.modules() if isinstance(m, nn.ModuleList)), None)
    if not experts:
        return None
    cfg = getattr(module, "config", None)
    k = next((v for v in (getattr(module, "top_k", None), getattr(cfg, "num_experts_per_tok", None))
              if isinstance(v, int) and v > 0), 2)
    return experts, min(k, experts)


def _routed_specs(width: int, experts: int, k: int, n: int = 64) -> list[dict]:
    """A routed block's inputs: tokens [n, width], expert indices [n, k] below ``experts``,
    weights [n, k]."""
    return [{"kind": "tensor", "shape": [n, width], "dtype": "float32"},
            {"kind": "index", "shape": [n, k], "high": experts, "dtype": "int64"},
            {"kind": "tensor", "shape": [n, k], "dtype": "float32"}]


def _pair_specs(name: str, shape: list[int], module: nn.Module) -> list[dict]:
    """Input ``name`` as two tensors of shape [batch, seq, head size] passed as a tuple (the
    first spec carries ``"pair"``), for a [batch, seq, width] guess ``shape``."""
    pair = {"kind": "tensor", "shape": [shape[0], shape[1], _head_dim(module, shape[-1])],
            "dtype": "float32", "arg": name}
    return [{**pair, "pair": True}, dict(pair)]


def _annotation(param: inspect.Parameter) -> str:
    """A parameter's annotation as written (a string under ``from __future__ import
    annotations``, else its repr: ``tuple[torch.Tensor, torch.Tensor]``)."""
    return param.annotation if isinstance(param.annotation, str) else repr(param.annotation)


def _value_spec(name: str, param: inspect.Parameter, module: nn.Module) -> dict | None:
    """A required forward parameter that is not a tensor: an optional mask (``attention_mask:
    torch.Tensor | None``, passed None: no masking, as transformers' layers accept), or a
    string the module lists in a plural attribute (``layer_type`` from ``self.layer_types``), or
    the device a forward builds its tensors on (``device``: ``"cpu"``)."""
    if "mask" in name.lower() and re.search(r"None|Optional", _annotation(param)):
        return {"kind": "value", "value": None}
    if name == "device":  # ``forward(i, j, device)`` building its positions there
        return {"kind": "value", "value": "cpu"}
    listed = getattr(module, name + "s", None)
    if isinstance(listed, (list, tuple, set)) and listed and all(isinstance(v, str) for v in listed):
        return {"kind": "value", "value": sorted(listed)[0]}
    return None


def in_place_of(new: dict, old: dict) -> dict:
    """A copy of input spec ``new`` to stand where ``old`` stood, keeping ``old``'s keyword
    (its ``arg``), if it had one."""
    return {**new, **({"arg": old["arg"]} if "arg" in old else {})}


#: Annotations of a forward parameter that takes a plain number, and the number given.
_NUMBER_ANNOTATIONS = {"int": SEQ, "<class 'int'>": SEQ, "float": 0.5, "<class 'float'>": 0.5}


def _annotated_numbers(specs: list[dict], params: list[tuple[str, inspect.Parameter]]) -> list[dict] | None:
    """``specs`` with each tensor input whose parameter is annotated ``int`` (or ``float``) given
    a plain number instead (``forward(text, max_seq_len: int)``); None when there is none, or
    when the specs do not map one to one onto ``params``."""
    if len(specs) != len(params):
        return None
    out = [in_place_of({"kind": "value", "value": _NUMBER_ANNOTATIONS[_annotation(p)]}, s)
           if s["kind"] in ("tensor", "index") and _annotation(p) in _NUMBER_ANNOTATIONS else s
           for s, (_, p) in zip(specs, params)]
    return out if out != specs else None


def _is_pair(name: str, param: inspect.Parameter) -> bool:
    """A forward parameter taking two tensors: a ``PAIRED`` name or an annotation
    ``tuple[torch.Tensor, torch.Tensor]``."""
    return name in PAIRED or bool(re.fullmatch(r"(typing\.)?[Tt]uple\[(torch\.)?Tensor, ?(torch\.)?Tensor\]",
                                               _annotation(param)))


def _head_dim(module: nn.Module, width: int) -> int:
    for m in module.modules():
        hd = getattr(m, "head_dim", None)
        if isinstance(hd, int) and hd > 0:
            return hd
    cfg = getattr(module, "config", None)
    heads = getattr(cfg, "num_attention_heads", None)
    return width // heads if isinstance(heads, int) and heads else 64


def call(module: nn.Module, specs: list[dict], args: list[Any]) -> Any:
    """Run ``module`` on built inputs: positional ones, then keyword ones (``"arg"`` in the
    spec), a spec with ``"pair"`` taking two consecutive tensors as a tuple."""
    pos, kw, i = [], {}, 0
    while i < len(specs):
        s = specs[i]
        value = args[i]
        if s.get("pair"):
            value = (args[i], args[i + 1])
            i += 1
        if s.get("arg"):
            kw[s["arg"]] = value
        else:
            pos.append(value)
        i += 1
    return module(*pos, **kw)


#: Forward parameters giving the spatial size of a [batch, height * width, channels] input
#: (Swin-style blocks): one int each, or an (height, width) pair.
_SPATIAL_INT = re.compile(r"h|w|height|width|img_h|img_w|hh|ww|h_x|w_x")
_SPATIAL_PAIR = re.compile(r"x_size|input_dimensions|hw_shape|hw|input_resolution|spatial_shape|hw_size|"
                           r"feat_size|image_size|size_hw")
SPATIAL = 16  # height and width given to such blocks: 256 tokens
#: A sequence-length tensor beside a [batch, time, features] input (ESPnet's ``ilens``).
_LENGTHS = re.compile(r"(.*_)?(i?lens|o?lens|lengths?|seq_lens?|x_lens|n_frames)")
#: A diffusion timestep or noise level: one value per batch element.
_TIMESTEP = re.compile(r"t|ts|timesteps?|time_?steps?|times?|sigmas?|noise_levels?|noise_labels?")


def _spatial_value(name: str) -> dict | None:
    if _SPATIAL_INT.fullmatch(name.lower()):
        return {"kind": "value", "value": SPATIAL}
    if _SPATIAL_PAIR.fullmatch(name.lower()):
        return {"kind": "value", "value": (SPATIAL, SPATIAL)}
    return None


def _token_embedding(module: nn.Module) -> nn.Module | None:
    """The embedding token ids index: a transformers model's input embeddings (a composite's
    language model: its vision tower's position embedding comes first and is smaller or
    larger), else the first ``nn.Embedding``/``nn.EmbeddingBag``."""
    try:
        emb = module.get_input_embeddings() if hasattr(module, "get_input_embeddings") else None
    except Exception:  # a model whose input embeddings are not an attribute it has yet
        emb = None
    if isinstance(emb, (nn.Embedding, nn.EmbeddingBag)):
        return emb
    return next((m for m in module.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))), None)


def _spec_for(name: str, shape: list[int], module: nn.Module, first: bool = True) -> dict:
    low = name.lower()
    if not first and len(shape) >= 2:
        if _LENGTHS.fullmatch(low):
            t = shape[1] if len(shape) == 2 else shape[-2] if len(shape) == 3 else shape[-1]
            return {"kind": "index", "shape": [shape[0]], "low": t, "high": t + 1, "dtype": "int64"}
        if _TIMESTEP.fullmatch(low):
            return {"kind": "tensor", "shape": [shape[0]], "dtype": "float32"}
    emb = _token_embedding(module)
    if emb is not None and re.search(r"(ids|idx|index|indices|tokens|input$|^x$|^inp$|^seq$|^text$)", low) \
            and _first_layer(module) is emb:
        return {"kind": "index", "shape": shape[:2] if len(shape) > 2 else shape, "high": emb.num_embeddings,
                "dtype": "int64"}
    if re.search(r"(input_ids|token_ids|^tokens$|labels$|^targets?$|^ids$|_ids$)", low):
        high = emb.num_embeddings if emb is not None else 10
        if not first and len(shape) >= 4 and "label" in low:  # one class per image
            return {"kind": "index", "shape": shape[:1], "high": high, "dtype": "int64"}
        return {"kind": "index", "shape": shape[:2] if len(shape) > 2 else shape, "high": high, "dtype": "int64"}
    if re.search(r"mask", low):
        return {"kind": "mask", "shape": shape[:2] if len(shape) > 2 else shape, "dtype": "bool"}
    return {"kind": "tensor", "shape": list(shape), "dtype": "float32"}


#: Graph inputs (torch_geometric's message passing layers): node features [NODES, features]
#: beside an edge index [2, EDGES] of node ids.
NODES, EDGES = 64, 256
_EDGE_INDEX = re.compile(r"edge_index(es)?|edge_indices|adj_t|adj")
_EDGE_VALUES = re.compile(r"edge_weights?|edge_attr|edge_features?|edge_feat|edge_emb")
_GRAPH_BATCH = re.compile(r"batch|batch_index|batch_vec")


def _graph_specs(params: list[tuple[str, inspect.Parameter]], width: int, module: nn.Module) -> list[dict] | None:
    """Inputs of a layer that takes an edge index: node features [NODES, width] float32, the
    edge index [2, EDGES] int64 of node ids, edge weights [EDGES] or attributes [EDGES,
    ``module.edge_dim``], a node-to-graph ``batch`` [NODES] int64 of two graphs, positions
    [NODES, 3]. None for a forward without an edge index."""
    if not any(_EDGE_INDEX.fullmatch(n.lower()) for n, _ in params):
        return None
    edge_dim = getattr(module, "edge_dim", None)
    edge_dim = edge_dim if is_int(edge_dim) and edge_dim > 0 else width
    relations = getattr(module, "num_relations", None)
    specs = []
    for n, p in params:
        low = n.lower()
        if _EDGE_INDEX.fullmatch(low):
            s = {"kind": "index", "shape": [2, EDGES], "high": NODES, "dtype": "int64"}
        elif _EDGE_VALUES.fullmatch(low):
            shape = [EDGES] if "weight" in low else [EDGES, edge_dim]
            s = {"kind": "tensor", "shape": shape, "dtype": "float32"}
        elif re.fullmatch(r"edge_types?|rel_types?|relations?", low):
            s = {"kind": "index", "shape": [EDGES], "high": relations if isinstance(relations, int) and relations > 0
                 else 2, "dtype": "int64"}
        elif _GRAPH_BATCH.fullmatch(low):
            s = {"kind": "index", "shape": [NODES], "high": 2, "dtype": "int64"}
        elif re.fullmatch(r"pos|positions?|coords?", low):
            s = {"kind": "tensor", "shape": [NODES, 3], "dtype": "float32"}
        else:
            s = {"kind": "tensor", "shape": [NODES, width], "dtype": "float32"}
        specs.append({**s, "arg": n} if p.kind == p.KEYWORD_ONLY else s)
    return specs
