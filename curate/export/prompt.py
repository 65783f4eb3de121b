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


#: The sentence stating a problem's precision, for problems run in a lower one than float32
#: (``curate diversify --dtypes``): what the verifier does with ``dtype``
#: (:func:`curate.verify.verify`), as KernelBench's harness does for its precision setting.
PRECISION = """\
Precision: this problem runs in {dtype}. The harness casts `Model` and `ModelNew` with \
`.to(torch.{dtype})` (every floating-point parameter and buffer) and every floating-point \
input to torch.{dtype}; integer inputs are kept. `ModelNew.forward` must return {dtype} \
outputs, compared with {dtype} tolerances; accumulating in float32 inside a kernel is fine.
"""


def build_prompt(reference_code: str, dtype: str | None = None) -> str:
    """The user message for one problem: the instruction, the precision it runs in when
    that is not float32, then the reference in a code block.

    Args:
        reference_code: KernelBench-format source (``Model``, ``get_inputs``,
            ``get_init_inputs``), as in the ``code`` column.
        dtype: the torch name of the precision the problem runs in (the ``dtype`` column:
            ``"bfloat16"``, ``"float16"``); None or ``"float32"``: no precision sentence.
    Returns:
        The prompt text (str).
    Raises:
        ValueError: ``reference_code`` is empty.
    """
    if not reference_code or not reference_code.strip():
        raise ValueError("empty reference code")
    precision = PRECISION.format(dtype=dtype) + "\n" if dtype and dtype != "float32" else ""
    return (f"{INSTRUCTION}\n{precision}Reference program:\n\n```python\n{reference_code.strip()}\n```\n")
