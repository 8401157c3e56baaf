"""A published world for the compat tests: a vLLM that uses a tokenizer attribute a later
transformers removes, a name a later transformers drops from a model module, and imports
that cannot fail (guarded or for type checkers only); three transformers releases in the
shapes the real ones have (a lazy ``_import_structure``, modules that re-export a folder,
module aliases, a ``__getattr__`` answering special-token names)."""

from __future__ import annotations

from pathlib import Path

import layouts

from registry_world import padding
from wheelhouse import Wheel

TOKENIZER_USE = '''"""vLLM's tokenizer helpers (shape only)."""
import copy
from typing import TYPE_CHECKING

from transformers import PreTrainedTokenizerFast
from transformers.tokenization_utils_fast import PreTrainedTokenizerFast as Fast

if TYPE_CHECKING:
    from transformers.tokenization_utils_never import Unused

try:
    from transformers import AddedInAFarFutureRelease
except ImportError:
    AddedInAFarFutureRelease = None


def get_cached_tokenizer(tokenizer: Fast) -> PreTrainedTokenizerFast:
    cached = copy.copy(tokenizer)
    special = tokenizer.all_special_tokens_extended
    first = tokenizer.bos_token_id  # answered by __getattr__ in 5.x: not a finding
    try:
        tokenizer.only_sometimes_there
    except AttributeError:
        pass

    class CachedTokenizer(tokenizer.__class__):
        @property
        def all_special_tokens_extended(self):
            return special

        def twice(self):
            return self.all_special_tokens_extended  # its own property

    cached.__class__ = CachedTokenizer
    return cached, first
'''

QWEN2_VL_USE = """from transformers.models.whisper.modeling_whisper import WHISPER_ATTENTION_CLASSES
from transformers.models.whisper import WhisperFeatureExtractor

from .vision_tower import Tower


class Qwen2VLForConditionalGeneration:
    attention = WHISPER_ATTENTION_CLASSES
"""

TF_INIT_4 = """__version__ = "{version}"
_import_structure = {{
    "configuration_utils": ["PretrainedConfig"],
    "tokenization_utils_base": ["PreTrainedTokenizerBase", "SpecialTokensMixin"],
    "tokenization_utils_fast": ["PreTrainedTokenizerFast"],
    "models.whisper": [],
}}
_import_structure["models.whisper"].extend(["WhisperFeatureExtractor"])
"""

TF_INIT_5 = """__version__ = "{version}"
import sys
from typing import TYPE_CHECKING

_import_structure = {{
    "configuration_utils": ["PreTrainedConfig", "PretrainedConfig"],
    "tokenization_utils_base": ["PreTrainedTokenizerBase"],
    "tokenization_utils_tokenizers": ["PreTrainedTokenizerFast"],
    "tokenization_utils_fast": [],
}}

if TYPE_CHECKING:
    from .tokenization_utils_tokenizers import PreTrainedTokenizerFast as PreTrainedTokenizerFast


def _create_tokenization_alias(alias, target):
    sys.modules[alias] = sys.modules[__name__ + target]


_create_tokenization_alias(
    f"{{__name__}}.tokenization_utils_fast", ".tokenization_utils_tokenizers"
)
"""

BASE_4 = """from collections import UserDict


class SpecialTokensMixin:
    SPECIAL_TOKENS_ATTRIBUTES = ["bos_token", "eos_token"]

    @property
    def all_special_tokens_extended(self):
        return []

    @property
    def bos_token_id(self):
        return 1


class BatchEncoding(UserDict):
    pass


class PreTrainedTokenizerBase(SpecialTokensMixin):
    def __init__(self):
        self.verbose = False
"""

BASE_5 = """from collections import UserDict


class BatchEncoding(UserDict):
    pass


class PreTrainedTokenizerBase:
    SPECIAL_TOKENS_ATTRIBUTES = ["bos_token", "eos_token"]

    def __getattr__(self, key):
        stem = key[:-3] if key.endswith("_id") else key
        if stem in self.SPECIAL_TOKENS_ATTRIBUTES:
            return None
        raise AttributeError(key)
"""

