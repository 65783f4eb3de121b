"""Mining yield on real package source (PyPI wheels, cached in ~/.cache/curate): dependency
closure across files and packages, torch-only stand-ins, configuration classes with concrete
values, argument and shape deduction, and the reasons modules are rejected."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from curate.mine import default_cache, shims
from curate.mine.closure import ClosureError, Resolver, rename_globals
from curate.mine.deps import dependency_roots
from curate.mine.sources import resolve
from curate.mine.synthesize import SynthesisError, synthesize
from curate.problem import exec_source, load_problem

CACHE = default_cache()

# Packages a mined problem must not need: it runs with torch, numpy and the standard library alone.
BLOCKED = ["einops", "einx", "transformers", "timm", "torchvision", "huggingface_hub", "packaging",
           "vit_pytorch", "x_transformers", "torchgeo", "diffusers", "local_attention", "safetensors",
           "monai", "peft", "accelerate", "beartype", "jaxtyping"]
_RUN_ALONE = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = set(%r)
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is not available to a mined problem")
    sys.meta_path.insert(0, Block())
    import importlib.util
    _find_spec = importlib.util.find_spec
    # a probe (``importlib.util.find_spec("accelerate")``) sees the package as not installed
    importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] in BLOCKED else _find_spec(name, *a)
    for name in list(sys.modules):
        if name.split(".")[0] in BLOCKED:
            del sys.modules[name]
    import linecache, torch
    code = sys.stdin.read()
    # as curate.problem.exec_source: the source is readable (TorchScript and Triton read it)
    linecache.cache["<problem>"] = (len(code), None, code.splitlines(keepends=True), "<problem>")
    ns = {"__name__": "__main__"}
    exec(compile(code, "<problem>", "exec"), ns)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    out = model(*ns["get_inputs"]())
    print("OK", type(out).__name__)
""") % (BLOCKED,)


