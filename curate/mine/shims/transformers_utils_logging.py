"""Stand-in for ``transformers.utils.logging``: the standard library's loggers, with the
``warning_once``/``info_once``/``warning_advice`` methods transformers adds to them
(156 ``logger.warning_once`` calls in the modeling files of transformers 5.23)."""

import logging


class _OnceLogger(logging.LoggerAdapter):
    """A standard logger that also emits a given message at most once (``*_once``)."""

    def __init__(self, logger):
        super().__init__(logger, {})
        self._seen = set()

    def _once(self, level, msg, *args, **kwargs):
        key = (level, str(msg), args)
        if key not in self._seen:
            self._seen.add(key)
            self.log(level, msg, *args, **kwargs)

    def warning_once(self, msg, *args, **kwargs):
        self._once(logging.WARNING, msg, *args, **kwargs)

    def info_once(self, msg, *args, **kwargs):
        self._once(logging.INFO, msg, *args, **kwargs)

    def warning_advice(self, msg, *args, **kwargs):
        self.warning(msg, *args, **kwargs)


def get_logger(name=None):
    return _OnceLogger(logging.getLogger(name))
