"""Mining code nobody tuned for, second part: a source's declared dependencies followed on a
second try when a placeholder of one of them is what failed (curate.mine.declared); model
factories asked for no downloaded weights (curate.mine.codegen); inputs drawn in the unit
interval where normal ones make the output NaN or fail a value check, and images of the least
size an error names (curate.mine.synthesize, curate.mine.repairs); a package missing from a
``try`` block raising ``ModuleNotFoundError`` as Python does (curate.mine.closure). On real
code of manifests/pypi-pytorch.yaml's packages."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import textwrap
from pathlib import Path

import polars as pl
import pytest
import torch
from test_mine_yield import pypi, run_alone

from curate.mine import default_cache, run
from curate.mine.closure import Resolver
from curate.mine.codegen import exec_safe
from curate.mine.declared import (DeclaredDependencies, declared_requirements, pinned_versions,
                                  placeholder_packages, provider)
from curate.mine.errors import SynthesisError
from curate.mine.guess import config_classes
from curate.mine.sources import resolve
from curate.mine.synthesize import synthesize
from curate.problem import load_problem
from curate.table import read_problems

CACHE = default_cache()
XUNET = {"kind": "pypi", "name": "x-unet", "version": "0.5.0"}


def test_a_wheel_declares_its_requirements_without_torch_or_extras():
    """x-unet 0.5.0's METADATA: ``einops``, ``torch-einops-utils``, ``torch`` and ``pytest``
    behind the ``test`` extra."""
    reqs = declared_requirements(resolve(XUNET, CACHE))
    assert reqs[:2] == ["einops", "torch-einops-utils"]
    assert "torch" not in reqs  # every problem has it
    assert "pytest" not in reqs  # only with the ``test`` extra


def test_a_directory_declares_its_requirements_in_requirements_txt_and_pyproject(tmp_path: Path):
    """A repository checkout (a ``dir`` source): x-unet's package folder with the two files a
    repository declares its dependencies in."""
    shutil.copytree(resolve(XUNET, CACHE).root / "x_unet", tmp_path / "x_unet")
    (tmp_path / "requirements.txt").write_text("torch>=2.5  # the runtime\n-r more.txt\n\n"
                                               "einops (==0.8.0)\ngit+https://example.invalid/x.git\n")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "x"
        dependencies = ["torch-einops-utils>=0.1.29", "pytest; extra == 'test'", "einops"]
        """))
    source = resolve({"kind": "dir", "name": "x", "path": str(tmp_path)}, CACHE)
    assert declared_requirements(source) == ["einops", "torch-einops-utils"]
    assert pinned_versions(source) == {"einops": "0.8.0"}  # a range (>=0.1.29) is no pin
    (tmp_path / "pyproject.toml").write_text("[project\n")  # broken: the other file still counts
    assert declared_requirements(source) == ["einops"]


def test_a_dependency_pinned_to_one_release_is_that_release():
    """alphafold3-pytorch 0.8.3 pins ``multimolecule==0.0.5`` and ``scipy==1.13.1``: those are
    the releases a second try downloads (an older API a source was written against)."""
    source = resolve({"kind": "pypi", "name": "alphafold3-pytorch", "version": "0.8.3"}, CACHE)
    pins = pinned_versions(source)
    assert pins["multimolecule"] == "0.0.5" and pins["scipy"] == "1.13.1"
    assert "einops" in declared_requirements(source) and "einops" not in pins


def test_a_placeholder_package_is_matched_to_a_distribution_by_name_or_prefix():
    reqs = ["einops", "torch-einops-utils", "pyro-ppl", "nptyping"]
    assert provider("torch_einops_utils", reqs) == "torch-einops-utils"  # PEP 503 names
    assert provider("pyro", reqs) == "pyro-ppl"  # a distribution named after its package, and more
    assert provider("np", reqs) is None  # too short to match by prefix
    assert provider("einx", reqs) is None


