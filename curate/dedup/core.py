"""The core of a mined problem: the class it is about, its ``Model`` wrapper and its inputs.

A mined problem carries its class's whole dependency closure: curate's torch-only stand-ins
(einops, transformers' infrastructure) and a library's own infrastructure (diffusers'
``ModelMixin`` and attention processors, transformers' configuration classes), often tens of
kilobytes that every problem of that library shares. Jaccard over the whole text then calls
two different modules near-duplicates for what they share: on the 144-source PyPI run,
``SinusoidalPosEmb`` and ``RearrangeImage`` (both mostly the einops stand-in) at 0.91, two
diffusers blocks of 260 KB at 0.92. Near-duplicates must also be alike in their core.
"""

from __future__ import annotations

import re

_MODEL = re.compile(r"class Model\((\w+)\)\s*:")
# the next top-level statement: a line that starts with neither blank space, a comment, nor
# the closing bracket of a statement that spans lines
_TOP = re.compile(r"\n(?=[^\s#)\]}])")


def core_text(code: str) -> str:
    """The mined class's statement (decorators included), then everything from ``class
    Model(<class>):`` on (the wrapper and the inputs). A problem whose ``Model`` is not such
    a wrapper (KernelBench's own format, hand-written problems) is its own core.

    String searches from the end rather than a regular expression over the whole text: a
    closure can be 300 KB, and the core is a few KB near the end."""
    at = code.rfind("\nclass Model(")
    m = _MODEL.match(code, at + 1) if at >= 0 else None
    if m is None:
        return code
    name = m.group(1)
    start = max(code.rfind(f"\nclass {name}(", 0, at), code.rfind(f"\nclass {name}:", 0, at))
    if start < 0 and not code.startswith((f"class {name}(", f"class {name}:")):
        return code
    line_end = code.find("\n", start + 1)  # the body starts after the class line
    while start > 0:  # decorators above the class
        prev = code.rfind("\n", 0, start)
        if prev < 0 or not code.startswith("@", prev + 1):
            break
        start = prev
    end = _TOP.search(code, line_end, at + 1) if line_end >= 0 else None
    stop = end.start() if end is not None else at
    return code[start + 1:stop + 1] + code[at + 1:]
