"""A published world for what vLLM does at start-up that a transformers release can refuse,
in the shapes the real releases have (our own sources, the names are facts):

- vLLM "0.9.2": its config package, imported at start-up, imports every config module; one
  registers ``AutoConfig.register("aimv2", ...)``. Its config loader refuses a RoPE dict whose
  ``rope_type`` and ``type`` differ. Model files import transformers 5's renamed image
  processors (``SiglipImageProcessorFast``) and code under a transformers-5 branch;
- vLLM "0.19.1": a lazy config package (``_CLASS_TO_MODULE`` and ``__getattr__``), a config
  module with an import only its model type loads, a version helper and a flag;
- transformers 4.53.1 (no ``aimv2``), 4.54.0 (takes ``aimv2``), 4.57.6, and 5.5.4 (lazy
  packages answering ``*ImageProcessorFast``, alias modules made in a loop over its files,
  a Qwen2-VL config that writes ``rope_type="default"`` and keeps ``type``).
"""

from __future__ import annotations

from pathlib import Path

import layouts

from registry_world import padding
from wheelhouse import Wheel

REGISTRY = """
_VLLM_MODELS = {
    "Qwen2VLForConditionalGeneration": ("qwen2_vl", "Qwen2VLForConditionalGeneration"),
    "Gemma3nForConditionalGeneration": ("gemma3n_mm", "Gemma3nForConditionalGeneration"),
    "Qwen3VLForConditionalGeneration": ("qwen3_vl", "Qwen3VLForConditionalGeneration"),
    "OvisForConditionalGeneration": ("ovis", "Ovis"),
}
"""
OVIS_092 = """from transformers import AutoConfig, AutoProcessor, PretrainedConfig


class AIMv2Config(PretrainedConfig):
    model_type = "aimv2"


class OvisConfig(PretrainedConfig):
    model_type = "ovis"


AutoConfig.register("aimv2", AIMv2Config)
AutoConfig.register("ovis_tok", OvisConfig, exist_ok=True)
AutoProcessor.register("OvisProcessor", OvisConfig)
"""
CONFIG_092 = """import transformers
from packaging.version import Version
from transformers import PretrainedConfig

from vllm.transformers_utils.configs import OvisConfig

_CONFIG_REGISTRY = {"ovis": OvisConfig}


def patch_rope_scaling_dict(rope_scaling):
    if "rope_type" in rope_scaling and "type" in rope_scaling:
        rope_type = rope_scaling["rope_type"]
        rope_type_legacy = rope_scaling["type"]
        if rope_type != rope_type_legacy:
            raise ValueError("conflicts")


def weights(model):
    if Version(transformers.__version__) >= Version("5.0.0"):
        from transformers.conversion_mapping import get_model_conversion_mapping

        return get_model_conversion_mapping(model)
    return None
"""
MODELS_092 = {
    "vllm/model_executor/models/qwen2_vl.py": "class Qwen2VLForConditionalGeneration:\n    pass\n",
    "vllm/model_executor/models/gemma3n_mm.py": (
        "from transformers.models.siglip import SiglipImageProcessorFast\n"
        "from transformers.models.siglip import NoSuchImageProcessorFast\n"
    ),
    "vllm/model_executor/models/qwen3_vl.py": (
        "from transformers.models.qwen2_vl.image_processing_qwen2_vl_fast import (\n"
        "    Qwen2VLImageProcessorFast,\n)\n"
    ),
    "vllm/model_executor/models/ovis.py": "class Ovis:\n    pass\n",
}

