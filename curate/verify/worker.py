"""The verification task that runs inside a :class:`curate.sandbox.Sandbox` process.

:func:`verify_task` is module-level so the sandbox can pickle it by reference. The order of
its steps is part of the defence:

1. reference phase (before any candidate code runs): load the reference, build its model
   under ``torch.manual_seed(seed)``, compute its outputs on every input set (and held-out
   shape), record which ATen operators it runs, time it (eager, optionally Inductor);
2. candidate phase: install the launch counters, execute the candidate as its own module,
   build ``ModelNew`` under the same seed, run it on the same inputs (rebuilt from the same
   seeds), and compare with the stored reference outputs; then time it.

Because the reference outputs and timings are taken first, a candidate that patches
``torch.relu`` (say) cannot change what it is compared with or the baseline it is timed
against. Memory is poisoned throughout (:mod:`curate.verify.poison`): output elements a
candidate never writes hold NaN or 3.4e38, never the reference's values. On CUDA every
kernel the candidate launches must run on the stream the harness gave it: work on a side
stream is a failure, whether or not it is joined back (the timer syncs the device, so it
could not hide time, but a kernel on an unjoined stream races its own caller).
Imports only torch, triton, the standard library and curate's torch-only modules.
"""

from __future__ import annotations

import os
import random
import sys
import time
import traceback
from typing import Any

import torch

from curate.outputs import output_tensors
from curate.problem import build_inputs, cast_floating, load_problem
from curate.measure import timing as _timing
from curate.verify import correctness as _correctness
from curate.verify import guards as _guards
from curate.verify.correctness import Tolerance, compare, constant_answer_margin, noise_tolerance
from curate.verify.guards import (LaunchCounter, OpRecorder, interpreter_hooks, output_problem, python_threads,
                                  runs_reference_ops, snapshot, side_stream_kernels, tampered)
from curate.verify.sealed import Sealer, Tampered
from curate.verify.verifier import TIMED_CHECKS
from curate.verify.load import CandidateLoadError, load_candidate
from curate.verify.poison import poison_device_cache, poison_host_allocations, poison_outputs


class _Fail(Exception):
    """Ends the candidate phase with ``reason`` (compiled stays as already set)."""


def _seed_all(seed: int) -> None:
    # the CPU and CUDA generators only: torch.manual_seed also queues lazy seeds for every
    # other backend, each capturing a formatted stack (about 1 ms a call in torch 2.11), and
    # this runs before every timed trial's fresh inputs
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        for gen in torch.cuda.default_generators:
            gen.manual_seed(seed)
    else:
        torch.cuda.manual_seed_all(seed)  # queued until CUDA starts, as torch.manual_seed does
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % 2**32)


def _make_inputs(ns: dict, spec: list | None, device: str, seed: int, dtype: str | None = None) -> list:
    return cast_floating(_draw_inputs(ns, spec, device, seed), dtype)


def _draw_inputs(ns: dict, spec: list | None, device: str, seed: int) -> list:
    """The inputs for one set: from the spec, else from the problem's ``get_inputs()``.

    ``get_inputs()`` runs with ``device`` as torch's default device, so its factory calls
    (``torch.randn``...) draw on the GPU: drawing a large input on the CPU and copying it
    took most of a verification's time (seconds for a few hundred MB, with every worker's
    CPU threads competing). The reference and the candidate get their inputs the same way,
    from the same seed. A ``get_inputs()`` that fails on the device (it calls ``.numpy()``,
    say) is run on the CPU and its tensors moved, as KernelBench's harness does.
    """
    if spec is not None:
        return build_inputs(spec, device, seed)
    if device.startswith("cuda"):
        _seed_all(seed)
        try:
            with torch.device(device):
                xs = ns["get_inputs"]()
            return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]
        except Exception:
            pass
    _seed_all(seed)
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]


def _build(cls: type, init: list, device: str, seed: int, dtype: str | None = None) -> torch.nn.Module:
    _seed_all(seed)
    model = cls(*init).to(device)
    return model.to(getattr(torch, dtype)) if dtype else model


def _clone(xs: list) -> list:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in xs]


