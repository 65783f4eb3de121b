"""Stand-in for ``diffusers.models.modeling_utils``: a ``ModelMixin`` base without checkpoint
loading, hooks, offloading or parallelism (those pull in most of diffusers)."""

import torch
from torch import nn


def get_parameter_device(module):
    """The device of the first parameter or buffer (CPU for a module with neither)."""
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")


def get_parameter_dtype(module):
    """The dtype of the first floating parameter or buffer, else of the last one seen."""
    last = None
    for t in list(module.parameters()) + list(module.buffers()):
        if t.is_floating_point():
            return t.dtype
        last = t.dtype
    return last if last is not None else torch.get_default_dtype()


class ModelMixin(nn.Module):
    """Base of diffusers models: ``device``/``dtype`` properties and the gradient-checkpointing
    switch that ``forward`` methods test; weights keep PyTorch's default initialisation."""

    config_name = "config.json"
    _supports_gradient_checkpointing = False
    _no_split_modules = None
    _keep_in_fp32_modules = None
    _skip_layerwise_casting_patterns = None
    _repeated_blocks = []

    def __init__(self):
        super().__init__()
        self._gradient_checkpointing_func = None

    def __getattr__(self, name):
        # registered configuration entries read as attributes (``self.in_channels``), before
        # nn.Module's lookup of parameters, buffers and submodules
        internal = self.__dict__.get("_internal_dict")
        if internal is not None and name in internal:
            return internal[name]
        return super().__getattr__(name)

    @property
    def device(self):
        return get_parameter_device(self)

    @property
    def dtype(self):
        return get_parameter_dtype(self)

    @property
    def is_gradient_checkpointing(self):
        return any(getattr(m, "gradient_checkpointing", False) for m in self.modules())

    def num_parameters(self, only_trainable=False, exclude_embeddings=False):
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not only_trainable)


class LegacyModelMixin(ModelMixin):
    pass
