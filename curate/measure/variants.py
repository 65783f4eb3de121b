"""Which input dimensions a base problem's shape variants differ in: the dimensions a
TorchInductor compile marks dynamic so that one compiled graph serves every variant."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Iterable


def varying_dims(specs: Iterable[list[dict[str, Any]]]) -> list[list[int]] | None:
    """The ``[input index, dimension]`` pairs whose size differs between input specs.

    Args:
        specs: the input specs (lists of :class:`curate.problem.InputSpec` dicts) of one base
            problem's shape variants.
    Returns:
        the pairs, sorted; None when the variants cannot share a graph's signature (a
        different number of inputs, a tensor's rank or dtype that differs, or a non-tensor
        input whose value differs) or when nothing differs.
    """
    specs = list(specs)
    if len(specs) < 2 or any(len(s) != len(specs[0]) for s in specs):
        return None
    pairs: list[list[int]] = []
    for i, first in enumerate(specs[0]):
        entries = [s[i] for s in specs]
        if first.get("kind") != "tensor" or any(e.get("kind") != "tensor" for e in entries):
            if any(json.dumps(e, sort_keys=True) != json.dumps(first, sort_keys=True) for e in entries):
                return None
            continue
        shapes = [list(e.get("shape") or []) for e in entries]
        if len({len(s) for s in shapes}) > 1 or len({e.get("dtype") for e in entries}) > 1:
            return None
        pairs += [[i, d] for d in range(len(shapes[0])) if len({s[d] for s in shapes}) > 1]
    return pairs or None


def dynamic_dims_by_row(rows: list[dict[str, Any]]) -> dict[int, list[list[int]]]:
    """For each row (by index) of a base problem with several shape variants built with the
    same constructor arguments, the dimensions its variants differ in (:func:`varying_dims`).
    Rows without a ``base_problem_id``, with unreadable specs, or whose base problem's
    variants cannot share a graph are left out (they compile static)."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if row.get("base_problem_id"):  # each precision variant compiles its own graphs
            groups[row["base_problem_id"], row.get("dtype") or "float32"].append(i)
    out: dict[int, list[list[int]]] = {}
    for members in groups.values():
        if len(members) < 2 or len({rows[i].get("init_args") or "" for i in members}) > 1:
            continue
        try:
            specs = [json.loads(rows[i].get("input_spec") or "null") for i in members]
        except ValueError:
            continue
        if any(not isinstance(s, list) for s in specs):
            continue
        dims = varying_dims(specs)
        if dims:
            out.update({i: dims for i in members})
    return out
