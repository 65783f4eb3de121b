"""First guesses and alternatives for the constructor arguments of a mined module.

A guess for one parameter is one of three kinds of value:

- a Python literal (int, float, bool, str, None, list, tuple): becomes a positional
  argument of ``Model`` and an entry of ``get_init_inputs()``;
- :class:`Expr`, source text evaluated in the problem file (``torch.nn.GELU``,
  ``torch.nn.Linear(64, 64)``, a block class the file defines): written into ``Model``'s
  ``__init__``, not an input, because it is not a literal;
- :class:`ConfigArg`, a model configuration class of the file built from keyword
  arguments: its init input is the dict of values it is built with.

Guesses read the parameter's name, its annotation, its default, string literals the
constructor compares it with, and the classes the problem file defines. Sizes are
realistic (64 features or channels, heads 8, 32x32 images), and configurations are
scaled down to a problem-sized model (width at most 512, 2 layers, vocabulary 1024)
keeping head sizes and ratios (see :func:`scaled_config`).

Only torch and the standard library are imported (this runs in sandbox workers).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import types
import typing
from typing import Any

import torch
from torch import nn

C, HW, SEQ = 64, 32, 128
B = 8
MAX_INPUT_BYTES = 64 * 1024 * 1024
SMALL_WIDTH = 256  # the width of a model retried smaller after its defaults ran out of memory
MAX_WIDTH = 512
MAX_LAYERS = 2
MAX_VOCAB = 1024


@dataclasses.dataclass(frozen=True)
class Expr:
    """Source text of a non-literal argument, evaluated in the problem's namespace."""

    code: str


@dataclasses.dataclass(frozen=True)
class ConfigArg:
    """A configuration class of the problem file, built as ``cls_name(**values)``."""

    cls_name: str
    values: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)

    def with_value(self, key: str, value: Any) -> "ConfigArg":
        return dataclasses.replace(self, values=tuple(sorted({**self.as_dict(), key: value}.items())))

    def is_type(self, type_name: str) -> bool:
        """Whether an error's ``'<type_name>' object`` is this configuration (Python may
        print a qualified name, ``types.SimpleNamespace``)."""
        return self.cls_name.rsplit(".", 1)[-1] == type_name.rsplit(".", 1)[-1]


@dataclasses.dataclass(frozen=True)
class NamespaceArg(ConfigArg):
    """A configuration object the file does not define (modelscope's and LAVIS's ``config``,
    super-gradients' ``arch_params``): ``types.SimpleNamespace(**values)``, holding the
    attributes the constructor was seen to read, one added per ``AttributeError``."""

    cls_name: str = "types.SimpleNamespace"


def build(value: Any, ns: dict[str, Any]) -> Any:
    """The object a guess stands for, in namespace ``ns``."""
    if isinstance(value, Expr):
        return eval(value.code, ns)
    if isinstance(value, NamespaceArg):
        return types.SimpleNamespace(**value.as_dict())
    if isinstance(value, ConfigArg):
        return ns[value.cls_name](**value.as_dict())
    return value


