"""Stand-in for ``transformers.models.auto``: the auto classes resolve a model type or a
configuration to the classes of this problem. The closure copies the configuration and model
classes of the sub-models a composite model names (``SubConfigSpec(model_type="llama")``,
``CONFIG_MAPPING["resnet"]``) into the problem, so ``AutoConfig``/``CONFIG_MAPPING`` find the
configuration class whose ``model_type`` it is, and ``AutoModel``/``AutoBackbone`` the model
class built from a configuration's class. A model type the problem lacks gets a generic
decoder-style configuration; a model the problem lacks raises ``ImportError``."""

from torch import nn
from transformers.configuration_utils import PreTrainedConfig


def _problem_config(model_type):
    """The configuration class of this problem whose ``model_type`` is ``model_type``, or None."""
    for obj in list(globals().values()):
        if (isinstance(obj, type) and issubclass(obj, PreTrainedConfig) and not issubclass(obj, AutoConfig)
                and vars(obj).get("model_type") == model_type):
            return obj
    return None


def _built_from(model, config_cls):
    """Whether model class ``model`` takes configurations of ``config_cls`` (its ``config_class``,
    or a ``config: <Name>Config`` annotation in its bases, as transformers' models declare)."""
    if getattr(model, "config_class", None) is config_cls:
        return True
    for klass in model.__mro__:
        note = vars(klass).get("__annotations__", {}).get("config")
        if note is config_cls or note == config_cls.__name__:
            return True
    return False


def _problem_model(config, suffix, kind):
    """The model class of this problem built from ``config``'s class: the one named after the
    configuration (``LlamaConfig`` -> ``LlamaModel``) first, then one named ``...<suffix>``,
    then one without a task head (``PeAudioEncoder`` for ``PeAudioEncoderConfig``), shortest
    first. A backbone is always a ``...Backbone``; a model never is."""
    family = type(config).__name__.removesuffix("Config")
    found = [obj for obj in list(globals().values())
             if isinstance(obj, type) and issubclass(obj, nn.Module)
             and not obj.__name__.endswith("PreTrainedModel")
             and obj.__name__.endswith("Backbone") == (suffix == "Backbone")
             and (obj.__name__ == family + suffix or _built_from(obj, type(config)))]
    if not found:
        raise ImportError(f"{kind}: no model for {type(config).__name__} is part of the problem")
    return min(found, key=lambda c: (c.__name__ != family + suffix, not c.__name__.endswith(suffix),
                                     "For" in c.__name__, len(c.__name__)))


class AutoModel:
    """``AutoModel.from_config(config)``: the base model of this problem for the configuration's
    class (its family's ``<Name>Model``)."""

    @classmethod
    def from_config(cls, config, **kwargs):
        return _problem_model(config, "Model", "AutoModel")(config)


class AutoBackbone:
    """``AutoBackbone.from_config(config)``: the ``<Name>Backbone`` of this problem for the
    configuration's class."""

    @classmethod
    def from_config(cls, config, **kwargs):
        return _problem_model(config, "Backbone", "AutoBackbone")(config)


class AutoConfig(PreTrainedConfig):
    """A configuration for a sub-model chosen by name at run time: common transformer fields
    with problem-sized values (when the problem has no configuration class of that type)."""

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
        """The problem's configuration of ``model_type`` built from ``kwargs``, else a generic one."""
        found = _problem_config(model_type)
        if found is not None:
            return found(**kwargs)
        return cls(model_type=model_type, **kwargs)


class _ConfigMapping:
    """``CONFIG_MAPPING[model_type]``: the problem's configuration class of that type, else a
    generic configuration class that records the type."""

    def __getitem__(self, model_type):
        found = _problem_config(model_type)
        if found is not None:
            return found
        return type("AutoConfig", (AutoConfig,), {"__annotations__": {"model_type": str}, "model_type": model_type})

    def __contains__(self, model_type):
        return True

    def get(self, model_type, default=None):
        return self[model_type]


CONFIG_MAPPING = _ConfigMapping()
