"""The task prompt shown to the policy for one problem (KernelBench-style instruction).

The task follows KernelBench's setting (ScalingIntelligence/KernelBench): given a PyTorch
reference ``Model``, write ``ModelNew`` with custom kernels and the same interface. The
wording is ours. The rules it states are the ones the verifier enforces (see
``docs/verifier.md``), so a policy is never rewarded for something the prompt forbids.
"""

from __future__ import annotations

INSTRUCTION = """\
You are an expert in writing fast GPU kernels. Below is a PyTorch reference program. It \
defines `class Model(nn.Module)`, `get_init_inputs()` (the positional arguments of \
`Model.__init__`) and `get_inputs()` (the arguments of `Model.forward`).

Write a faster replacement named `ModelNew`:
- implement the computation with custom GPU kernels written in Triton (`@triton.jit`); \
fusing several operators into one kernel is encouraged; CUDA through \
`torch.utils.cpp_extension.load_inline` is also accepted;
- `ModelNew.__init__` takes the same arguments as `Model.__init__`, and `ModelNew.forward` \
takes the same inputs and returns the same outputs (shapes, dtypes and values within \
floating-point tolerance);
- it must stay correct for other input shapes than the ones in `get_inputs()`: do not \
hard-code sizes;
- do not hand the work back to the PyTorch operators you are replacing, cache outputs, \
modify the inputs, lower the precision, or use extra threads or streams.

Reply with the complete Python module (imports, kernels and `class ModelNew`) in a single \
```python code block. Do not redefine `Model`, `get_inputs` or `get_init_inputs`.
"""


def build_prompt(reference_code: str) -> str:
    """The user message for one problem: the instruction, then the reference in a code block.

    Args:
        reference_code: KernelBench-format source (``Model``, ``get_inputs``,
            ``get_init_inputs``), as in the ``code`` column.
    Returns:
        The prompt text (str).
    Raises:
        ValueError: ``reference_code`` is empty.
    """
    if not reference_code or not reference_code.strip():
        raise ValueError("empty reference code")
    return (f"{INSTRUCTION}\nReference program:\n\n```python\n{reference_code.strip()}\n```\n")
