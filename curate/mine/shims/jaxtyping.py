"""Stand-in for ``jaxtyping``: array annotations (``Float[Tensor, "b n d"]``) stand for the
array type they subscript; ``@jaxtyped`` checks nothing."""


class _ArrayHint:
    def __class_getitem__(cls, item):
        return item[0] if isinstance(item, tuple) else item


class Float(_ArrayHint):
    pass


class Int(_ArrayHint):
    pass


class Bool(_ArrayHint):
    pass


class Shaped(_ArrayHint):
    pass


class Num(_ArrayHint):
    pass


def jaxtyped(func=None, *args, **kwargs):
    if func is None or not callable(func):
        return lambda f: f
    return func
