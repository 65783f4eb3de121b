"""The verifier: does a candidate ``ModelNew`` compile, match the reference, and run faster?

See :func:`verify` (one candidate), :func:`verify_many` (a batch through a sandbox pool),
:class:`VerifyResult`, :func:`extract_code` (the program in a model's reply) and ``docs/verifier.md``. Imports only the standard library at import time; the sandboxed worker
(:mod:`curate.verify.worker`) imports torch and triton.
"""

from curate.verify.extract import extract_code
from curate.verify.verifier import (SUSPICIOUS_SPEEDUP, VerifyResult, make_config,
                                    normalize_variants, resolve_device, verify, verify_many)

__all__ = ["verify", "verify_many", "VerifyResult", "extract_code", "make_config",
           "normalize_variants", "resolve_device", "SUSPICIOUS_SPEEDUP"]
