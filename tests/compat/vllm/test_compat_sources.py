"""The pieces compat reads vLLM's and transformers' source with, on small sources we write in
the shapes the real releases use: guards on transformers' version, who loads a file, the
names vLLM registers with the auto classes, transformers' aliases and fallbacks, config
fields its loader refuses, and receivers of names vLLM shares with transformers."""

from __future__ import annotations

import ast
import textwrap
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version
from properties import examples

from envkit.compat import apisurface, receivers
from envkit.compat.check import configfields, registrations
from envkit.compat.check.sources import Sources
from envkit.compat.transformers import tfaliases
from envkit.compat.vllm.guards import Guards, dead_lines, within
from envkit.compat.vllm.loading import Loaders


class Probe:
    """A transformers release as the guards ask of it: its version and a few known facts."""

    def __init__(self, version: str, members: dict[tuple[str, str], set[str]] | None = None):
        self.version = Version(version)
        self.members = members or {}
        self.modules = {"transformers.conversion_mapping"} if self.version.major >= 5 else set()

    def module_exists(self, module: str) -> bool | None:
        return module in self.modules

    def provides(self, module: str, name: str) -> bool | None:
        return None

    def has_member(self, module: str, cls: str, name: str) -> bool | None:
        found = self.members.get((module, cls))
        return None if found is None else name in found

    def lacks(self, name: str) -> bool:
        return False


def tree(text: str) -> ast.Module:
    return ast.parse(textwrap.dedent(text))


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(textwrap.dedent(text).splitlines(), 1) if needle in line)


GUARDED = """
import importlib.metadata
import importlib.util

import transformers
from packaging.version import Version
from transformers import PretrainedConfig

TRANSFORMERS_VERSION = importlib.metadata.version("transformers")
WITH_AXIAL = Version(TRANSFORMERS_VERSION) >= Version("5.17.0.dev0")

if WITH_AXIAL:
    from transformers.models.pixtral.modeling_pixtral import AxialRotary  # v5-only
else:
    from transformers.models.pixtral.modeling_pixtral import PixtralRotary  # v4-only


def patch(config):
    if Version(transformers.__version__) < Version("5.0.0"):
        config.rope_parameters = config.rope_scaling  # v4 branch
    else:
        config.standardize_rope_params()  # v5 branch


class Backend:
    @staticmethod
    def check_version(min_version, feature):
        installed = Version(transformers.__version__)
        required = Version(min_version)
        if installed < required:
            raise ImportError(feature)

    def eagle(self):
        self.check_version("5.2.0", "Eagle3 support")
        from transformers.utils.output_capturing import OutputRecorder  # after the helper

    def mapping(self):
        if importlib.util.find_spec("transformers.conversion_mapping") is None:
            return None
        from transformers.conversion_mapping import WeightRenaming  # found by spec


class OlmoConfig(PretrainedConfig):
    def __init__(self):
        if hasattr(self, "validate_layer_type"):
            self.validate_layer_type()  # probed v5 method
        else:
            from transformers.configuration_utils import layer_type_validation  # probed v4
"""


@pytest.mark.parametrize(
    ("version", "dead", "live"),
    [
        (
            "4.57.6",
            ["v5-only", "v5 branch", "after the helper", "probed v5"],
            ["v4-only", "v4 branch", "probed v4"],
        ),
        (
            "5.5.4",
            ["v5-only", "v4 branch", "probed v4"],
            ["v4-only", "v5 branch", "after the helper", "found by spec"],
        ),
        ("5.20.2", ["v4-only", "v4 branch"], ["v5-only", "v5 branch", "after the helper"]),
    ],
)  # fmt: skip
def test_guards_rule_out_the_branches_the_release_cannot_run(
    version: str, dead: list[str], live: list[str]
) -> None:
    members = {
        ("transformers", "PretrainedConfig"): (
            {"to_dict", "validate_layer_type"} if version >= "5" else {"to_dict"}
        )
    }
    ranges = dead_lines(tree(GUARDED), Probe(version, members))
    for needle in dead:
        assert within(ranges, line_of(GUARDED, needle)), needle
    for needle in live:
        assert not within(ranges, line_of(GUARDED, needle)), needle


