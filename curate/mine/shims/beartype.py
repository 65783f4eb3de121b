"""Stand-in for ``beartype``: the decorator returns the function unchecked (run-time type
checking is not part of a problem's computation)."""


def beartype(func=None, *args, **kwargs):
    """``@beartype`` and ``@beartype(conf=...)``: the function itself."""
    if func is None or not callable(func):
        return lambda f: f
    return func
