"""Stand-in for ``diffusers.configuration_utils``: ``register_to_config`` records a model's
constructor arguments (defaults filled in) as its ``config``, which diffusers models read in
``forward`` (``self.config.sample_size``); no loading, saving or hub code."""

import functools
import inspect
from collections import OrderedDict


class FrozenDict(OrderedDict):
    """A read-only dict whose keys are also attributes (``config.in_channels``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, value in self.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "_frozen", True)

    def _refuse(self, *args, **kwargs):
        raise TypeError(f"a {type(self).__name__} cannot be changed")

    __delitem__ = setdefault = pop = update = _refuse

    def __setattr__(self, name, value):
        if getattr(self, "_frozen", False):
            self._refuse()
        object.__setattr__(self, name, value)

    def __setitem__(self, name, value):
        if getattr(self, "_frozen", False):
            self._refuse()
        super().__setitem__(name, value)


class ConfigMixin:
    """Keeps the registered constructor arguments as ``self.config`` (a :class:`FrozenDict`);
    an attribute missing on the object is looked up there, as diffusers does."""

    config_name = None
    ignore_for_config = []
    has_compatibles = False

    def register_to_config(self, **kwargs):
        kwargs.pop("kwargs", None)
        merged = {**dict(self.__dict__.get("_internal_dict", {})), **kwargs}
        object.__setattr__(self, "_internal_dict", FrozenDict(merged))

    @property
    def config(self):
        return self.__dict__.get("_internal_dict", FrozenDict())

    def __getattr__(self, name):
        internal = self.__dict__.get("_internal_dict")
        if internal is not None and name in internal:
            return internal[name]
        parent = super()
        if hasattr(parent, "__getattr__"):  # nn.Module's lookup of parameters, buffers, submodules
            return parent.__getattr__(name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


class LegacyConfigMixin(ConfigMixin):
    pass


def register_to_config(init):
    """Decorate ``__init__`` of a :class:`ConfigMixin`: record every argument (positional,
    keyword, or the default) except private ``_``-prefixed ones and ``ignore_for_config``."""

    @functools.wraps(init)
    def inner_init(self, *args, **kwargs):
        public = {k: v for k, v in kwargs.items() if not k.startswith("_")}
        ignore = getattr(self, "ignore_for_config", [])
        params = [(n, p.default) for n, p in list(inspect.signature(init).parameters.items())[1:]
                  if n not in ignore and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        recorded = {n: a for (n, _), a in zip(params, args)}
        recorded.update({n: public.get(n, d) for n, d in params if n not in recorded})
        self.register_to_config(**recorded)
        init(self, *args, **public)

    return inner_init
