"""Stand-in for ``mne.utils``' soft import: a problem may import only the standard library,
torch and numpy, so any other package is absent (braindecode's
``_soft_import("huggingface_hub", ..., strict=False)`` gets False)."""

import importlib
import sys


def _soft_import(name, purpose="", strict=True, *, min_version=None):
    """The module ``name`` when a problem may import it; otherwise False, or RuntimeError
    when ``strict``."""
    if name.split(".")[0] in ("torch", "numpy") or name.split(".")[0] in sys.stdlib_module_names:
        return importlib.import_module(name)
    if strict:
        raise RuntimeError(f"For {purpose} to work, the {name} module is needed, but it is not part of the problem")
    return False


def warn(message, category=RuntimeWarning, module="mne", ignore_namespaces=("mne",)):
    """mne's warning helper: a plain ``warnings.warn``."""
    import warnings

    warnings.warn(message, category, stacklevel=2)
