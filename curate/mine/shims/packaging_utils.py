"""Stand-in for ``packaging.utils``: project-name normalization, for the optional-dependency
checks mined code runs at import time (physicsnemo's ``is_package_available``)."""

import re


def canonicalize_name(name, *, validate=False):
    """``name`` normalized as PEP 503 says: runs of ``-``, ``_`` and ``.`` become one ``-``,
    lower case (``"Torch_Geometric"`` -> ``"torch-geometric"``)."""
    return re.sub(r"[-_.]+", "-", str(name)).lower()
