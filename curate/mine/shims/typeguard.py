"""Stand-in for ``typeguard``: run-time type checks are not part of a problem's computation,
so the decorator returns the function unchecked and the check functions accept their value
(espnet decorates most constructors with ``@typechecked``)."""


def typechecked(func=None, *args, **kwargs):
    """``@typechecked`` and ``@typechecked(...)``: the function itself."""
    if func is None or not callable(func):
        return lambda f: f
    return func


def check_argument_types(*args, **kwargs):
    """typeguard 2's in-function check: always passes."""
    return True


def check_return_type(value=None, *args, **kwargs):
    """typeguard 2's return check: always passes."""
    return True


def check_type(value, *args, **kwargs):
    """typeguard's value check: returns the value, as typeguard 3 and later do."""
    return value
