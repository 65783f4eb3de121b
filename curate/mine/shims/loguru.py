"""Stand-in for ``loguru``: its ``logger`` object, writing through the standard library's
``logging`` (a logger named ``loguru``). Logging is not part of a problem's computation;
alphafold3-pytorch's diffusion module logs each step of its forward with ``logger.info``.

Messages are formatted as loguru formats them: ``logger.info("{} steps", n)`` is
``"{} steps".format(n)``; a message without arguments is written as given. Sinks, levels,
context binding and options (``add``, ``remove``, ``bind``, ``opt``, ``contextualize``,
``catch``) are accepted and change nothing but what they return.
"""

import contextlib
import logging

_LOG = logging.getLogger("loguru")
_LEVELS = {"trace": 5, "debug": logging.DEBUG, "info": logging.INFO, "success": 25,
           "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL}


class Logger:
    """The ``loguru.logger`` calls mined code makes; each logs through :mod:`logging`."""

    def log(self, level, message, *args, **kwargs):
        number = level if isinstance(level, int) else _LEVELS.get(str(level).lower(), logging.INFO)
        text = str(message)
        if args or kwargs:
            try:
                text = text.format(*args, **kwargs)
            except (IndexError, KeyError, ValueError):  # braces that are not fields, as loguru leaves them
                pass
        _LOG.log(number, text)

    def trace(self, message, *args, **kwargs):
        self.log("trace", message, *args, **kwargs)

    def debug(self, message, *args, **kwargs):
        self.log("debug", message, *args, **kwargs)

    def info(self, message, *args, **kwargs):
        self.log("info", message, *args, **kwargs)

    def success(self, message, *args, **kwargs):
        self.log("success", message, *args, **kwargs)

    def warning(self, message, *args, **kwargs):
        self.log("warning", message, *args, **kwargs)

    def error(self, message, *args, **kwargs):
        self.log("error", message, *args, **kwargs)

    def critical(self, message, *args, **kwargs):
        self.log("critical", message, *args, **kwargs)

    def exception(self, message, *args, **kwargs):
        _LOG.exception(str(message).format(*args, **kwargs) if args or kwargs else str(message))

    def add(self, *args, **kwargs):
        return 0

    def remove(self, *args, **kwargs):
        return None

    def configure(self, *args, **kwargs):
        return []

    def level(self, name, *args, **kwargs):
        return name

    def disable(self, name):
        return None

    def enable(self, name):
        return None

    def bind(self, **kwargs):
        return self

    def opt(self, *args, **kwargs):
        return self

    def patch(self, *args, **kwargs):
        return self

    def contextualize(self, **kwargs):
        return contextlib.nullcontext()

    def catch(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs and not isinstance(args[0], type):
            return args[0]  # ``@logger.catch`` on a function: it runs as written
        return lambda fn: fn


logger = Logger()