LAZY_CONFIGS = """import importlib

_CLASS_TO_MODULE = {
    "OvisConfig": "vllm.transformers_utils.configs.ovis",
    "Step3VLConfig": "vllm.transformers_utils.configs.step3_vl",
}


def __getattr__(name):
    return getattr(importlib.import_module(_CLASS_TO_MODULE[name]), name)
"""
CONFIG_0191 = """import importlib.metadata

import transformers
from packaging.version import Version
from transformers import PretrainedConfig

_CONFIG_REGISTRY = LazyConfigDict(ovis="OvisConfig", step3_vl="Step3VLConfig")

WITH_V5 = Version(importlib.metadata.version("transformers")) >= Version("5.0.0")


def patch(config):
    if WITH_V5:
        config.standardize_rope_params()
"""
STEP3 = """from transformers import PretrainedConfig
from transformers.tokenization_utils_tokenizers import TokenizersBackend


class Step3VLConfig(PretrainedConfig):
    model_type = "step3_vl"
"""
BACKEND = """import transformers
from packaging.version import Version


class Base:
    @staticmethod
    def check_version(min_version, feature):
        if Version(transformers.__version__) < Version(min_version):
            raise ImportError(feature)

    def eagle(self):
        self.check_version("5.2.0", "Eagle3")
        from transformers.utils.output_capturing import OutputRecorder

        return OutputRecorder
"""


def _vllm(version: str, files: dict[str, str], requires: str) -> Wheel:
    common: dict[str, str | bytes] = {
        "vllm/_C.so": padding(200_000),
        "vllm/__init__.py": "from vllm.entrypoints.llm import LLM\n",
        "vllm/entrypoints/__init__.py": "",
        "vllm/entrypoints/llm.py": "from vllm.transformers_utils.config import get_config\n",
        "vllm/transformers_utils/__init__.py": "",
        "vllm/model_executor/__init__.py": "",
        "vllm/model_executor/models/__init__.py": "from .registry import ModelRegistry\n",
        "vllm/model_executor/models/registry.py": REGISTRY,
        **MODELS_092,
    }
    return Wheel("vllm", version, {**common, **files}, requires=[requires, "torch==2.7.0"])


def _transformers_4(version: str, *, aimv2: bool) -> Wheel:
    layout = layouts.transformers_4()
    auto = layout.files[layouts.TF_CONFIG_AUTO]
    if aimv2:
        auto = auto.replace('("qwen2_vl",', '("aimv2", "Aimv2Config"),\n        ("qwen2_vl",')
    files: dict[str, str | bytes] = {
        layouts.TF_CONFIG_AUTO: auto,
        "transformers/__init__.py": (
            f'__version__ = "{version}"\n'
            '_import_structure = {"configuration_utils": ["PretrainedConfig"],\n'
            '    "models.auto": ["AutoConfig", "AutoProcessor"]}\n'
        ),
        "transformers/configuration_utils.py": "class PretrainedConfig:\n    pass\n",
        "transformers/models/siglip/__init__.py": '__all__ = ["SiglipImageProcessorFast"]\n',
        "transformers/models/qwen2_vl/image_processing_qwen2_vl_fast.py": (
            "class Qwen2VLImageProcessorFast:\n    pass\n"
        ),
    }
    return Wheel("transformers", version, files)


LAZY_PACKAGE = """from ...utils import _LazyModule
from ...utils.import_utils import define_import_structure

_file = globals()["__file__"]
sys.modules[__name__] = _LazyModule(__name__, _file, define_import_structure(_file))
"""
IMPORT_UTILS = """class _LazyModule:
    def __getattr__(self, name):
        if name.endswith("TokenizerFast"):
            fallback_name = name[:-4]
        if name.endswith("ImageProcessorFast"):
            fallback_name = name[:-4]
        raise AttributeError(name)
"""
INIT_5 = """__version__ = "{version}"
import sys
from pathlib import Path

_import_structure = {{
    "configuration_utils": ["PretrainedConfig"],
    "models.auto": ["AutoConfig", "AutoProcessor"],
}}
sys.modules[__name__] = _LazyModule(__name__, globals()["__file__"], _import_structure)


def _create_module_alias(alias, target):
    sys.modules[alias] = target


for _proc_file in sorted((Path(__file__).parent / "models").rglob("image_processing_*.py")):
    _model = _proc_file.parent.name
    _module = _proc_file.stem
    _target = f".models.{{_model}}.{{_module}}"
    _create_module_alias(f"{{__name__}}.models.{{_model}}.{{_module}}_fast", _target)

    def getattr_factory(target):
        def _getattr(name):
            return name.removesuffix("Fast")

        return _getattr
"""
QWEN2_VL_CONFIG_5 = """class Qwen2VLTextConfig:
    model_type = "qwen2_vl_text"

    def convert_rope_params_to_dict(self, **kwargs):
        if self.rope_parameters.get("rope_type", self.rope_parameters.get("type")) == "mrope":
            self.rope_parameters["rope_type"] = "default"


class Qwen2VLConfig:
    model_type = "qwen2_vl"
"""


