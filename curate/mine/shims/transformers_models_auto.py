"""Stand-in for ``transformers.models.auto``: ``AutoConfig`` as a generic decoder-style
configuration (the model-type registry is not part of a mined problem). ``AutoModel`` and
the other model registries are absent, so modules that build sub-models through them are
rejected."""

from transformers.configuration_utils import PreTrainedConfig


class AutoConfig(PreTrainedConfig):
    """A configuration for a sub-model chosen by name at run time: common transformer fields
    with problem-sized values."""

    model_type: str = "auto"
    vocab_size: int = 1024
    hidden_size: int = 512
    intermediate_size: int = 2048
    num_hidden_layers: int = 2
    num_attention_heads: int = 8
    num_key_value_heads: int = 8
    head_dim: int = 64
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-6
    layer_norm_eps: float = 1e-5
    initializer_range: float = 0.02
    attention_dropout: float = 0.0
    hidden_dropout_prob: float = 0.0
    attention_bias: bool = False
    mlp_bias: bool = False
    use_cache: bool = False
    pad_token_id: int = 0
    rope_parameters: dict = None
    tie_word_embeddings: bool = False

    @classmethod
    def for_model(cls, model_type, *args, **kwargs):
        return cls(model_type=model_type, **kwargs)