def run_alone(code: str) -> None:
    """Run a problem file in a fresh interpreter where the mined packages cannot be imported."""
    p = subprocess.run([sys.executable, "-c", _RUN_ALONE], input=code, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and p.stdout.startswith("OK"), p.stderr[-2000:]


def imported(code: str) -> set[str]:
    """Top-level packages a problem file imports at module level (a guarded import inside a
    method, such as transformers' optional CUDA kernels, is the mined code's own business)."""
    out = set()
    for n in ast.parse(code).body:
        if isinstance(n, ast.Import):
            out |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            out.add(n.module.split(".")[0])
    return out


def pypi(name: str, version: str, deps: list[dict] | None = None) -> Resolver:
    entry = {"kind": "pypi", "name": name, "version": version, "deps": deps or []}
    source = resolve(entry, CACHE)
    return Resolver(source.root, {}, source.importable, dependency_roots(entry, CACHE))


def mine(resolver: Resolver, module: str, cls: str, budget_s: float = 60.0) -> dict:
    closure = resolver.closure(module, cls)
    return synthesize(closure.source, cls, f"test: {module}.{cls}", budget_s)


# --------------------------------------------------------------------------- einops
def _load_einops_standin():
    spec = importlib.util.spec_from_file_location("standin_einops", Path(__file__).resolve().parents[1]
                                                  / "curate" / "mine" / "shims" / "einops.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _einops_calls(roots: list[Path]) -> set[tuple[str, str, tuple[str, ...], str]]:
    """(function, pattern, axis keywords, reduction) of every literal einops call in the files."""
    calls = set()
    for root in roots:
        for f in root.rglob("*.py"):
            try:
                tree = ast.parse(f.read_text())
            except SyntaxError:
                continue
            for n in ast.walk(tree):
                if not isinstance(n, ast.Call):
                    continue
                fn = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
                if fn not in ("rearrange", "repeat", "reduce", "Rearrange", "Reduce"):
                    continue
                strs = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                pats = [s for s in strs if "->" in s]
                if pats:
                    red = [s for s in strs if "->" not in s]
                    calls.add((fn.lower(), pats[0], tuple(sorted(k.arg for k in n.keywords if k.arg)),
                               red[0] if red else "mean"))
    return calls


def test_einops_standin_matches_einops_on_every_literal_call_in_real_packages():
    einops = pytest.importorskip("einops")
    ours = _load_einops_standin()
    roots = [resolve({"kind": "pypi", "name": n, "version": v}, CACHE).root
             for n, v in [("x-transformers", "2.31.10"), ("vit-pytorch", "1.26.11"),
                          ("denoising-diffusion-pytorch", "2.3.4"), ("perceiver-pytorch", "0.11.0")]]
    calls = _einops_calls(roots)
    assert len(calls) > 200  # distinct patterns/keyword sets used by these four libraries
    checked = 0
    for fn, pattern, kws, reduction in sorted(calls):
        left, right = pattern.split("->")
        lg, rg = ours._einops_parse(left), ours._einops_parse(right)
        sizes, counter = {}, itertools.count(2)
        names = [a for g in lg + rg for a in g if a != "..." and not a.isdigit()]
        for a in names:
            sizes.setdefault(a, next(counter) % 5 + 2)
        shape = []
        for g in lg:
            if tuple(g) == ("...",):
                shape += [2, 3]
                continue
            shape.append(__import__("math").prod(int(a) if a.isdigit() else 6 if a == "..." else sizes[a]
                                                 for a in g))
        left_names = {a for g in lg for a in g}
        kw = {k: sizes[k] for k in kws if k in sizes}
        kw.update({a: sizes[a] for a in names if a not in left_names})
        x = torch.randn(shape)
        args = (reduction,) if fn == "reduce" else ()
        try:
            want = getattr(einops, fn)(x, pattern, *args, **kw)
        except Exception:
            continue  # a call this synthetic shape cannot satisfy (einops refuses it too)
        got = getattr(ours, fn)(x, pattern, *args, **kw)
        assert got.shape == want.shape and torch.equal(got, want), (fn, pattern, kw)
        checked += 1
    assert checked >= 0.95 * len(calls)


def test_einops_standin_pack_unpack_einsum_and_layers_match_einops():
    einops = pytest.importorskip("einops")
    from einops.layers.torch import Rearrange, Reduce

    ours = _load_einops_standin()
    a, b = torch.randn(2, 5, 8), torch.randn(2, 3, 4, 8)
    want, ws = einops.pack([a, b], "b * d")
    got, gs = ours.pack([a, b], "b * d")
    assert torch.equal(got, want) and [tuple(s) for s in gs] == [tuple(s) for s in ws]
    for u, v in zip(ours.unpack(got, gs, "b * d"), einops.unpack(want, ws, "b * d")):
        assert torch.equal(u, v)
    q, k = torch.randn(2, 4, 7, 16), torch.randn(2, 4, 9, 16)
    pattern = "b h i d, b h j d -> b h i j"  # x-transformers' attention scores
    assert torch.allclose(ours.einsum(q, k, pattern), einops.einsum(q, k, pattern))
    assert ours.parse_shape(q, "b h _ d") == einops.parse_shape(q, "b h _ d")
    img = torch.randn(2, 3, 32, 32)
    layers = __import__("curate.mine.shims", fromlist=["path"])
    spec = importlib.util.spec_from_file_location("standin_layers", layers.path("einops.layers.torch"))
    assert spec is not None
    for p in ["b c (h p1) (w p2) -> b (h w) (p1 p2 c)"]:
        ns = {"_einops_apply": ours._einops_apply}
        exec(compile(textwrap.dedent(layers.path("einops.layers.torch").read_text()).replace(
            "from einops import _einops_apply", ""), "layers", "exec"), ns)
        assert torch.equal(ns["Rearrange"](p, p1=4, p2=4)(img), Rearrange(p, p1=4, p2=4)(img))
        assert torch.equal(ns["Reduce"]("b c h w -> b c", "max")(img), Reduce("b c h w -> b c", "max")(img))
    with pytest.raises(ValueError):
        ours.rearrange(img, "b c h -> b c h")  # rank mismatch is an error, as in einops


def test_vit_pytorch_vit_is_mined_with_einops_inlined_and_an_image_input():
    prob = mine(pypi("vit-pytorch", "1.26.11"), "vit_pytorch.vit", "ViT")
    code = prob["code"]
    assert "einops" not in imported(code)
    assert "def _einops_apply" in code and "class Rearrange" in code
    spec = prob["input_spec"][0]
    assert spec["kind"] == "tensor" and len(spec["shape"]) == 4 and spec["shape"][0] == 8
    assert spec["shape"][2] == spec["shape"][3] >= 32  # an image of the size the constructor was given
    run_alone(code)


# --------------------------------------------------------------------------- transformers
@pytest.fixture(scope="module")
def transformers_resolver() -> Resolver:
    return pypi("transformers", "5.23.0")


def test_transformers_decoder_layer_is_mined_with_a_scaled_concrete_config(transformers_resolver):
    """LlamaDecoderLayer(config, layer_idx): the configuration class travels with the layer
    (its base is a stand-in), is built from a dict of scaled values, and the rotary (cos, sin)
    pair the layer expects becomes two inputs."""
    prob = mine(transformers_resolver, "transformers.models.llama.modeling_llama", "LlamaDecoderLayer")
    code = prob["code"]
    assert "class LlamaConfig(PreTrainedConfig)" in code
    assert imported(code) <= {"__future__", "torch", "typing", "typing_extensions", "types", "math",
                              "collections", "functools", "dataclasses", "copy", "logging", "inspect",
                              "re", "warnings", "abc", "enum", "itertools", "os", "sys", "contextlib"}
    config, layer_idx = prob["init_args"]
    # Llama's defaults are 4096 wide with 32 heads of 128: width 512 keeps the head size
    assert config["hidden_size"] == 512 and config["num_attention_heads"] == 4
    assert config["num_hidden_layers"] <= 2 and layer_idx == 0
    hidden, cos, sin = prob["input_spec"]
    assert hidden["shape"] == [8, 128, 512] and cos["shape"] == sin["shape"] == [8, 128, 128]
    assert "position_embeddings=(position_embeddings_0, position_embeddings_1)" in code
    run_alone(code)


def test_transformers_composite_copies_its_auto_sub_models(transformers_resolver):
    """VideoLlavaModel builds its vision tower and language model with ``AutoModel.from_config``
    on sub-configurations of model types "clip_vision_model" and "llama": the closure copies
    CLIPVisionConfig/CLIPVisionModel and LlamaConfig/LlamaModel, the stand-in finds them by model
    type, and the sub-configurations are scaled from their own values."""
    prob = mine(transformers_resolver, "transformers.models.video_llava.modeling_video_llava", "VideoLlavaModel")
    code = prob["code"]
    assert "class LlamaModel(" in code and "class CLIPVisionModel(" in code and "import transformers" not in code
    (config,) = prob["init_args"]
    assert config["text_config"]["model_type"] == "llama" and config["text_config"]["hidden_size"] <= 512
    assert config["vision_config"]["num_hidden_layers"] <= 2
    run_alone(code)


def test_transformers_unannotated_config_and_model_output(transformers_resolver):
    """BertLayer takes an unannotated ``config``: the file's BertConfig is found by name, its
    dropout set to 0 so the problem is deterministic."""
    prob = mine(transformers_resolver, "transformers.models.bert.modeling_bert", "BertLayer")
    (config,) = prob["init_args"]
    assert config["hidden_dropout_prob"] == 0.0 and config["attention_probs_dropout_prob"] == 0.0
    assert prob["input_spec"][0]["shape"] == [8, 128, 768]
    run_alone(prob["code"])


def test_transformers_whole_model_runs_on_token_ids(transformers_resolver):
    prob = mine(transformers_resolver, "transformers.models.llama.modeling_llama", "LlamaForCausalLM")
    spec = prob["input_spec"][0]
    assert spec["kind"] == "index" and spec["high"] == prob["init_args"][0]["vocab_size"] == 1024
    run_alone(prob["code"])


def test_generic_head_builds_its_family_base_model_through_automodel(transformers_resolver):
    """transformers 5's ``GenericForTokenClassification`` heads build the base model with
    ``AutoModel.from_config(config)``: the closure copies ``LlamaModel`` and ``LlamaConfig``
    beside the head, and the AutoModel stand-in builds it; a missing padding id is set so the
    classification head can find each row's last token."""
    mod = "transformers.models.llama.modeling_llama"
    for cls in ("LlamaForTokenClassification", "LlamaForSequenceClassification"):
        prob = mine(transformers_resolver, mod, cls)
        assert "class LlamaModel(" in prob["code"] and "class LlamaConfig(" in prob["code"]
        assert prob["input_spec"][0]["kind"] == "index"
        run_alone(prob["code"])


def test_transformers_logger_standin_warns_once(caplog):
    spec = importlib.util.spec_from_file_location("standin_logging", Path(__file__).resolve().parents[1]
                                                  / "curate" / "mine" / "shims" / "transformers_utils_logging.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    log = mod.get_logger("curate.test.once")
    with caplog.at_level("INFO", logger="curate.test.once"):
        for _ in range(3):
            log.warning_once("cache is not supported")
            log.info_once("eager attention")
        log.warning("every time")
        log.warning("every time")
    assert [r.getMessage() for r in caplog.records] == ["cache is not supported", "eager attention",
                                                        "every time", "every time"]


# --------------------------------------------------------------------------- closure
def test_clashing_definitions_from_two_files_are_both_kept_renamed(tmp_path: Path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import torch\nSCALE = 2.0\ndef helper(x):\n    return x * SCALE\n")
    (pkg / "b.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn
        from .a import helper as scale_a
        SCALE = 3.0
        def helper(x):
            return x + SCALE
        class Both(nn.Module):
            def forward(self, x, SCALE=None):
                return helper(x) + scale_a(x)
    """))
    src = Resolver(tmp_path, {}).closure("pkg.b", "Both").source
    ns: dict = {}
    exec(compile(src, "both", "exec"), ns)
    assert ns["Both"]()(torch.ones(1)).item() == 4.0 + 2.0
    # a.helper takes the name b imports it under; a.SCALE is renamed; the parameter is untouched
    assert "def scale_a(x):\n    return x * SCALE_2" in src and "SCALE=None" in src


def test_a_clashing_dunder_global_keeps_its_dunder_form(tmp_path: Path):
    """Two files' ``__version__``: the second is renamed ``__version_2__``, not ``__version___2``,
    which Python would name-mangle inside a class body (peft's configs read it there)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("__version__ = '1.0'\ndef va():\n    return __version__\n")
    (pkg / "b.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn
        from .a import va
        __version__ = '2.0'
        class Versioned(nn.Module):
            version = __version__
            def forward(self, x):
                return x * float(self.version) + float(va())
    """))
    src = Resolver(tmp_path, {}).closure("pkg.b", "Versioned").source
    ns: dict = {}
    exec(compile(src, "versioned", "exec"), ns)
    assert ns["Versioned"]()(torch.ones(1)).item() == 2.0 + 1.0
    assert "__version_2__" in src and "__version___2" not in src


def test_transformers_version_reads_resolve_to_the_standin(tmp_path: Path):
    """``import transformers; transformers.__version__`` (peft's import-time checks) reads the
    stand-in's version; base classes imported from the top (``PreTrainedModel``) are the
    stand-ins'; a name the stand-in lacks stays a placeholder raising ImportError."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(textwrap.dedent("""
        import torch
        import transformers
        from transformers import AutoTokenizer, PreTrainedModel
        NEW = int(transformers.__version__.split(".")[0]) >= 5
        class Gate(torch.nn.Module):
            def forward(self, x):
                return x * 2 if NEW else x
            def tokenizer(self):
                return AutoTokenizer()
        class Head(PreTrainedModel):
            def forward(self, x):
                return x
    """))
    src = Resolver(tmp_path, {}).closure("pkg.m", "Gate").source
    ns: dict = {}
    exec(compile(src, "gate", "exec"), ns)
    assert ns["Gate"]()(torch.ones(1)).item() == 2.0
    with pytest.raises(ImportError):
        ns["Gate"]().tokenizer()
    src = Resolver(tmp_path, {}).closure("pkg.m", "Head").source
    ns = {}
    exec(compile(src, "head", "exec"), ns)
    assert ns["Head"](config="cfg").config == "cfg"


def test_beartype_and_jaxtyping_resolve_to_standins(tmp_path: Path):
    """lucidrains' libraries decorate with ``@beartype`` and annotate with jaxtyping's
    ``Float[Tensor, "b n"]``: both resolve to stand-ins, so the problem needs neither."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn, Tensor
        from beartype import beartype
        from beartype.typing import Optional
        from beartype.door import is_bearable
        from jaxtyping import Float, jaxtyped

        @beartype
        def scale(x: Float[Tensor, "b n"], by: Optional[float] = None) -> Tensor:
            return x * (by or 2.0)

        class Scaled(nn.Module):
            @jaxtyped(typechecker=beartype)
            def forward(self, x: Float[Tensor, "b n"]):
                return scale(x) if is_bearable(x, Tensor) else x
    """))
    src = Resolver(tmp_path, {}).closure("pkg.m", "Scaled").source
    assert not imported(src) & {"beartype", "jaxtyping"}
    ns: dict = {}
    exec(compile(src, "scaled", "exec"), ns)
    assert ns["Scaled"]()(torch.ones(2, 3)).sum().item() == 12.0


def test_registrations_into_a_copied_factory_are_copied_too():
    """monai's layer factories fill ``Act``, ``Conv``, ``Norm`` at import time
    (``Act.add_factory_class(...)``, ``@Conv.factory_function("conv")``); nothing reads those
    statements by name, yet ``Act.PRELU`` fails without them. The mined SegResNet holds them
    and runs with monai absent."""
    resolver = pypi("monai", "1.6.1")
    closure = resolver.closure("monai.networks.nets.segresnet", "SegResNet")
    assert "Act.add_factory_class(" in closure.source and "@Conv.factory_function(" in closure.source
    prob = synthesize(closure.source, "SegResNet", "test: monai SegResNet", 60.0)
    assert "monai" not in imported(prob["code"])
    run_alone(prob["code"])


def test_peft_adapter_layer_with_transformers_version_checks_and_hub_mixin():
    """peft derives configs from ``transformers.utils.PushToHubMixin`` (a stand-in now), and an
    adapter layer gets the kind of layer it wraps (``base_layer``) built in the problem."""
    resolver = pypi("peft", "0.21.2")
    closure = resolver.closure("peft.tuners.fourierft.layer", "FourierFTLinear")
    assert "class PushToHubMixin" in closure.source
    prob = synthesize(closure.source, "FourierFTLinear", "test: peft FourierFTLinear", 60.0)
    assert "torch.nn.Linear(" in prob["code"] and not imported(prob["code"]) & {"peft", "transformers"}
    run_alone(prob["code"])


def test_rename_globals_leaves_locals_attributes_and_keywords_alone():
    code = textwrap.dedent("""
        def f(x):
            y = x.logger + logger.level
            def g(logger):
                return logger
            return g(logger=logger)
    """)
    out = rename_globals(code, {"logger": "logger_2"})
    assert "x.logger" in out and "logger_2.level" in out and "def g(logger)" in out
    assert "g(logger=logger_2)" in out


def test_cross_package_dependency_is_copied_with_provenance():
    """torchgeo builds on timm's layers: with timm as a declared dependency the timm code is
    copied, and the problem says where it comes from."""
    resolver = pypi("torchgeo", "0.8.1", [{"name": "timm", "version": "1.0.31"},
                                          {"name": "torchvision", "version": "0.29.1"}])
    closure, found = None, None
    for path in sorted((resolver.root / "torchgeo" / "models").glob("*.py")):
        mod = f"torchgeo.models.{path.stem}"
        idx = resolver.load(mod)
        for cls in (idx.classes if idx else {}):
            if not resolver.is_module_class(mod, cls):
                continue
            try:
                closure = resolver.closure(mod, cls)
            except ClosureError:
                continue
            if "# includes code from timm 1.0.31" in closure.source:
                found = (mod, cls)
                break
        if found:
            break
    assert found, "no torchgeo class copies timm code"
    assert not imported(closure.source) & {"timm", "torchvision"}


def test_packaging_version_checks_resolve_to_the_standin():
    prob = mine(pypi("denoising-diffusion-pytorch", "2.3.4"),
                "denoising_diffusion_pytorch.attend", "Attend")
    assert "packaging" not in imported(prob["code"])
    run_alone(prob["code"])


def test_typeguard_decorated_espnet_layer_resolves_to_the_standin():
    """espnet decorates its constructors with typeguard's ``@typechecked``."""
    resolver = pypi("espnet", "202611")
    closure = resolver.closure("espnet2.layers.utterance_mvn", "UtteranceMVN")
    assert "@typechecked" in closure.source and "typeguard" not in imported(closure.source)
    prob = synthesize(closure.source, "UtteranceMVN", "test: espnet UtteranceMVN", 60.0)
    run_alone(prob["code"])


def test_braindecode_and_alphafold3_import_time_helpers_resolve_to_standins():
    """braindecode's model base needs pydantic's import-string adapter, docstring_inheritance's
    metaclass and mne's ``_soft_import``/``warn`` at import time; alphafold3-pytorch reads its
    switches with environs' ``Env``. Both mine to problems that run with none of them."""
    eeg = pypi("braindecode", "1.8.1").closure("braindecode.models.eegnet", "EEGNet")
    af3 = pypi("alphafold3-pytorch", "0.8.3").closure("alphafold3_pytorch.alphafold3", "Transition")
    assert "env = Env()" in af3.source
    for closure, banned in [(eeg, {"pydantic", "mne", "docstring_inheritance"}), (af3, {"environs"})]:
        assert not imported(closure.source) & banned
        prob = synthesize(closure.source, closure.class_name, "test: stand-ins", 60.0)
        run_alone(prob["code"])


def _standin(module: str):
    spec = importlib.util.spec_from_file_location(module.replace(".", "_") + "_standin", shims.path(module))
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    return standin


def test_decorator_and_pydantic_standins_behave_as_the_packages_document(monkeypatch):
    decorator = _standin("decorator").decorator
    calls = []

    def caller(func, *args, **kwargs):
        calls.append(args)
        return func(*args, **kwargs) + 1

    @decorator(caller)
    def add(a, b=2):
        """adds"""
        return a + b

    assert add(1) == 4 and add(1, b=5) == 7 and calls == [(1,), (1,)] and add.__doc__ == "adds"
    assert decorator(caller, lambda: 1)() == 2
    pydantic = _standin("pydantic")
    adapter = pydantic.TypeAdapter(pydantic.ImportString)
    assert adapter.validate_python("torch.nn.ELU") is torch.nn.ELU
    with pytest.raises(pydantic.ValidationError):
        adapter.validate_python("os.system")
    env = _standin("environs").Env()
    monkeypatch.setenv("CURATE_TEST_FLAG", "yes")
    assert env.bool("CURATE_TEST_FLAG", False) is True and env.bool("CURATE_TEST_UNSET", False) is False
    assert env.int("CURATE_TEST_UNSET", 3) == 3


def test_packaging_utils_standin_normalizes_names_as_packaging_does():
    from packaging.utils import canonicalize_name

    standin = _standin("packaging.utils")
    for name in ["torch_geometric", "Torch-Geometric", "cupy-cuda12x", "a.B__c--d", "nvidia.physicsnemo", "X"]:
        assert standin.canonicalize_name(name) == canonicalize_name(name)


# --------------------------------------------------------------------------- reject reasons
def _synth(src: str, cls: str) -> str:
    try:
        synthesize("import torch\nfrom torch import nn\n" + textwrap.dedent(src), cls, "t", 10)
    except Exception as exc:
        return getattr(exc, "reason", type(exc).__name__)
    return "kept"


def test_reject_reasons_are_specific():
    assert _synth("""
        class Noisy(nn.Module):
            def forward(self, x):
                return x + torch.randn_like(x)
    """, "Noisy") == "random_output"
    assert _synth("""
        class NeedsWeights(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.load("checkpoints/model.pt")
            def forward(self, x):
                return x
    """, "NeedsWeights") == "needs_data_files"
    assert _synth("""
        import urllib.request
        class Downloads(nn.Module):
            def __init__(self):
                super().__init__()
                urllib.request.urlopen("http://203.0.113.1/w.bin", timeout=0.5)
            def forward(self, x):
                return x
    """, "Downloads") == "needs_network"
    assert _synth("""
        class Base(nn.Module):
            def forward(self, x):
                raise NotImplementedError
    """, "Base") == "abstract"
    assert _synth("""
        class Drop(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(64, 64)
                self.drop = nn.Dropout(0.5)
            def forward(self, x):
                return self.drop(self.lin(x))
    """, "Drop") == "kept"  # fixed dropout: the problem is put in eval mode


def test_mined_code_imports_only_what_a_problem_may_import_whatever_is_installed():
    """scipy is installed here (a test dependency's dependency), yet a problem may not import
    it: a method's ``import scipy`` fails as it would where only torch and numpy are, and an
    optional import takes its fallback. torch's own lazy imports still work."""
    pytest.importorskip("scipy")
    assert _synth("""
        class Special(nn.Module):
            def forward(self, x):
                import scipy.special
                return x * float(scipy.special.gamma(3.0))
    """, "Special") == "import_missing"
    prob = synthesize(textwrap.dedent("""
        import torch
        from torch import nn
        class Fallback(nn.Module):
            def forward(self, x):
                try:
                    import scipy.special
                    return x * float(scipy.special.gamma(3.0))
                except ImportError:
                    return x.sum(-1)  # the fallback: one dimension fewer
    """), "Fallback", "t", 20)
    assert len(prob["output_shapes"][0]) == len(prob["input_spec"][0]["shape"]) - 1
    probe = synthesize(textwrap.dedent("""
        import importlib.util
        import torch
        from torch import nn
        class Probe(nn.Module):
            def forward(self, x):  # an availability check answers as where scipy is absent
                return x if importlib.util.find_spec("scipy") is None else x.sum(-1)
    """), "Probe", "t", 20)
    assert len(probe["output_shapes"][0]) == len(probe["input_spec"][0]["shape"])
    assert _synth("""
        class Lazy(nn.Module):
            def forward(self, x):
                return torch.fft.rfft(x).abs()  # torch imports its own modules as it goes
    """, "Lazy") == "kept"


def test_string_choices_and_callables_are_guessed():
    prob = synthesize(textwrap.dedent("""
        import torch
        from torch import nn
        class Pool(nn.Module):
            def __init__(self, dim, mode, act_layer):
                super().__init__()
                assert mode in ("avg", "max"), mode
                self.mode = mode
                self.proj = nn.Linear(dim, dim)
                self.act = act_layer()
            def forward(self, x):
                y = self.act(self.proj(x))
                return y.mean(1) if self.mode == "avg" else y.amax(1)
    """), "Pool", "t", 10)
    assert prob["init_args"] == [64, "avg"]
    assert "act_layer=torch.nn.GELU" in prob["code"]
    run_alone(prob["code"])


# --------------------------------------------------------------------------- through the stage
def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_stage_copies_manifest_deps_and_keeps_both_kinds_of_network_reason(tmp_path: Path, monkeypatch):
    """`curate mine` follows imports into a source's manifest ``deps`` (scan and closure get
    their roots), with provenance; in the guarded sandbox an actual connection is refused as
    ``network``, while a stand-in that declines to download gives ``needs_network`` and a
    missing weights file ``needs_data_files``."""
    from curate.mine import stage
    from curate.table import read_problems, read_rejected

    dep = tmp_path / "dep"
    _write(dep, "helperlib/__init__.py", "")
    _write(dep, "helperlib/ops.py", """
        import torch
        def double(x):
            return torch.tanh(x) * 2
    """)
    src = tmp_path / "repo"
    _write(src, "pkg/__init__.py", "")
    _write(src, "pkg/layers.py", """
        import socket
        import torch
        from torch import nn
        from helperlib.ops import double
        from huggingface_hub import hf_hub_download

        class Doubler(nn.Module):
            def forward(self, x):
                return double(x)

        class FromHub(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.load(hf_hub_download("org/model", "w.pt"))
            def forward(self, x):
                return x

        class LoadsWeights(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.load("checkpoints/model.pt")
            def forward(self, x):
                return x

        class Connects(nn.Module):
            def forward(self, x):
                try:
                    socket.socket().connect(("127.0.0.1", 9))
                except OSError:
                    pass
                return x
    """)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"sources:\n  - {{kind: dir, name: repo, path: {src}, "
                        f"deps: [{{name: helperlib, version: '1.0'}}]}}\n")
    seen = []

    def roots(entry, cache):
        seen.append(entry.get("deps"))
        return [(dep, "helperlib 1.0 (MIT)")]

    monkeypatch.setattr(stage, "dependency_roots", roots)
    stats = stage.run(manifest, tmp_path / "out", workers=2, timeout_s=30, mem_mb=2048)
    assert seen == [[{"name": "helperlib", "version": "1.0"}]]
    assert stats["in"] == stats["kept"] + stats["rejected"] == 4
    kept = read_problems(tmp_path / "out" / "mine")
    assert kept["name"].to_list() == ["repo.Doubler"]
    code = kept["code"][0]
    assert "# includes code from helperlib 1.0 (MIT): helperlib.ops" in code and "def double(x)" in code
    assert "helperlib" not in imported(code)
    run_alone(code)
    rej = read_rejected(tmp_path / "out" / "mine")
    reasons = dict(zip(rej["name"].to_list(), rej["reject_reason"].to_list()))
    assert reasons == {"repo.FromHub": "needs_network", "repo.LoadsWeights": "needs_data_files",
                       "repo.Connects": "network"}


def test_an_import_inside_a_function_of_a_name_copied_as_is_reads_the_global(tmp_path: Path):
    """compressai's ``def default_entropy_coder(): from compressai import get_entropy_coder``:
    the copied function is a global of the same name, and ``get_entropy_coder =
    get_entropy_coder`` in the function would make it local and unbound."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .coders import get_coder\n")
    (pkg / "coders.py").write_text("def get_coder():\n    return 3.0\n")
    (pkg / "model.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn
        def default_coder():
            from pkg import get_coder
            return get_coder()
        class Scaled(nn.Module):
            def forward(self, x):
                return x * default_coder()
    """))
    src = Resolver(tmp_path, {}).closure("pkg.model", "Scaled").source
    ns: dict = {}
    exec(compile(src, "scaled", "exec"), ns)
    assert ns["Scaled"]()(torch.ones(2)).tolist() == [3.0, 3.0]


def test_a_library_logger_becomes_the_standard_librarys(tmp_path: Path):
    """super-gradients' ``logger = get_logger(__name__)`` sets up handlers and makes
    ``~/sg_logs`` at import time: the problem gets ``logging.getLogger(__name__)`` instead, one
    for every file that defines the same logger, and none of the helper's code."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "logs.py").write_text(textwrap.dedent("""
        import logging, os
        from pathlib import Path
        def get_logger(name, level="INFO"):
            os.makedirs(Path.home() / "pkg_logs", exist_ok=True)
            return logging.getLogger(name)
    """))
    (pkg / "blocks.py").write_text(textwrap.dedent("""
        from torch import nn
        from pkg.logs import get_logger
        logger = get_logger(__name__, "DEBUG")
        class Block(nn.Module):
            def forward(self, x):
                logger.debug("block")
                return x + 1
    """))
    (pkg / "model.py").write_text(textwrap.dedent("""
        import logging
        from torch import nn
        from pkg.logs import get_logger
        from pkg.blocks import Block
        logger = get_logger(__name__)
        std = logging.getLogger(__name__)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
            def forward(self, x):
                logger.info("net")
                std.info("net")
                return self.block(x) * 2
    """))
    src = Resolver(tmp_path, {}).closure("pkg.model", "Net").source
    assert "pkg_logs" not in src and "def get_logger" not in src
    assert src.count("logger = logging.getLogger(__name__)") == 1 and "std = logging.getLogger(__name__)" in src
    ns: dict = {"__name__": "problem"}
    exec(compile(src, "net", "exec"), ns)
    assert ns["Net"]()(torch.ones(2)).tolist() == [4.0, 4.0]


def test_a_module_imported_as_an_alias_inside_a_function_becomes_a_namespace(tmp_path: Path):
    """torch-geometric's ``aggregation_resolver`` does ``import torch_geometric.nn.aggr as
    aggr`` in its body and reads ``aggr.SumAggregation``: the alias is bound to a namespace of
    what the function reads, copied into the problem."""
    pkg = tmp_path / "pkg"
    (pkg / "aggr").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "aggr" / "__init__.py").write_text("from .basic import SumAggregation, MeanAggregation\n")
    (pkg / "aggr" / "basic.py").write_text(textwrap.dedent("""
        from torch import nn
        class SumAggregation(nn.Module):
            def forward(self, x):
                return x.sum(0)
        class MeanAggregation(nn.Module):
            def forward(self, x):
                return x.mean(0)
    """))
    (pkg / "conv.py").write_text(textwrap.dedent("""
        from torch import nn
        def resolve(name):
            import pkg.aggr as aggr
            choices = {c.__name__: c for c in vars(aggr).values()}
            choices["sum"] = aggr.SumAggregation
            return choices[name]()
        class Conv(nn.Module):
            def __init__(self, aggr="sum"):
                super().__init__()
                self.aggr = resolve(aggr)
            def forward(self, x):
                return self.aggr(x) * 2
    """))
    src = Resolver(tmp_path, {}).closure("pkg.conv", "Conv").source
    assert "import pkg" not in src and "class SumAggregation" in src and "class MeanAggregation" not in src
    ns: dict = {}
    exec(compile(src, "conv", "exec"), ns)
    assert ns["Conv"]()(torch.ones(3, 2)).tolist() == [6.0, 6.0]


def test_blame_finds_the_failing_line_of_the_mined_code():
    """Repairs read the mined line an error was raised on; the code runs under a file name
    unique to its source (for linecache), which blame must recognise."""
    from curate.mine.synthesize import blame
    from curate.problem import exec_source

    ns = exec_source("def f(cfg):\n    return cfg.hidden_size * 2\n", "curate_mined")
    with pytest.raises(AttributeError) as info:
        ns["f"](None)
    assert blame(info.value).strip() == "return cfg.hidden_size * 2"


def test_attention_layers_get_their_optional_config_rotary_pair_and_encoder_states(transformers_resolver):
    """Three forward-input repairs on real transformers layers: BartAttention's optional
    ``config`` (read as ``self.config._attn_implementation`` in forward, found from the failing
    line), Qwen3Attention's required ``position_embeddings`` (a (cos, sin) pair) and
    ``attention_mask: Tensor | None`` (None), and a cross-attention's ``encoder_hidden_states``
    (given once the forward fails on it being None)."""
    bart = mine(transformers_resolver, "transformers.models.bart.modeling_bart", "BartAttention")
    assert isinstance(bart["init_args"][-1], dict) and "d_model" in bart["init_args"][-1]
    qwen = mine(transformers_resolver, "transformers.models.qwen3.modeling_qwen3", "Qwen3Attention")
    pair = [s for s in qwen["input_spec"] if s.get("arg") == "position_embeddings"]
    assert len(pair) == 2 and pair[0]["pair"] and pair[0]["shape"] == pair[1]["shape"]
    assert {"kind": "value", "value": None, "arg": "attention_mask"} in qwen["input_spec"]
    cross = mine(transformers_resolver, "transformers.models.camembert.modeling_camembert",
                 "CamembertCrossAttention")
    assert [s.get("arg") for s in cross["input_spec"]] == [None, "encoder_hidden_states"]
    for prob in (bart, qwen, cross):
        run_alone(prob["code"])


def test_rope_standin_initialisations(monkeypatch):
    """The rotary initialisations a configuration may name: YaRN keeps the highest frequency
    and divides the lowest by the factor, with attention scaled 0.1 ln(factor) + 1; Llama 3
    divides long wavelengths by the factor and keeps short ones; linear divides all."""
    import math
    import types

    spec = importlib.util.spec_from_file_location("standin_rope", Path(__file__).resolve().parents[1]
                                                  / "curate" / "mine" / "shims" / "transformers_modeling_rope_utils.py")
    rope = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "transformers.utils", types.SimpleNamespace(_decorator=lambda f: f))
    spec.loader.exec_module(rope)
    base = dict(hidden_size=512, num_attention_heads=4, max_position_embeddings=32768, head_dim=None)
    plain = 1.0 / (10000.0 ** (torch.arange(0, 128, 2).float() / 128))
    yarn = types.SimpleNamespace(**base, rope_parameters={
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0, "original_max_position_embeddings": 4096})
    inv, att = rope.ROPE_INIT_FUNCTIONS["yarn"](yarn)
    assert inv.shape == (64,) and math.isclose(att, 0.1 * math.log(8.0) + 1)
    assert torch.isclose(inv[0], plain[0]) and torch.isclose(inv[-1], plain[-1] / 8)
    llama3 = types.SimpleNamespace(**base, rope_parameters={
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    inv, att = rope.ROPE_INIT_FUNCTIONS["llama3"](llama3)
    assert att == 1.0 and torch.isclose(inv[0], plain[0]) and torch.isclose(inv[-1], plain[-1] / 8)
    assert torch.all(inv <= plain + 1e-12) and torch.all(inv >= plain / 8 - 1e-12)
    linear = types.SimpleNamespace(**base, rope_parameters={"rope_type": "linear", "factor": 2.0})
    assert torch.allclose(rope.ROPE_INIT_FUNCTIONS["linear"](linear)[0], plain / 2)


def test_models_configured_for_yarn_and_llama3_rope_are_mined(transformers_resolver):
    """Ministral 3 defaults to YaRN rotary embeddings and Apertus to Llama 3's: both raised
    KeyError in the rope stand-in before."""
    for mod, cls in (("ministral3.modeling_ministral3", "Ministral3ForSequenceClassification"),
                     ("apertus.modeling_apertus", "ApertusModel")):
        prob = mine(transformers_resolver, f"transformers.models.{mod}", cls)
        assert prob["input_spec"][0]["kind"] == "index"


def test_pytorchcv_network_gets_per_stage_channel_lists_and_its_recorded_input_size():
    """pytorchcv's whole networks take ``channels`` as a list of per-unit widths per stage and
    record ``in_size=(224, 224)``: four nested stages are guessed once a flat list fails on
    ``'int' object is not iterable``, and the input takes the recorded size (the final 7x7
    average pool needs it)."""
    resolver = pypi("pytorchcv", "0.0.74")
    prob = mine(resolver, "pytorchcv.models.resnet", "ResNet")
    channels = prob["init_args"][0]
    assert len(channels) == 4 and all(isinstance(stage, list) for stage in channels)
    assert prob["input_spec"][0]["shape"][1:] == [3, 224, 224]
    run_alone(prob["code"])


def test_a_placeholder_module_has_a_version_for_import_time_checks():
    """diffusers checks ``version.parse(PIL.__version__)`` at import time; PIL is a placeholder
    in a problem, and that check must not fail the whole file (99 diffusers classes did)."""
    spec = importlib.util.spec_from_file_location("standin_unavailable", Path(__file__).resolve().parents[1]
                                                  / "curate" / "mine" / "shims" / "unavailable.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pil = mod.unavailable("PIL")
    assert isinstance(pil.__version__, str) and pil.__version__ > "9.1.0"
    assert not isinstance(torch.ones(1), pil.Image.Image)
    with pytest.raises(ImportError, match="PIL.Image.open is not available"):
        pil.Image.open("x.png")
    # a class with a placeholder mixin (and an abstract base) among its bases is built as usual
    import abc

    class Block(torch.nn.Module, mod.unavailable("huggingface_hub.PyTorchModelHubMixin"), abc.ABC):
        def __init__(self, width):
            super().__init__()
            self.proj = torch.nn.Linear(width, width)

        def forward(self, x):
            return self.proj(x)

    assert Block(4)(torch.ones(2, 4)).shape == (2, 4)


def _typecheck_layer(decorator):
    """NeMo's pattern: ``typecheck`` is a class whose method is the wrapt wrapper, bound per
    decorated function; the wrapper sees the module as ``instance``."""
    seen = []

    class typecheck:
        enabled = True

        def __call__(self, wrapped):
            return self.wrapped_call(wrapped)

        @decorator(enabled=lambda: typecheck.enabled)
        def wrapped_call(self, wrapped, instance, args, kwargs):
            seen.append((type(instance).__name__, len(args), sorted(kwargs)))
            return wrapped(*args, **kwargs) * 2

    class Layer(torch.nn.Module):
        @typecheck()
        def forward(self, x, scale=1.0):
            """doubles"""
            return x * scale

    return Layer, typecheck, seen


def test_wrapt_standin_binds_methods_and_follows_enabled_as_wrapt_does():
    import wrapt

    for decorator in (_standin("wrapt").decorator, wrapt.decorator):
        Layer, typecheck, seen = _typecheck_layer(decorator)
        layer = Layer()
        assert layer(torch.ones(2), scale=3.0).tolist() == [6.0, 6.0]
        assert seen == [("Layer", 1, ["scale"])] and Layer.forward.__doc__ == "doubles"
        typecheck.enabled = False  # asked at each call
        assert layer(torch.ones(2)).tolist() == [1.0, 1.0] and len(seen) == 1

        @decorator
        def plus_one(wrapped, instance, args, kwargs):
            seen.append(instance)
            return wrapped(*args, **kwargs) + 1

        @plus_one
        def f(a):
            return a

        assert f(1) == 2 and seen[-1] is None


def test_file_reads_and_argument_free_loggers_are_made_exec_safe(tmp_path: Path):
    """torchvision's extension loader and modelscope's index read ``__file__`` at import time
    (an exec-based harness defines none); modelscope's ``logger = get_logger()`` helper calls a
    function defined further down its file, at import time."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "logs.py").write_text(textwrap.dedent("""
        import logging
        def get_logger(log_level=logging.INFO):
            if is_dist():
                raise RuntimeError("distributed")
            return logging.getLogger("pkg")
        def is_dist():
            return False
    """))
    (pkg / "model.py").write_text(textwrap.dedent("""
        import logging, os
        from torch import nn
        from pkg.logs import get_logger
        logger = get_logger(log_level=logging.WARNING)
        HERE = os.path.dirname(__file__)
        VERBOSE = bool(os.environ.get("PKG_VERBOSE"))
        if VERBOSE:
            logger.info("loaded from %s", HERE)
            SCALE = 2
        else:
            SCALE = 1
        class Net(nn.Module):
            def forward(self, x):
                logger.debug(HERE)
                return (x + len(HERE)) * SCALE
    """))
    src = Resolver(tmp_path, {}).closure("pkg.model", "Net").source
    assert "def get_logger" not in src and "logger = logging.getLogger(__name__)" in src
    assert src.index("logger = logging.getLogger") < src.index("logger.info")
    assert src.index('__file__ = globals().get("__file__", "")') < src.index("HERE = ")
    ns: dict = {"__name__": "problem"}
    exec(compile(src, "net", "exec"), ns)
    assert ns["Net"]()(torch.zeros(1)).tolist() == [0.0]
    ns = {"__name__": "problem", "__file__": "/models/net.py"}  # run as a file, it keeps its own
    exec(compile(src, "net", "exec"), ns)
    assert ns["Net"]()(torch.zeros(1)).tolist() == [len("/models")]


def test_a_dotted_import_in_a_version_check_is_the_modules_own_package(tmp_path: Path):
    """nnAudio and funasr import ``torch.fft`` inside a torch-version check: that binds the
    ``torch`` imported at the top, not a second definition to rename (``torch_2``)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "spec.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn
        major = int(torch.__version__.split(".")[0])
        if major >= 1:
            NEW_FFT = True
            import torch.fft
        else:
            NEW_FFT = False
        class Spectrum(nn.Module):
            def forward(self, x):
                y = torch.fft.rfft(x) if NEW_FFT else None
                return torch.view_as_real(y)
    """))
    src = Resolver(tmp_path, {}).closure("pkg.spec", "Spectrum").source
    assert "torch_2" not in src and "import torch.fft" in src
    ns: dict = {"__name__": "problem"}
    exec(compile(src, "spectrum", "exec"), ns)
    assert ns["Spectrum"]()(torch.ones(8)).shape == (5, 2)


def test_tqdm_six_and_distutils_standins(tmp_path: Path):
    """allennlp picks its progress bar in an import-time ``if`` (the stand-in must come before
    that block); ``six.add_metaclass`` and ``distutils.version`` (gone in Python 3.12) keep
    their Python 3 meaning."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bars.py").write_text(textwrap.dedent("""
        import os
        if os.environ.get("PKG_NOTEBOOK"):
            from tqdm import tqdm_notebook as _tqdm
        else:
            from tqdm import tqdm as _tqdm
        def total(xs):
            return sum(x for x in _tqdm(xs, desc="sum"))
    """))
    (pkg / "layer.py").write_text(textwrap.dedent("""
        from torch import nn
        from pkg.bars import total
        class Layer(nn.Module):
            def forward(self, x):
                return x * total([1, 2, 3])
    """))
    src = Resolver(tmp_path, {}).closure("pkg.layer", "Layer").source
    assert "tqdm" not in imported(src) and src.index("class tqdm") < src.index("if os.environ")
    ns: dict = {"__name__": "problem"}
    exec(compile(src, "layer", "exec"), ns)
    assert ns["Layer"]()(torch.ones(2)).tolist() == [6.0, 6.0]

    six = _standin("six")

    class Meta(type):
        tagged = True

    @six.add_metaclass(Meta)
    class Tagged:
        __slots__ = ("a",)

    assert type(Tagged) is Meta and Tagged.tagged and six.string_types == (str,)
    loose = _standin("distutils.version").LooseVersion
    assert loose("1.10.0") > loose("1.9.2") and loose("2.1") >= "2.1" and loose("1.7") < "1.7.1"
    assert loose("2.0.0a1") > "2.0.0" and loose(torch.__version__) > "1.8"  # distutils' own order


def test_a_config_of_another_package_becomes_a_namespace_of_what_is_read():
    """modelscope's BERT heads take a ``config`` whose class the file does not define (it came
    from transformers): the constructor's ``AttributeError`` on a guessed plain value turns it
    into ``types.SimpleNamespace`` holding each attribute read, one per error; a parameter read
    as a mapping (``opts.get``) becomes a dict of its defaults."""
    source = textwrap.dedent("""
        import torch
        from torch import nn
        class Head(nn.Module):
            def __init__(self, config, opts):
                super().__init__()
                self.proj = nn.Linear(config.hidden_size, config.num_labels)
                self.norm = nn.LayerNorm(config.num_labels, eps=opts.get("eps", 1e-5))
            def forward(self, x):
                return self.norm(self.proj(x))
    """)
    got = synthesize(source, "Head", "doc", budget_s=60)
    config, opts = got["init_args"]
    assert set(config) == {"hidden_size", "num_labels"} and opts == {}
    assert "types.SimpleNamespace(**config)" in got["code"]
    run_alone(got["code"])


def test_vision_embeddings_take_the_configured_image_and_moe_experts_their_router_choice(transformers_resolver):
    """Two input shapes read off the built module: SiglipVisionEmbeddings' patch grid and
    position table fix its image at ``config.image_size`` with ``config.num_channels``, and
    Qwen3MoeExperts takes tokens with the router's top-k expert indices (below the expert
    count) and weights. The experts' ``torch.empty`` parameters, which transformers leaves to
    a model-level init, are filled from N(0, 0.02) while Model is built, so two builds under
    one seed agree and the output is finite."""
    siglip = mine(transformers_resolver, "transformers.models.siglip.modeling_siglip", "SiglipVisionEmbeddings")
    config = siglip["init_args"][0]
    assert siglip["input_spec"][0]["shape"] == [2, config.get("num_channels", 3), 224, 224]
    run_alone(siglip["code"])

    moe = mine(transformers_resolver, "transformers.models.qwen3_moe.modeling_qwen3_moe", "Qwen3MoeExperts")
    tokens, index, weights = moe["input_spec"]
    assert tokens["shape"][0] == index["shape"][0] == weights["shape"][0]
    assert index["shape"][1] == weights["shape"][1] >= 1
    assert "with _filled_empty():" in moe["code"]
    prob = load_problem(moe["code"], "moe")
    built = []
    for _ in range(2):
        torch.manual_seed(0)
        built.append(prob["Model"](*prob["get_init_inputs"]()))
    assert index["kind"] == "index" and index["high"] == built[0].gate_up_proj.shape[0]
    for a, b in zip(built[0].parameters(), built[1].parameters()):
        a, b = a.detach(), b.detach()
        assert torch.equal(a, b) and bool(torch.isfinite(a).all()) and 0 < float(a.std()) < 0.1
    run_alone(moe["code"])


def test_swin_block_gets_its_spatial_size_and_an_espnet_encoder_its_lengths(transformers_resolver):
    """Forward parameters beside the tensor: SwinLayer's ``input_dimensions`` is an (height,
    width) pair matching a [batch, height * width, channels] input, and ESPnet's RNNEncoder
    takes ``ilens`` as one full length per batch element."""
    swin = mine(transformers_resolver, "transformers.models.swin.modeling_swin", "SwinLayer")
    hidden, dims = swin["input_spec"][:2]
    assert dims["kind"] == "value" and len(dims["value"]) == 2
    assert hidden["shape"][1] == dims["value"][0] * dims["value"][1]
    run_alone(swin["code"])

    resolver = pypi("espnet", "202611")
    closure = resolver.closure("espnet2.asr.encoder.rnn_encoder", "RNNEncoder")
    prob = synthesize(closure.source, "RNNEncoder", "test: espnet RNNEncoder", 60.0)
    x, ilens = prob["input_spec"][:2]
    assert ilens["kind"] == "index" and ilens["shape"] == [x["shape"][0]]
    assert ilens["low"] == x["shape"][1] and ilens["high"] == x["shape"][1] + 1
    assert f"torch.randint({ilens['low']}, {ilens['high']}," in prob["code"]
    run_alone(prob["code"])


def test_constructor_repairs_from_listed_choices_dimension_counts_and_activation_names():
    """monai's EfficientNetBN needs ``spatial_dims`` 2 or 3 and a ``model_name`` the error
    message lists; a configuration read for its activation gets a name (``'gelu'``)."""
    from curate.mine.construct import _listed_choices

    assert _listed_choices("AssertionError: factor must be one of [4, 8, 12, 16]") == [4, 8, 12, 16]
    assert _listed_choices("ValueError: mode must be one of {'reflect', 'zeros'}, but got mode=''") == [
        "reflect", "zeros"]
    resolver = pypi("monai", "1.6.1")
    closure = resolver.closure("monai.networks.nets.efficientnet", "EfficientNetBN")
    prob = synthesize(closure.source, "EfficientNetBN", "test: monai EfficientNetBN", 60.0)
    assert prob["init_args"][0].startswith("efficientnet-b")
    assert 2 in prob["init_args"] or len(prob["input_spec"][0]["shape"]) == 4
    run_alone(prob["code"])


def test_nemo_module_gets_its_declared_input_types():
    """NeMo modules declare their forward inputs (``input_types``: ``NeuralType(('B', 'T'),
    AudioSignal())``, lengths as ``LengthsType``) and check them under ``@typecheck``, which
    takes keyword arguments only: SEANetEncoder gets a waveform of one second by name and one
    full length per batch element."""
    resolver = pypi("nemo-toolkit", "3.0.0")
    closure = resolver.closure("nemo.collections.tts.modules.encodec_modules", "SEANetEncoder")
    prob = synthesize(closure.source, "SEANetEncoder", "test: nemo SEANetEncoder", 60.0)
    audio, lengths = prob["input_spec"]
    assert audio["arg"] == "audio" and len(audio["shape"]) == 2 and audio["shape"][1] >= 16000
    assert lengths["arg"] == "audio_len" and lengths["kind"] == "index" and lengths["shape"] == audio["shape"][:1]
    assert lengths["low"] == audio["shape"][1]
    run_alone(prob["code"])


def test_complex_spectra_and_layers_passed_to_the_constructor():
    """An error asking for complex tensors (ESPnet's spectral losses compare STFT frames) makes
    the inputs complex64; a constructor parameter the module calls (``self.embedding(x)``)
    where a number was guessed becomes the layer its name says."""
    resolver = pypi("espnet", "202611")
    closure = resolver.closure("espnet2.enh.loss.criterions.tf_domain", "FrequencyDomainAbsCoherence")
    prob = synthesize(closure.source, "FrequencyDomainAbsCoherence", "test: espnet coherence", 60.0)
    assert [s["dtype"] for s in prob["input_spec"]] == ["complex64", "complex64"]
    assert "dtype=torch.complex64" in prob["code"]
    run_alone(prob["code"])

    resolver = pypi("spikingjelly", "2.0.0")
    closure = resolver.closure("spikingjelly.activation_based.ann2snn.recipes.spikezip_qann", "SpikeZIPEmbedding")
    prob = synthesize(closure.source, "SpikeZIPEmbedding", "test: spikingjelly embedding", 60.0)
    assert "torch.nn.Embedding(" in prob["code"] and prob["input_spec"][0]["kind"] == "index"
    run_alone(prob["code"])


def test_a_library_built_on_transformers_copies_its_activations_and_a_block_gets_its_parent_config(
        transformers_resolver):
    """modelscope's BERT-style layers use ``ACT2FN`` from ``transformers.activations``; with
    transformers as a manifest dependency that table is copied (it was a placeholder before).
    DbrxFFN reads ``config.ffn_config``, which the file's DbrxConfig has and the DbrxFFNConfig
    its name suggests lacks: the constructor search switches configuration class."""
    resolver = pypi("modelscope", "1.40.2", deps=[{"name": "transformers", "version": "5.23.0"}])
    closure = resolver.closure("modelscope.models.nlp.megatron_bert.backbone", "MegatronBertLayer")
    assert "ACT2FN = unavailable(" not in closure.source and "ACT2FN" in closure.source
    prob = synthesize(closure.source, "MegatronBertLayer", "test: modelscope MegatronBertLayer", 60.0)
    run_alone(prob["code"])

    dbrx = mine(transformers_resolver, "transformers.models.dbrx.modeling_dbrx", "DbrxFFN")
    assert "ffn_config" in dbrx["init_args"][0]
    run_alone(dbrx["code"])


def test_diffusers_model_builds_on_the_model_and_config_standins():
    """A diffusers model (``ModelMixin``, ``ConfigMixin``, ``@register_to_config``) copies the
    stand-ins instead of diffusers' hooks, hub and scheduler code, which put it over the size
    cap; its constructor arguments, defaults included, are readable as ``config``."""
    from curate.mine.closure import MAX_CLOSURE_CHARS

    resolver = pypi("diffusers", "0.42.1")
    closure = resolver.closure("diffusers.models.autoencoders.autoencoder_tiny", "AutoencoderTiny")
    assert len(closure.source) < MAX_CLOSURE_CHARS
    assert "diffusers.hooks" not in closure.files and "def register_to_config" in closure.source
    prob = synthesize(closure.source, "AutoencoderTiny", "test: diffusers AutoencoderTiny", 60.0)
    run_alone(prob["code"])
    ns = load_problem(prob["code"], "tiny")
    model = ns["Model"](*ns["get_init_inputs"]())
    assert model.config.in_channels == 3 and model.config["latent_channels"] == model.latent_channels


def test_a_diffusers_transformer_out_of_memory_at_its_defaults_is_retried_smaller():
    """Flux's defaults (24 heads of 128, 19 + 38 blocks) need about 12 billion parameters: the
    retry after the allocator fails keeps the head size with fewer heads and caps the blocks."""
    from curate.mine.synthesize import ConstructorSearch

    resolver = pypi("diffusers", "0.42.1")
    closure = resolver.closure("diffusers.models.transformers.transformer_flux", "FluxTransformer2DModel")
    ns = exec_source(closure.source, "curate_mined_flux")
    search = ConstructorSearch(ns["FluxTransformer2DModel"], ns)
    oom = "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 905969664 bytes."
    (smaller,) = search._repairs({}, oom)
    assert "attention_head_dim" not in smaller and smaller["num_attention_heads"] * 128 <= 256  # head size kept
    assert smaller["num_layers"] <= 2 and smaller["num_single_layers"] <= 2
    assert sum(smaller.get("axes_dims_rope", (16, 56, 56))) == 128  # the rotary axes still fill a head
    model = ns["FluxTransformer2DModel"](**smaller)
    assert sum(p.numel() for p in model.parameters()) < 50_000_000
    assert search._repairs(smaller, oom) == []  # nothing left to shrink: no endless retry



def test_a_message_passing_layer_gets_its_type_aliases_and_graph_inputs():
    """torch_geometric's ``MessagePassing`` evaluates its subclass's type hints when built
    (``OptTensor``, ``Optional``): the closure copies those aliases, and the layer gets node
    features [nodes, features] and an edge index [2, edges] of node ids."""
    resolver = pypi("torch-geometric", "2.8.1")
    closure = resolver.closure("torch_geometric.nn.conv.gcn_conv", "GCNConv")
    assert "OptTensor = " in closure.source
    prob = synthesize(closure.source, "GCNConv", "test: torch_geometric GCNConv", 60.0)
    nodes, edges = prob["input_spec"][:2]
    assert edges["kind"] == "index" and edges["shape"][0] == 2 and edges["high"] == nodes["shape"][0]
    run_alone(prob["code"])


def test_a_model_argument_called_with_several_inputs_gets_a_passthrough():
    """k-diffusion's denoiser calls ``self.inner_model(input * c_in, sigma)``: no layer takes
    two inputs, so the argument becomes a callable that returns its first tensor."""
    resolver = pypi("k-diffusion", "0.1.1.post1")
    prob = mine(resolver, "k_diffusion.layers", "SimpleLossDenoiser")
    assert "inner_model=(lambda *args, **kwargs:" in prob["code"]


def test_a_mask_gets_a_shape_that_broadcasts_and_an_optional_input_read_under_another_name():
    """A mask guessed [batch, length] that does not broadcast gets the shapes masks take:
    coqui-tts' VITS ``x_mask`` is [batch, 1, time] beside [batch, channels, time], and
    torch-molecule's attention mask is [batch, 1, 1, length] against the scores. An optional
    forward input left None is read under a local name (diffusers' LongCat attention reads
    ``encoder_query`` from ``encoder_hidden_states``): the input sharing its words is given."""
    for package, version, module, cls in [
            ("coqui-tts", "0.28.0", "TTS.tts.layers.vits.stochastic_duration_predictor", "ElementwiseAffine"),
            ("torch-molecule", "0.2.0", "torch_molecule.predictor.smiles_transformer.model", "MultiHeadAttention")]:
        prob = mine(pypi(package, version), module, cls)
        mask = next(s for s in prob["input_spec"] if s["kind"] == "mask")
        assert len(mask["shape"]) >= 3 and 1 in mask["shape"][1:]
        run_alone(prob["code"])

    resolver = pypi("diffusers", "0.42.1")
    closure = resolver.closure("diffusers.models.transformers.transformer_longcat_image", "LongCatImageAttention")
    prob = synthesize(closure.source, "LongCatImageAttention", "test: diffusers LongCatImageAttention", 60.0)
    assert any(s.get("arg") == "encoder_hidden_states" for s in prob["input_spec"])


def test_constructor_guesses_take_the_type_the_failing_line_uses():
    """A guessed number the constructor indexes with string keys (modelscope's LoFTR backbone reads
    ``config['initial_dim']``, then ``block_dims[2]``) becomes a dict of the keys the file reads,
    its list long enough for the index; one unpacked (super-gradients' ViT:
    ``image_height, image_width = image_size``) a tuple of as many; a list whose items are unpacked
    (NeMo's STFT resolutions: ``n_fft, hop, win = resolution``) a list of such tuples."""
    prob = mine(pypi("modelscope", "1.40.2"),
                "modelscope.models.cv.image_local_feature_matching.src.loftr.backbone.resnet_fpn", "ResNetFPN_8_2")
    (config,) = prob["init_args"]
    assert isinstance(config, dict) and "initial_dim" in config and len(config["block_dims"]) >= 3
    run_alone(prob["code"])

    prob = mine(pypi("super-gradients", "3.7.1"), "super_gradients.training.models.classification_models.vit", "ViT")
    assert isinstance(prob["init_args"][0], (list, tuple)) and len(prob["init_args"][0]) == 2
    run_alone(prob["code"])

    prob = mine(pypi("nemo-toolkit", "3.0.0"), "nemo.collections.tts.modules.encodec_modules",
                "MultiResolutionDiscriminatorSTFT")
    assert all(len(r) == 3 for r in prob["init_args"][0])
    run_alone(prob["code"])


def test_a_failed_assert_on_a_constructor_argument_is_satisfied():
    """pytorchcv's SINet block asserts ``isinstance(normalization, nn.Module)``: the layer class
    guessed for ``normalization`` becomes an instance of it."""
    prob = mine(pypi("pytorchcv", "0.0.74"), "pytorchcv.models.sinet", "PreActivation")
    assert "normalization=torch.nn." in prob["code"] and "normalization=torch.nn.BatchNorm2d," not in prob["code"]


def test_inputs_take_each_arguments_rank_and_size_tuples_from_the_forward_source():
    # forward(x, style): ``b, c, h, w = x.shape`` and ``self.modulation(style).view(b, 1, c, 1, 1)``
    # - an image and a [batch, features] style vector, not two tensors of one shape
    prob = mine(pypi("spandrel", "0.4.2"), "spandrel.architectures.GFPGAN.__arch.stylegan2_arch", "ModulatedConv2d")
    assert [len(s["shape"]) for s in prob["input_spec"]] == [4, 2]
    # forward(size): ``h, w = size`` - a (height, width) pair of ints
    prob = mine(pypi("segment-anything", "1.0"), "segment_anything.modeling.prompt_encoder", "PositionEmbeddingRandom")
    assert [s["kind"] for s in prob["input_spec"]] == ["value"] and prob["input_spec"][0]["value"] == (16, 16)
    run_alone(prob["code"])


def test_a_lazy_package_init_resolves_through_its_type_checking_imports():
    """modelscope's ``fileio/__init__`` replaces itself with a lazy module and names its exports
    only under ``if TYPE_CHECKING:``; ``from modelscope.fileio import LocalStorage`` (read by
    ``modelscope.utils.checkpoint`` at import) finds the class in ``fileio/file.py``."""
    resolver = pypi("modelscope", "1.40.2")
    assert resolver.locate("modelscope.utils.checkpoint", "LocalStorage") == ("modelscope.fileio.file", "LocalStorage")


def test_torch_cpp_extension_imports_in_a_problem():
    """peft's BOFT layers import ``torch.utils.cpp_extension`` (which needs setuptools and
    packaging, as any machine building CUDA candidates has): the problem loads and runs."""
    prob = mine(pypi("peft", "0.21.2"), "peft.tuners.boft.layer", "Linear")
    assert "cpp_extension" in prob["code"]


def test_block_classes_passed_by_the_module_s_factories_are_copied_and_used():
    """pretrainedmodels' SENet takes ``block``; only its factories (``senet154()`` ->
    ``SENet(SEBottleneck, ...)``) name the block classes. They are copied beside it and the
    block guess takes one. timm's ResNet gets its blocks from ``dict(block=BasicBlock, ...)``
    and, when forward reads ``self.layer4``, four entries in its per-stage list."""
    prob = mine(pypi("pretrainedmodels", "0.7.4"), "pretrainedmodels.models.senet", "SENet")
    assert re.search(r"block=SE\w*Bottleneck", prob["code"])
    prob = mine(pypi("timm", "1.0.31", [{"name": "torchvision", "version": "0.29.1"}]), "timm.models.resnet", "ResNet")
    assert prob["init_args"][0] == [2, 2, 2, 2]
    run_alone(prob["code"])


def test_a_constructor_argument_read_as_a_tensor_becomes_one():
    """modelscope's GlobalCMVN asserts ``mean.shape == istd.shape``: the numbers guessed for
    ``mean`` and ``istd`` become tensors."""
    prob = mine(pypi("modelscope", "1.40.2"), "modelscope.models.audio.kws.nearfield.cmvn", "GlobalCMVN")
    assert "mean=torch.randn(" in prob["code"] and "istd=torch.randn(" in prob["code"]
    run_alone(prob["code"])


def test_torch_s_not_implemented_input_errors_are_repaired_not_taken_for_abstract():
    """torch raises NotImplementedError for an input its op does not take (reflect padding of
    size 2 on a 4-D input, bilinear upsampling of a 3-D one): the input's rank is repaired;
    a ``forward`` left to subclasses is still rejected as abstract. speechbrain's
    DepthwiseSeparableConv1d and pytorch-toolbelt's FPNFuse were rejected as abstract before."""
    prob = mine(pypi("speechbrain", "1.1.2"), "speechbrain.nnet.CNN", "DepthwiseSeparableConv1d")
    assert len(prob["input_spec"][0]["shape"]) == 3
    prob = mine(pypi("pytorch-toolbelt", "0.8.0"), "pytorch_toolbelt.modules.fpn", "FPNFuse")
    assert len(prob["input_spec"][0]["shape"]) >= 4  # iterated: each item an image batch
    with pytest.raises(SynthesisError, match="abstract"):  # "Must be implemented by subclasses"
        mine(pypi("torchani", "2.9.0"), "torchani.neighbors", "Neighborlist")


def test_a_registry_reading_each_class_s_file_builds_in_a_problem():
    """funasr's ``@tables.register(...)`` records each class's file and line with
    ``inspect.getfile``, which an exec'd problem's classes do not have: the copied registry
    records a placeholder, and the encoder is built."""
    resolver = pypi("funasr", "1.4.16")
    closure = resolver.closure("funasr.models.sond.encoder.ecapa_tdnn_encoder", "Res2NetBlock")
    assert "inspect.getfile(target_class)" not in closure.source
    prob = mine(resolver, "funasr.models.sond.encoder.ecapa_tdnn_encoder", "Res2NetBlock")
    run_alone(prob["code"])


def test_a_layer_called_as_no_layer_is_called_becomes_a_passthrough():
    """monai's MaskedLoss calls the loss it wraps as ``self.loss(input, target)``: the Linear
    first guessed for ``loss`` rejects two inputs, so a callable returning its first tensor
    stands in for it."""
    prob = mine(pypi("monai", "1.6.1"), "monai.losses.spatial_mask", "MaskedLoss")
    assert "lambda *args, **kwargs" in prob["code"]
    run_alone(prob["code"])


def test_plain_values_where_the_constructor_needs_layers_become_layers():
    """monai's DenseBlock adds each of ``layers`` as a sub-module: the numbers first guessed
    for it become a list of layers."""
    prob = mine(pypi("monai", "1.6.1"), "monai.networks.blocks.denseblock", "DenseBlock")
    assert "layers=[torch.nn.Linear(" in prob["code"]
    run_alone(prob["code"])