def test_a_flag_imported_from_another_vllm_module_counts() -> None:
    user = """
    from vllm.model_executor.models.pixtral import WITH_AXIAL

    if WITH_AXIAL:
        from transformers.models.pixtral import Axial  # needs the flag
    """
    flags = Guards(tree(GUARDED), Probe("4.57.6")).module_values()
    ranges = dead_lines(tree(user), Probe("4.57.6"), lambda m: flags if "pixtral" in m else {})
    assert within(ranges, line_of(user, "needs the flag"))
    # what cannot be told keeps both branches
    assert dead_lines(tree(user), Probe("4.57.6")) == []


def test_a_module_read_for_its_flags_is_parsed_once_for_its_guards_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module another file imports a flag from, and whose own module-level raise hangs on
    the release (vllm/config.py, vllm/utils.py): its tree serves both reads, and the
    answers are those of two parses."""
    flagged = """
    import importlib.metadata
    from packaging.version import Version

    NEW = Version(importlib.metadata.version("transformers")) >= Version("5.0.0")
    if not NEW:
        raise ImportError("needs transformers 5")  # refused
    """
    user = """
    from vllm.flagged import NEW

    if NEW:
        from transformers import AutoConfig  # v5 branch
    """
    texts = {
        "vllm/flagged.py": textwrap.dedent(flagged).encode(),
        "vllm/user.py": textwrap.dedent(user).encode(),
    }
    parsed: list[str] = []
    real = apisurface.parse

    def counted(data: str | bytes, path: str) -> ast.Module | None:
        parsed.append(path)
        return real(data, path)

    monkeypatch.setattr(apisurface, "parse", counted)
    sources = Sources(texts)
    sources.probe = Probe("4.57.6")  # type: ignore[assignment]
    assert not sources.live("vllm/user.py", line_of(user, "v5 branch"))
    refused = sources.refusals()
    assert [(f, line) for f, line, _m in refused] == [
        ("vllm/flagged.py", line_of(flagged, "refused"))
    ]
    assert parsed.count("vllm/flagged.py") == 1
    assert sources._held == {}  # let go once its guards are read


def test_a_model_type_test_limits_a_block_to_those_types() -> None:
    text = """
    _WRONG: set[str] = {"step3_vl", "other"}


    def get(model_type):
        if model_type in _WRONG:
            from transformers.tokenization_utils_tokenizers import Backend  # two types
        if config.model_type == "kimi":
            pass  # one type
    """
    guards = Guards(tree(text), Probe("4.57.6"))
    guards.dead_lines()
    spans = {types: (a, b) for a, b, types in guards.only}
    assert set(spans) == {("other", "step3_vl"), ("kimi",)}
    a, b = spans[("other", "step3_vl")]
    assert a <= line_of(text, "two types") <= b


@settings(max_examples=examples(60), deadline=None)
@given(st.text(max_size=200))
def test_guards_never_fail_on_any_source(text: str) -> None:
    try:
        parsed = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    assert isinstance(dead_lines(parsed, Probe("5.0.0")), list)


def _loaders(files: dict[str, str]) -> Loaders:
    return Loaders({p: textwrap.dedent(t).encode() for p, t in files.items()})


REGISTRY = """
_VLLM_MODELS = {
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
    "PixtralForConditionalGeneration": ("pixtral", "PixtralForConditionalGeneration"),
    "LlavaForConditionalGeneration": ("llava", "LlavaForConditionalGeneration"),
    "TransformersForCausalLM": ("transformers", "TransformersForCausalLM"),
    "OvisForConditionalGeneration": ("ovis", "Ovis"),
}
"""
CONFIG = """
from vllm.transformers_utils.configs import OvisConfig

_CONFIG_REGISTRY = LazyConfigDict(ovis="OvisConfig", chatglm="ChatGLMConfig")
"""
LAZY_CONFIGS = """
import importlib

_CLASS_TO_MODULE = {
    "OvisConfig": "vllm.transformers_utils.configs.ovis",
    "ChatGLMConfig": "vllm.transformers_utils.configs.chatglm",
}


