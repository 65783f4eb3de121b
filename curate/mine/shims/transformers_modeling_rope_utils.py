"""Stand-in for ``transformers.modeling_rope_utils``: the rotary-embedding initialisations a
configuration may name in ``rope_parameters["rope_type"]`` ("default" is computed by each
model's own code). Written for curate from the published methods:

- ``linear``: position interpolation (Chen et al. 2023, arXiv:2306.15595): frequencies / factor.
- ``dynamic``: NTK-aware scaling (bloc97, 2023); at construction it equals the default table
  (the run-time update is not modelled: a problem's sequences stay within its configuration).
- ``yarn``: YaRN (Peng et al. 2023, arXiv:2309.00071): interpolation and extrapolation
  blended by a linear ramp over the rotary dimensions, attention scaled by
  ``0.1 * ln(factor) + 1``.
- ``longrope``: LongRoPE (Ding et al. 2024, arXiv:2402.13753): per-dimension rescale factors.
- ``llama3``: Llama 3.1's band-wise scaling (low frequencies / factor, high kept, the band
  between smoothed).
- ``proportional``: only ``partial_rotary_factor`` of the head's dimensions rotate; the table
  keeps the full head size (the other frequencies are zero).

Each function takes ``(config, device=None, seq_len=None, layer_type=None)`` and returns
``(inv_freq, attention_factor)``: a float32 tensor of shape ``[rotary_dim // 2]`` and a float.
"""

import math
from typing import TypedDict

import torch

from transformers.utils import _decorator

dynamic_rope_update = _decorator


class RopeParameters(TypedDict, total=False):
    rope_type: str
    rope_theta: float


def _params(config, layer_type=None) -> dict:
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        params = params[layer_type]
    return dict(params)


def _head_dim(config, head_dim_key="head_dim") -> int:
    head_dim = getattr(config, head_dim_key, None)
    return head_dim or config.hidden_size // config.num_attention_heads


def _base_and_dim(config, params: dict, head_dim_key="head_dim") -> tuple[float, int]:
    base = params.get("rope_theta", getattr(config, "rope_theta", None)) or 10000.0
    partial = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None)) or 1.0
    return float(base), int(_head_dim(config, head_dim_key) * partial)


def _inv_freq(base: float, dim: int, device=None) -> torch.Tensor:
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim))


def _original_max(config, params: dict) -> int:
    return (params.get("original_max_position_embeddings")
            or getattr(config, "original_max_position_embeddings", None) or config.max_position_embeddings)


def _linear(config, device=None, seq_len=None, layer_type=None, **kwargs):
    params = _params(config, layer_type)
    base, dim = _base_and_dim(config, params)
    return _inv_freq(base, dim, device) / float(params.get("factor", 1.0)), 1.0


def _dynamic(config, device=None, seq_len=None, layer_type=None, **kwargs):
    params = _params(config, layer_type)
    base, dim = _base_and_dim(config, params)
    return _inv_freq(base, dim, device), 1.0


def _yarn_mscale(scale: float, m: float = 1.0) -> float:
    return 0.1 * m * math.log(scale) + 1.0 if scale > 1 else 1.0


def _yarn(config, device=None, seq_len=None, layer_type=None, **kwargs):
    params = _params(config, layer_type)
    base, dim = _base_and_dim(config, params)
    factor = float(params.get("factor", 1.0))
    original = _original_max(config, params)
    attention = params.get("attention_factor")
    if attention is None:
        m, m_all = params.get("mscale"), params.get("mscale_all_dim")
        attention = _yarn_mscale(factor, m) / _yarn_mscale(factor, m_all) if m and m_all else _yarn_mscale(factor)
    beta_fast, beta_slow = params.get("beta_fast") or 32, params.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:  # the dimension that turns `rotations` times
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    ramp = (torch.arange(dim // 2, dtype=torch.float32, device=device) - low) / max(high - low, 1e-3)
    keep = 1 - ramp.clamp(0, 1)  # 1: extrapolate (high frequencies), 0: interpolate
    extrapolated = _inv_freq(base, dim, device)
    inv_freq = extrapolated / factor * (1 - keep) + extrapolated * keep
    return inv_freq, float(attention)


def _longrope(config, device=None, seq_len=None, layer_type=None, **kwargs):
    params = _params(config, layer_type)
    base, dim = _base_and_dim(config, params)
    original = _original_max(config, params)
    factor = params.get("factor") or config.max_position_embeddings / original
    attention = params.get("attention_factor")
    if attention is None:
        attention = math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0
    rescale = params.get("long_factor") if seq_len and seq_len > original else params.get("short_factor")
    rescale = torch.tensor(rescale or [1.0] * (dim // 2), dtype=torch.float32, device=device)
    return _inv_freq(base, dim, device) / rescale, float(attention)


def _llama3(config, device=None, seq_len=None, layer_type=None, **kwargs):
    params = _params(config, layer_type)
    base, dim = _base_and_dim(config, params)
    inv_freq = _inv_freq(base, dim, device)
    factor = float(params.get("factor", 8.0))
    low, high = float(params.get("low_freq_factor", 1.0)), float(params.get("high_freq_factor", 4.0))
    original = _original_max(config, params)
    wavelen = 2 * math.pi / inv_freq
    long_waves = wavelen > original / low
    scaled = torch.where(long_waves, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / max(high - low, 1e-6)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    between = ~(wavelen < original / high) & ~long_waves
    return torch.where(between, smoothed, scaled), 1.0


def _proportional(config, device=None, seq_len=None, layer_type=None, head_dim_key="head_dim", **kwargs):
    params = _params(config, layer_type)
    base = float(params.get("rope_theta", getattr(config, "rope_theta", None)) or 10000.0)
    head_dim = _head_dim(config, head_dim_key)
    partial = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None)) or 1.0
    rotated = int(head_dim * partial) // 2
    inv_freq = torch.zeros(head_dim // 2, dtype=torch.float32, device=device)
    inv_freq[:rotated] = _inv_freq(base, head_dim, device)[:rotated]
    return inv_freq, 1.0


ROPE_INIT_FUNCTIONS = {"linear": _linear, "dynamic": _dynamic, "yarn": _yarn, "longrope": _longrope,
                       "llama3": _llama3, "proportional": _proportional}
