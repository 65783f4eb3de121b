"""Stand-in for ``wrapt``'s ``decorator``: a wrapper ``wrapper(wrapped, instance, args,
kwargs)`` becomes a decorator whose result binds like the function it wraps (NeMo's
``@typecheck()`` on ``forward``; its wrapper is itself a method of the ``typecheck`` class).

Behaviour follows wrapt's documentation (https://wrapt.readthedocs.io, "Universal
decorators"): ``instance`` is the object a method was looked up on, None for a plain
function; ``enabled`` (a bool or a callable asked at each call) turns the wrapper off.
"""

import functools


class _Wrapped:
    """``wrapped`` decorated by ``wrapper``; looked up on an object it binds to it."""

    def __init__(self, wrapper, wrapped, instance=None, enabled=None):
        self._self_wrapper = wrapper
        self._self_instance = instance
        self._self_enabled = enabled
        self.__wrapped__ = wrapped
        functools.update_wrapper(self, wrapped, updated=())

    def __get__(self, obj, owner=None):
        if obj is None or not hasattr(self.__wrapped__, "__get__"):
            return self
        bound = self.__wrapped__.__get__(obj, owner)
        return _Wrapped(self._self_wrapper, bound, obj, self._self_enabled)

    def __call__(self, *args, **kwargs):
        enabled = self._self_enabled
        if callable(enabled):
            enabled = enabled()
        if enabled is not None and not enabled:
            return self.__wrapped__(*args, **kwargs)
        return self._self_wrapper(self.__wrapped__, self._self_instance, args, kwargs)


class _Decorator:
    """What ``@decorator`` makes of a wrapper: applied to a function it wraps it; defined in a
    class body it binds its ``self`` first, as the method it decorates would."""

    def __init__(self, wrapper, enabled=None):
        self._wrapper = wrapper
        self._enabled = enabled
        functools.update_wrapper(self, wrapper, updated=())

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        return _Decorator(self._wrapper.__get__(obj, owner), self._enabled)

    def __call__(self, wrapped):
        return _Wrapped(self._wrapper, wrapped, None, self._enabled)


def decorator(wrapper=None, enabled=None, adapter=None, proxy=None):
    """``@decorator`` or ``@decorator(enabled=...)`` over ``wrapper(wrapped, instance, args,
    kwargs)``; ``adapter`` and ``proxy`` (signature adapters) are accepted and ignored."""
    if wrapper is None:
        return functools.partial(decorator, enabled=enabled)
    return _Decorator(wrapper, enabled)


class FunctionWrapper(_Wrapped):
    """``FunctionWrapper(wrapped, wrapper)``, as wrapt spells the arguments."""

    def __init__(self, wrapped, wrapper, enabled=None):
        super().__init__(wrapper, wrapped, None, enabled)
