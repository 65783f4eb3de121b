"""Stand-in for the ``decorator`` package's ``decorator``: turn a caller
``caller(func, *args, **kwargs)`` into a decorator (torchdrug's ``@cached`` forward)."""

import functools


def decorator(caller, func=None, *args, **kwargs):
    """``decorator(caller)`` is a decorator; ``decorator(caller, func)`` decorates ``func``:
    a call of the result runs ``caller(func, *args, **kwargs)``."""
    if func is None:
        return lambda f: decorator(caller, f)

    @functools.wraps(func)
    def wrapper(*a, **kw):
        return caller(func, *a, **kw)

    return wrapper