# --------------------------------------------------------------------------- names
_INT_HINTS = [
    (r"(^|_)(num_)?heads?$|^n_?heads?$|nhead|head_count", 8),
    (r"kernel(_size)?$|^ksize$|^k$", 3),
    (r"(^|_)idx$|layer_id|layer_index|^index$", 0),
    (r"stride|dilation|upscale|downscale|^scale_factor$|^scale$|^factor$", 2),
    (r"^groups?$|num_groups|n_groups", 1),
    (r"padding|^pad$", 1),
    (r"num_classes|n_classes|classes$|num_labels", 10),
    (r"vocab|num_embeddings|n_vocab|n_tokens|num_tokens|codebook_size", 1000),
    (r"depth|num_layers|n_layers|layers$|num_blocks|blocks$|n_blocks", 2),
    (r"ratio|reduction|expansion|expand|mult", 4),
    (r"seq_len|max_len|max_seq|max_position|context|block_size|num_positions|length|window$", SEQ),
    (r"img_size|image_size|resolution|input_size|^size$|feat_size|grid_size|spatial", HW),
    (r"window_size", 4),
    (r"patch_size|patch$|^patch", 4),
    (r"top_?k|k_?top", 2),
    (r"in_chans$|in_channels$|^channels$|^in_ch$|^c_in$|num_channels|n_channels", C),
    (r"experts", 4),
    (r"bits$", 8),
    (r"^n$|^num$|count$", 4),
]
#: Sizes for list-typed per-axis parameters, by name: a window of 7 x 7 tokens (Swin's own
#: default, Liu et al. 2021) rather than a whole 32 x 32 image, which made torchvision's Swin
#: blocks seconds a forward on a CPU.
_PAIR_HINTS = [
    (r"window_size|window$", 7),
    (r"shift_size|shift$", 3),
    (r"kernel(_size)?$|^ksize$", 3),
    (r"patch_size|patch$", 4),
    (r"stride|dilation", 2),
]
_FLOAT_HINTS = [
    (r"eps|epsilon", 1e-5),
    (r"drop|dropout|^p$|prob|rate", 0.0),
    (r"momentum", 0.1),
    (r"beta|alpha|gamma|scale|temperature|tau|lambda|weight|margin|threshold|value|lr|theta|sigma|std", 1.0),
]
_BOOL_RE = (r"^(use_|is_|has_|with_|enable|bias|inplace|affine|batch_first|zero|learn|norm_|pre_|post_|"
            r"residual|training|causal|return_|add_|apply_|do_|no_|skip|shared?_|share|flatten|"
            r"pretrained|progress|channels_last|align_corners|ceil_mode|bidirectional)")
_ACT_RE = r"(^|_)(act|activation|activations|nonlinearity|act_layer|act_fn|activation_fn|acti|gate_fn|act_func)$"
_NORM_RE = r"(^|_)(norm|norm_layer|norm_fn|normalization|norm_cls|norm_type|normalize)$"
_MODULE_RE = r"^(fn|func|function|module|net|network|layer|block|body|inner|sublayer|model|wrapped|op|mlp|attn|f)$"
_BLOCK_RE = r"(^|_)(block|block_fn|block_type|block_cls|layer_cls|blocks|cell)$"
_CONFIG_RE = r"(^|_)(config|cfg|conf|args|params|hparams|opt|opts|hp|options)$"
_SHAPE_RE = r"shape$|shapes$|sizes$|dims$|channels_list|hidden_sizes|features_list|widths$"

ACT_CHOICES = [Expr("torch.nn.GELU"), Expr("torch.nn.ReLU"), Expr("torch.nn.GELU()"), Expr("torch.nn.functional.gelu")]
NORM_CHOICES = [Expr("torch.nn.LayerNorm"), Expr("torch.nn.BatchNorm2d"), Expr("torch.nn.Identity")]
MODULE_CHOICES = [Expr(f"torch.nn.Linear({C}, {C})"), Expr(f"torch.nn.Conv2d({C}, {C}, 3, padding=1)"),
                  Expr("torch.nn.Identity()")]


# The layer an adapter wraps (peft's LoRA/IA3/... layers take ``base_layer``): the layer kind
# the class is named for first.
_WRAPPED_RE = r"^(base_layer|base_module|orig_module|original_module|target_module|wrapped_module|base_model)$"
_WRAPPED_BY_NAME = [(r"Conv1d", Expr(f"torch.nn.Conv1d({C}, {C}, 3, padding=1)")),
                    (r"Conv3d", Expr(f"torch.nn.Conv3d({C}, {C}, 3, padding=1)")),
                    (r"Conv", Expr(f"torch.nn.Conv2d({C}, {C}, 3, padding=1)")),
                    (r"Embedding", Expr(f"torch.nn.Embedding(1024, {C})")),
                    (r"MultiheadAttention", Expr(f"torch.nn.MultiheadAttention({C}, 4, batch_first=True)"))]


def _wrapped_choices(class_name: str) -> list[Any]:
    first = [e for pat, e in _WRAPPED_BY_NAME if re.search(pat, class_name)][:1]
    return first + [e for e in MODULE_CHOICES[:2] if e not in first]


