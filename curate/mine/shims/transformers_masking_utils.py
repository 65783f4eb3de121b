"""Stand-in for ``transformers.masking_utils``: additive float masks for eager attention.

A mask is ``[batch, 1, query, key]`` with 0 where attention is allowed and the dtype's
minimum elsewhere, the form transformers' eager attention adds to its scores.
"""

import torch


def _additive_mask(inputs_embeds, attention_mask, causal, window=None, key_len=None):
    if attention_mask is not None and attention_mask.dim() == 4:
        return attention_mask
    batch, q = inputs_embeds.shape[0], inputs_embeds.shape[1]
    k = key_len or (attention_mask.shape[-1] if attention_mask is not None else q)
    if not causal and attention_mask is None and window is None:
        return None
    device, dtype = inputs_embeds.device, inputs_embeds.dtype
    if not dtype.is_floating_point:
        dtype = torch.float32
    allowed = torch.ones(q, k, dtype=torch.bool, device=device)
    if causal:
        allowed = torch.tril(allowed, diagonal=k - q)
    if window is not None:
        allowed = allowed & ~torch.tril(torch.ones(q, k, dtype=torch.bool, device=device), diagonal=k - q - window)
    allowed = allowed[None, None].expand(batch, 1, q, k)
    if attention_mask is not None:
        allowed = allowed & attention_mask[:, None, None, :].bool()
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)


def create_causal_mask(config, inputs_embeds, attention_mask, past_key_values=None, position_ids=None, **kwargs):
    return _additive_mask(inputs_embeds, attention_mask, causal=True)


def create_sliding_window_causal_mask(config, inputs_embeds, attention_mask, past_key_values=None,
                                      position_ids=None, **kwargs):
    return _additive_mask(inputs_embeds, attention_mask, causal=True,
                          window=getattr(config, "sliding_window", None))


def create_bidirectional_mask(config, inputs_embeds, attention_mask, encoder_hidden_states=None, **kwargs):
    key_len = encoder_hidden_states.shape[1] if encoder_hidden_states is not None else None
    return _additive_mask(inputs_embeds, attention_mask, causal=False, key_len=key_len)


def create_bidirectional_sliding_window_mask(config, inputs_embeds, attention_mask, encoder_hidden_states=None,
                                             **kwargs):
    return _additive_mask(inputs_embeds, attention_mask, causal=False,
                          window=getattr(config, "sliding_window", None))
