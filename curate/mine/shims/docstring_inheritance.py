"""Stand-in for ``docstring_inheritance``: its metaclasses only merge docstrings, which a
problem does not need (braindecode's model base uses ``NumpyDocstringInheritanceInitMeta``)."""

import abc


class NumpyDocstringInheritanceMeta(abc.ABCMeta):
    """A metaclass that leaves docstrings as written."""


class NumpyDocstringInheritanceInitMeta(abc.ABCMeta):
    """A metaclass that leaves docstrings as written."""


class GoogleDocstringInheritanceMeta(abc.ABCMeta):
    """A metaclass that leaves docstrings as written."""


class GoogleDocstringInheritanceInitMeta(abc.ABCMeta):
    """A metaclass that leaves docstrings as written."""
