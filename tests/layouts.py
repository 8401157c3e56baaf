"""Small sources written for envkit's tests, in the *shapes* vLLM and transformers releases use
for their registries (no upstream code: names are facts, the rest is filler we generate).

Each builder returns a :class:`Layout`: the files (wheel member -> text) and what a correct
scan must find in them, so the tests compare the scanner with the fixture's own truth. The
real members are read from the index by the ``network`` tests.

Shapes reproduced:

- vLLM 0.2-era ``models/__init__.py``: one ``_MODELS`` dict of ``"Arch": ("module", "Class")``;
- vLLM 0.8-era ``registry.py``: several tables spread into ``_VLLM_MODELS`` (``**name``), one
  holding a dict comprehension that copies every ``LlamaForCausalLM`` alias (``**{...}``);
  ``config.py``: an annotated ``_CONFIG_REGISTRY`` dict that spreads an override table;
- vLLM 0.30-era: the same registry plus ``_PREVIOUSLY_SUPPORTED_MODELS`` (dropped, with the
  last release) and ``_OOT_SUPPORTED_MODELS`` (moved to plugins); ``config.py`` builds its
  table with keyword ``LazyConfigDict(name="Class")``;
- transformers 4: ``CONFIG_MAPPING_NAMES = OrderedDict([(...), ...])`` among other tables;
- transformers 5: a generated ``auto_mappings.py`` holding the mapping, imported by
  ``configuration_auto.py`` (``from .auto_mappings import ...``), which ``.update()``s it and
  rebuilds it with ``OrderedDict(**{...}, **NAMES)``.

Every module also carries code around the tables (imports, functions, classes, calls), which
the scanner must step over without running.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VLLM_REGISTRY = "vllm/model_executor/models/registry.py"
VLLM_OLD_REGISTRY = "vllm/model_executor/models/__init__.py"
VLLM_CONFIG = "vllm/transformers_utils/config.py"
TF_CONFIG_AUTO = "transformers/models/auto/configuration_auto.py"
TF_AUTO_MAPPINGS = "transformers/models/auto/auto_mappings.py"
TF_MODELING_AUTO = "transformers/models/auto/modeling_auto.py"

# transformers' auto model tables in their shape (model type, class name), a few of each
MODELING_AUTO = """from collections import OrderedDict

MODEL_MAPPING_NAMES = OrderedDict(
    [
        ("llama", "LlamaModel"),
        ("qwen2_vl", "Qwen2VLModel"),
        ("qwen3_5", "Qwen3_5Model"),
    ]
)

MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict(
    [
        ("llama", "LlamaForCausalLM"),
        ("midtype", "Mid003ForCausalLM"),
    ]
)

MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES = OrderedDict(
    [
        ("qwen2_vl", "Qwen2VLForConditionalGeneration"),
        ("qwen3_5", "Qwen3_5ForConditionalGeneration"),
    ]
)
"""

NOISE = """import importlib
import os
from typing import Any

from .interfaces import supports_lora  # a relative import the scanner must not follow

logger = get_logger(__name__)


def _load(name: str) -> Any:
    return importlib.import_module(name)


class Registry:
    def __init__(self, models: dict) -> None:
        self.models = dict(models)
