"""Torch-only stand-ins for third-party modules that mined code imports.

Each file here is our own code standing in for one module (named in :data:`STAND_INS`). The
closure (:mod:`curate.mine.closure`) resolves an import from such a module to the stand-in's
definition, when it has one, and copies it into the problem like any other dependency, so
problems stay runnable with torch and numpy alone. A stand-in reproduces the behaviour mined modules
rely on (tested against the real package where it can be installed), not the whole API.
"""

from __future__ import annotations

from pathlib import Path

_DIR = Path(__file__).parent

#: module name -> file of its stand-in
STAND_INS: dict[str, str] = {
    "einops": "einops.py",
    "einops.layers.torch": "einops_layers_torch.py",
    "transformers": "transformers.py",
    "transformers.utils": "transformers_utils.py",
    "transformers.utils.generic": "transformers_reexports.py",
    "transformers.utils.import_utils": "transformers_reexports.py",
    "transformers.utils.logging": "transformers_utils_logging.py",
    "transformers.utils.output_capturing": "transformers_utils_output_capturing.py",
    "transformers.file_utils": "transformers_reexports.py",
    "transformers.processing_utils": "transformers_processing_utils.py",
    "transformers.modeling_flash_attention_utils": "transformers_modeling_flash_attention_utils.py",
    "transformers.integrations": "transformers_integrations.py",
    "transformers.integrations.hub_kernels": "transformers_reexports.py",
    "transformers.integrations.accelerate": "transformers_reexports.py",
    "transformers.integrations.deepspeed": "transformers_reexports.py",
    "transformers.integrations.fsdp": "transformers_reexports.py",
    "transformers.integrations.moe": "transformers_reexports.py",
    "transformers.modeling_utils": "transformers_modeling_utils.py",
    "transformers.modeling_layers": "transformers_modeling_layers.py",
    "transformers.generation": "transformers_generation.py",
    "transformers.cache_utils": "transformers_cache_utils.py",
    "transformers.masking_utils": "transformers_masking_utils.py",
    "transformers.modeling_rope_utils": "transformers_modeling_rope_utils.py",
    "transformers.configuration_utils": "transformers_configuration_utils.py",
    "transformers.utils.type_validators": "transformers_utils_type_validators.py",
    "huggingface_hub.dataclasses": "huggingface_hub_dataclasses.py",
    "transformers.models.auto": "transformers_models_auto.py",
    "transformers.models.auto.configuration_auto": "transformers_models_auto.py",
    "transformers.models.auto.modeling_auto": "transformers_models_auto.py",
    "packaging": "packaging.py",
    "packaging.version": "packaging_version.py",
    "packaging.utils": "packaging_utils.py",
    "typeguard": "typeguard.py",
    "pydantic": "pydantic.py",
    "pydantic.fields": "pydantic.py",
    "pydantic.functional_validators": "pydantic.py",
    "pydantic_core": "pydantic.py",
    "docstring_inheritance": "docstring_inheritance.py",
    "mne.utils": "mne_utils.py",
    "environs": "environs.py",
    "decorator": "decorator.py",
    "wrapt": "wrapt.py",
    "tqdm": "tqdm.py",
    "tqdm.auto": "tqdm.py",
    "loguru": "loguru.py",
    "six": "six.py",
    "distutils.version": "distutils_version.py",
    "huggingface_hub": "huggingface_hub.py",
    "huggingface_hub.utils": "huggingface_hub.py",
    "beartype": "beartype.py",
    "beartype.typing": "beartype_typing.py",
    "beartype.door": "beartype_door.py",
    "jaxtyping": "jaxtyping.py",
    "diffusers.configuration_utils": "diffusers_configuration_utils.py",
    "diffusers.models.modeling_utils": "diffusers_modeling_utils.py",
    "diffusers.models.attention_dispatch": "diffusers_attention_dispatch.py",
    "diffusers.loaders": "diffusers_loaders.py",
    "diffusers.loaders.peft": "diffusers_loaders.py",
    "diffusers.loaders.single_file_model": "diffusers_loaders.py",
    "diffusers.models.cache_utils": "diffusers_loaders.py",
    "scipy": "scipy.py",
    "scipy.signal": "scipy_signal.py",
    "scipy.signal.windows": "scipy_signal.py",
    "scipy.stats": "scipy_stats.py",
    "scipy.fftpack": "scipy_fftpack.py",
    "scipy.special": "scipy_special.py",
    "librosa": "librosa.py",
    "librosa.filters": "librosa_filters.py",
    "librosa.util": "librosa_util.py",
    "curate.unavailable": "unavailable.py",
}


#: module name -> file of a stand-in used only where the module is absent from the source and
#: its dependencies: research code imports a few helpers of a large package (timm's
#: ``DropPath``, mmcv's ``ConvModule``) that is not installed with it; where the package's
#: own code is at hand, that code is copied instead.
FALLBACKS: dict[str, str] = {
    **{f"timm.{m}": "timm_layers.py" for m in (
        "layers", "layers.drop", "layers.helpers", "layers.weight_init", "layers.mlp",
        "models.layers", "models.layers.drop", "models.layers.helpers", "models.layers.weight_init",
        "models.layers.mlp", "models.registry", "models._registry", "models")},
    **{m: "mmcv_cnn.py" for m in ("mmcv.cnn", "mmcv.cnn.bricks", "mmcv.cnn.bricks.conv_module",
                                  "mmcv.cnn.utils.weight_init", "mmcv.runner", "mmcv.runner.base_module",
                                  "mmengine.model", "mmengine.model.weight_init")},
}

#: Names research code calls without importing them (an import lost when a file was copied
#: from elsewhere): the stand-in module whose definition they are taken to mean. Only names
#: with one common meaning; ``reduce`` (``functools``' or einops') is not among them.
KNOWN_NAMES: dict[str, str] = {
    **{n: "einops" for n in ("rearrange", "repeat", "parse_shape", "pack", "unpack")},
    **{n: "einops.layers.torch" for n in ("Rearrange", "Reduce")},
    **{n: "timm.layers" for n in ("DropPath", "drop_path", "to_2tuple", "to_3tuple", "to_ntuple",
                                  "trunc_normal_", "lecun_normal_", "make_divisible", "register_model")},
    **{n: "mmcv.cnn" for n in ("ConvModule", "build_norm_layer", "build_conv_layer", "build_activation_layer",
                               "constant_init", "normal_init", "xavier_init", "kaiming_init", "BaseModule")},
}


def path(module: str) -> Path | None:
    """The stand-in file for ``module`` (a stand-in or a fallback), or None."""
    name = STAND_INS.get(module) or FALLBACKS.get(module)
    return _DIR / name if name else None


def overrides(module: str) -> bool:
    """Whether ``module``'s stand-in is used even where the module's own code is at hand."""
    return module in STAND_INS