def _time(model: torch.nn.Module, xs: list, device: str, warmup: int, trials: int) -> dict[str, float]:
    """Median-of-trials timing of ``model(*xs)`` (:func:`curate.measure.timing.time_calls`:
    CUDA events, L2 flush, the device synchronized before each end event)."""
    flush = _timing.L2Flush(device) if device.startswith("cuda") else None

    def call():
        with torch.no_grad():
            return model(*xs)

    t = _timing.time_calls(call, device, trials, warmup, flush=flush)
    del flush
    return t


def _same_inputs(a: list, b: list) -> bool:
    return all(torch.equal(x, y) if isinstance(x, torch.Tensor) else True for x, y in zip(a, b))


#: Characters of an exception kept in a verdict's reason.
REASON_CHARS = 500


def _short(exc: BaseException) -> str:
    """An exception as a verdict quotes it, at most :data:`REASON_CHARS` characters.

    Triton's compile errors (``CompilationError`` and its subclasses, read by their ``src``,
    ``node`` and ``error_message`` attributes) print up to 12 lines of the kernel's source
    before the cause, so their first 500 characters often hold no cause at all; they are given
    as the location, the cause and the failing source line. Other long messages keep their
    head and their tail, where compilers and CUDA put the cause."""
    name = type(exc).__name__
    node, src = getattr(exc, "node", None), getattr(exc, "src", None)
    if hasattr(exc, "error_message") and hasattr(node, "lineno"):
        cause = exc.error_message or (repr(exc.__cause__) if exc.__cause__ is not None else "")
        lines = src.split("\n") if isinstance(src, str) else []
        where = lines[node.lineno - 1].strip() if 0 < node.lineno <= len(lines) else ""
        text = f"{name}: at {node.lineno}:{node.col_offset}: {cause}" + (f" (in `{where}`)" if where else "")
    else:
        text = f"{name}: {exc}"
    if len(text) <= REASON_CHARS:
        return text
    half = (REASON_CHARS - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def _sync(device: str) -> None:
    """Wait for the device, and raise a kernel launch error that nobody checked.

    A launch that fails its configuration (more shared memory or threads than a block may have)
    is not an asynchronous error: ``synchronize`` does not report it, and it waits in CUDA's
    per-thread last-error slot until the next launch checks it, which would be the verifier's
    own (its output comparison) and blamed on verification. A one-element launch here raises it
    where the caller attributes it to the forward just run. On CUDA, ``torch.AcceleratorError``.
    """
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.ones(1, device=device)  # torch checks the last error after its own launch


def _clear_launch_error(device: str) -> None:
    """Drop a launch error an earlier job of this worker left unread, so that it is not blamed
    on this job's reference (:func:`_sync` reads them after every forward; this is the guard
    for whatever ran outside one)."""
    try:
        _sync(device)
    except Exception:  # noqa: BLE001 - reading the error clears it; nothing to report here
        pass


def _use_triton_interpreter() -> None:
    """Make ``@triton.jit`` run kernels on CPU tensors (``TRITON_INTERPRET=1``).

    Triton decides at *import* time whether its own library kernels (``tl.zeros``,
    ``tl.sum``, ...) are interpreted. The sandbox's fork server imports triton before this
    variable is set, so its Python modules are dropped and imported again (the compiled
    extension ``triton._C`` stays: it cannot be loaded twice); this costs ~30 ms.
    """
    os.environ["TRITON_INTERPRET"] = "1"
    std = sys.modules.get("triton.language.standard")
    if std is None:
        return
    from triton.runtime.jit import JITFunction

    if any(isinstance(v, JITFunction) for v in vars(std).values()):
        for name in list(sys.modules):
            if (name == "triton" or name.startswith("triton.")) and not name.startswith("triton._C"):
                del sys.modules[name]
        import triton.language  # noqa: F401  (re-imported under the interpreter)


def verify_task(reference_code: str, candidate_code: str, cfg: dict[str, Any],
                cache: dict | None = None) -> dict[str, Any]:
    """Verify one candidate against one reference; see :func:`curate.verify.verify`.

    Args:
        cfg: ``device`` ("cpu"/"cuda"), ``seed``, ``n_trials``, ``init_args`` (list or None),
            ``input_spec`` (list or None), ``shape_variants`` (list of ``{"input_spec",
            "init_args"}``), ``tolerance`` (``[atol, rtol, rel_l2]`` or None), ``time_it``,
            ``inductor``, ``allow_compile``, ``warmup``, ``trials``, ``suspicious_speedup``.
        cache: a persistent worker's per-problem state (see :func:`serve`): the reference's
            loaded namespace and its timings are kept there across calls; its model, inputs
            and outputs are built afresh on every call (from that call's seed).
    Returns:
        A plain dict with the fields of :class:`curate.verify.VerifyResult` plus
        ``reference_error`` (bool: the reference itself failed).
    """
    device = cfg["device"]
    poison_host_allocations()
    if device == "cpu":
        _use_triton_interpreter()
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no compile pool in a sandbox
    res: dict[str, Any] = {
        "compiled": False, "correct": False, "speedup_vs_eager": None,
        "speedup_vs_inductor": None, "eager_ms": None, "inductor_ms": None,
        "candidate_ms": None, "reason": "", "reference_error": False,
        "details": {"device": device, "triton_interpret": device == "cpu", "seed": cfg["seed"]},
    }
    det = res["details"]
    det["phase_s"] = phases = {}
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        _clear_launch_error(device)
    with torch.no_grad():
        try:
            t0 = time.perf_counter()
            ref = _reference_phase(reference_code, cfg, device, det, cache)
            phases["reference"] = round(time.perf_counter() - t0, 4)
        except BaseException as exc:  # mined code may even raise SystemExit
            res.update(reference_error=True, reason=f"reference failed: {_short(exc)}")
            det["traceback"] = traceback.format_exc(limit=-4)[-2000:]
            _gpu_peak(det, device)
            return res
        res["eager_ms"], res["inductor_ms"] = ref["eager_ms"], ref["inductor_ms"]
        try:
            _candidate_phase(candidate_code, ref, cfg, device, ref["tol"], res)
        except _Fail as exc:
            res["reason"] = str(exc)
            res["correct"] = False
        except Exception as exc:  # e.g. an output object whose comparison raises
            res["reason"] = f"verification failed: {_short(exc)}"
            res["correct"] = False
            det["traceback"] = traceback.format_exc(limit=-4)[-2000:]
    _gpu_peak(det, device)
    return res


def _gpu_peak(det: dict, device: str) -> None:
    """``det["gpu_peak_bytes"]``: the most GPU memory the call's tensors held at once (bytes,
    torch's allocator; the reference's and the candidate's together), on CUDA."""
    if device.startswith("cuda"):
        try:
            det["gpu_peak_bytes"] = int(torch.cuda.max_memory_allocated())
        except Exception:  # a candidate may have left the device unusable; the verdict stands
            pass


def _problem_state(code: str, cfg: dict, device: str, cache: dict | None) -> dict[str, Any]:
    """The reference's loaded namespace and a slot for its timings, cached per problem."""
    if cache is None:
        return {"ns": load_problem(code, "reference"), "timings": {}}
    import hashlib

    key = hashlib.sha256(f"{device}\0{code}".encode()).hexdigest()
    state = cache.pop(key, None)  # re-inserted last: the dict is kept in LRU order
    if state is None:
        state = {"ns": load_problem(code, "reference"), "timings": {}}
    cache[key] = state
    while len(cache) > PROBLEMS_KEPT:
        cache.pop(next(iter(cache)))
    return state


#: Problems whose reference state one persistent worker keeps (least recently used go first).
PROBLEMS_KEPT = 16


def _reference_phase(code: str, cfg: dict, device: str, det: dict,
                     cache: dict | None = None) -> dict[str, Any]:
    state = _problem_state(code, cfg, device, cache)
    ns = state["ns"]
    init = list(cfg["init_args"]) if cfg.get("init_args") is not None else list(ns["get_init_inputs"]())
    seed, spec = cfg["seed"], cfg.get("input_spec")
    dtype = cfg.get("dtype")
    model = _build(ns["Model"], init, device, seed, dtype)
    sets = []  # input sets: (label, index, init args, input spec, seed)
    recorder = OpRecorder()
    for i in range(cfg["n_trials"]):
        sets.append(("trial", i, init, spec, seed + i))
    for j, v in enumerate(cfg.get("shape_variants") or []):
        v_init = list(v["init_args"]) if v.get("init_args") is not None else init
        sets.append(("held-out shape", j, v_init, v["input_spec"], seed + 100 + j))
    if cfg["time_it"]:  # timed calls are checked too, and once more after timing
        for k in range(TIMED_CHECKS + 1):
            sets.append(("probe", k, init, spec, seed + 200 + k))
    sealer = Sealer()
    done = []
    override = Tolerance(*cfg["tolerance"]) if cfg.get("tolerance") else None
    noise_key = repr(("noise", init, spec, dtype, override))
    for label, i, s_init, s_spec, s_seed in sets:
        m = model if s_init == init else _build(ns["Model"], s_init, device, seed, dtype)
        xs = _make_inputs(ns, s_spec, device, s_seed, dtype)
        pristine = _clone(xs)
        if label == "trial" and i == 0:
            with recorder:
                out = m(*xs)
        else:
            out = m(*xs)
        _sync(device)
        after = None if _same_inputs(xs, pristine) else _clone(xs)
        if label == "trial" and i == 0 and noise_key not in state["timings"]:
            # a property of the problem at this shape, like the margin below
            state["timings"][noise_key] = noise_tolerance(m, pristine, out, override)
        # a module may hand out a buffer it overwrites on the next call: sealing copies the
        # output, and the original is poisoned so no candidate allocation inherits the right
        # answer. Only the sealed copy is kept
        done.append({"label": label, "i": i, "init": s_init, "spec": s_spec, "seed": s_seed,
                     "out": sealer.seal(out, PROBE_HOST_BYTES if label == "probe" else None), "after": after,
                     "out_nbytes": [t.numel() * t.element_size() for t in output_tensors(out)]})
        poison_outputs(out, keep=list(m.parameters()) + list(m.buffers()))
        _sync(device)
        del out
        del xs, pristine
    constant = False
    tol = state["timings"].get(noise_key) or override
    if tol is not None and tol is not override:
        det["rounding_noise"] = ("the reference's output is rounding noise around zero (it differs from "
                                 "the same computation in float64 by more than the relative L2 bound): "
                                 "judged by the elementwise test alone")
    margin_key = repr(("margin", init, spec, dtype, cfg["n_trials"], tol))
    margin = state["timings"].get(margin_key)
    trial_outs = [d["out"] for d in done if d["label"] == "trial"]
    if margin is None and len(trial_outs) >= 2:
        # a property of the problem at this shape: the later calls of a persistent worker
        # reuse it (dozens of reductions, each a device synchronization, per call). The
        # outputs are opened one or two at a time, not all at once
        margin = state["timings"][margin_key] = constant_answer_margin(sealer.opened(trial_outs), tol)
    if margin is not None:
        det["constant_answer_margin"] = round(margin, 4) if margin != float("inf") else None
        constant = margin <= 1.0
    del trial_outs
    det["reference_ops"] = sorted(recorder.compute_ops())
    det["reference_mutates_inputs"] = any(d["after"] is not None for d in done)
    eager_ms = inductor_ms = None
    timing_key = repr((init, spec, dtype, cfg["warmup"], cfg["trials"], bool(cfg["inductor"])))
    cached = state["timings"].get(timing_key)
    if cfg["time_it"] and cached is not None:  # the baseline was timed by an earlier call
        eager_ms, inductor_ms = cached["eager_ms"], cached["inductor_ms"]
        det.update(cached["details"], reference_timing_cached=True)
    elif cfg["time_it"]:
        xs = _make_inputs(ns, spec, device, seed, dtype)
        t = _time(model, xs, device, cfg["warmup"], cfg["trials"])
        eager_ms = t["median_ms"]
        det["eager_timing"] = t
        if cfg["inductor"]:
            try:
                compiled = torch.compile(model)
                t = _time(compiled, xs, device, max(cfg["warmup"], 1), cfg["trials"])
                inductor_ms = t["median_ms"]
                det["inductor_timing"] = t
            except Exception as exc:  # the baseline failing must not sink the candidate
                det["inductor_error"] = _short(exc)
        del xs
        state["timings"][timing_key] = {
            "eager_ms": eager_ms, "inductor_ms": inductor_ms,
            "details": {k: det[k] for k in ("eager_timing", "inductor_timing", "inductor_error") if k in det}}
    return {"ns": ns, "init": init, "spec": spec, "ops": recorder.compute_counts(),
            "sets": [d for d in done if d["label"] != "probe"],
            "probes": [d for d in done if d["label"] == "probe"], "sealer": sealer,
            "constant": constant, "eager_ms": eager_ms, "inductor_ms": inductor_ms, "tol": tol}


#: A probe's reference output larger than this (bytes) waits in host memory: the probes are
#: read a few times per verification, and holding four more multi-GB outputs on the GPU beside
#: the input sets' would crowd out the workers sharing it.
PROBE_HOST_BYTES = 256 << 20


def _guard_snapshot() -> dict[str, int]:
    """Identities of what timing and comparison depend on: the clocks and torch functions of
    :func:`curate.verify.guards.snapshot`, and every function and class of the verifier's own
    modules (a candidate that replaces ``summarize`` or ``compare`` is caught)."""
    from curate.measure import stats as _stats
    from curate import problem as _problem
    from curate.verify import sealed as _sealed

    extra: dict[str, tuple[Any, str]] = {}
    for mod in (sys.modules[__name__], _correctness, _guards, _timing, _stats, _sealed, _problem):
        for attr, value in list(vars(mod).items()):
            if callable(value) and not attr.startswith("__"):
                extra[f"{mod.__name__.rsplit('.', 1)[-1]}.{attr}"] = (mod, attr)
    for cls in (Sealer, _timing.L2Flush, LaunchCounter):
        for attr, value in list(vars(cls).items()):
            if callable(value):
                extra[f"{cls.__name__}.{attr}"] = (cls, attr)
    return snapshot(extra)


def _candidate_phase(code: str, ref: dict, cfg: dict, device: str, tol: Tolerance | None,
                     res: dict[str, Any]) -> None:
    counter = LaunchCounter()
    counter.install()
    try:
        _candidate_checks(code, ref, cfg, device, tol, res, counter)
    finally:  # a persistent worker verifies again: its next call installs afresh
        counter.uninstall()


def _candidate_checks(code: str, ref: dict, cfg: dict, device: str, tol: Tolerance | None,
                      res: dict[str, Any], counter: LaunchCounter) -> None:
    det = res["details"]
    allow_compile = cfg["allow_compile"]
    det["launch_hooks"] = counter.installed
    before = _guard_snapshot()
    threads0 = python_threads()
    hooks0 = interpreter_hooks()

    def check_guards(where: str) -> None:
        changed = tampered(before, _guard_snapshot())
        if changed:
            raise _Fail(f"candidate replaced {', '.join(changed[:6])} ({where})")
        extra = python_threads() - threads0
        if extra > 0 and not allow_compile:
            raise _Fail(f"candidate left {extra} Python thread(s) running ({where})")
        if interpreter_hooks() != hooks0:
            raise _Fail("candidate left a torch function or dispatch mode, a trace or profile "
                        f"function or a garbage-collector callback active ({where})")

    phases = det.setdefault("phase_s", {})
    t0 = time.perf_counter()
    try:
        module = load_candidate(code)
    except CandidateLoadError as exc:
        raise _Fail(f"candidate failed to load: {exc}") from None
    check_guards("after loading")
    model_new = module.ModelNew
    models: dict[str, torch.nn.Module] = {}

    def model_for(init: list) -> torch.nn.Module:
        key = repr(init)
        if key not in models:
            try:
                models[key] = _build(model_new, init, device, cfg["seed"], cfg.get("dtype"))
            except Exception as exc:
                raise _Fail(f"ModelNew({', '.join(map(repr, init))}) raised {_short(exc)}") from None
        return models[key]

    model_for(ref["init"])
    dynamo_graphs0 = _dynamo_graphs()
    recorder = OpRecorder(counter)
    launches_total = 0
    errs: list[dict[str, float]] = []
    for n, s in enumerate(ref["sets"]):
        where = f"{s['label']} {s['i']}"
        m = model_for(s["init"])
        xs = _make_inputs(ref["ns"], s["spec"], device, s["seed"], cfg.get("dtype"))
        pristine = _clone(xs) if s["after"] is None else None
        poison_device_cache(device, s["out_nbytes"])
        c0 = counter.count
        side0 = counter.side_stream
        try:
            if n == 0 and not allow_compile:
                with recorder:
                    out = m(*xs)
            elif n == 1 and device.startswith("cuda") and not allow_compile:
                # a profiled forward names the stream of every kernel, extensions' too
                side = side_stream_kernels(lambda: m(*xs))
                out = side["out"]
                det["stream_check"] = {k: v for k, v in side.items() if k != "out"}
                if side.get("kernels_on_side_streams"):
                    raise _Fail("kernel launched on a side stream: "
                                + ", ".join(side["kernels_on_side_streams"][:3]))
            else:
                out = m(*xs)
            _sync(device)
        except _Fail:
            raise
        except BaseException as exc:  # untrusted code: SystemExit included
            if n == 0:
                res["compiled"] = False
                raise _Fail(f"forward raised {_short(exc)}") from None
            raise _Fail(f"forward raised on {where}: {_short(exc)}") from None
        if n == 0:
            res["compiled"] = True
            phases["candidate_first_forward"] = round(time.perf_counter() - t0, 4)  # JIT compiles
        if counter.side_stream > side0:
            raise _Fail(f"kernel launched on a side stream on {where}")
        launched = counter.count - c0
        launches_total += launched
        check_guards(where)
        if launched == 0:
            through_compile = allow_compile and _dynamo_graphs() > dynamo_graphs0
            if not through_compile:
                raise _Fail("no custom kernel launched" + (f" on {where}" if n else ""))
        cmp = _check_output(ref, s, out, tol, where)
        errs.append({"max_abs_err": cmp.max_abs_err, "rel_l2": cmp.rel_l2})
        if s["after"] is None:
            if not _same_inputs(xs, pristine):
                raise _Fail(f"candidate modified its inputs on {where}")
        else:
            c = compare(s["after"], xs, tol)
            if not c.ok:
                raise _Fail(f"inputs after forward differ from the reference's on {where}: {c.reason}")
        if n == 0 and not allow_compile:
            det["candidate_ops"] = sorted(recorder.compute_ops())
            if runs_reference_ops(ref["ops"], recorder.compute_counts()):
                raise _Fail("the reference's PyTorch operators (" + ", ".join(sorted(ref["ops"]))
                            + ") run outside the candidate's kernels, as often as in the reference")
        del xs, out
    for s in ref["sets"]:  # compared: timing needs only the probes' outputs
        s["out"] = s["after"] = None
    det["launches"] = launches_total
    det["errors"] = errs
    res["correct"] = True
    res["reason"] = "correct"
    phases["candidate_checks"] = round(time.perf_counter() - t0, 4)
    if ref["constant"]:
        # a kernel that writes the constant "wins" any race: correctness credit only
        res["reason"] = CONSTANT_REFERENCE + (ROUNDING_NOISE if "rounding_noise" in det else "")
        return
    if cfg["time_it"]:
        t1 = time.perf_counter()
        _time_candidate(ref, cfg, device, model_for(ref["init"]), res, tol, check_guards)
        check_guards("timing")
        phases["candidate_timing"] = round(time.perf_counter() - t1, 4)


#: The reason given to a correct candidate of a reference whose output does not depend on its
#: inputs: no speedup is measured or paid.
CONSTANT_REFERENCE = ("correct; no speedup credit: the reference's output does not depend on its inputs "
                      "(a constant answer passes the correctness check)")
#: Added to that reason where the reference's output is rounding noise around zero.
ROUNDING_NOISE = "; its output is rounding noise around zero, judged by the elementwise test alone"


def _check_output(ref: dict, s: dict, out: Any, tol: Tolerance | None, where: str):
    """Compare one forward's output with the sealed reference output of input set ``s``;
    raises :class:`_Fail` when it is not a plain tensor output or does not match."""
    try:
        expected = ref["sealer"].unseal(s["out"])
    except Tampered:
        raise _Fail(f"candidate overwrote the reference's output ({where})") from None
    why = output_problem(out, expected)
    if why:
        raise _Fail(f"{why} ({where})")
    cmp = compare(expected, out, tol)
    del expected
    if not cmp.ok:
        raise _Fail(f"wrong output on {where}: {cmp.reason}")
    return cmp


class _TimedInputs:
    """The inputs of a candidate's timed calls: fresh values before every timed trial, and at
    :data:`TIMED_CHECKS` trial positions drawn from the operating system's randomness the
    values of a probe set whose reference output was taken before the candidate ran; the
    output of those calls is checked after the call (outside the timed interval).

    So a candidate cannot compute only while it is checked (count its calls, watch for a
    new input pointer: the buffers stay the same, their values change), nor cache its output
    by an input fingerprint (every trial's values are new), nor return a stale buffer.
    """

    def __init__(self, ref: dict, cfg: dict, device: str, model: torch.nn.Module, xs: list,
                 tol: Tolerance | None) -> None:
        self.ref, self.cfg, self.device, self.model, self.xs, self.tol = ref, cfg, device, model, xs, tol
        self.probes = ref["probes"][:TIMED_CHECKS]
        self.rng = random.SystemRandom()
        self.sample: set[int] = set()
        self.pending: dict | None = None
        self.next_probe = 0
        self.out: Any = None
        self.checked = 0

    def call(self) -> Any:
        with torch.no_grad():
            self.out = self.model(*self.xs)
        return self.out

    def between(self, i: int, n: int) -> None:
        if self.pending is not None:
            probe, self.pending = self.pending, None
            _check_output(self.ref, probe, self.out, self.tol, f"timed call {self.checked}")
            self.checked += 1
        self.out = None
        if i >= n:
            return
        if i == 0:
            self.sample = set(self.rng.sample(range(n), min(len(self.probes), n)))
        if i in self.sample:
            self.pending = self.probes[self.next_probe % len(self.probes)]
            self.next_probe += 1
            seed = self.pending["seed"]
        else:
            seed = self.rng.randrange(2**31)
        fresh = _make_inputs(self.ref["ns"], self.ref["spec"], self.device, seed, self.cfg.get("dtype"))
        for k, (x, f) in enumerate(zip(self.xs, fresh)):
            if isinstance(x, torch.Tensor) and isinstance(f, torch.Tensor):
                if x.shape == f.shape and x.dtype == f.dtype:
                    x.copy_(f)
                else:
                    self.xs[k] = f


def _time_candidate(ref: dict, cfg: dict, device: str, model: torch.nn.Module, res: dict,
                    tol: Tolerance | None, check_guards) -> None:
    det = res["details"]
    eager_ms, inductor_ms = ref["eager_ms"], ref["inductor_ms"]  # not the dict the candidate could reach
    xs = _make_inputs(ref["ns"], ref["spec"], device, cfg["seed"], cfg.get("dtype"))
    timed = _TimedInputs(ref, cfg, device, model, xs, tol)
    try:
        t = _time_checked(timed, device, cfg)
    except _Fail:
        raise
    except Exception as exc:
        det["timing_error"] = _short(exc)
        return
    det["candidate_timing"] = t
    cand_ms = t["median_ms"]
    if eager_ms and cand_ms > 0 and eager_ms / cand_ms > cfg["suspicious_speedup"]:
        # an outsized speedup must survive a second timing on fresh inputs; keep the slower
        try:
            t2 = _time_checked(timed, device, cfg)
        except _Fail:
            raise
        except Exception as exc:
            det["timing_error"] = _short(exc)
            return
        det["candidate_retiming"] = t2
        cand_ms = max(cand_ms, t2["median_ms"])
    det["timed_calls_checked"] = timed.checked
    _final_check(ref, cfg, device, model, tol)
    check_guards("after the final check")
    res["candidate_ms"] = cand_ms
    res["eager_ms"], res["inductor_ms"] = eager_ms, inductor_ms
    if cand_ms > 0:
        if eager_ms:
            res["speedup_vs_eager"] = eager_ms / cand_ms
        if inductor_ms:
            res["speedup_vs_inductor"] = inductor_ms / cand_ms


def _time_checked(timed: _TimedInputs, device: str, cfg: dict) -> dict[str, float]:
    """:func:`_time` of the candidate with :class:`_TimedInputs` between its trials."""
    flush = _timing.L2Flush(device) if device.startswith("cuda") else None
    t = _timing.time_calls(timed.call, device, cfg["trials"], cfg["warmup"], flush=flush,
                           between=timed.between)
    del flush
    return t


def _final_check(ref: dict, cfg: dict, device: str, model: torch.nn.Module, tol: Tolerance | None) -> None:
    """One more forward after timing, on new input tensors with values never shown before,
    compared with the reference (a candidate that stops computing once timed fails here)."""
    probe = ref["probes"][TIMED_CHECKS]
    xs = _make_inputs(ref["ns"], probe["spec"], device, probe["seed"], cfg.get("dtype"))
    pristine = _clone(xs) if probe["after"] is None else None
    try:
        out = model(*xs)
        _sync(device)
    except BaseException as exc:  # untrusted code: SystemExit included
        raise _Fail(f"forward raised on the check after timing: {_short(exc)}") from None
    _check_output(ref, probe, out, tol, "the check after timing")
    if pristine is not None and not _same_inputs(xs, pristine):
        raise _Fail("candidate modified its inputs on the check after timing")


def _dynamo_graphs() -> int:
    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is None:
        return 0
    return int(dynamo.counters["stats"]["unique_graphs"])


def serve(conn, device: str, env: dict[str, str] | None = None, threads: int | None = None) -> None:
    """A persistent verification worker's loop (run by :meth:`curate.sandbox.Sandbox.start_worker`).

    Each request is ``(reference_code, candidate_code, cfg)`` (as for :func:`verify_task`);
    None ends the loop. The answer is ``("ok", {"result": <verify_task dict>, "retire": [...]},
    "")``: ``retire`` lists what the candidate left changed in this process
    (:func:`curate.verify.guards.process_state`): a replaced torch function, a global
    setting, a thread, a pushed mode. The pool then stops this worker, so no candidate can
    influence a later call's reference. The CUDA context, Triton's and Inductor's in-memory
    caches and each problem's loaded reference and baseline timings stay across calls.

    ``env`` is set before CUDA starts (``CUDA_VISIBLE_DEVICES``: the GPU this worker uses);
    each answer names the devices the worker sees (``visible_devices``). ``threads``: torch's
    intra-op CPU threads in this worker (None: the sandbox's one).
    """
    entered_at = time.time()
    cache: dict = {}
    if threads:  # several workers share the host's cores
        torch.set_num_threads(threads)
    os.environ.update(env or {})
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if device.startswith("cuda"):
        torch.cuda.init()
    elif device == "cpu":
        _use_triton_interpreter()
    startup = {"entered_at": entered_at, "cuda_init_s": round(time.time() - entered_at, 4)}
    poison_host_allocations()
    baseline = None
    while True:
        request = conn.recv()
        if request is None:
            return
        reference_code, candidate_code, cfg = request
        if baseline is None:
            baseline = _guards.process_state()
        try:
            result = verify_task(reference_code, candidate_code, cfg, cache)
            if startup is not None:  # where a cold first call's time went
                result["details"]["worker_startup"], startup = startup, None
        except MemoryError as exc:
            conn.send(("memory", None, f"MemoryError: {exc}"))
            return
        except BaseException as exc:  # untrusted code: the worker cannot be trusted after this
            conn.send(("error", None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)[-2000:]}"))
            return
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        retire = _guards.changed(baseline, _guards.process_state())
        conn.send(("ok", {"result": result, "retire": retire, "visible_devices": visible}, ""))
        if retire:
            return
