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
instead of failing the whole file.
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

    def __call__(cls, *args, **kwargs):
        if "_curate_placeholder" not in cls.__dict__:  # a class of the file with a placeholder base
            return super().__call__(*args, **kwargs)
        raise ImportError(f"{cls.__name__} is not available to this problem (it needs a package other than torch)")


def unavailable(name):
    """A placeholder for module (or module attribute) ``name``."""
    return _UnavailableMeta(name, (), {"_curate_placeholder": True})
