"""Baseline solvers: where the rank stage's candidates come from.

A solver turns one problem row (a dict with at least ``problem_id`` and ``code``) into
candidate programs (Python source defining ``ModelNew``):

- :class:`InductorSolver` (``"inductor"``): offline and deterministic; ``ModelNew`` runs the
  reference through ``torch.compile`` (TorchInductor) and is verified with
  ``allow_compile=True``. It measures whether the problem survives compilation and what
  Inductor gains over eager; it does not write kernels, so it ranks problems only coarsely.
  (Inductor's generated code could be captured with ``run_and_get_code``, but on a CPU
  machine that code is C++, not Triton, so it would not be a candidate of the kind the
  policy writes.)
- :class:`OpenAISolver` (``"openai"``): ``k`` samples per problem from any OpenAI-compatible
  chat endpoint (``POST {base_url}/chat/completions``), over a thread pool, with an on-disk
  cache keyed by (model, prompt, temperature, sample index) so a re-run does not re-query.
- :class:`CompletionsSolver` (``"completions"``): a JSONL file of
  ``{"problem_id", "completion"}`` lines (several per problem allowed).

A solver raises :class:`SolverError` for a problem it could not produce candidates for; the
stage then keeps the problem with its predicted difficulty and the error in ``rank_error``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.request
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Protocol, runtime_checkable

from curate.rank.prompt import build_prompt
from curate.verify import extract_code


class SolverError(Exception):
    """The solver produced no candidates for a problem (endpoint error, no completions)."""


@runtime_checkable
class Solver(Protocol):
    """What the rank stage needs from a solver.

    Attributes:
        name: the ``solver`` column value.
        deterministic: every sample is the same program (pass@k then equals pass@1).
        allow_compile: verify with ``allow_compile=True`` (only the Inductor baseline).
    """

    name: str
    deterministic: bool
    allow_compile: bool

    def candidates(self, problem: dict[str, Any], k: int) -> list[str]:
        """Candidate programs for ``problem`` (a row dict); raises :class:`SolverError`."""
        ...


_INDUCTOR_MODEL_NEW = '''

# ---- curate: TorchInductor baseline ----
import torch as _curate_torch


class ModelNew(_curate_torch.nn.Module):
    """The reference Model compiled by TorchInductor (offline baseline candidate)."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.compiled = _curate_torch.compile(Model(*args, **kwargs))

    def forward(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)