def __getattr__(name):
    return getattr(importlib.import_module(_CLASS_TO_MODULE[name]), name)
"""


def world_of_files(configs_init: str = LAZY_CONFIGS) -> dict[str, str]:
    return {
        "vllm/__init__.py": "from vllm.entrypoints.llm import LLM\n",
        "vllm/entrypoints/llm.py": "from vllm.transformers_utils.config import get_config\n"
        "from vllm.spec_decode import eagle\n",
        "vllm/spec_decode.py": "from vllm.model_executor.models.llama import Llama\n",
        "vllm/transformers_utils/__init__.py": "",
        "vllm/transformers_utils/config.py": CONFIG,
        "vllm/transformers_utils/configs/__init__.py": configs_init,
        "vllm/transformers_utils/configs/ovis.py": "from transformers import AutoConfig\n\n"
        "class OvisConfig:\n    def fields(self):\n        return self.x  # a method\n",
        "vllm/transformers_utils/configs/chatglm.py": "class ChatGLMConfig:\n    pass\n",
        "vllm/model_executor/__init__.py": "",
        "vllm/model_executor/models/__init__.py": "from .registry import ModelRegistry\n",
        "vllm/model_executor/models/registry.py": REGISTRY,
        "vllm/model_executor/models/llama.py": "class Llama:\n    pass\n",
        "vllm/model_executor/models/pixtral.py": "from .vision_helper import Tower\n",
        "vllm/model_executor/models/llava.py": "from .pixtral import Pixtral\n",
        "vllm/model_executor/models/vision.py": (
            "def encoder_info(config):\n    from .pixtral import Info\n    return Info\n"
        ),
        "vllm/model_executor/models/vision_helper.py": "class Tower:\n    pass\n",
        "vllm/model_executor/models/transformers/__init__.py": "from .base import Base\n",
        "vllm/model_executor/models/transformers/base.py": "class Base:\n    pass\n",
        "vllm/multimodal/__init__.py": "from vllm.model_executor.models.vision import info\n",
        "vllm/benchmarks/serve.py": "import json\n",  # loaded by name: vLLM-wide
    }


def test_files_are_scoped_by_who_loads_them() -> None:
    loaders = _loaders(world_of_files())
    scope = loaders.file_scope
    # start-up imports llama at module level (through speculative decoding): vLLM-wide
    assert scope("vllm/model_executor/models/llama.py").everywhere
    # a deferred import from a vLLM-wide helper does not make a model file vLLM-wide
    pixtral = scope("vllm/model_executor/models/pixtral.py")
    assert not pixtral.everywhere
    assert pixtral.architectures == (
        "LlavaForConditionalGeneration", "PixtralForConditionalGeneration",
    )  # fmt: skip
    # a helper only model files import, in the models folder or in a package
    assert (
        scope("vllm/model_executor/models/vision_helper.py").architectures == pixtral.architectures
    )
    backend = scope("vllm/model_executor/models/transformers/base.py")
    assert backend.architectures == ("TransformersForCausalLM",)
    # config modules a lazy table loads on demand: their model types; one the loader imports
    # at module level (through the table) is loaded at start-up
    assert scope("vllm/transformers_utils/configs/chatglm.py").model_types == ("chatglm",)
    assert scope("vllm/transformers_utils/configs/ovis.py").everywhere
    assert scope("vllm/benchmarks/serve.py").everywhere


def test_a_config_class_method_breaks_only_its_model_types() -> None:
    files = world_of_files()
    loaders = _loaders(files)
    path = "vllm/transformers_utils/configs/ovis.py"
    method = next(n for n, line in enumerate(files[path].splitlines(), 1) if "a method" in line)
    assert loaders.scope(path, 1).everywhere  # the module's own import runs at start-up
    assert loaders.scope(path, method).model_types == ("ovis",)


def test_an_eager_config_package_loads_every_config_module_at_start_up() -> None:
    eager = "from .ovis import OvisConfig\nfrom .chatglm import ChatGLMConfig\n"
    loaders = _loaders(world_of_files(eager))
    assert loaders.file_scope("vllm/transformers_utils/configs/chatglm.py").everywhere


def test_type_checking_imports_load_nothing() -> None:
    files = world_of_files()
    files["vllm/entrypoints/llm.py"] += (
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from vllm.model_executor.models.pixtral import Pixtral\n"
    )
    assert not _loaders(files).file_scope("vllm/model_executor/models/pixtral.py").everywhere


OVIS_CONFIG = """
import contextlib

