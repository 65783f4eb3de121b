"""Stand-in for ``diffusers.models.attention_dispatch``: every call takes the native path,
``torch.nn.functional.scaled_dot_product_attention`` on [batch, seq, heads, head_dim]
tensors (diffusers' dispatch layout); the other backends (flash, xformers, sage, hub
kernels) and context parallelism are left out."""

from enum import Enum

import torch

_CAN_USE_FLEX_ATTN = True


class AttentionBackendName(str, Enum):
    NATIVE = "native"
    _NATIVE_MATH = "_native_math"
    _NATIVE_EFFICIENT = "_native_efficient"
    _NATIVE_FLASH = "_native_flash"
    _NATIVE_CUDNN = "_native_cudnn"


def dispatch_attention_fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                          enable_gqa=False, attention_kwargs=None, *, backend=None, parallel_config=None):
    """Scaled dot-product attention of [batch, seq, heads, head_dim] query, key and value
    (returns the same layout); a [batch, seq_k] mask is broadcast over heads and queries."""
    if attn_mask is not None and attn_mask.ndim == 2 and attn_mask.shape == (query.shape[0], key.shape[1]):
        attn_mask = attn_mask[:, None, None, :]
    q, k, v = (x.permute(0, 2, 1, 3) for x in (query, key, value))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                                           is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    return out.permute(0, 2, 1, 3)
