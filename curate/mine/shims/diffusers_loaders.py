"""Stand-in for ``diffusers.loaders`` and its submodules: the loader mixins add checkpoint,
LoRA and adapter loading methods, which a problem never calls, so each is an empty class."""


class PeftAdapterMixin:
    _hf_peft_config_loaded = False


class FromOriginalModelMixin:
    pass


class FromSingleFileMixin:
    pass


class UNet2DConditionLoadersMixin:
    pass


class FluxTransformer2DLoadersMixin:
    pass


class SD3Transformer2DLoadersMixin:
    pass


class TextualInversionLoaderMixin:
    pass


class SD3IPAdapterMixin:
    pass


class ModularIPAdapterMixin:
    pass


class CacheMixin:
    """``diffusers.models.cache_utils.CacheMixin``: caching techniques for inference loops."""

    @property
    def is_cache_enabled(self):
        return False