from transformers import AutoConfig, AutoImageProcessor, AutoProcessor, PretrainedConfig


class AIMv2Config(PretrainedConfig):
    model_type = "aimv2"


class LidConfig(PretrainedConfig):
    model_type = "lid"


class Qwen2VLConfig(PretrainedConfig):
    pass


AutoConfig.register("aimv2", AIMv2Config)  # raises when transformers owns it
AutoConfig.register(LidConfig.model_type, LidConfig)  # read from the class
AutoConfig.register("aimv2_tok", AIMv2Config, exist_ok=True)
AutoProcessor.register("OvisProcessor", object)  # a string key never clashes
AutoImageProcessor.register(Qwen2VLConfig, object)  # a class key: by its __name__
with contextlib.suppress(ValueError):
    AutoConfig.register("caught", AIMv2Config)
try:
    AutoConfig.register("also_caught", AIMv2Config)
except ValueError:
    pass
"""


def test_registrations_that_can_raise() -> None:
    found = registrations.registrations(tree(OVIS_CONFIG), "vllm/configs/ovis.py")
    keys = [(r.kind, r.key, r.by_class) for r in found]
    assert keys == [
        ("AutoConfig", "aimv2", False),
        ("AutoConfig", "lid", False),
        ("AutoImageProcessor", "Qwen2VLConfig", True),
    ]
    assert found[0].line == line_of(OVIS_CONFIG, "raises when transformers owns it")
    dead = line_of(OVIS_CONFIG, "read from the class")
    alive = registrations.registrations(tree(OVIS_CONFIG), "x", lambda n: n == dead)
    assert [r.key for r in alive] == ["aimv2", "Qwen2VLConfig"]


AUTO_MAPPINGS = """
from collections import OrderedDict

CONFIG_MAPPING_NAMES = OrderedDict([("qwen2_vl", "Qwen2VLConfig"), ("aimv2", "Aimv2Config")])
IMAGE_PROCESSOR_MAPPING_NAMES = OrderedDict([("qwen2_vl", {"torchvision": "Qwen2VLProc"})])
"""
IMAGE_AUTO = """
from .auto_factory import _LazyAutoMapping
from .auto_mappings import IMAGE_PROCESSOR_MAPPING_NAMES
from .configuration_auto import CONFIG_MAPPING_NAMES

IMAGE_PROCESSOR_MAPPING = _LazyAutoMapping(CONFIG_MAPPING_NAMES, IMAGE_PROCESSOR_MAPPING_NAMES)


class AutoImageProcessor:
    @staticmethod
    def register(config_class, image_processor_classes=None, exist_ok=False):
        IMAGE_PROCESSOR_MAPPING.register(config_class, image_processor_classes, exist_ok=exist_ok)
"""
CONFIG_AUTO = "from .auto_mappings import CONFIG_MAPPING_NAMES\n"


def test_what_the_release_owns_decides_a_clash() -> None:
    autos = {
        "transformers/models/auto/auto_mappings.py": AUTO_MAPPINGS.encode(),
        "transformers/models/auto/image_processing_auto.py": IMAGE_AUTO.encode(),
        "transformers/models/auto/configuration_auto.py": CONFIG_AUTO.encode(),
    }
    owned = registrations.Tables(frozenset({"qwen2_vl", "aimv2"}), lambda: autos)
    found = registrations.registrations(tree(OVIS_CONFIG), "ovis.py")
    assert [owned.clashes(r) for r in found] == [True, False, True]
    older = registrations.Tables(frozenset({"qwen2_vl"}), lambda: {})
    assert older.clashes(found[0]) is False and older.clashes(found[2]) is None  # unreadable
    releases = [Version(v) for v in ("4.52.0", "4.53.1", "4.54.0", "4.55.0", "4.57.6")]
    first = registrations.first_owner("aimv2", releases, lambda v: v >= Version("4.54.0"))
    assert first == "4.54.0"


LAZY_MODULE = """
class _LazyModule:
    def __getattr__(self, name):
        if name.endswith("TokenizerFast"):
            fallback_name = name[:-4]
            if name.endswith("Tokenizer") or name.endswith("TokenizerFast"):
                lookup = name[:-4] if name.endswith("TokenizerFast") else name
        if name.endswith("ImageProcessorFast"):
            fallback_name = name[:-4]
        candidate = name[:-10] if name.endswith("Tokenizer") else name