def module_choices(name: str) -> list[Any]:
    """Layers for a parameter the module calls (``self.embedding(x)``) where a plain value was
    guessed (``'int' object is not callable``): the layer kind its name says first."""
    by_name = [e for pat, e in _WRAPPED_BY_NAME if re.search(pat, name, re.I)][:1]
    return by_name + [e for e in MODULE_CHOICES if e not in by_name]


def _annotation_text(param: inspect.Parameter) -> str:
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        return ""
    if isinstance(ann, typing.ForwardRef):  # a ``NamedTuple``'s field under postponed annotations
        return ann.__forward_arg__
    return ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))


def _block_classes(ns: dict[str, Any], owner: type) -> list[Expr]:
    """Module classes of the file that look like building blocks: named so (``BasicBlock``,
    ``SEBottleneck``) or with the ``expansion`` ResNet-style blocks declare (``BasicBlockV1b``)."""
    out = []
    for name, obj in ns.items():
        if (isinstance(obj, type) and issubclass(obj, nn.Module) and obj is not owner
                and (re.search(r"(Block|Bottleneck|Layer|Cell|Unit)$", name) or "expansion" in vars(obj))
                and not inspect.isabstract(obj)):
            out.append(Expr(name))
    return out[:4]


def compared_strings(text: str, name: str, literal: str = r"[^'\"]*") -> list[str]:
    """String literals source ``text`` compares ``name`` with (``mode == 'bilinear'``,
    ``pool in {'cls', 'mean'}``, ``'gelu' == act``), in order, without repeats; ``literal`` is
    the pattern a string on the right of ``name`` must match to count."""
    out: list[str] = []
    pat = rf"\b{re.escape(name)}\s*(?:==|!=|\bin\b|\bnot in\b)\s*([\[\(\{{][^\]\)\}}]*[\]\)\}}]|['\"][^'\"]*['\"])"
    for m in re.finditer(pat, text):
        out += [s for s in re.findall(rf"['\"]({literal})['\"]", m.group(1)) if s not in out]
    for m in re.finditer(rf"['\"]([\w\-]+)['\"]\s*(?:==|!=)\s*{re.escape(name)}\b", text):
        if m.group(1) not in out:
            out.append(m.group(1))
    return out


def string_choices(cls: type, name: str) -> list[str]:
    """String literals ``cls.__init__`` compares parameter ``name`` with, in source order
    (:func:`compared_strings`)."""
    try:
        src = textwrap.dedent(inspect.getsource(cls.__init__))
    except (OSError, TypeError):
        return []
    return compared_strings(src, name)


def config_classes(ns: dict[str, Any]) -> list[type]:
    """Configuration classes defined in the problem file: transformers-style configurations
    (a base named ``PreTrainedConfig``/``PretrainedConfig``) and dataclasses whose fields all
    have defaults (``ModelArgs`` and the like)."""
    out = []
    for obj in list(ns.values()):
        try:
            if not isinstance(obj, type) or issubclass(obj, nn.Module):
                continue
            if any(k.__name__ in ("PreTrainedConfig", "PretrainedConfig") for k in obj.__mro__[1:]):
                out.append(obj)
            elif dataclasses.is_dataclass(obj) and all(
                    f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
                    for f in dataclasses.fields(obj)) and dataclasses.fields(obj):
                out.append(obj)
        except Exception:  # noqa: BLE001 - a class whose metaclass answers any attribute with its own error
            continue  # (brevitas' dependency injectors raise DependencyError for __dataclass_fields__)
    return out


def _config_for(name: str, ann: str, ns: dict[str, Any], owner: type) -> type | None:
    configs = config_classes(ns)
    if not configs:
        return None
    words = re.findall(r"[A-Za-z_]\w*", ann)
    for word in words:
        for c in configs:
            if c.__name__ == word:
                return c
    # a class of the problem file that is no such configuration (one with required fields, or a
    # base its implementations derive from: olmo-core's ``sequence_mixer: SequenceMixerConfig``):
    # one of its subclasses that is, else none here (the class is built for it by the
    # constructor search, ``ConstructorSearch._annotated_instances``)
    named = [ns[w] for w in words if isinstance(ns.get(w), type) and ns[w].__module__ == owner.__module__
             and not issubclass(ns[w], nn.Module)]
    if named:
        configs = [c for c in configs if any(issubclass(c, k) for k in named)]
        if not configs:
            return None
    elif not re.search(_CONFIG_RE, name.lower()) and "config" not in ann.lower():
        return None
    if ann and not any(w in ann for w in ("Config", "config", "Args", "Namespace", "Any")):
        return None

    def shared_prefix(c: type) -> int:
        a, b = c.__name__.lower(), owner.__name__.lower()
        return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

    return max(configs, key=lambda c: (shared_prefix(c), -len(c.__name__)))


