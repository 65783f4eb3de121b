"""A stand-in for a module a mined problem cannot import (a package other than torch).

The closure binds the names mined code imports from such a module to placeholders made
here, instead of rejecting the class outright: code that only mentions the module (an
``isinstance(x, np.ndarray)`` check, a branch that is not taken, an annotation) still runs,
and code that uses it raises ``ImportError`` naming the module, which the synthesizer
records as ``import_missing``. A placeholder is a class, so attribute chains
(``np.random.rand``) give further placeholders and ``isinstance`` checks against them are
simply false; calling one raises. A class of the file with a placeholder among its bases (a
mixin from another package) is built as usual: only the placeholder's own methods are
missing. Its ``__version__`` is a high version string, so import-time checks (diffusers'
``version.parse(PIL.__version__) >= ...``) take the branch written for current releases
instead of failing the whole file. A definition decorated with a placeholder is bound by
:func:`deferred` to an object that raises only when used.
"""

from abc import ABCMeta


class _UnavailableMeta(ABCMeta):
    # an ABCMeta, so a class may have both a placeholder and an abstract class as bases
    def __getattr__(cls, attr):
        if attr == "__version__":
            return "999.0.0"
        if attr.startswith("__"):
            raise AttributeError(attr)
        return unavailable(f"{cls.__name__}.{attr}")

    def register(cls, *args, **kwargs):
        # a missing registry's decorator factory (olmo-core's configurations derive from
        # dataclass_extensions' ``Registrable``: ``@SequenceMixerConfig.register("default")``),
        # not ABCMeta's virtual subclasses: the class decorated is kept, unregistered
        if len(args) == 1 and not kwargs and isinstance(args[0], type):
            return super().register(args[0])
        return lambda registered: registered

    def __call__(cls, *args, **kwargs):
        if "_curate_placeholder" not in cls.__dict__:  # a class of the file with a placeholder base
            return super().__call__(*args, **kwargs)
        raise ImportError(f"{cls.__name__} is not available to this problem (it needs a package other than torch)")


def unavailable(name):
    """A placeholder for module (or module attribute) ``name``."""
    return _UnavailableMeta(name, (), {"_curate_placeholder": True})


class _Deferred:
    """What a definition decorated with a placeholder (``@triton.jit``,
    ``@triton.autotune(configs=[triton.Config(...)])``) is bound to: using it (a call, a
    launch grid ``kernel[grid]``, an attribute) raises the ``ImportError`` decorating it
    raised."""

    def __init__(self, message):
        self._message = message

    def __call__(self, *args, **kwargs):
        raise ImportError(self._message)

    def __getitem__(self, item):
        raise ImportError(self._message)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise ImportError(self._message)


def deferred(decorator):
    """A decorator applying ``decorator()`` (the original decorator expression, given as a
    thunk) and, where that raises ``ImportError`` (it uses a package a problem cannot import),
    binding the definition to a :class:`_Deferred` instead: the file loads, and only code that
    uses the definition (a Triton kernel a layer calls when told to) fails, as
    ``import_missing``."""
    def apply(obj):
        try:
            return decorator()(obj)
        except ImportError as exc:
            return _Deferred(str(exc))
    return apply

