"""Stand-in for ``transformers.processing_utils``: only the ``Unpack`` type hint."""

from typing_extensions import Unpack