#: Arguments that build a problem-sized instance of a ``torch.nn`` layer class named by an
#: annotation (``fp: nn.LayerNorm``); classes not listed are built without arguments.
_LAYER_ARGS = {
    "Linear": f"{C}, {C}", "Bilinear": f"{C}, {C}, {C}", "LazyLinear": f"{C}",
    "Conv1d": f"{C}, {C}, 3, padding=1", "Conv2d": f"{C}, {C}, 3, padding=1", "Conv3d": f"{C}, {C}, 3, padding=1",
    "ConvTranspose1d": f"{C}, {C}, 3, padding=1", "ConvTranspose2d": f"{C}, {C}, 3, padding=1",
    "ConvTranspose3d": f"{C}, {C}, 3, padding=1",
    "LayerNorm": f"{C}", "RMSNorm": f"{C}", "BatchNorm1d": f"{C}", "BatchNorm2d": f"{C}", "BatchNorm3d": f"{C}",
    "InstanceNorm1d": f"{C}", "InstanceNorm2d": f"{C}", "InstanceNorm3d": f"{C}", "GroupNorm": f"8, {C}",
    "Embedding": f"{MAX_VOCAB}, {C}", "EmbeddingBag": f"{MAX_VOCAB}, {C}",
    "MultiheadAttention": f"{C}, 8, batch_first=True", "LSTM": f"{C}, {C}, batch_first=True",
    "GRU": f"{C}, {C}, batch_first=True", "RNN": f"{C}, {C}, batch_first=True", "LSTMCell": f"{C}, {C}",
    "GRUCell": f"{C}, {C}", "PReLU": "", "Dropout": "0.0",
    "TransformerEncoderLayer": f"{C}, 8, {4 * C}, 0.0, batch_first=True",
    "TransformerDecoderLayer": f"{C}, 8, {4 * C}, 0.0, batch_first=True",
}
_CONTAINERS = {"Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"}


def _annotation_words(ann: Any) -> list[str]:
    """Class names an annotation (a string, a class, ``Optional[...]``) mentions."""
    if isinstance(ann, str):
        return re.findall(r"(?<![\w.])(?:torch\.)?(?:nn\.)?([A-Z]\w*)", ann)
    if isinstance(ann, type):
        return [ann.__name__] if ann.__module__.startswith("torch.nn") else []
    return [w for a in typing.get_args(ann) for w in _annotation_words(a)]


def annotated_layer(ann: Any, ns: dict[str, Any] | None = None) -> Expr | None:
    """An instance of the ``torch.nn`` layer class an annotation names (``nn.LayerNorm``,
    ``Optional[torch.nn.Conv2d]``, ``"LayerNorm"``), or None: containers and plain
    ``nn.Module`` say nothing about the layer, and a bare name the problem file binds to a
    class of its own (e2-tts-pytorch's ``Transformer``) means that class, not torch's."""
    for word in _annotation_words(ann):
        own = (ns or {}).get(word)
        if isinstance(own, type) and own is not getattr(nn, word, None) and isinstance(ann, str) \
                and not re.search(rf"\bnn\.{word}\b", ann):
            continue
        layer = getattr(nn, word, None)
        if not (isinstance(layer, type) and issubclass(layer, nn.Module)) or word in _CONTAINERS:
            continue
        code = f"torch.nn.{word}({_LAYER_ARGS.get(word, '')})"
        try:
            eval(code, {"torch": torch})
        except Exception:  # a layer that needs arguments this table does not know
            continue
        return Expr(code)
    return None


def _str_annotation(ann_l: str) -> bool:
    """A lower-cased annotation that takes a string: ``str``, ``Optional[str]``, ``str | None``."""
    return ann_l in ("str", "optional[str]", "str | none", "typing.optional[str]")