"""


@dataclass
class Layout:
    files: dict[str, str]
    architectures: set[str] = field(default_factory=set)
    model_types: set[str] = field(default_factory=set)
    previously_supported: dict[str, str] = field(default_factory=dict)
    out_of_tree: dict[str, str] = field(default_factory=dict)


def filler(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{n:03d}ForCausalLM" for n in range(count)]


def _entries(archs: dict[str, tuple[str, str]], indent: str = "    ") -> str:
    return "".join(f'{indent}"{a}": ("{m}", "{c}"),\n' for a, (m, c) in archs.items())


def vllm_old() -> Layout:
    archs = {
        "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
        "AquilaModel": ("llama", "LlamaForCausalLM"),
        "MistralForCausalLM": ("llama", "LlamaForCausalLM"),
        **{a: ("filler", a) for a in filler("Old", 9)},
    }
    text = NOISE + "\n# architecture -> (module, class)\n_MODELS = {\n" + _entries(archs) + "}\n"
    text += "\nModelRegistry = Registry(_MODELS)\n"
    return Layout({VLLM_OLD_REGISTRY: text}, architectures=set(archs))


def _vllm_registry(
    text_models: dict[str, tuple[str, str]],
    multimodal: dict[str, tuple[str, str]],
    tail: str = "",
) -> tuple[str, set[str]]:
    llama_aliases = {a for a, (_m, c) in text_models.items() if c == "LlamaForCausalLM"}
    embedding = {"Qwen2Model": ("qwen2", "Qwen2EmbeddingModel"), "LlamaModel": ("llama", "X")}
    text = NOISE + "\n_TEXT_GENERATION_MODELS = {\n    # [Decoder-only]\n"
    text += _entries(text_models) + "}\n\n_EMBEDDING_MODELS = {\n" + _entries(embedding)
    text += (
        "    **{\n        # every alias of the Llama class embeds as well\n"
        "        k: (mod, arch) for k, (mod, arch) in _TEXT_GENERATION_MODELS.items()\n"
        '        if arch == "LlamaForCausalLM"\n    },\n}\n\n'
    )
    text += "_MULTIMODAL_MODELS = {\n" + _entries(multimodal) + "}\n\n"
    text += '_TRANSFORMERS_MODELS = {\n    "TransformersForCausalLM": ("transformers", "T"),\n}\n\n'
    text += (
        "_VLLM_MODELS = {\n    **_TEXT_GENERATION_MODELS,\n    **_EMBEDDING_MODELS,\n"
        "    **_MULTIMODAL_MODELS,\n    **_TRANSFORMERS_MODELS,\n}\n\n"
        "ModelRegistry = Registry({k: v for k, v in _VLLM_MODELS.items()})\n"
    )
    found = set(text_models) | set(embedding) | llama_aliases | set(multimodal)
    return text + tail, found | {"TransformersForCausalLM"}


def vllm_085() -> Layout:
    text_models = {
        "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
        "AquilaForCausalLM": ("llama", "LlamaForCausalLM"),
        "Qwen2ForCausalLM": ("qwen2", "Qwen2ForCausalLM"),
        "Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),
        "Phi3SmallForCausalLM": ("phi3_small", "Phi3SmallForCausalLM"),  # dropped after 0.9.2
        **{a: ("filler", a) for a in filler("Mid", 20)},
    }
    multimodal = {
        "Qwen2VLForConditionalGeneration": ("qwen2_vl", "Qwen2VLForConditionalGeneration"),
        "MllamaForConditionalGeneration": ("mllama", "MllamaForConditionalGeneration"),
    }
    registry, archs = _vllm_registry(text_models, multimodal)
    configs = ["chatglm", "dbrx", "mpt", "nemotron"]
    config = NOISE + (
        "\n_CONFIG_REGISTRY_OVERRIDE_HF: Dict[str, Type[PretrainedConfig]] = {\n"
        '    "mllama": MllamaConfig\n}\n\n'
        "_CONFIG_REGISTRY: Dict[str, Type[PretrainedConfig]] = {\n"
        + "".join(f'    "{t}": {t.title()}Config,\n' for t in configs)
        + "    **_CONFIG_REGISTRY_OVERRIDE_HF\n}\n"
    )
    return Layout(
        {VLLM_REGISTRY: registry, VLLM_CONFIG: config},
        architectures=archs,
        model_types={*configs, "mllama"},
    )


def vllm_0330() -> Layout:
    text_models = {
        "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
        "Qwen2ForCausalLM": ("qwen2", "Qwen2ForCausalLM"),
        "Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),
        **{a: ("filler", a) for a in filler("New", 30)},
    }
    multimodal = {
        "Qwen2VLForConditionalGeneration": ("qwen2_vl", "Qwen2VLForConditionalGeneration"),
        "Qwen3_5ForConditionalGeneration": ("qwen3_5", "Qwen3_5ForConditionalGeneration"),
    }
    # the last record is wrong on purpose, as real ones have been: 0.8.5 still lists it
    previously = {
        "Phi3SmallForCausalLM": "0.9.2",
        "MotifForCausalLM": "0.10.2",
        "AquilaForCausalLM": "0.2.7",
    }
    plugins = {"BartModel": "the Bart plugin", "Florence2ForConditionalGeneration": "the plugin"}
    tail = (
        "\n_PREVIOUSLY_SUPPORTED_MODELS = {\n"
        + "".join(f'    "{a}": "{v}",\n' for a, v in previously.items())
        + "}\n\n_OOT_SUPPORTED_MODELS = {\n"
        + "".join(f'    "{a}": "{v}",\n' for a, v in plugins.items())
        + "}\n"
    )
    registry, archs = _vllm_registry(text_models, multimodal, tail)
    configs = ["chatglm", "deepseek_vl_v2", "kimi_vl", "qwen3_5_moe_extra"]
    config = (
        NOISE
        + "\n\nclass LazyConfigDict(dict):\n    def __getitem__(self, key):\n"
        + "        return _load(super().__getitem__(key))\n\n\n"
        + "_CONFIG_REGISTRY: dict[str, type[PreTrainedConfig]] = LazyConfigDict(\n"
        + "".join(f'    {t}="{t.title()}Config",\n' for t in configs)
        + ")\n"
    )
    return Layout(
        {VLLM_REGISTRY: registry, VLLM_CONFIG: config},
        architectures=archs,
        model_types=set(configs),
        previously_supported=previously,
        out_of_tree=plugins,
    )


def _pairs(types: list[str]) -> str:
    return "".join(f'        ("{t}", "{t.title().replace("_", "")}Config"),\n' for t in types)


def transformers_4() -> Layout:
    types = ["bart", "llama", "qwen2", "qwen2_vl", "qwen3", *(f"filler{n:03d}" for n in range(40))]
    text = NOISE + (
        "\nCONFIG_MAPPING_NAMES = OrderedDict(\n    [\n" + _pairs(types) + "    ]\n)\n\n"
        "MODEL_NAMES_MAPPING = OrderedDict(\n    [\n"
        + "".join(f'        ("{t}", "{t.upper()}"),\n' for t in types[:3])
        + "    ]\n)\n\nCONFIG_MAPPING = _LazyConfigMapping(CONFIG_MAPPING_NAMES)\n"
    )
    return Layout({TF_CONFIG_AUTO: text}, model_types=set(types))


def transformers_5() -> Layout:
    generated = [
        "bart",
        "llama",
        "qwen2",
        "qwen2_vl",
        "qwen3",
        "qwen3_5",
        *(f"gen{n:03d}" for n in range(60)),
    ]
    mappings = (
        "# generated file: do not edit\nfrom collections import OrderedDict\n\n"
        "CONFIG_MAPPING_NAMES = OrderedDict(\n    [\n" + _pairs(generated) + "    ]\n)\n\n"
        'SPECIAL_MODEL_TYPE_TO_MODULE_NAME = OrderedDict([("mlcd", "mlcd")])\n'
    )
    updated = ["mlcd", "mimi_decoder"]
    auto = NOISE + (
        "from .auto_mappings import CONFIG_MAPPING_NAMES, SPECIAL_MODEL_TYPE_TO_MODULE_NAME\n\n"
        "CONFIG_MAPPING_NAMES.update(\n    {\n"
        + "".join(f'        "{t}": "{t.title()}Config",\n' for t in updated)
        + "    }\n)\n\n"
        'CONFIG_MAPPING_NAMES = OrderedDict(**{"gpt-sw3": "GPT2Config"}, **CONFIG_MAPPING_NAMES)\n'
        "\nCONFIG_MAPPING = _LazyConfigMapping(CONFIG_MAPPING_NAMES)\n"
    )
    return Layout(
        {TF_CONFIG_AUTO: auto, TF_AUTO_MAPPINGS: mappings, TF_MODELING_AUTO: MODELING_AUTO},
        model_types={*generated, *updated, "gpt-sw3"},
    )
