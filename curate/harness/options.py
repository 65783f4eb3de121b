"""Stage options: declared once per stage as a dataclass, checked here.

Each stage declares its options in ``curate/<stage>/options.py`` as a dataclass whose fields
carry a type, a default and ``metadata``:

=============  ==========================================================================
``help``       str, the option's help text (the CLI shows it; required)
``flag``       str, the CLI flag when it is not ``--<name>`` (e.g. ``--push-to-hub``)
``argument``   True: a positional CLI argument (mine's manifest) instead of an option
``cli``        False: not on the command line (a secret such as a token); YAML and Python only
``sep``        str: a list option the CLI takes as one string split on ``sep``
=============  ==========================================================================

From these the CLI commands (:mod:`curate.harness.cli`), the stage's Python signature
(:mod:`curate.harness.stage`) and the pipeline-YAML check (:func:`check_options`) are made.
Standard library only, so that the CLI starts without the stages' dependencies.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import types
import typing
from pathlib import Path
from typing import Any, Mapping

STAGE_OPTIONS = {
    "mine": "curate.mine.options:MineOptions",
    "dedup": "curate.dedup.options:DedupOptions",
    "diversify": "curate.diversify.options:DiversifyOptions",
    "measure": "curate.measure.options:MeasureOptions",
    "rank": "curate.rank.options:RankOptions",
    "export": "curate.export.options:ExportOptions",
}
"""Where each stage's options dataclass lives (``module:Class``)."""


def option(default: Any, help: str, **metadata: Any) -> Any:
    """An option field: ``default`` and ``help`` (plus any metadata key of the module docstring)."""
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


def executor_option(where: str) -> Any:
    """The ``executor`` option of a stage (``local`` or ``ray``); ``where`` says what runs there."""
    return option("local", where)


def ray_address_option() -> Any:
    """The ``ray_address`` option that goes with :func:`executor_option`."""
    return option(None, "Ray cluster to join ('auto' on a node started with `ray start`, "
                        "'ray://head:10001'); default: start a local Ray instance (--executor ray).")


class OptionError(ValueError):
    """An option that a stage does not take, or a value of the wrong type."""


def options_class(stage: str) -> type:
    """The options dataclass of ``stage`` (a name of :data:`STAGE_OPTIONS`).

    Raises:
        KeyError: an unknown stage.
    """
    module, _, name = STAGE_OPTIONS[stage].partition(":")
    return getattr(importlib.import_module(module), name)


def fields(cls: type) -> tuple[dataclasses.Field, ...]:
    """The option fields of an options dataclass, in declaration order, with resolved types
    (``Field.type`` is a type, not the string ``from __future__ import annotations`` leaves)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        f.type = hints[f.name]
        out.append(f)
    return tuple(out)


def default(f: dataclasses.Field) -> Any:
    """A field's default (``dataclasses.MISSING`` for a required one)."""
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return f.default


def suggest(name: str, allowed: typing.Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the allowed name closest to ``name``, or ``""``."""
    close = difflib.get_close_matches(str(name), list(allowed), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_error(stage: str, names: typing.Iterable[str], allowed: typing.Sequence[str]) -> str:
    """One line naming the options ``stage`` does not take, the closest allowed name and
    every allowed name."""
    names = sorted((str(n) for n in names))
    what = "option" if len(names) == 1 else "options"
    hints = "".join(suggest(n, allowed) for n in names)
    return (f"{stage}: unknown {what} {', '.join(repr(n) for n in names)}{hints}; "
            f"{stage} takes: {', '.join(allowed)}")


def _type_name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_type_name(args[0])}"
        return f"a list of {len(args)} ({', '.join(_type_name(a) for a in args)})"
    if tp is Path:
        return "a path (string)"
    return getattr(tp, "__name__", str(tp))


def _fits(tp: Any, value: Any) -> bool:
    """Whether a YAML value can stand for type ``tp`` (an int for a float, a string for a path,
    a list for a tuple); values are not converted, so a stage sees what the YAML says."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(a, value) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is Any:
        return True
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if tp is Path:
        return isinstance(value, (str, Path))
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(args[0], v) for v in value)
        return len(value) == len(args) and all(_fits(a, v) for a, v in zip(args, value))
    return isinstance(value, tp) if isinstance(tp, type) else True


def check_options(stage: str, values: Mapping[str, Any], cls: type | None = None,
                  fixed: typing.Collection[str] = ()) -> dict[str, Any]:
    """Check a stage's options as a pipeline YAML gives them; return them ready for the
    stage's ``run`` (unchanged, except a ``sep`` option given as one string, which is split).

    Args:
        stage: the stage name (in messages; and to find ``cls`` when it is None).
        values: option name -> value.
        fixed: names the caller sets itself (``out``), refused here.
    Raises:
        OptionError: an unknown option (the message names the closest allowed name and all
            of them), a value of the wrong type, or a required option left out.
    """
    cls = cls or options_class(stage)
    fs = {f.name: f for f in fields(cls) if f.name not in fixed}
    allowed = list(fs) + (["source"] if stage != "mine" else [])
    bad = [k for k in values if k not in allowed]
    if bad:
        raise OptionError(unknown_error(stage, bad, allowed))
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key == "source":
            tp: Any = typing.Optional[Path]
        else:
            tp = fs[key].type
            sep = fs[key].metadata.get("sep")
            if sep and isinstance(value, str):
                value = [v.strip() for v in value.split(sep) if v.strip()]
        if not _fits(tp, value):
            raise OptionError(f"{stage}: option {key!r} must be {_type_name(tp)}, got "
                              f"{type(value).__name__} {value!r}")
        out[key] = value
    missing = [n for n, f in fs.items() if default(f) is dataclasses.MISSING and n not in out]
    if missing:
        raise OptionError(f"{stage}: missing option{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(missing)}")
    return out