def literal_values(ann: Any) -> list[Any]:
    """The values a ``Literal[...]`` annotation allows (``Literal["rms", "none"]``, also as a
    string under ``from __future__ import annotations`` and inside ``Optional[...]``), in
    order; [] for any other annotation."""
    if isinstance(ann, str):
        m = re.search(r"\bLiteral\[(.*?)\]", ann)
        if not m:
            return []
        try:
            got = ast.literal_eval(f"({m.group(1)},)")
        except (ValueError, SyntaxError):
            return []
        return [v for v in got if isinstance(v, (str, int, float, bool))]
    if typing.get_origin(ann) is typing.Literal:
        return list(typing.get_args(ann))
    return [v for a in typing.get_args(ann) for v in literal_values(a)]


def guess(name: str, param: inspect.Parameter, cls: type, ns: dict[str, Any]) -> list[Any]:
    """Guesses for constructor parameter ``name`` of ``cls``, best first."""
    low = name.lower()
    literal = literal_values(param.annotation)
    if literal:  # ``norm: Literal["rms"]``: the values allowed, not a layer its name suggests
        return literal
    ann = _annotation_text(param)
    config = _config_for(name, ann, ns, cls)
    if config is not None:
        return [ConfigArg(config.__name__, tuple(sorted(scaled_config(config).items())))]
    # not for the parameters that take a class to build (``norm_layer: nn.LayerNorm = ...``)
    classes = re.search(_ACT_RE, low) or re.search(_NORM_RE, low) or re.search(_BLOCK_RE, low)
    layer = annotated_layer(param.annotation, ns) if ann and not classes else None
    if layer is not None:  # the layer a wrapper takes (``fp: nn.LayerNorm``, ``base: nn.Linear``)
        return [layer] + [e for e in MODULE_CHOICES if e != layer]
    ann_l = ann.lower()
    if (re.search(_ACT_RE, low) or "callable" in ann_l and re.search(r"act", low)) and not _str_annotation(ann_l):
        return ACT_CHOICES
    if re.search(_NORM_RE, low) and ("str" not in ann_l):
        return NORM_CHOICES
    if re.search(_BLOCK_RE, low) and "int" not in ann_l and not re.match(r"(num|n)_", low):  # not a count
        return _block_classes(ns, cls) + MODULE_CHOICES
    if re.search(_WRAPPED_RE, low):
        return _wrapped_choices(cls.__name__)
    if re.search(_MODULE_RE, low) or re.search(r"\bmodule\b|nn\.module|callable", ann_l):
        return MODULE_CHOICES + ACT_CHOICES[:1]
    # a name that reads as a switch but an annotation that says a number (torch-geometric-temporal's
    # ``residual_channels: int``) is the number
    if ann_l == "bool" or re.search(_BOOL_RE, low) and ann_l not in ("int", "float", "str"):
        return [False, True]
    if _str_annotation(ann_l) or re.search(r"(mode|type|kind|method|name|pool|"
                                                                    r"padding_mode|reduction|style)$", low):
        strings = string_choices(cls, name)
        if strings:
            return strings + [None]
        if "act" in low:
            return ["relu", "gelu"]
        if "reduc" in low:
            return ["mean", "sum"]
        if "norm" in low:
            return ["layer", "batch", "none"]
        if low.endswith("name"):  # a key (peft's adapter_name indexes ModuleDicts): not empty
            return ["default", "", None]
        return ["", None]
    if ann_l == "float" or any(re.search(p, low) for p, _ in _FLOAT_HINTS[:2]):
        for pat, v in _FLOAT_HINTS:
            if re.search(pat, low):
                return [v, 0.5, 1.0]
        return [1.0, 0.5]
    if re.fullmatch(r"spatial_dims?|n_?dims?|ndims?|num_dims|dimensions|n_spatial_dims|conv_dims?|dim_spatial", low):
        return [2, 3, 1]  # a count of spatial dimensions (monai's spatial_dims): 2-D first
    if (re.search(_SHAPE_RE, low) and ann_l != "int") or re.search(r"(tuple|list|sequence|iterable)\[", ann_l) \
            or ann_l in ("list", "tuple", "sequence", "iterable"):  # a bare ``kernel_set: list``
        if re.search(r"hidden_sizes|channels_list|widths|features_list|dims$", low):
            return [[C, C], [C, 2 * C, 4 * C, 8 * C], C]
        pair = next((v for pat, v in _PAIR_HINTS if re.search(pat, low)), None)
        if pair is not None:  # a per-axis size (``window_size: List[int]``): that size on each axis
            return [[pair, pair], [C], (C, HW, HW), [HW, HW], C]
        return [[C], (C, HW, HW), [HW, HW], C]
    for pat, v in _INT_HINTS:
        if re.search(pat, low):
            return [v, C, 2, 1]
    for pat, v in _FLOAT_HINTS[2:]:
        if re.search(pat, low):
            return [v, C]
    return [C, 32, 2, 1, None]