FAST = """from .tokenization_utils_base import PreTrainedTokenizerBase


class PreTrainedTokenizerFast(PreTrainedTokenizerBase):
    def decode(self, ids):
        return ""
"""

WHISPER_INIT = """from typing import TYPE_CHECKING

from ...utils import _LazyModule
from ...utils.import_utils import define_import_structure

if TYPE_CHECKING:
    from .modeling_whisper import *
else:
    import sys

    _file = globals()["__file__"]
    sys.modules[__name__] = _LazyModule(__name__, _file, define_import_structure(_file))
"""

WHISPER_FEATURES = (
    '__all__ = ["WhisperFeatureExtractor"]\n\n\nclass WhisperFeatureExtractor:\n    pass\n'
)


def _transformers(version: str, *, five: bool) -> Wheel:
    files: dict[str, str | bytes] = {
        **dict(layouts.transformers_5().files if five else layouts.transformers_4().files),
        "transformers/__init__.py": (TF_INIT_5 if five else TF_INIT_4).format(version=version),
        "transformers/tokenization_utils_base.py": BASE_5 if five else BASE_4,
        "transformers/models/whisper/__init__.py": WHISPER_INIT,
        # found only because the package exports every module's __all__ of its folder
        "transformers/models/whisper/feature_extraction_whisper.py": WHISPER_FEATURES,
        "transformers/models/whisper/modeling_whisper.py": (
            '__all__ = ["WhisperModel"]\n\n\nclass WhisperModel:\n    pass\n'
            + ("" if five else "\n\nWHISPER_ATTENTION_CLASSES = {}\n")
        ),
    }
    if five:
        files["transformers/tokenization_utils_tokenizers.py"] = FAST
        files["transformers/configuration_utils.py"] = (
            "class PreTrainedConfig:\n    pass\n\n\nPretrainedConfig = PreTrainedConfig\n"
        )
    else:
        files["transformers/tokenization_utils_fast.py"] = FAST
        files["transformers/configuration_utils.py"] = (
            "class PretrainedConfig:\n    def _set_token_in_kwargs(self):\n        pass\n"
        )
    return Wheel("transformers", version, files)


def wheels() -> list[Wheel]:
    return [
        Wheel(
            "vllm",
            "0.8.5",
            {
                "vllm/_C.so": padding(),
                **layouts.vllm_085().files,
                "vllm/transformers_utils/tokenizer.py": TOKENIZER_USE,
                "vllm/model_executor/models/qwen2_vl.py": QWEN2_VL_USE,
                # a helper among the model files: its finding breaks its importers' models
                "vllm/model_executor/models/vision_tower.py": (
                    "from transformers.models.whisper.modeling_whisper import "
                    "WHISPER_ATTENTION_CLASSES\n\n\nclass Tower:\n    pass\n"
                ),
                "vllm/sampling.py": "def pick(config):\n    return config.eos_token_id\n",
            },
            requires=["transformers>=4.51.1", "torch==2.6.0"],
        ),
        _transformers("4.51.3", five=False),
        _transformers("4.52.0", five=False),  # published after vLLM 0.8.5: not its reference
        _transformers("5.0.0", five=True),
    ]


UPLOADS = {
    "vllm-0.8.5": "2025-04-28T23:59:40Z",
    "transformers-4.51.3": "2025-04-14T00:00:00Z",
    "transformers-4.52.0": "2025-05-20T00:00:00Z",
    "transformers-5.0.0": "2026-01-20T00:00:00Z",
}


def upload_times(folder: Path) -> dict[str, str]:
    return {p.name: UPLOADS["-".join(p.name.split("-")[:2])] for p in folder.glob("*.whl")}
