"""Synthesis failures: :class:`SynthesisError` with its reject reason, the mined line an
error came from (:func:`blame`) and reasons read off error messages (:func:`_classify`)."""

from __future__ import annotations

import linecache
import re
import traceback


_MEMORY = re.compile(r"DefaultCPUAllocator|can't allocate memory|Cannot allocate memory|^MemoryError|out of memory")

_NETWORK = re.compile(r"URLError|HTTPError|ConnectionError|ConnectTimeout|gaierror|Name or service not known|"
                      r"Temporary failure in name resolution|urlopen|load_state_dict_from_url|hf_hub_download|"
                      r"torch\.hub|Network is unreachable|Max retries exceeded")
_DATA_FILE = re.compile(r"FileNotFoundError|No such file or directory|IsADirectoryError|\.(pt|pth|ckpt|npy|npz|"
                        r"json|yaml|yml|txt|csv|bin|safetensors|pkl)\b['\"]")


class SynthesisError(Exception):
    """No runnable constructor arguments or inputs were found. ``reason`` is a short category."""

    def __init__(self, reason: str, detail: str = "", line: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.line = line


MINED_FILE = "<curate_mined>"  # the file name the closure is compiled under


def blame(exc: BaseException) -> str:
    """The source line of the mined code where ``exc`` was raised (innermost mined frame):
    the constructor parameters it mentions are the ones to change first."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith(MINED_FILE[:-1]):  # exec_source names it "<curate_mined HASH>"
            return frame.line or ""
    return ""


def guard_line(exc: BaseException) -> str:
    """The condition guarding the ``raise`` of the innermost mined frame of ``exc``: ``if
    x.shape[1] != self.num_channels:`` above ``raise ValueError(...)`` (a check written as an
    ``if`` names the input and the size it wants, which the ``raise`` line does not); empty
    when that line is no ``raise`` or no ``if`` encloses it within 8 lines."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not frame.filename.startswith(MINED_FILE[:-1]):
            continue
        line = linecache.getline(frame.filename, frame.lineno)
        if not line.lstrip().startswith("raise"):
            return ""
        indent = len(line) - len(line.lstrip())
        for k in range(frame.lineno - 1, max(frame.lineno - 9, 0), -1):
            above = linecache.getline(frame.filename, k)
            if above.strip() and len(above) - len(above.lstrip()) < indent:
                return above.strip() if re.match(r"(el)?if\b", above.strip()) else ""
        return ""
    return ""


def mined_lines(exc: BaseException) -> list[str]:
    """The source lines of every mined frame ``exc`` passed through, innermost first: where a
    helper (an einops call, a small function of the file) raised on an argument, the outer lines
    show which of the caller's names was passed to it."""
    return [f.line or "" for f in reversed(traceback.extract_tb(exc.__traceback__))
            if f.filename.startswith(MINED_FILE[:-1])]


def _classify(msg: str, default: str) -> str:
    """A reject reason for an error message: ``import_missing``, ``needs_network``,
    ``needs_data_files`` or ``default``."""
    if re.search(r"is not available to this problem|^ModuleNotFoundError|No module named", msg):
        return "import_missing"
    if _NETWORK.search(msg):
        return "needs_network"
    if _DATA_FILE.search(msg):
        return "needs_data_files"
    return default
