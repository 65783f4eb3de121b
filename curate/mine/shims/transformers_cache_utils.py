"""Stand-in for ``transformers.cache_utils``: a minimal key/value cache."""

import torch


class Cache:
    """Per-layer key/value tensors, concatenated along the sequence axis (-2)."""

    def __init__(self, *args, **kwargs):
        self.keys = {}
        self.values = {}

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        if layer_idx in self.keys:
            key_states = torch.cat([self.keys[layer_idx], key_states], dim=-2)
            value_states = torch.cat([self.values[layer_idx], value_states], dim=-2)
        self.keys[layer_idx], self.values[layer_idx] = key_states, value_states
        return key_states, value_states

    def get_seq_length(self, layer_idx=0):
        return self.keys[layer_idx].shape[-2] if layer_idx in self.keys else 0

    def get_mask_sizes(self, query_length, layer_idx=0):
        """(kv_length, kv_offset) for building layer ``layer_idx``'s attention mask: what is
        cached plus the new queries, no offset (a cache without a sliding window)."""
        if not isinstance(query_length, int):  # older callers pass cache_position
            query_length = query_length.shape[0]
        return self.get_seq_length(layer_idx) + query_length, 0


class DynamicCache(Cache):
    pass


class EncoderDecoderCache(Cache):
    def __init__(self, self_attention_cache=None, cross_attention_cache=None, *args, **kwargs):
        super().__init__()
        self.self_attention_cache = self_attention_cache or DynamicCache()
        self.cross_attention_cache = cross_attention_cache or DynamicCache()
        self.is_updated = {}

    def get_seq_length(self, layer_idx=0):
        return self.self_attention_cache.get_seq_length(layer_idx)

    def get_mask_sizes(self, query_length, layer_idx=0):
        return self.self_attention_cache.get_mask_sizes(query_length, layer_idx)