def test_x_unet_is_kept_with_its_declared_dependencys_code():
    """x-unet's ``XUnet`` concatenates with ``torch_einops_utils.safe_cat``. Mined from
    x-unet alone, the name is a placeholder and building the model fails; the second try
    copies the function from torch-einops-utils (x-unet's ``Requires-Dist``) and the problem
    runs where neither package can be imported, with the dependency in its provenance."""
    source = resolve(XUNET, CACHE)
    resolver = Resolver(source.root, {}, source.importable)
    module, cls = "x_unet.x_unet", "XUnet"
    first = resolver.closure(module, cls).source
    assert placeholder_packages(first) == {"torch_einops_utils"}
    with pytest.raises(SynthesisError) as err:
        synthesize(first, cls, "test", 60)
    assert err.value.reason == "import_missing"

    again = DeclaredDependencies(CACHE).second_closures(resolver, source, [(module, cls, first),
                                                                          (module, "Block", "no placeholder")])
    assert list(again) == [0]  # the class without a placeholder is not tried again
    assert "includes code from torch-einops-utils" in again[0]
    assert not placeholder_packages(again[0]) & {"torch_einops_utils"}
    run_alone(synthesize(again[0], cls, "test", 60)["code"])


def test_the_mine_stage_keeps_what_the_second_try_keeps(tmp_path: Path):
    """The stage on x-unet's model file: the classes rejected as ``import_missing`` for
    torch-einops-utils are problems after the second try, and a rerun finds both tries in its
    journal (nothing synthesized again)."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"sources:\n  - {{kind: pypi, name: x-unet, version: \"0.5.0\", "
                        f"include: [\"x_unet/x_unet.py\"]}}\n")
    out = tmp_path / "out"
    stats = run(manifest=manifest, out=out, workers=2, timeout_s=60, cache_dir=CACHE)
    problems = read_problems(out / "mine")
    names = set(problems["name"].to_list())
    assert {"x-unet.XUnet", "x-unet.FeatureMapConsolidator"} <= names, stats
    code = problems.filter(pl.col("name") == "x-unet.XUnet")["code"][0]
    assert "torch-einops-utils" in code
    run_alone(code)
    again = run(manifest=manifest, out=out, workers=2, timeout_s=60, cache_dir=CACHE)
    assert again["rows_out"] == stats["rows_out"]


def test_pretrained_weights_are_not_downloaded():
    """basicsr's FID ``InceptionV3`` builds ``models.inception_v3(pretrained=True,
    init_weights=False)``; torchvision's own factories take ``weights=`` enums or strings.
    The problem's code asks for no weights and keeps every other argument."""
    code = textwrap.dedent("""\
        inception = models.inception_v3(pretrained=True, init_weights=False)
        net = resnet50(weights=ResNet50_Weights.IMAGENET1K_V2, progress=False)
        net = vgg16(weights="DEFAULT")
        keep = make(weights=my_weights, pretrained=flag)
        """)
    assert exec_safe(code) == textwrap.dedent("""\
        inception = models.inception_v3(pretrained=False, init_weights=False)
        net = resnet50(weights=None, progress=False)
        net = vgg16(weights=None)
        keep = make(weights=my_weights, pretrained=flag)
        """)


