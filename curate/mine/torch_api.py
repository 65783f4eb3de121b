"""Problems around torch's own modules written through torch's public API.

A class mined from torch's installed source (``torch/nn/modules/batchnorm.py::BatchNorm2d``)
copied with its private base classes runs only on the torch it was copied from: the copy of
``_InstanceNorm`` from torch 2.13 passes ``bias=`` to a ``_NormBase`` it imports, which
torch 2.11's does not take. Such a class is written instead as an import of the public class
(``from torch.nn import BatchNorm2d``), and ``Model`` subclasses it: the problem is torch's
module as every torch version since the class was published defines it, the way a
KernelBench level-1 problem wraps ``nn.BatchNorm2d``. Private classes (``_NormBase``,
``_ConvNd``) and classes of private modules have no such spelling and are rejected
(``torch_private``).

Imports torch and the standard library only.
"""

from __future__ import annotations

import importlib

#: Namespaces searched first for a class mined from torch, in order: its public spelling.
PUBLIC_NAMESPACES = ("torch.nn",)


def module_of(rel: str) -> str:
    """``torch/nn/modules/linear.py`` -> ``torch.nn.modules.linear`` (``__init__.py`` -> the package)."""
    dotted = rel.removesuffix(".py").replace("/", ".")
    return dotted.removesuffix(".__init__")


def public_spelling(rel: str, class_name: str) -> tuple[str, str] | None:
    """``(namespace, class_name)`` to import ``class_name`` of torch's file ``rel`` from, or
    None when the class has no public spelling (a private class or module, or one not
    defined in that file in the installed torch)."""
    modname = module_of(rel)
    try:
        module = importlib.import_module(modname)
    except Exception:  # the file is not importable as it sits in the installed torch
        return None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type) or cls.__module__ != modname or class_name.startswith("_"):
        return None
    for ns in PUBLIC_NAMESPACES:
        try:
            if getattr(importlib.import_module(ns), class_name, None) is cls:
                return ns, class_name
        except Exception:
            continue
    if any(part.startswith("_") for part in modname.split(".")):
        return None
    return modname, class_name


def public_closure(rel: str, class_name: str) -> str | None:
    """The closure source of a torch class written through its public spelling (see the
    module docstring), or None when it has none."""
    found = public_spelling(rel, class_name)
    if found is None:
        return None
    ns, name = found
    return f"import torch\nfrom torch import nn\nfrom {ns} import {name}\n"