"""
INIT_LOOP = """
import sys
from pathlib import Path

if TYPE_CHECKING:
    pass
else:
    def _create_module_alias(alias, target):
        sys.modules[alias] = target

    _create_module_alias(f"{__name__}.tokenization_utils_fast", ".tokenization_utils_tokenizers")
    for _proc_file in sorted((Path(__file__).parent / "models").rglob("image_processing_*.py")):
        _model = _proc_file.parent.name
        _module = _proc_file.stem
        _target = f".models.{_model}.{_module}"
        _create_module_alias(f"{__name__}.models.{_model}.{_module}_fast", _target)

        def getattr_factory(target):
            def _getattr(name):
                return name.removesuffix("Fast")
            return _getattr
"""
INIT_PATTERN = """
import re

_LEGACY = {"tokenization_utils_fast": "tokenization_utils_tokenizers"}
_PATTERN = re.compile(rf"{re.escape(__name__)}\\.models\\.(\\w+)\\.image_processing_(\\w+)_fast")


def _resolve(fullname):
    if (match := _PATTERN.fullmatch(fullname)) is not None:
        return f"{__name__}.models.{match[1]}.image_processing_{match[2]}"
    package, _, name = fullname.rpartition(".")
    if package == __name__ and name in _LEGACY:
        return f"{__name__}.{_LEGACY[name]}"
    return None
"""
FINDER = """
class _LegacyModuleAliasFinder:
    def exec_module(self, module):
        def __getattr__(name):
            if name.endswith("ImageProcessorFast") and hasattr(module, name[:-4]):
                return name[:-4]
"""


@pytest.mark.parametrize("init", [INIT_LOOP, INIT_PATTERN], ids=["loop", "pattern"])
def test_transformers_aliases_and_fallbacks_are_read_from_its_source(init: str) -> None:
    members = [
        "transformers/models/siglip/image_processing_siglip.py",
        "transformers/models/qwen2_vl/image_processing_qwen2_vl.py",
        "transformers/models/qwen2_vl/modeling_qwen2_vl.py",
    ]
    texts = {tfaliases.INIT: init.encode(), tfaliases.IMPORT_UTILS: (LAZY_MODULE + FINDER).encode()}
    rules = tfaliases.read_rules(texts, members)
    old = "transformers.models.qwen2_vl.image_processing_qwen2_vl_fast"
    assert rules.target(old) == "transformers.models.qwen2_vl.image_processing_qwen2_vl"
    assert rules.target("transformers.tokenization_utils_fast") == (
        "transformers.tokenization_utils_tokenizers"
    )
    assert rules.target("transformers.models.qwen2_vl.modeling_qwen2_vl_fast") is None
    # lazy packages answer *ImageProcessorFast and *TokenizerFast with the plain name; the
    # nested converter test's own slice is not a rule of the outer one
    assert set(rules.lazy) == {("ImageProcessorFast", 4), ("TokenizerFast", 4)}
    assert rules.fallbacks("SiglipImageProcessorFast", alias=False) == ["SiglipImageProcessor"]
    assert rules.fallbacks("SiglipImageProcessor", alias=False) == []
    assert rules.fallbacks("Qwen2VLImageProcessorFast", alias=True) == ["Qwen2VLImageProcessor"]


def test_a_release_without_those_rules_answers_nothing_more() -> None:
    rules = tfaliases.read_rules({tfaliases.INIT: b"_import_structure = {}\n"}, [])
    assert rules.target("transformers.tokenization_utils_fast") is None
    assert rules.fallbacks("SiglipImageProcessorFast", alias=False) == []


VLLM_ROPE_OLD = """
def patch_rope_scaling_dict(rope_scaling):
    if "rope_type" in rope_scaling and "type" in rope_scaling:
        rope_type = rope_scaling["rope_type"]
        rope_type_legacy = rope_scaling["type"]
        if rope_type != rope_type_legacy:
            raise ValueError("conflict")