def optional_override(name: str, param: inspect.Parameter) -> Any:
    """A value to pass instead of an optional parameter's default, or ``inspect.Parameter.empty``:
    random layers off (dropout probabilities 0), no pretrained weights (no downloads), and the
    feature sizes a ``None`` default leaves unset."""
    low, default = name.lower(), param.default
    if isinstance(default, float) and not isinstance(default, bool) and default > 0 and re.search(
            r"drop|dropout|^p$|_p$|noise", low):
        return 0.0
    if default is True and re.search(r"pretrained|download|load_weights|progress|from_hub", low):
        return False
    if default is None and re.search(r"(^|_)(dim|channels|features|size|hidden|in_chans|embed_dim|"
                                     r"hidden_dim|out_dim|d_model|width)$", low):
        return C
    return inspect.Parameter.empty


def alternatives(value: Any, name: str) -> list[Any]:
    """Other values to try for a parameter whose guess failed."""
    if isinstance(value, (Expr, ConfigArg)):
        return []
    if isinstance(value, bool) or value is None:
        return [True, False, None, C, 1, "relu"]
    if isinstance(value, int):
        return [v for v in (C, 32, 16, 8, 4, 3, 2, 1, 128, 256, [C, C], (3, 3), True, None) if v != value]
    if isinstance(value, float):
        return [0.5, 0.1, 1, 2.0, 0.0]
    if isinstance(value, (list, tuple)):
        # per-stage lists of per-unit widths (pytorchcv's ``channels=[[64, 64], [128, 128]]``)
        # (four stages: networks built for 224x224 images downsample 32x, pooling the last 7x7)
        nested = [[[C // 2] * 2, [C] * 2, [2 * C] * 2, [4 * C] * 2]] if all(isinstance(v, int) for v in value) else []
        return [C, [C], *nested, [C, C], (HW, HW), 3, [C, 2 * C, 4 * C, 8 * C]]
    return [C, None, 1, True, "relu"]


# --------------------------------------------------------------------------- configurations
_WIDTH_RE = re.compile(r"(hidden_size|d_model|n_embd|embed_dim|hidden_dim|^dim$|d_ff|ffn_dim|intermediate_size|"
                       r"n_inner|_ffn_dim|d_inner|inner_dim|projection_dim|proj_dim|mlp_dim|_size$|_dim$|"
                       r"width|channels)")
_NOT_WIDTH_RE = re.compile(r"vocab|position|image|img|patch|kernel|window|batch|bucket|chunk|(^|_)max_|sample|"
                           r"stride|pool|head_dim|group|(^|_)num_|(^|_)n_|length|seq|spatial|sliding|rope|"
                           r"rotary|expert|codebook|_len|period|frames|mel|fft|hop|bins|buckets|freq")
_HEADS_RE = re.compile(r"(num_attention_heads|num_heads|n_head|n_heads|encoder_attention_heads|"
                       r"decoder_attention_heads|num_key_value_heads|num_kv_heads|n_kv_heads|heads)$")
_LAYERS_RE = re.compile(r"(num_hidden_layers|num_layers|n_layer|n_layers|encoder_layers|decoder_layers|"
                        r"num_decoder_layers|num_encoder_layers|depth|layers)$")
_EXPERTS_RE = re.compile(r"(num_experts|num_local_experts|n_routed_experts|moe_num_experts|n_experts)$")
_TOPK_RE = re.compile(r"(num_experts_per_tok|experts_per_token|moe_topk|top_k|topk)$")
_POSITIONS_RE = re.compile(r"(max_position_embeddings|n_positions|max_positions|max_seq_len|max_seq_length|"
                            r"max_len|max_length|context_length|n_ctx)$")
MAX_POSITIONS = 4096
_HEAD_DIM_RE = re.compile(r"(attention_head_dim|head_dim|dim_head|head_size)$")
_WIDTH_KEYS = ("hidden_size", "d_model", "n_embd", "embed_dim", "hidden_dim", "dim", "width", "n_inner")


def scaled_config(config_cls: type, max_width: int = MAX_WIDTH, sizes: bool = False) -> dict[str, Any]:
    """Keyword values that build ``config_cls`` as a problem-sized model.

    Builds the class's defaults, then divides width-like integers by ``width / max_width``
    (rounded to multiples of 8), head counts by the same factor (head size kept, at least one
    head, key/value groups kept), caps layer counts at :data:`MAX_LAYERS`, the vocabulary at
    :data:`MAX_VOCAB` (token ids above it moved inside, a missing padding id set to its last id), experts at 4 (2 per token), and sets
    dropout probabilities to 0 (problems must be deterministic). Returns only changed values.
    Sub-configurations (attributes that are configurations themselves) are scaled the same way
    and returned as dicts.
    """
    try:
        cfg = config_cls()
    except Exception:
        return {}
    return _scaled_instance(cfg, max_width, sizes)


def _scaled_instance(cfg: Any, max_width: int, sizes: bool = False) -> dict[str, Any]:
    """:func:`scaled_config` for the configuration instance ``cfg``: the values that change."""
    values = {k: v for k, v in vars(cfg).items() if not k.startswith("_")}
    extra = {k: v for k, v in vars(cfg).items() if k in ("_out_indices", "_out_features")}
    return scaled_values(values, max_width, type(cfg), sizes, extra)


def is_int(v: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def int_list(v: Any) -> bool:
    """A sequence whose items are all :func:`is_int`."""
    return all(is_int(x) for x in v)


def scaled_values(values: dict[str, Any], max_width: int = MAX_WIDTH, config_cls: type | None = None,
                  sizes: bool = False, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The changed entries of ``values`` (keyword name -> default value) that make a
    problem-sized model, by the rules of :func:`scaled_config`; ``config_cls`` (the
    configuration the values come from, if any) is not scaled again among its own attributes.

    With ``sizes`` (a retry after the defaults ran out of memory), a model without a width
    keeps its head size with fewer heads (diffusers' ``num_attention_heads`` x
    ``attention_head_dim``), lists of widths (``block_out_channels``) shrink by the same
    factor, and position tables are capped at :data:`MAX_POSITIONS`. ``extra``: private
    attributes of a configuration instance (a backbone's ``_out_indices``, behind a property)."""
    extra = extra or {}
    out: dict[str, Any] = {}
    width_key = next((k for k in _WIDTH_KEYS if is_int(values.get(k))), None)
    width = values[width_key] if width_key else None
    heads = {k: v for k, v in values.items() if is_int(v) and _HEADS_RE.search(k)}
    main_heads = next((heads[k] for k in heads if "key_value" not in k and "kv" not in k), None)
    ratio = 1.0  # old width / new width
    new_heads = main_heads
    if width and width > max_width:
        if main_heads and width % main_heads == 0:  # keep the head size: fewer heads
            new_heads = max(1, main_heads // max(1, width // max_width))
            out[width_key] = new_heads * (width // main_heads)
        else:
            out[width_key] = max_width
        ratio = width / out[width_key]
    head_dim = next((v for k, v in values.items() if _HEAD_DIM_RE.search(k) and isinstance(v, int)
                     and not isinstance(v, bool) and v > 0), None)
    if sizes and not width and main_heads and head_dim and main_heads * head_dim > max_width:
        # diffusers' transformers give heads and head size, not a width: fewer heads, same size
        new_heads = max(1, max_width // head_dim)
        ratio = main_heads / new_heads
    widths = [max(x) for k, x in values.items() if isinstance(x, (list, tuple)) and x and int_list(x)
              and _WIDTH_RE.search(k) and not _NOT_WIDTH_RE.search(k)]
    if sizes and not width and ratio == 1 and widths and max(widths) > max_width:  # a UNet's block_out_channels
        ratio = max(widths) / max_width
    for k, v in values.items():
        if isinstance(v, bool):
            continue
        if ratio > 1 and isinstance(v, (list, tuple)) and v and int_list(v) and _WIDTH_RE.search(k) \
                and not _NOT_WIDTH_RE.search(k) and max(v) >= 256:
            out[k] = type(v)(max(8, round(x / ratio / 8) * 8) for x in v)
            continue
        if isinstance(v, float) and re.search(r"drop|dropout", k) and v > 0:
            out[k] = 0.0
        elif isinstance(v, int) and _LAYERS_RE.search(k) and v > MAX_LAYERS:
            out[k] = MAX_LAYERS
        elif isinstance(v, int) and k.endswith("vocab_size") and v > MAX_VOCAB:
            out[k] = MAX_VOCAB
        elif isinstance(v, int) and _EXPERTS_RE.search(k) and v > 4:
            out[k] = 4
        elif isinstance(v, int) and _TOPK_RE.search(k) and v > 2:
            out[k] = 2
        elif sizes and isinstance(v, int) and _POSITIONS_RE.search(k) and v > MAX_POSITIONS:
            out[k] = MAX_POSITIONS
        elif k in out:
            continue
        elif isinstance(v, int) and k in heads and ratio > 1:
            if ("key_value" in k or "kv" in k) and main_heads:
                group = max(1, main_heads // v) if v else 1
                out[k] = max(1, new_heads // group)
            elif v == main_heads:
                out[k] = new_heads
            else:
                out[k] = max(1, round(v / ratio))
        elif (isinstance(v, int) and ratio > 1 and v >= 256
              and (k in _WIDTH_KEYS or _WIDTH_RE.search(k) and not _NOT_WIDTH_RE.search(k))):
            out[k] = max(8, round(v / ratio / 8) * 8)
        elif isinstance(v, list) and v and int_list(v) \
                and re.search(r"depths$|layers$|num_blocks$", k) and max(v) > 1:
            out[k] = [1] * len(v)
        elif hasattr(v, "__dict__") and type(v).__name__.endswith("Config") and type(v) is not config_cls:
            # the instance, not its class's defaults: a composite gives its sub-configurations
            # their own values (VipLlava's CLIP vision tower: 1024 wide, 24 layers)
            sub = _scaled_instance(v, max_width, sizes)
            if sub:
                kind = getattr(v, "model_type", None)
                out[k] = {"model_type": kind, **sub} if isinstance(kind, str) and kind else sub
    capped = [v for k, v in out.items() if _LAYERS_RE.search(k) and is_int(v)]
    indices = values.get("out_indices", extra.get("_out_indices"))
    if capped and isinstance(indices, (list, tuple)) and indices and int_list(indices) and max(indices) > max(capped):
        # a backbone's feature stages: stage i is the output of layer i, and fewer layers remain
        out["out_indices"] = sorted({min(i, max(capped)) for i in indices if i >= 0} or {max(capped)})
        if values.get("out_features", extra.get("_out_features")) is not None:
            out["out_features"] = None  # recomputed from the indices
    vocab = out.get("vocab_size", values.get("vocab_size"))
    if vocab is None:  # a composite's token ids (image_token_id) index its text model's vocabulary
        vocab = next((sub["vocab_size"] for sub in out.values() if isinstance(sub, dict)
                      and isinstance(sub.get("vocab_size"), int)), None)
    if isinstance(vocab, int):
        for k, v in values.items():
            if k.endswith("token_id") and is_int(v) and v >= vocab:
                out[k] = vocab - 1
        if "pad_token_id" in values and values["pad_token_id"] is None:
            out["pad_token_id"] = vocab - 1  # classification heads find each row's last non-pad token
    return out


def to_source(value: Any) -> str:
    """Source text for a guess inside ``Model.__init__``."""
    return value.code if isinstance(value, Expr) else repr(value)
