"""Stand-in for ``distutils.version`` (removed in Python 3.12): ``LooseVersion`` and
``StrictVersion`` compare version strings component by component, numbers as numbers, as
the standard library's did, so version checks give the same branch on 3.11 and 3.12."""

import re


class LooseVersion:
    """A version string split into numbers and words, compared as a list."""

    def __init__(self, vstring=None):
        self.vstring = str(vstring) if vstring is not None else ""
        parts = [p for p in re.split(r"(\d+|[a-z]+|\.)", self.vstring) if p and p != "."]
        self.version = [int(p) if p.isdigit() else p for p in parts]

    def _other(self, other):
        return other if isinstance(other, LooseVersion) else LooseVersion(other)

    def _cmp(self, other):
        a, b = self.version, self._other(other).version
        for x, y in zip(a, b):
            if x != y:
                if type(x) is not type(y):  # distutils compared str and int by raising; numbers first
                    return -1 if isinstance(x, str) else 1
                return -1 if x < y else 1
        return (len(a) > len(b)) - (len(a) < len(b))

    def __eq__(self, other):
        return self._cmp(other) == 0

    def __lt__(self, other):
        return self._cmp(other) < 0

    def __le__(self, other):
        return self._cmp(other) <= 0

    def __gt__(self, other):
        return self._cmp(other) > 0

    def __ge__(self, other):
        return self._cmp(other) >= 0

    def __hash__(self):
        return hash(tuple(self.version))

    def __str__(self):
        return self.vstring

    def __repr__(self):
        return f"LooseVersion({self.vstring!r})"


StrictVersion = LooseVersion
