"""Stand-in for the ``packaging`` package: its ``version`` module (see :mod:`.packaging_version`)."""

import packaging.version as version
