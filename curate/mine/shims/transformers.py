"""Stand-in for the top of the ``transformers`` package: its version, which other libraries
(peft) compare at import time. The stand-ins of transformers' submodules imitate the
infrastructure of this release. A name the stand-in lacks (``from transformers import
PreTrainedModel`` in another library) stays a placeholder that raises ``ImportError`` when used."""

__version__ = "5.23.0"