'''


class InductorSolver:
    """``ModelNew`` = ``torch.compile(Model)``: one deterministic candidate per problem."""

    name = "inductor"
    deterministic = True
    allow_compile = True

    def candidates(self, problem: dict[str, Any], k: int) -> list[str]:
        return [problem["code"].rstrip() + "\n" + _INDUCTOR_MODEL_NEW]


class CompletionsSolver:
    """Candidates read from a JSONL file of completions, several per problem allowed.

    A line holds the candidate in ``completion`` (a whole model reply: the program is
    extracted as the reward does) or ``code`` (the program), and names its problem by one of:

    - ``problem_id``: the row's ``problem_id`` (or its ``name``);
    - ``level`` with ``problem_id`` (KernelBench's number) or ``problem_name`` (its file name
      without ``.py``): a row made from a KernelBench-format file (:mod:`curate.mine.kernelbench`)
      whose path is ``level<L>/<problem_name>.py``, so published completions for KernelBench's
      problems (``tests/data/model_kernels/kernels.jsonl``) rank them as they are.

    Every line for a problem is one candidate (``k`` only sets the pass@k estimate).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a line is not JSON or lacks a candidate or a problem (the message names
            the line).
    """

    deterministic = False
    allow_compile = False

    def __init__(self, path: Path | str):
        path = Path(path)
        self.name = f"completions:{path.name}"
        self.by_problem: dict[str, list[str]] = defaultdict(list)
        self.by_kernelbench: dict[tuple[int, str], list[str]] = defaultdict(list)
        with path.open() as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from None
                text = rec.get("completion", rec.get("code")) if isinstance(rec, dict) else None
                if not isinstance(text, str) or (rec.get("problem_id") is None and rec.get("problem_name") is None):
                    raise ValueError(f"{path}:{lineno}: need string fields problem_id (or level with "
                                     "problem_name) and completion (or code)")
                level = rec.get("level")
                if level is not None and str(level).isdigit():
                    if rec.get("problem_name"):
                        self.by_kernelbench[(int(level), str(rec["problem_name"]))].append(text)
                    elif str(rec.get("problem_id")).isdigit():
                        self.by_kernelbench[(int(level), f"#{int(rec['problem_id'])}")].append(text)
                    else:
                        raise ValueError(f"{path}:{lineno}: a KernelBench line needs problem_name or a "
                                         "numeric problem_id")
                else:
                    self.by_problem[str(rec["problem_id"])].append(text)

    def _kernelbench(self, problem: dict[str, Any]) -> list[str]:
        src = problem.get("source") or {}
        path = str(src.get("path") or "") if isinstance(src, dict) else ""
        parts = path.removesuffix(".py").split("/")
        if len(parts) < 2 or not parts[-2].startswith("level") or not parts[-2][5:].isdigit():
            return []
        level, stem = int(parts[-2][5:]), parts[-1]
        number = stem.split("_")[0]
        by_number = self.by_kernelbench.get((level, f"#{int(number)}"), []) if number.isdigit() else []
        return self.by_kernelbench.get((level, stem), []) + by_number

    def candidates(self, problem: dict[str, Any], k: int) -> list[str]:
        found = (self.by_problem.get(str(problem["problem_id"])) or self.by_problem.get(str(problem.get("name")))
                 or self._kernelbench(problem))
        if not found:
            raise SolverError("no completions for this problem")
        return [extract_code(c) for c in found]


class OpenAISolver:
    """``k`` samples per problem from an OpenAI-compatible chat completions endpoint.

    Args:
        base_url: e.g. ``"https://api.openai.com/v1"`` or ``"http://127.0.0.1:8000/v1"``
            (vLLM, SGLang, llama.cpp servers speak the same protocol).
        model: the ``model`` field of each request.
        api_key: sent as ``Authorization: Bearer``; None sends no header (local servers).
        temperature: sampling temperature.
        concurrency: requests in flight at once (threads).
        cache_dir: one JSON file per (model, prompt, temperature, sample index); None: no cache.
        request_timeout_s: seconds per HTTP request.
        retries: extra attempts after HTTP 429/5xx or a connection error (backoff 1, 2, 4 s ...).
        max_tokens: forwarded when set.
    """

    deterministic = False
    allow_compile = False

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 temperature: float = 0.8, concurrency: int = 8,
                 cache_dir: Path | str | None = None, request_timeout_s: float = 600.0,
                 retries: int = 3, max_tokens: int | None = None):
        if not base_url or not model:
            raise ValueError("the openai solver needs base_url and model")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.name = f"openai:{model}"
        self.api_key = api_key
        self.temperature = temperature
        self.concurrency = max(1, concurrency)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.request_timeout_s = request_timeout_s
        self.retries = retries
        self.max_tokens = max_tokens
        self._fetched: dict[tuple[str, int], str | SolverError] = {}
        self.requests_sent = 0

    # -- cache ---------------------------------------------------------------------------
    def cache_key(self, prompt: str, index: int) -> str:
        """sha256 of (model, prompt, temperature, sample index)."""
        blob = json.dumps([self.model, prompt, self.temperature, index], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _cache_path(self, prompt: str, index: int) -> Path | None:
        return self.cache_dir / f"{self.cache_key(prompt, index)}.json" if self.cache_dir else None

    # -- HTTP ----------------------------------------------------------------------------
    def _request(self, prompt: str) -> str:
        body: dict[str, Any] = {"model": self.model, "temperature": self.temperature,
                                "messages": [{"role": "user", "content": prompt}]}
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(2 ** (attempt - 1))
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                self.requests_sent += 1
                with urllib.request.urlopen(req, timeout=self.request_timeout_s) as resp:
                    payload = json.loads(resp.read().decode())
                return payload["choices"][0]["message"]["content"] or ""
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}"
                if exc.code != 429 and exc.code < 500:
                    break
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            except (KeyError, IndexError, TypeError, json.JSONDecodeError) as exc:
                last = f"unexpected response: {type(exc).__name__}: {exc}"
                break
        raise SolverError(f"{self.url}: {last}")

    def completion(self, prompt: str, index: int) -> str:
        """Sample ``index`` for ``prompt``, from the cache when present."""
        path = self._cache_path(prompt, index)
        if path is not None and path.is_file():
            return json.loads(path.read_text())["completion"]
        text = self._request(prompt)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"model": self.model, "temperature": self.temperature,
                                       "index": index, "completion": text}))
            tmp.replace(path)  # atomic: a killed run never leaves half a cache entry
        return text

    def prepare(self, problems: Iterable[dict[str, Any]], k: int) -> None:
        """Fetch every (problem, sample) concurrently before verification starts."""
        jobs = [(str(p["problem_id"]), build_prompt(p["code"]), i) for p in problems for i in range(k)]

        def fetch(job):
            pid, prompt, i = job
            try:
                return (pid, i), self.completion(prompt, i)
            except SolverError as exc:
                return (pid, i), exc

        with ThreadPoolExecutor(self.concurrency) as pool:
            for key, value in pool.map(fetch, jobs):
                self._fetched[key] = value

    def candidates(self, problem: dict[str, Any], k: int) -> list[str]:
        pid = str(problem["problem_id"])
        prompt = build_prompt(problem["code"])
        out = []
        for i in range(k):
            got = self._fetched.get((pid, i))
            if got is None:
                got = self.completion(prompt, i)
            if isinstance(got, SolverError):
                raise got
            out.append(extract_code(got))
        return out


def make_solver(solver: str, *, completions: Path | str | None = None, base_url: str | None = None,
                model: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                temperature: float = 0.8, concurrency: int = 8,
                cache_dir: Path | str | None = None) -> Solver | None:
    """Build the solver named ``solver`` (``"inductor"``, ``"openai"``, ``"completions"``;
    ``"none"``: None, no candidates, difficulty from measure's figures alone).

    Raises:
        ValueError: unknown name, or a missing argument the solver needs.
    """
    if solver == "none":
        return None
    if solver == "inductor":
        return InductorSolver()
    if solver == "completions":
        if completions is None:
            raise ValueError("solver=completions needs --completions FILE.jsonl")
        return CompletionsSolver(completions)
    if solver == "openai":
        if not base_url or not model:
            raise ValueError("solver=openai needs --base-url and --model")
        return OpenAISolver(base_url, model, api_key=os.environ.get(api_key_env) or None,
                            temperature=temperature, concurrency=concurrency, cache_dir=cache_dir)
    raise ValueError(f"unknown solver {solver!r}: use none, inductor, openai or completions")


__all__ = ["Solver", "SolverError", "InductorSolver", "CompletionsSolver", "OpenAISolver",
           "make_solver"]
