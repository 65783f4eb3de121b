"""The stage harness: what every stage shares.

- :mod:`.options`: each stage's options dataclass (``curate/<stage>/options.py``) and the
  check of options a pipeline YAML gives (unknown keys with the closest allowed name, types);
- :mod:`.stage`: a stage's ``run`` made from its work function and its options: the input
  folder it reads, its clock, its tables and ``stats.json``;
- :mod:`.cli`: the ``curate <stage>`` commands made from the options dataclasses.
"""

from typing import Any, Callable


def lazy_stage(package: str) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for a stage package: names not defined in the package
    come from ``<package>.stage``, imported on first use, so the CLI can read a stage's
    options without loading its work (polars, the verifier). Raises ``AttributeError`` for a
    name the stage module lacks too."""

    def __getattr__(name: str) -> Any:
        import importlib

        try:
            return getattr(importlib.import_module(f"{package}.stage"), name)
        except AttributeError:
            raise AttributeError(f"module '{package}' has no attribute {name!r}") from None

    return __getattr__