def _transformers_5(version: str) -> Wheel:
    files: dict[str, str | bytes] = {
        **dict(layouts.transformers_5().files),
        "transformers/__init__.py": INIT_5.format(version=version),
        "transformers/utils/import_utils.py": IMPORT_UTILS,
        "transformers/configuration_utils.py": "class PretrainedConfig:\n    pass\n",
        "transformers/conversion_mapping.py": "def get_model_conversion_mapping(m):\n    ...\n",
        "transformers/tokenization_utils_tokenizers.py": "class TokenizersBackend:\n    pass\n",
        "transformers/utils/output_capturing.py": "class OutputRecorder:\n    pass\n",
        "transformers/models/siglip/__init__.py": LAZY_PACKAGE,
        "transformers/models/siglip/image_processing_siglip.py": (
            '__all__ = ["SiglipImageProcessor"]\n\n\nclass SiglipImageProcessor:\n    pass\n'
        ),
        "transformers/models/qwen2_vl/__init__.py": LAZY_PACKAGE,
        "transformers/models/qwen2_vl/image_processing_qwen2_vl.py": (
            '__all__ = ["Qwen2VLImageProcessor"]\n\n\nclass Qwen2VLImageProcessor:\n    pass\n'
        ),
        "transformers/models/qwen2_vl/configuration_qwen2_vl.py": QWEN2_VL_CONFIG_5,
    }
    auto = str(files[layouts.TF_AUTO_MAPPINGS])
    files[layouts.TF_AUTO_MAPPINGS] = auto.replace(
        '("qwen2_vl",', '("aimv2", "Aimv2Config"),\n        ("qwen2_vl",'
    )
    return Wheel("transformers", version, files)


def wheels() -> list[Wheel]:
    old = {
        "vllm/transformers_utils/config.py": CONFIG_092,
        "vllm/transformers_utils/configs/__init__.py": (
            "from vllm.transformers_utils.configs.ovis import OvisConfig\n"
        ),
        "vllm/transformers_utils/configs/ovis.py": OVIS_092,
    }
    new = {
        "vllm/transformers_utils/config.py": CONFIG_0191,
        "vllm/transformers_utils/configs/__init__.py": LAZY_CONFIGS,
        "vllm/transformers_utils/configs/ovis.py": "class OvisConfig:\n    pass\n",
        "vllm/transformers_utils/configs/step3_vl.py": STEP3,
        "vllm/model_executor/models/transformers/__init__.py": "from .base import Base\n",
        "vllm/model_executor/models/transformers/base.py": BACKEND,
    }
    return [
        _vllm("0.9.2", old, "transformers>=4.51.1"),
        _vllm("0.19.1", new, "transformers!=5.0.*,>=4.56.0,<5.5"),
        _transformers_4("4.53.1", aimv2=False),
        _transformers_4("4.54.0", aimv2=True),
        _transformers_4("4.55.0", aimv2=True),
        _transformers_4("4.57.6", aimv2=True),
        _transformers_5("5.5.4"),
    ]


UPLOADS = {
    "vllm-0.9.2": "2025-07-08T00:00:00Z",
    "vllm-0.19.1": "2026-04-01T00:00:00Z",
    "transformers-4.53.1": "2025-07-01T00:00:00Z",
    "transformers-4.54.0": "2025-07-25T00:00:00Z",
    "transformers-4.55.0": "2025-08-05T00:00:00Z",
    "transformers-4.57.6": "2026-01-10T00:00:00Z",
    "transformers-5.5.4": "2026-03-20T00:00:00Z",
}


def upload_times(folder: Path) -> dict[str, str]:
    return {p.name: UPLOADS["-".join(p.name.split("-")[:2])] for p in folder.glob("*.whl")}
