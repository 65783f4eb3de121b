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
    "docstring_inheritance": "docstring_inheritance.py",
    "mne.utils": "mne_utils.py",
    "environs": "environs.py",
    "decorator": "decorator.py",
    "wrapt": "wrapt.py",
    "tqdm": "tqdm.py",
    "tqdm.auto": "tqdm.py",
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


def path(module: str) -> Path | None:
    """The stand-in file for ``module``, or None."""
    name = STAND_INS.get(module)
    return _DIR / name if name else None
