"""Stand-in for ``transformers.configuration_utils``: a configuration base that keeps the
model's own configuration class (its fields, defaults and ``__post_init__``) working
without hub, serialisation or validation code.

A configuration is built from keyword arguments: every annotated class-level default of
the class and its bases, then the arguments given, then ``__post_init__`` with the
arguments no field takes (transformers' dataclass behaviour). Attention runs eagerly and
outputs are not captured (``_attn_implementation="eager"``, no attentions or hidden states).
"""

import copy


class SubConfigSpec:
    """How a composite configuration builds one sub-configuration (``vision_config``, ...)."""

    def __init__(self, config_class, model_type=None, init_kwargs=None, optional=False):
        self.config_class = config_class
        self.model_type = model_type
        self.init_kwargs = init_kwargs or {}
        self.optional = optional


def remap_legacy_layer_types(config=None, **kwargs):
    return None


class PreTrainedConfig:
    """Base of a model configuration (see the module docstring)."""

    model_type = ""
    attribute_map = {}
    sub_configs_defaults = {}
    default_theta = 10_000.0
    default_rope_type = "default"
    output_hidden_states = False
    return_dict = True
    dtype = None
    chunk_size_feed_forward = 0
    is_encoder_decoder = False
    id2label = None
    label2id = None
    problem_type = None
    architectures = None

    def __init__(self, **kwargs):
        for klass in reversed(type(self).__mro__):
            notes = vars(klass).get("__annotations__", {})
            for name, note in notes.items():
                if name in vars(klass) and not str(note).startswith("ClassVar"):
                    object.__setattr__(self, name, copy.deepcopy(vars(klass)[name]))
        for name in list(kwargs):
            if any(name in vars(k).get("__annotations__", {}) for k in type(self).__mro__):
                setattr(self, name, kwargs.pop(name))
        self.__post_init__(**kwargs)

    def __post_init__(self, **kwargs):
        for key, spec in type(self).sub_configs_defaults.items():
            spec = spec if isinstance(spec, SubConfigSpec) else SubConfigSpec(spec)
            value = getattr(self, key, None)
            if isinstance(value, dict):
                setattr(self, key, spec.config_class(**{**spec.init_kwargs, **value}))
            elif value is None and not spec.optional:
                setattr(self, key, spec.config_class(**spec.init_kwargs))
        num_labels = kwargs.pop("num_labels", 2)
        if self.id2label is None:
            self.id2label = {i: f"LABEL_{i}" for i in range(num_labels)}
            self.label2id = {v: k for k, v in self.id2label.items()}
        self.num_labels = len(self.id2label)
        if hasattr(self, "rope_parameters") or "rope_theta" in kwargs:
            params = dict(getattr(self, "rope_parameters", None) or {})
            params.setdefault("rope_type", params.get("type", "default"))
            params.setdefault("rope_theta", kwargs.pop("rope_theta", getattr(self, "rope_theta", None)
                                                    or self.default_theta))
            factor = kwargs.pop("partial_rotary_factor", getattr(self, "partial_rotary_factor", None))
            if factor is not None:
                params.setdefault("partial_rotary_factor", factor)
            if params["rope_type"] == "default" and self.default_rope_type != "default":
                params["rope_type"] = self.default_rope_type
            self.rope_parameters = params
        self._attn_implementation = kwargs.pop("attn_implementation", None) or "eager"
        self._experts_implementation = kwargs.pop("experts_implementation", None)
        self.output_attentions = kwargs.pop("output_attentions", False)
        self._name_or_path = ""
        for key, value in kwargs.items():
            setattr(self, key, value)

    @property
    def use_return_dict(self):
        return self.return_dict

    @property
    def name_or_path(self):
        return self._name_or_path

    def __setattr__(self, key, value):
        object.__setattr__(self, type(self).attribute_map.get(key, key), value)

    def __getattr__(self, key):  # only called for missing attributes
        target = type(self).attribute_map.get(key)
        if target is None or target == key:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")
        return getattr(self, target)

    def get_text_config(self, decoder=None, encoder=None):
        for key in ("text_config", "decoder", "text_encoder"):
            sub = self.__dict__.get(key)
            if isinstance(sub, PreTrainedConfig):
                return sub
        return self

    def to_dict(self):
        return copy.deepcopy(self.__dict__)

    def __repr__(self):
        return f"{type(self).__name__}({self.__dict__})"


PretrainedConfig = PreTrainedConfig
