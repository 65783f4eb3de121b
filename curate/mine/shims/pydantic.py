"""Stand-in for the part of ``pydantic`` model libraries use at import time: a type adapter
for import strings (braindecode resolves ``"torch.nn.ELU"`` in saved configurations with
``TypeAdapter(ImportString)``) and the validation error. Only modules a problem may import
(the standard library, torch, numpy) are resolved."""

import importlib


class ValidationError(ValueError):
    """A value the adapter cannot validate."""


class ImportString:
    """Marker type: a dotted path to an importable object."""


def _import_string(path):
    module, _, attr = str(path).rpartition(".")
    if module.split(".")[0] not in ("torch", "numpy", "math", "collections", "functools", "operator"):
        raise ValidationError(f"cannot import {path!r} in a problem")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValidationError(f"cannot import {path!r}: {exc}") from None


class TypeAdapter:
    """``TypeAdapter(ImportString).validate_python("torch.nn.ELU")`` -> ``torch.nn.ELU``;
    other types pass values through."""

    def __init__(self, type_, *args, **kwargs):
        self.type = type_

    def validate_python(self, value, *args, **kwargs):
        if self.type is ImportString and isinstance(value, str):
            return _import_string(value)
        return value
