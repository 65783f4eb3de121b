"""Stand-in for ``environs``: typed reads of environment variables with defaults
(alphafold3-pytorch reads its debug and checkpointing switches at import time)."""

import os

_TRUE = {"1", "true", "t", "yes", "y", "on"}
_MISSING = object()


class Env:
    """``env.bool("DEBUG", False)``, ``env.int``, ``env.float``, ``env.str``, ``env.list`` and
    ``env("NAME", default)``; ``read_env`` reads no ``.env`` file (a problem has none)."""

    def __init__(self, *args, **kwargs):
        pass

    def read_env(self, *args, **kwargs):
        return False

    def _get(self, name, default, parse):
        raw = os.environ.get(name)
        if raw is None:
            if default is _MISSING:
                raise KeyError(f"environment variable {name} is not set")
            return default
        return parse(raw)

    def __call__(self, name, default=_MISSING, **kwargs):
        return self._get(name, default, str)

    def str(self, name, default=_MISSING, **kwargs):
        return self._get(name, default, str)

    def bool(self, name, default=_MISSING, **kwargs):
        return self._get(name, default, lambda v: v.strip().lower() in _TRUE)

    def int(self, name, default=_MISSING, **kwargs):
        return self._get(name, default, int)

    def float(self, name, default=_MISSING, **kwargs):
        return self._get(name, default, float)

    def list(self, name, default=_MISSING, subcast=None, **kwargs):
        cast = subcast or (lambda v: v)
        return self._get(name, default, lambda v: [cast(p.strip()) for p in v.split(",") if p.strip()])
