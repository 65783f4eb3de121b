"""Stand-in for ``transformers.utils`` (and ``transformers.utils.generic``): the decorators,
type hints and small helpers modeling files import, as torch-only code written for curate.

Documentation decorators return their target unchanged; output-shaping decorators
(``can_return_tuple``, ``merge_with_config_defaults``) leave the forward as written, so it
returns the model output object its body builds; feature probes report only torch.
"""

import dataclasses
import functools
from collections import OrderedDict
from typing import TypedDict

import torch


def _decorator(*args, **kwargs):
    """Usable bare (``@deco``) or with arguments (``@deco(...)``); returns the target as is."""
    if len(args) == 1 and not kwargs and callable(args[0]):
        return args[0]
    return lambda target: target


auto_docstring = _decorator
add_start_docstrings = _decorator
add_start_docstrings_to_model_forward = _decorator
add_end_docstrings = _decorator
replace_return_docstrings = _decorator
add_code_sample_docstrings = _decorator
can_return_tuple = _decorator
merge_with_config_defaults = _decorator
check_model_inputs = _decorator
accepts_precomputed_kwargs = _decorator
deprecate_kwarg = _decorator


class TransformersKwargs(TypedDict, total=False):
    """Keyword arguments forwarded through transformers' layers (all optional)."""


class ModelOutput(OrderedDict):
    """A model output: a dataclass whose non-None fields are also its ordered items, so
    ``out.logits``, ``out["logits"]`` and ``out[0]`` all work."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                OrderedDict.__setitem__(self, f.name, value)

    def __getitem__(self, key):
        if isinstance(key, str):
            return OrderedDict.__getitem__(self, key)
        return self.to_tuple()[key]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            OrderedDict.__setitem__(self, name, value)
        object.__setattr__(self, name, value)

    def __setitem__(self, key, value):
        OrderedDict.__setitem__(self, key, value)
        object.__setattr__(self, key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


def torch_int(x):
    """``x`` as a Python int (a tensor stays a tensor while tracing)."""
    if isinstance(x, torch.Tensor) and torch.compiler.is_compiling():
        return x.to(torch.int64)
    return int(x)


def torch_float(x):
    if isinstance(x, torch.Tensor) and torch.compiler.is_compiling():
        return x.to(torch.float32)
    return float(x)


def torch_compilable_check(cond, msg, error_type=ValueError):
    """Raise ``error_type(msg)`` when ``cond`` is false (``cond`` and ``msg`` may be callables)."""
    if callable(cond):
        cond = cond()
    if isinstance(cond, torch.Tensor):
        cond = bool(cond.all())
    if not cond:
        raise error_type(msg() if callable(msg) else msg)


def is_torchdynamo_compiling():
    return torch.compiler.is_compiling()


def is_torch_available():
    return True


def _unavailable(*args, **kwargs):
    return False


is_accelerate_available = _unavailable
is_peft_available = _unavailable
is_flash_attn_2_available = _unavailable
is_flash_attn_available = _unavailable
is_torch_flex_attn_available = _unavailable
is_torch_fx_proxy = _unavailable
is_scipy_available = _unavailable
is_torchdynamo_exporting = _unavailable
is_mambapy_available = _unavailable
is_kernels_available = _unavailable
is_flash_attention_requested = _unavailable


def is_torch_greater_or_equal(version, accept_dev=False):
    """Whether the running torch is at least ``version`` ("2.5", "2.1.0")."""
    def key(v):
        return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in v.split("+")[0].split(".")[:3])
    return key(torch.__version__) >= key(version)


def requires_backends(obj, backends):
    """transformers raises when an optional backend is missing; here only torch is present."""
    backends = [backends] if isinstance(backends, str) else list(backends)
    missing = [b for b in backends if b != "torch"]
    if missing:
        raise ImportError(f"{getattr(obj, '__name__', obj)} requires {missing}")


def maybe_autocast(device_type, dtype=None, enabled=True, cache_enabled=None):
    """``torch.autocast`` (switched off on devices without autocast support)."""
    kwargs = {} if cache_enabled is None else {"cache_enabled": cache_enabled}
    return torch.autocast(device_type=device_type, dtype=dtype, enabled=enabled, **kwargs)


class PushToHubMixin:
    """Uploading to the Hub is not part of a problem (peft's configs and models derive from it)."""

    def push_to_hub(self, *args, **kwargs):
        raise ConnectionError("push_to_hub: a mined problem does not upload to the Hugging Face Hub")


def http_user_agent(user_agent=None):
    return ""
