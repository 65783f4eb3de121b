"""A stage's ``curate <stage>`` command, made from its options dataclass.

Each option field becomes ``--<name with dashes>`` (or its ``flag``), a bool one
``--<name>/--no-<name>``, an ``argument`` one a positional argument; ``cli: False`` fields
are left out; a ``sep`` field is one string on the command line, split before the stage
sees it. Every command also takes ``--out`` and (all but mine) ``--from``.
"""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from curate.harness.options import default, fields, options_class

OUT_HELP = "Run folder; the stage writes OUT/<stage>/."
FROM_HELP = "Read problems from this stage folder or parquet instead of OUT/<previous stage>."


def _is_bool(tp: Any) -> bool:
    return tp is bool or tp == Optional[bool]


def _cli_params(stage: str) -> tuple[list[inspect.Parameter], dict[str, Any]]:
    P = inspect.Parameter
    fs = [f for f in fields(options_class(stage)) if f.metadata.get("cli", True)]
    params: list[inspect.Parameter] = []
    hints: dict[str, Any] = {}

    def add(name: str, tp: Any, info: Any) -> None:
        params.append(P(name, P.POSITIONAL_OR_KEYWORD, default=info, annotation=tp))
        hints[name] = tp

    for f in fs:
        if f.metadata.get("argument"):
            add(f.name, f.type, typer.Argument(..., help=f.metadata["help"]))
    add("out", Path, typer.Option(..., "--out", "-o", help=OUT_HELP))
    if stage != "mine":
        add("source", Optional[Path], typer.Option(None, "--from", help=FROM_HELP))
    for f in fs:
        if f.metadata.get("argument"):
            continue
        dash = f.name.replace("_", "-")
        tp, value = f.type, default(f)
        if f.metadata.get("sep"):
            tp, value = str, ""
        decl = f.metadata.get("flag") or (f"--{dash}/--no-{dash}" if _is_bool(tp) else f"--{dash}")
        add(f.name, tp, typer.Option(value, decl, help=f.metadata["help"]))
    return params, hints


def _split(stage: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``sep`` options from one command-line string to the list the stage takes."""
    for f in fields(options_class(stage)):
        sep = f.metadata.get("sep")
        if sep and isinstance(kwargs.get(f.name), str):
            item = typing.get_args(f.type)[0]
            kwargs[f.name] = [item(p.strip()) for p in kwargs[f.name].split(sep) if p.strip()]
    return kwargs


def command(stage: str, call: Callable[[str, dict[str, Any]], None], doc: str) -> Callable[..., None]:
    """The typer callback of ``curate <stage>``: it hands ``call(stage, options)`` the
    options as the stage's ``run`` takes them (``out`` and ``source`` among them)."""
    params, hints = _cli_params(stage)

    def cmd(**kwargs: Any) -> None:
        call(stage, _split(stage, kwargs))

    cmd.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    cmd.__annotations__ = hints
    cmd.__name__ = cmd.__qualname__ = stage
    cmd.__doc__ = doc
    return cmd
