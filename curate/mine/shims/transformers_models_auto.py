"""Stand-in for ``transformers.models.auto``: ``AutoConfig`` as a generic decoder-style
configuration (the model-type registry is not part of a mined problem), and ``AutoModel``
building the base model of a configuration's family when the problem defines it (the
``GenericForSequenceClassification``-style heads of transformers; the closure copies the
family's ``<Name>Model`` beside such a head). Other registries are absent, so modules that
build other sub-models through them are rejected."""

from torch import nn
from transformers.configuration_utils import PreTrainedConfig


class AutoModel:
    """``AutoModel.from_config(config)``: the model class of this problem whose
    ``config_class`` is the configuration's class (its family's base model)."""

    @classmethod
    def from_config(cls, config, **kwargs):
        family = type(config).__name__.removesuffix("Config")
        found = [obj for obj in list(globals().values())
                 if isinstance(obj, type) and issubclass(obj, nn.Module) and obj.__name__.endswith("Model")
                 and not obj.__name__.endswith("PreTrainedModel")
                 and (getattr(obj, "config_class", None) is type(config) or obj.__name__ == family + "Model")]
        if not found:
            raise ImportError(f"AutoModel: no model for {type(config).__name__} is part of the problem")
        return min(found, key=lambda c: (c.__name__ != family + "Model", len(c.__name__)))(config)


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
