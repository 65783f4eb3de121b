"""Stand-in for ``six`` on Python 3: the compatibility helpers mined code still uses
(``add_metaclass``, ``with_metaclass``, the type aliases), written as their Python 3 meaning
(https://six.readthedocs.io)."""

PY2 = False
PY3 = True
string_types = (str,)
integer_types = (int,)
class_types = (type,)
text_type = str
binary_type = bytes


def add_metaclass(metaclass):
    """Class decorator: rebuild the class with ``metaclass``."""
    def wrapper(cls):
        body = dict(cls.__dict__)
        slots = body.get("__slots__")
        for name in ([slots] if isinstance(slots, str) else slots or ()):
            body.pop(name, None)
        body.pop("__dict__", None)
        body.pop("__weakref__", None)
        return metaclass(cls.__name__, cls.__bases__, body)
    return wrapper


def with_metaclass(meta, *bases):
    """Base class that makes the subclass with ``meta``."""
    return meta("_WithMetaclassBase", bases or (object,), {})


def iteritems(d, **kwargs):
    return iter(d.items(**kwargs))


def itervalues(d, **kwargs):
    return iter(d.values(**kwargs))


def iterkeys(d, **kwargs):
    return iter(d.keys(**kwargs))
