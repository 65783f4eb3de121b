"""Entries of a mapping set for the length of a ``with`` block (``os.environ`` for worker
processes started inside it, ``sys.modules`` while a problem is synthesized).

Standard library only.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping, MutableMapping

_ABSENT = object()


@contextmanager
def scoped_items(mapping: MutableMapping[Any, Any], values: Mapping[Any, Any]) -> Iterator[None]:
    """Set ``mapping[k] = v`` for each item of ``values`` inside the block; on leaving it
    (normally or by an exception) each of those keys has its earlier value again, or is
    deleted when it had none. Other keys written inside the block stay (a module imported
    meanwhile stays in ``sys.modules``), unlike ``unittest.mock.patch.dict``, which puts back
    a copy of the whole mapping."""
    saved = {k: mapping.get(k, _ABSENT) for k in values}
    mapping.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is _ABSENT:
                mapping.pop(k, None)
            else:
                mapping[k] = v