"""
VLLM_ROPE_NEW = """
def patch_rope_parameters_dict(rope_parameters):
    if "rope_type" in rope_parameters and "type" in rope_parameters:
        rope_type = rope_parameters["rope_type"]
        rope_type_legacy = rope_parameters["type"]
        if (rope_type_legacy == "su" and rope_type == "longrope") or (
            rope_type_legacy == "mrope" and rope_type == "default"
        ):
            pass
        elif rope_type != rope_type_legacy:
            raise ValueError("conflict")
"""
TF_QWEN2_VL = """
class Qwen2VLTextConfig(PreTrainedConfig):
    model_type = "qwen2_vl_text"

    def convert_rope_params_to_dict(self, **kwargs):
        if self.rope_parameters.get("rope_type", self.rope_parameters.get("type")) == "mrope":
            self.rope_parameters["rope_type"] = "default"
        self.standardize_rope_params()


class Qwen2VLConfig(PreTrainedConfig):
    model_type = "qwen2_vl"
"""
TF_PHI3 = """
class Phi3Config(PreTrainedConfig):
    model_type = "phi3"

    def convert(self):
        kind = self.rope_parameters.get("rope_type", None)
        if kind is not None and kind in ["su", "yarn"]:
            self.rope_parameters["rope_type"] = "longrope"
"""
TF_RENAMES_BOTH = """
class Qwen2VLConfig:
    model_type = "qwen2_vl"

    def __init__(self):
        if self.rope_scaling["type"] == "mrope":
            self.rope_scaling["type"] = "default"
            self.rope_scaling["rope_type"] = "default"
"""


def test_config_fields_vllm_refuses_after_transformers_rewrote_them() -> None:
    (old,) = configfields.vllm_rules(tree(VLLM_ROPE_OLD), "vllm/transformers_utils/config.py")
    (new,) = configfields.vllm_rules(tree(VLLM_ROPE_NEW), "vllm/transformers_utils/config.py")
    assert (old.modern, old.legacy, old.allowed) == ("rope_type", "type", frozenset())
    assert old.line == line_of(VLLM_ROPE_OLD, "raise")
    assert new.allowed == {("su", "longrope"), ("mrope", "default")}
    rewrites = [
        *configfields.rewrites(tree(TF_QWEN2_VL), "qwen2_vl.py", "rope_type", "type"),
        *configfields.rewrites(tree(TF_PHI3), "phi3.py", "rope_type", "type"),
        *configfields.rewrites(tree(TF_RENAMES_BOTH), "both.py", "rope_type", "type"),
    ]
    assert [(r.file, r.old, r.new, r.model_types) for r in rewrites] == [
        ("qwen2_vl.py", ("mrope",), "default", ("qwen2_vl", "qwen2_vl_text")),
        ("phi3.py", ("su", "yarn"), "longrope", ("phi3",)),
    ]  # the last one renames both keys: no conflict
    assert [(r.file, v) for r, v in configfields.conflicts(old, rewrites)] == [
        ("qwen2_vl.py", ("mrope",)), ("phi3.py", ("su", "yarn")),
    ]  # fmt: skip
    assert [(r.file, v) for r, v in configfields.conflicts(new, rewrites)] == [
        ("phi3.py", ("yarn",))
    ]


SHARED = """
from typing import Union

from transformers import PreTrainedTokenizer

AnyTokenizer = Union[PreTrainedTokenizer, "MistralTokenizer"]


class Connector:
    def fetch_audio(self, url):
        return url


def cached(tokenizer: AnyTokenizer, other):
    special = tokenizer.all_special_tokens_extended  # typed as transformers'
    audio = other.fetch_audio("x")  # vLLM's own object
    return special, audio
