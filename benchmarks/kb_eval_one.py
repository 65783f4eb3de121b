"""One kernel through KernelBench's own evaluator (``eval_kernel_against_ref``), for
``benchmarks/model_kernels.py``; prints one JSON line.

Usage: ``KB_SRC=<KernelBench checkout>/src python benchmarks/kb_eval_one.py JOB.json`` where
the job holds ``ref`` (the reference source), ``code`` (the candidate) and ``backend``
(``cuda`` or ``triton``). KernelBench is not shipped with curate: the checkout is read from
``KB_SRC`` at run time. Its package imports LLM clients (dotenv, openai, litellm) when
imported; evaluation never calls them, so empty stand-ins take their place where they are not
installed. Extensions build through :func:`curate.verify.extensions.isolated`, as in the
verifier, so a kernel both evaluators verify compiles once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _stand_ins() -> None:
    for name, attrs in (("dotenv", {"load_dotenv": lambda *a, **k: None}),
                        ("openai", {"OpenAI": type("OpenAI", (), {})}),
                        ("litellm", {"completion": lambda *a, **k: None})):
        if importlib.util.find_spec(name) is None:
            sys.modules[name] = types.SimpleNamespace(**attrs)


def main() -> None:
    job = json.load(open(sys.argv[1]))
    sys.path[:0] = [os.environ["KB_SRC"], REPO]
    _stand_ins()
    import torch
    import torch.utils.cpp_extension as cpp

    from curate.verify.extensions import isolated

    cpp.load_inline = isolated(cpp.load_inline, "load_inline")
    cpp.load = isolated(cpp.load, "load")
    from kernelbench.eval import eval_kernel_against_ref

    torch.cuda.init()
    result = eval_kernel_against_ref(job["ref"], job["code"], seed_num=42, num_correct_trials=5,
                                     measure_performance=False, backend=job.get("backend", "cuda"),
                                     device=torch.device("cuda:0"))
    if result is None:  # KernelBench's way of saying the evaluation itself failed (a lock, a crash)
        print(json.dumps({"evaluated": False, "error": "eval_kernel_against_ref returned None"}))
        return
    print(json.dumps({"evaluated": True, "compiled": bool(result.compiled),
                      "correctness": bool(result.correctness),
                      "metadata": {k: str(v)[:300] for k, v in (result.metadata or {}).items()}}))


if __name__ == "__main__":
    main()
