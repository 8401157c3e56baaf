"""A published world for the shapes behind compat's last disagreements with run time (issue
20), our own sources in the real releases' shapes (the names are facts):

- vLLM "0.28.0" (transformers>=4.56.0): a fallback import (``try: from ... import New``
  ``except ImportError: from ... import Old as New``); a helper reading a config attribute
  under ``getattr(config, "is_heterogeneous", False)`` and one reading it bare, called only
  by a model file and by a convertor a model-type table selects; a RoPE check refusing a dict
  whose ``rope_type`` and ``type`` differ or that has no ``rope_type``; model files importing
  a config class from transformers' top level, a name a module's ``__getattr__ =
  deprecate_attr(...)`` answers, and reading ``tokenizer.add_bos_token``; a module refusing
  transformers 4 at import time; a GGUF helper calling ``from_text_vision_configs`` only
  when the checkpoint is a ``.gguf`` file with an ``mmproj`` file beside it (issue 27), and
  a processor module a lazy ``_CLASS_TO_MODULE`` table loads when a processor config names
  ``Cosmos3EdgeProcessor``, importing ``get_image_size`` from where 5.5.3 lacks it;
- transformers 4.57.6 (a top-level catalogue of model packages, no ``FalconH1Config``, the
  Gemma tokenizer defining ``add_bos_token``), 5.5.3 (Phi-3 and Phi-4-multimodal configs
  writing ``rope_type="longrope"`` for ``type`` su/yarn, Gemma 3's RoPE dict nested by layer
  type) and 5.15.1 (the reference: ``PreTrainedConfig`` has ``is_heterogeneous``,
  ``per_layer_config`` and ``from_text_vision_configs``, the tokenizer base
  ``add_bos_token``).
"""

from __future__ import annotations

from pathlib import Path

from wheelhouse import Wheel

REGISTRY = """
_VLLM_MODELS = {
    "Gemma4ForConditionalGeneration": ("gemma4", "Gemma4ForConditionalGeneration"),
    "Gemma3ForConditionalGeneration": ("gemma3_mm", "Gemma3ForConditionalGeneration"),
    "Phi3ForCausalLM": ("phi3", "Phi3ForCausalLM"),
    "PaliGemmaForConditionalGeneration": ("paligemma", "PaliGemmaForConditionalGeneration"),
    "FalconH1ForCausalLM": ("falcon_h1", "FalconH1ForCausalLM"),
}
"""
CONFIG = """from transformers import PretrainedConfig

try:
    from transformers.configuration_utils import ALLOWED_ATTENTION_LAYER_TYPES
except ImportError:
    from transformers.configuration_utils import (
        ALLOWED_LAYER_TYPES as ALLOWED_ATTENTION_LAYER_TYPES,
    )


def get_config(name):
    return PretrainedConfig()


def patch_rope_dict(rope):
    if "rope_type" in rope and "type" in rope:
        rope_type = rope["rope_type"]
        rope_type_legacy = rope["type"]
        if rope_type != rope_type_legacy:
            raise ValueError("conflicts")
    if "rope_type" not in rope:
        raise ValueError("no rope_type")


def patch_rope(config):
    rope = getattr(config, "rope_scaling", None)
    if rope is not None:
        patch_rope_dict(rope)
"""
GEMMA4_CONFIG = """from transformers import PretrainedConfig


def layer_config(text_config: PretrainedConfig, index: int) -> PretrainedConfig:
    if getattr(text_config, "is_heterogeneous", False):
        return text_config.per_layer_config[index]
    return text_config


def layer_overrides(text_config: PretrainedConfig) -> object:
    return text_config.per_layer_config
"""
CONVERTOR = """from vllm.transformers_utils.configs.gemma4 import layer_config, layer_overrides


class Base:
    def __init__(self, config):
        self.config = config

    def layers(self):
        return [self.config]


class Gemma4Convertor(Base):
    def layers(self):
        return [layer_config(self.config, 0), layer_overrides(self.config)]


CONVERTORS = {"gemma4": Gemma4Convertor, "gemma4_text": Gemma4Convertor}
"""
LLM = """from vllm.transformers_utils.config import get_config
from vllm.transformers_utils.convertor import CONVERTORS, Base
from vllm.transformers_utils.gguf_utils import maybe_patch_config
from vllm.transformers_utils.processor import get_processor


def layers(hf_config):
    return CONVERTORS.get(hf_config.model_type, Base)(hf_config).layers()
"""
REQUIREMENT = """from importlib.metadata import version

from packaging.version import Version

if Version(version("transformers")) < Version("5.0.0"):
    raise ImportError("Support for transformers 4 was removed")


def later_feature():
    if Version(version("transformers")) < Version("9.0.0"):
        raise RuntimeError("needs transformers 9")
"""
GGUF_UTILS = """from pathlib import Path

from transformers import PretrainedConfig


def check_gguf_file(model):
    path = Path(model)
    if not path.is_file():
        return False
    elif path.suffix == ".gguf":
        return True
    return False


def detect_multimodal(model):
    if not model.endswith(".gguf"):
        return None
    for pattern in ("mmproj.gguf", "mmproj-*.gguf"):
        found = list(Path(model).parent.glob(pattern))
        if found:
            return found[0]
    return None


def maybe_patch_config(model, config):
    mmproj = detect_multimodal(model)
    if mmproj is not None:
        config = PretrainedConfig.from_text_vision_configs(config, None)
    return config
"""
PROCESSOR = """from vllm.transformers_utils import processors


def get_processor(name_from_config):
    return getattr(processors, name_from_config, None)
"""
PROCESSORS = """import importlib

_CLASS_TO_MODULE = {
    "Cosmos3EdgeProcessor": "vllm.transformers_utils.processors.cosmos3_edge",
}


def __getattr__(name):
    if name in _CLASS_TO_MODULE:
        return getattr(importlib.import_module(_CLASS_TO_MODULE[name]), name)
    raise AttributeError(name)
"""
COSMOS3_EDGE = """from transformers.models.qwen3_vl.video_processing_qwen3_vl import (
    get_image_size,
    smart_resize,
)


class Cosmos3EdgeProcessor:
    def size(self, image):
        return smart_resize(*get_image_size(image))
"""
MODELS = {
    "vllm/model_executor/models/gemma4.py": (
        "from vllm.transformers_utils.configs.gemma4 import layer_overrides\n\n\n"
        "class Gemma4ForConditionalGeneration:\n"
        "    def __init__(self, config):\n"
        "        self.layers = layer_overrides(config)\n"
    ),
    "vllm/model_executor/models/gemma3_mm.py": (
        "from transformers.models.gemma3.processing_gemma3 import Gemma3ProcessorKwargs\n"
        "from transformers.models.gemma3.processing_gemma3 import Gemma3NeverKwargs\n"
    ),
    "vllm/model_executor/models/phi3.py": "class Phi3ForCausalLM:\n    pass\n",
    "vllm/model_executor/models/paligemma.py": (
        "from transformers import GemmaConfig, PreTrainedTokenizerBase\n\n\n"
        "def prefix(tokenizer: PreTrainedTokenizerBase) -> list[int]:\n"
        "    return [2] if tokenizer.add_bos_token else []\n"
    ),
    "vllm/model_executor/models/falcon_h1.py": "from transformers import FalconH1Config\n",
}


