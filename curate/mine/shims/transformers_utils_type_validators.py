"""Stand-in for ``transformers.utils.type_validators``: validated fields reduced to their
defaults (``interval(min=0.0)(default=1e-5)`` is ``1e-5``)."""


def _field(default=None, **kwargs):
    return default


def interval(*args, **kwargs):
    return _field


positive_int_field = _field
positive_any_number = _field


def _accept(value=None, default=None, **kwargs):
    """A validated field (``activation_fn_key(default="gelu")``): its default."""
    return default if value is None else value


def is_divisible_by(divisor):
    return _field


def tensor_shape(shape, length=None):
    return _field


activation_fn_key = _accept
probability = _accept
positive_int = _accept
