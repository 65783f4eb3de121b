"""Stand-in for ``transformers.modeling_flash_attention_utils``: flash attention is absent."""

from typing import TypedDict

from transformers.utils import _unavailable

flash_attn_supports_top_left_mask = _unavailable
is_flash_attn_available = _unavailable


class FlashAttentionKwargs(TypedDict, total=False):
    """Keyword arguments of flash attention kernels (unused: attention runs eagerly)."""
