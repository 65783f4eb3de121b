"""Stand-in for ``transformers.modeling_utils``: a ``PreTrainedModel`` base without
checkpoint loading or hub code, and attention dispatch that always picks the eager path."""

import torch
from torch import nn


class PreTrainedModel(nn.Module):
    """Base of transformers models: keeps ``config``; weights keep PyTorch's default
    initialisation (``post_init`` does not re-initialise them)."""

    config_class = None
    base_model_prefix = ""
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _no_split_modules = None

    def __init__(self, config, *inputs, **kwargs):
        super().__init__()
        self.config = config

    def post_init(self):
        pass

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    @property
    def device(self):
        return next(self.parameters()).device

    def get_extended_attention_mask(self, attention_mask, input_shape=None, device=None, dtype=None):
        """A [batch, seq] 0/1 mask as an additive [batch, 1, 1, seq] mask."""
        dtype = dtype or self.dtype
        mask = attention_mask[:, None, None, :] if attention_mask.dim() == 2 else attention_mask[:, None, :, :]
        return (1.0 - mask.to(dtype)) * torch.finfo(dtype).min

    def invert_attention_mask(self, encoder_attention_mask):
        return self.get_extended_attention_mask(encoder_attention_mask)

    def get_head_mask(self, head_mask, num_hidden_layers, is_attention_chunked=False):
        return [None] * num_hidden_layers if head_mask is None else head_mask

    def warn_if_padding_and_no_attention_mask(self, input_ids, attention_mask):
        """transformers logs a one-time warning here; a problem has nothing to warn about."""

    @classmethod
    def _from_config(cls, config, **kwargs):
        """The model built from ``config`` (transformers also sets dtype and attention here)."""
        return cls(config)

    def get_input_embeddings(self):
        """The token embedding: the first ``embed_tokens``/``word_embeddings``/``wte`` module
        (a composite model's language model holds it), else the first ``nn.Embedding``."""
        embeddings = [(n, m) for n, m in self.named_modules() if isinstance(m, nn.Embedding)]
        for name, module in embeddings:
            if name.rsplit(".", 1)[-1] in ("embed_tokens", "word_embeddings", "wte", "shared"):
                return module
        return embeddings[0][1] if embeddings else None


class _AttentionFunctions(dict):
    """Attention implementations by name; the eager one (the caller's default) is used."""

    def get_interface(self, attn_implementation, default):
        return default


ALL_ATTENTION_FUNCTIONS = _AttentionFunctions()


def slice_logits_to_keep(hidden_states, logits_to_keep):
    """The last ``logits_to_keep`` positions (0: all), or the positions a tensor lists."""
    if isinstance(logits_to_keep, int):
        return hidden_states if logits_to_keep == 0 else hidden_states[:, -logits_to_keep:, :]
    return hidden_states[:, logits_to_keep, :]
