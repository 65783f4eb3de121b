"""Stand-in for ``transformers.utils.logging``: the standard library's loggers."""

from logging import getLogger as get_logger