def test_a_loss_on_torchvision_vgg_builds_without_a_download(monkeypatch):
    """rectified-flow-pytorch's ``LPIPSLoss`` (with torchvision, its manifest ``deps``) builds
    ``torchvision.models.vgg16(weights=vgg_weights)`` with ``vgg_weights: VGG16_Weights =
    VGG16_Weights.DEFAULT``: as a problem it builds the same VGG, randomly initialized, where
    no network can be reached."""
    resolver = pypi("rectified-flow-pytorch", "0.14.0", [{"name": "torchvision", "version": "0.29.1"}])
    source = resolver.closure("rectified_flow_pytorch.rectified_flow", "LPIPSLoss").source
    assert "= VGG16_Weights.DEFAULT" in source
    safe = exec_safe(source)
    assert "= VGG16_Weights.DEFAULT" not in safe and "vgg_weights: VGG16_Weights = None" in safe

    def no_network(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    ns: dict = {}
    exec(compile(safe, "<lpips>", "exec"), ns)
    loss = ns["LPIPSLoss"]()
    vgg, = loss.vgg
    assert sum(p.numel() for p in vgg.features.parameters()) == 14_714_688  # VGG-16's convolutions
    x = torch.rand(2, 3, 64, 64)
    assert torch.isfinite(loss(x, x.flip(-1)))


def test_a_loss_of_log_magnitudes_gets_inputs_in_the_unit_interval():
    """auraloss 0.4.0's ``STFTMagnitudeLoss`` takes ``torch.log`` of both magnitudes: normal
    inputs make the loss NaN, so the problem's inputs are drawn in [0.01, 0.99]; the file's
    ``get_inputs()`` gives a finite loss where ``torch.randn`` inputs give NaN."""
    resolver = pypi("auraloss", "0.4.0")
    got = synthesize(resolver.closure("auraloss.freq", "STFTMagnitudeLoss").source, "STFTMagnitudeLoss", "test", 60)
    assert got["input_spec"] and all(s.get("unit_interval") for s in got["input_spec"])
    prob = load_problem(got["code"])
    torch.manual_seed(0)
    model = prob["Model"](*prob["get_init_inputs"]())
    assert torch.isfinite(model(*prob["get_inputs"]()))
    assert torch.isnan(model(*(torch.randn_like(x) for x in prob["get_inputs"]())))
    run_alone(got["code"])


def test_torchvision_is_followed_where_a_repository_does_not_declare_it(tmp_path: Path):
    """rectified-flow-pytorch's ``LPIPSLoss`` as a repository checkout with no requirements
    file: ``torchvision.models.vgg16`` is a placeholder at first, and the second try copies
    torchvision's VGG, a well-known model library followed whether declared or not."""
    pkg = resolve({"kind": "pypi", "name": "rectified-flow-pytorch", "version": "0.14.0"}, CACHE).root
    shutil.copytree(pkg / "rectified_flow_pytorch", tmp_path / "rectified_flow_pytorch")
    source = resolve({"kind": "dir", "name": "repo", "path": str(tmp_path)}, CACHE)
    assert declared_requirements(source) == []
    resolver = Resolver(source.root, {}, source.importable)
    module, cls = "rectified_flow_pytorch.rectified_flow", "LPIPSLoss"
    first = resolver.closure(module, cls).source
    assert "torchvision" in placeholder_packages(first)
    again = DeclaredDependencies(CACHE).second_closures(resolver, source, [(module, cls, first)])
    assert "includes code from torchvision" in again[0] and "class VGG(" in again[0]


@pytest.mark.parametrize("module,cls,side", [("piq.gmsd", "GMSDLoss", None), ("piq.ms_ssim", "MultiScaleSSIMLoss", 161)])
def test_image_metrics_that_check_their_inputs_get_images_they_take(module, cls, side):
    """piq 0.8.0's metrics assert ``Expected values to be greater or equal to 0``: the repair
    draws the images in [0.01, 0.99]. Its multi-scale SSIM then says ``expected at least
    161x161``: the images get that size. Each problem runs alone."""
    got = synthesize(pypi("piq", "0.8.0").closure(module, cls).source, cls, "test", 60)
    images = [s for s in got["input_spec"] if s["kind"] == "tensor"]
    assert len(images) == 2 and all(s.get("unit_interval") for s in images)
    if side:
        assert all(s["shape"][-2:] == [side, side] for s in images)
    run_alone(got["code"])


def test_a_missing_package_in_a_try_block_falls_back_as_python_would():
    """dptb 2.2.1's ``dptb/nn/hr2hR.py`` (the manifest's ``dptb/nn/*.py``) imports ``vbcsr``
    in ``try:`` and binds ``None`` under ``except ModuleNotFoundError:``. The copied import
    raises ``ModuleNotFoundError``, as a missing package does, so the fallback runs and the
    problem file loads."""
    source = resolve({"kind": "pypi", "name": "dptb", "version": "2.2.1", "include": ["dptb/nn/*.py"]}, CACHE)
    code = Resolver(source.root, {}, source.importable).closure("dptb.nn.hr2hR", "Hr2HR").source
    assert "except ModuleNotFoundError:" in code and "vbcsr" in code
    ns: dict = {}
    exec(compile(code, "<hr2hR>", "exec"), ns)
    assert ns["ImageContainer"] is None and isinstance(ns["Hr2HR"], type)


def test_a_class_whose_metaclass_raises_on_any_attribute_is_not_a_configuration():
    """A dependency-injection container's class answers every attribute it lacks with its own
    error, not ``AttributeError`` (as the ``dependencies`` package's ``Injector`` does for
    ``__dataclass_fields__``): looking for configuration classes skips it instead of failing
    the synthesis."""
    class Unresolvable(Exception):
        pass

    class InjectorMeta(type):
        def __getattr__(cls, attr):
            raise Unresolvable(f"{cls.__name__!r} can not resolve attribute {attr!r}")

    class Injector(metaclass=InjectorMeta):
        pass

    @dataclasses.dataclass
    class Config:
        width: int = 64

    assert config_classes({"Injector": Injector, "Config": Config}) == [Config]
