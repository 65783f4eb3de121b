"""What closures are made of: the entities names denote, the run-time modules a problem may
import, the markers of the emission order, :class:`Closure` and :class:`ClosureError`."""

from __future__ import annotations

import builtins
import re
import sys
from dataclasses import dataclass, field


#: What a problem may import: the standard library, torch (with typing_extensions, which it
#: requires) and numpy, which every kernel-evaluation environment has (KernelBench's, and our
#: GPU workers', which import torch, triton, numpy and the standard library alone).
#: functorch ships in torch's own wheel (``functorch.vmap`` is ``torch.vmap``)
RUNTIME_MODULES = frozenset(sys.stdlib_module_names) | {"torch", "functorch", "typing_extensions", "numpy"}
RESERVED = {"Model", "get_inputs", "get_init_inputs"}
#: Characters of copied source past which a closure is rejected (`closure_too_large`): diffusers'
#: ModelMixin subclasses pull in the whole library (25 MB), no problem a model can be given.
MAX_CLOSURE_CHARS = 300_000
_BUILTINS = set(dir(builtins)) | {"__file__", "__name__", "__doc__", "__class__", "__spec__", "__builtins__"}
_SHIM = "<shim>"  # prefix of the pseudo-module a stand-in is indexed under
_NS = "<ns>"  # prefix of a namespace's node in the emission order
_MISSING = "<miss>"  # prefix of a placeholder's node in the emission order
_IMPORTS = ("<import>", "<from>", "<module>", "<missing>", "<logger>", "<file>")
# `logger = get_logger(__name__)`, `_LOG = logging_utils.get_logger(__name__, "DEBUG")`
_LOGGER_STMT = re.compile(r"\s*_*(?:logger|log|LOGGER|LOG|Logger)\w*\s*(?::[^=]+)?=\s*([\w.]*(?:log|Log|LOG)\w*)"
                          r"\([^()]*\)\s*$")

# An entity is what a name denotes: (module, name) for a definition in the source or a shim,
# ("<import>", "a.b") and ("<from>", "a:b") for run-time `import a.b` / `from a import b`,
# ("<module>", module) for an alias of a module of the source (bound to a namespace).
Entity = tuple[str, str]


class ClosureError(Exception):
    """The class cannot be made self-contained. ``reason`` is a short category."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class Closure:
    """The self-contained source of a class and everything it needs (no ``Model`` yet).
    """

    source: str
    class_name: str
    files: list[str]
    unresolved: list[str] = field(default_factory=list)
