"""Stand-in for ``packaging.version``: release versions compared by their numbers.

Mined code compares versions of torch or itself (``version.parse(torch.__version__) >=
version.parse("2.0")``). A version here is its release tuple (``"2.13.0+cpu"`` is
``(2, 13, 0)``); pre-releases (``a``, ``b``, ``rc``, ``.dev``) sort before their release.
"""

import re


class Version:
    """A parsed version string, ordered by release numbers then pre-release stage."""

    def __init__(self, version):
        self.public = str(version).split("+")[0]
        m = re.match(r"v?(\d+(?:\.\d+)*)(.*)", self.public.strip())
        if m is None:
            raise ValueError(f"Invalid version: {version!r}")
        self.release = tuple(int(p) for p in m.group(1).split("."))
        rest = m.group(2)
        self.is_prerelease = bool(re.search(r"(a|b|rc|alpha|beta|dev|pre)", rest))
        dev = re.search(r"dev\.?(\d*)", rest)
        self.dev = (int(dev.group(1) or 0)) if dev else None
        self.is_devrelease = dev is not None
        post = re.search(r"post\.?(\d*)", rest)
        self.post = (int(post.group(1) or 0)) if post else None
        self.is_postrelease = post is not None
        pre = re.search(r"(a|b|rc)\.?(\d+)", rest)
        self.pre = (pre.group(1), int(pre.group(2))) if pre else None
        self.local = str(version).split("+")[1] if "+" in str(version) else None
        self.base_version = ".".join(str(p) for p in self.release)
        self.major = self.release[0]
        self.minor = self.release[1] if len(self.release) > 1 else 0
        self.micro = self.release[2] if len(self.release) > 2 else 0

    def _key(self):
        release = self.release + (0,) * (4 - len(self.release))
        return release, 0 if self.is_prerelease else 1

    def __lt__(self, other):
        return self._key() < _as_version(other)._key()

    def __le__(self, other):
        return self._key() <= _as_version(other)._key()

    def __gt__(self, other):
        return self._key() > _as_version(other)._key()

    def __ge__(self, other):
        return self._key() >= _as_version(other)._key()

    def __eq__(self, other):
        return self._key() == _as_version(other)._key()

    def __hash__(self):
        return hash(self._key())

    def __str__(self):
        return self.public


def _as_version(value):
    return value if isinstance(value, Version) else Version(value)


def parse(version):
    return Version(version)
