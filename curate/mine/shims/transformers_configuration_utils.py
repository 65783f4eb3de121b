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

    def build(self, kwargs):
        """The sub-configuration from ``kwargs``. Through ``AutoConfig`` (which has ``for_model``)
        it is the problem's configuration of the model type the values name, else of the
        spec's type (DETR's default ``timm_backbone`` is not part of a problem; its ResNet is)."""
        maker = getattr(self.config_class, "for_model", None)
        if maker is None:
            return self.config_class(**kwargs)
        wanted = kwargs.pop("model_type", None) or self.model_type
        built = maker(wanted, **kwargs)
        if type(built).__name__ == "AutoConfig" and self.model_type and wanted != self.model_type:
            built = maker(self.model_type, **self.init_kwargs)  # the other type's values do not apply
        return built


def remap_legacy_layer_types(config=None, **kwargs):
    return None


class _SubConfigs:
    """``Config.sub_configs``: sub-configuration classes by key, on the class and instances."""

    def __get__(self, obj, cls):
        return {key: spec.config_class if isinstance(spec, SubConfigSpec) else spec
                for key, spec in cls.sub_configs_defaults.items()}


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
    _attn_implementation = "eager"
    sub_configs = _SubConfigs()
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
                setattr(self, key, spec.build({**spec.init_kwargs, **value}))
            elif value is None and not spec.optional:
                setattr(self, key, spec.build(dict(spec.init_kwargs)))
        num_labels = kwargs.pop("num_labels", 2)
        if self.id2label is None:
            self.id2label = {i: f"LABEL_{i}" for i in range(num_labels)}
            self.label2id = {v: k for k, v in self.id2label.items()}
        self.num_labels = len(self.id2label)
        if hasattr(self, "rope_parameters") or "rope_theta" in kwargs:
            kwargs = self.convert_rope_params_to_dict(**kwargs)  # a model's config may override it
        self._attn_implementation = kwargs.pop("attn_implementation", None) or "eager"
        self._experts_implementation = kwargs.pop("experts_implementation", None)
        self.output_attentions = kwargs.pop("output_attentions", False)
        self._name_or_path = ""
        for key, value in kwargs.items():
            setattr(self, key, value)

    def convert_rope_params_to_dict(self, **kwargs):
        """Legacy ``rope_scaling``/``rope_theta``/``partial_rotary_factor`` arguments into
        ``rope_parameters``; returns the arguments left."""
        scaling = kwargs.pop("rope_scaling", None)
        self.rope_parameters = dict(scaling or getattr(self, "rope_parameters", None) or {})
        if "rope_theta" in kwargs:
            object.__setattr__(self, "rope_theta", kwargs.pop("rope_theta"))
        if "partial_rotary_factor" in kwargs:
            object.__setattr__(self, "partial_rotary_factor", kwargs.pop("partial_rotary_factor"))
        self.standardize_rope_params()
        return kwargs

    def standardize_rope_params(self):
        """Fill ``rope_parameters`` (one dict, or one per layer type such as
        ``full_attention``/``sliding_attention``) with ``rope_type``, ``rope_theta`` and
        ``partial_rotary_factor``, taken from the flat attributes when missing."""
        theta = getattr(self, "rope_theta", None) or self.default_theta
        factor = getattr(self, "partial_rotary_factor", None)
        params = dict(getattr(self, "rope_parameters", None) or {})
        layer_types = set(getattr(self, "layer_types", None) or ()) | {"full_attention", "sliding_attention"}
        nested = [k for k, v in params.items() if k in layer_types and (v is None or isinstance(v, dict))]
        for one in ([params[k] for k in nested if params[k] is not None] if nested else [params]):
            one.setdefault("rope_type", one.get("type", "default"))
            one.setdefault("rope_theta", theta)
            if factor is not None:
                one.setdefault("partial_rotary_factor", factor)
            if one["rope_type"] == "default" and self.default_rope_type != "default":
                one["rope_type"] = self.default_rope_type
        self.rope_parameters = params

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

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        return cls(**{**config_dict, **kwargs})

    def to_dict(self):
        return copy.deepcopy(self.__dict__)

    def __repr__(self):
        return f"{type(self).__name__}({self.__dict__})"


PretrainedConfig = PreTrainedConfig