"""


def test_a_name_vllm_defines_too_counts_only_on_a_transformers_typed_receiver() -> None:
    names = {"fetch_audio", "all_special_tokens_extended", "never_defined"}
    texts = {"vllm/a.py": SHARED.encode(), "vllm/b.py": b"def all_special_tokens_extended(): ...\n"}
    assert receivers.defined_by_vllm(texts, names) == {"fetch_audio", "all_special_tokens_extended"}
    parsed = tree(SHARED)
    types = receivers.transformers_types(parsed, lambda _m, _n: False)
    assert types == {"PreTrainedTokenizer", "AnyTokenizer"}
    reads = receivers.typed_reads(parsed, {"fetch_audio", "all_special_tokens_extended"}, types)
    assert reads == {("all_special_tokens_extended", line_of(SHARED, "typed as transformers'"))}


_TRICKY_SOURCES = [
    # imports at the top, in a later function, guarded ones, and strings and comments that
    # hold what looks like a top-level def or an import
    '''"""A module.

def not_code():
    from transformers import InADocstring
"""
from transformers import AutoConfig
import transformers.models.llama as llama

try:
    from transformers import Optional
except ImportError:
    Optional = None

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from transformers import OnlyTyping
else:
    from transformers import AtRunTime


def first():
    return 1

TEXT = \'\'\'"""

def inside():
    from transformers import InASingleQuotedTriple
\'\'\'
# a comment with """ in it

@decorated

def second():
    from transformers.generation import GenerationConfig
    x = "from transformers import NotAnImport"
    return x


class Third:
    def method(self):
        import transformers.utils

async def fourth():
    from transformers import LateImport
''',
    # no blank line before the defs: one block
    "def f():\n    from transformers import A\ndef g():\n    from transformers import B\n",
    # Windows line ends, an encoding line: read whole
    "from transformers import A\r\n\r\ndef f():\r\n    from transformers import B\r\n",
    "# -*- coding: latin-1 -*-\nfrom transformers import A\n\n\ndef f():\n    pass\n",
    "",
    "x = 1\n",
]


@pytest.mark.parametrize("source", _TRICKY_SOURCES)
def test_imports_in_finds_what_the_whole_tree_has(source: str) -> None:
    data = source.encode("latin-1")
    whole = apisurface.imports_of(ast.parse(data), "vllm/x.py")
    assert apisurface.imports_in(data, "vllm/x.py") == whole


def test_imports_in_reads_the_whole_file_when_a_block_does_not_parse() -> None:
    """A block the cut cannot parse alone (here: the def after a blank line is the body of
    a decorator's call) is read with the whole file, as its tree gives it."""
    source = b"@register(\n    1,\n\ndef f(): pass)\nfrom transformers import A\n"
    assert apisurface.imports_in(source, "vllm/x.py") == []
    good = b"x = (\n    1\n)\n\n\ndef f():\n    from transformers import A\n"
    assert [u.line for u in apisurface.imports_in(good, "vllm/x.py")] == [7]


# a string opened and never closed, over and over: each quote a scan to the end of the text
# if an unclosed string were tried again from the next quote (2 s of CPU at 16 KiB, the time
# growing with the square of the size); one pass over 64 KiB takes milliseconds
UNCLOSED = 1 << 16
UNCLOSED_TEXTS = {
    "double": b'"' + b'\\"' * (UNCLOSED // 2),
    "single": b"'" + b"\\'" * (UNCLOSED // 2),
    "triple-double": b'"""' + b'\\"""' * (UNCLOSED // 4),
    "triple-single": b"'''" + b"\\'''" * (UNCLOSED // 4),
    "mixed": b"\"'\\" * (UNCLOSED // 3),
    "continued lines": b'"\\\n' * (UNCLOSED // 3),
}


@pytest.mark.parametrize("text", list(UNCLOSED_TEXTS.values()), ids=list(UNCLOSED_TEXTS))
def test_the_block_cut_is_one_pass_over_strings_never_closed(text: bytes) -> None:
    started = time.process_time()
    apisurface.imports_in(b"from transformers import PreTrainedModel\n" + text, "x.py")
    assert time.process_time() - started < 1.0
