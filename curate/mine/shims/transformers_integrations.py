"""Stand-in for ``transformers.integrations`` (and ``.hub_kernels``, ``.accelerate``,
``.deepspeed``, ``.fsdp``): hub kernels and distributed wrappers are not used, so their
decorators return the class or function as written."""

from transformers.utils import _unavailable


def _factory(*args, **kwargs):
    """A decorator factory (``@deco("name")``) or a bare decorator on a class."""
    if len(args) == 1 and not kwargs and isinstance(args[0], type):
        return args[0]
    return lambda target: target


use_kernel_forward_from_hub = _factory
use_kernelized_func = _factory
use_kernel_func_from_hub_with_fallback = _factory
use_experts_implementation = _factory
force_accelerate_hooks = _factory
is_deepspeed_zero3_enabled = _unavailable
is_fsdp_managed_module = _unavailable