def _vllm() -> Wheel:
    files: dict[str, str | bytes] = {
        "vllm/__init__.py": "from vllm.entrypoints.llm import layers\n",
        "vllm/entrypoints/__init__.py": "",
        "vllm/entrypoints/llm.py": LLM,
        "vllm/transformers_utils/__init__.py": "",
        "vllm/transformers_utils/config.py": CONFIG,
        "vllm/transformers_utils/convertor.py": CONVERTOR,
        "vllm/transformers_utils/requirement.py": REQUIREMENT,
        "vllm/transformers_utils/gguf_utils.py": GGUF_UTILS,
        "vllm/transformers_utils/processor.py": PROCESSOR,
        "vllm/transformers_utils/processors/__init__.py": PROCESSORS,
        "vllm/transformers_utils/processors/cosmos3_edge.py": COSMOS3_EDGE,
        "vllm/transformers_utils/configs/__init__.py": "",
        "vllm/transformers_utils/configs/gemma4.py": GEMMA4_CONFIG,
        "vllm/model_executor/__init__.py": "",
        "vllm/model_executor/models/__init__.py": "from .registry import ModelRegistry\n",
        "vllm/model_executor/models/registry.py": REGISTRY,
        **MODELS,
    }
    return Wheel("vllm", "0.28.0", files, requires=["transformers>=4.56.0"])


INIT = """__version__ = "{version}"
import sys
from typing import TYPE_CHECKING

_import_structure = {{
    "configuration_utils": ["PretrainedConfig", "PreTrainedConfig"],
    "tokenization_utils_base": ["PreTrainedTokenizerBase"],{more}
}}

if TYPE_CHECKING:
    from .models import *
else:
    sys.modules[__name__] = _LazyModule(__name__, globals()["__file__"], _import_structure)
"""
# a catalogue: more model packages re-exported than transformers.models' own names
MODELS_INIT = "".join(f"from .family{n:02d} import *\n" for n in range(20))
PHI_CONFIG = """from ...configuration_utils import PreTrainedConfig


class {name}Config(PreTrainedConfig):
    model_type = "{model_type}"

    def convert_rope_params_to_dict(self, **kwargs):
        rope_parameters_type = self.rope_parameters.get("rope_type", None)
        if rope_parameters_type is not None and rope_parameters_type in ["su", "yarn"]:
            self.rope_parameters["rope_type"] = "longrope"
        return kwargs
"""
GEMMA3_CONFIG = """from ...configuration_utils import PreTrainedConfig


class Gemma3TextConfig(PreTrainedConfig):
    model_type = "gemma3_text"

    def convert_rope_params_to_dict(self, **kwargs):
        defaults = {
            "sliding_attention": {"rope_type": "default"},
            "full_attention": {"rope_type": "default"},
        }
        self.rope_parameters = self.rope_parameters or defaults


class Gemma3Config(PreTrainedConfig):
    model_type = "gemma3"
"""
PROCESSING_GEMMA3 = """from ...processing_utils import ProcessingKwargs, ProcessorMixin
from ...utils.deprecation import deprecate_attr


class Gemma3Processor(ProcessorMixin):
    pass


__getattr__ = deprecate_attr(
    __name__, rename={"Gemma3ProcessorKwargs": (ProcessingKwargs, "5.29.0")}
)

__all__ = ["Gemma3Processor"]
"""
TOKENIZER_BASE = "class PreTrainedTokenizerBase:\n    def encode(self, text):\n        return []\n"
BOS = "\n    @property\n    def add_bos_token(self):\n        return self._add_bos_token\n"
HETEROGENEOUS = """class HeterogeneousConfigMixin:
    per_layer_config: dict | None = None

    @property
    def is_heterogeneous(self):
        return self.per_layer_config is not None
"""

TEXT_VISION = """
    @classmethod
    def from_text_vision_configs(cls, text_config, vision_config):
        return cls()
"""


def _transformers(version: str) -> Wheel:
    v4 = version.startswith("4.")
    more = '\n    "models.falcon_h1": ["FalconH1Config"],' if not v4 else ""
    files: dict[str, str | bytes] = {
        "transformers/__init__.py": INIT.format(version=version, more=more),
        "transformers/models/__init__.py": MODELS_INIT,
        "transformers/tokenization_utils_base.py": TOKENIZER_BASE + ("" if v4 else BOS),
        "transformers/models/gemma/configuration_gemma.py": (
            "class GemmaConfig:\n    model_type = 'gemma'\n"
        ),
    }
    if v4:
        files["transformers/configuration_utils.py"] = (
            'ALLOWED_LAYER_TYPES = ("full_attention", "sliding_attention")\n\n\n'
            "class PretrainedConfig:\n    def to_dict(self):\n        return {}\n"
        )
        files["transformers/models/gemma/tokenization_gemma_fast.py"] = (
            "class GemmaTokenizerFast:\n    def __init__(self, add_bos_token=True):\n"
            "        self._add_bos_token = add_bos_token\n" + BOS
        )
        return Wheel("transformers", version, files)
    mixin = version == "5.15.1"
    files["transformers/configuration_utils.py"] = (
        ("from .integrations.heterogeneity import HeterogeneousConfigMixin\n\n" if mixin else "")
        + 'ALLOWED_ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention")\n\n\n'
        + f"class PreTrainedConfig{'(HeterogeneousConfigMixin)' if mixin else ''}:\n"
        + "    def to_dict(self):\n        return {}\n"
        + (TEXT_VISION if mixin else "")
        + "\n\nPretrainedConfig = PreTrainedConfig\n"
    )
    qwen3_vl = "transformers/models/qwen3_vl/video_processing_qwen3_vl.py"
    files[qwen3_vl] = "def smart_resize(height, width):\n    return height, width\n" + (
        "\n\ndef get_image_size(image):\n    return 1, 1\n" if mixin else ""
    )
    if mixin:
        files["transformers/integrations/__init__.py"] = ""
        files["transformers/integrations/heterogeneity.py"] = HETEROGENEOUS
    files["transformers/models/phi3/configuration_phi3.py"] = PHI_CONFIG.format(
        name="Phi3", model_type="phi3"
    )
    files["transformers/models/phi4_multimodal/configuration_phi4_multimodal.py"] = (
        PHI_CONFIG.format(name="Phi4Multimodal", model_type="phi4_multimodal")
    )
    files["transformers/models/gemma3/configuration_gemma3.py"] = GEMMA3_CONFIG
    files["transformers/models/gemma3/processing_gemma3.py"] = PROCESSING_GEMMA3
    return Wheel("transformers", version, files)


def wheels() -> list[Wheel]:
    return [_vllm(), *(_transformers(v) for v in ("4.57.6", "5.5.3", "5.15.1"))]


UPLOADS = {
    "vllm-0.28.0": "2026-06-01T00:00:00Z",
    "transformers-4.57.6": "2026-01-10T00:00:00Z",
    "transformers-5.5.3": "2026-03-20T00:00:00Z",
    "transformers-5.15.1": "2026-05-01T00:00:00Z",
}


def upload_times(folder: Path) -> dict[str, str]:
    return {p.name: UPLOADS["-".join(p.name.split("-")[:2])] for p in folder.glob("*.whl")}
