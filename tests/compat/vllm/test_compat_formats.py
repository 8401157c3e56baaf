"""compat scopes what only some checkpoints reach (issue 27): code under a test of the
checkpoint's format (a ``.gguf`` suffix, an ``mmproj`` file beside it) and a processor
module a lazy table loads by a name from the checkpoint's processor config. Each has a
control: the same code reached at start-up stays vLLM-wide."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.compat.check.sources import Sources
from envkit.compat.report import Code, CompatReport, Incompatibility
from envkit.compat.vllm.callers import Callers
from envkit.compat.vllm.formats import Formats
from envkit.compat.vllm.loading import Loaders
from envkit.io.cache import Fields

import indexserver
from helpers import output, run_cli

PROBES = """from pathlib import Path


def check_gguf_file(model):
    path = Path(model)
    if not path.is_file():
        return False
    elif path.suffix == ".gguf":
        return True
    return False


def is_gguf(model):
    if check_gguf_file(model):
        return True
    return False


def detect_multimodal(model):
    if not model.endswith(".gguf"):
        return None
    for pattern in ("mmproj.gguf", "mmproj-*.gguf", "*mmproj*.gguf"):
        found = list(Path(model).parent.glob(pattern))
        if found:
            return found[0]
    return None


def names(model):
    return [p for p in Path(model).iterdir() if p.name.endswith(".json")]
"""
START = "vllm/transformers_utils/config.py"


def world(config: str, extra: dict[str, str] | None = None) -> dict[str, bytes]:
    files = {
        "vllm/__init__.py": "from vllm.transformers_utils.config import get_config\n",
        "vllm/transformers_utils/__init__.py": "",
        "vllm/transformers_utils/gguf_utils.py": PROBES,
        START: "from transformers import PretrainedConfig\n"
        "from vllm.transformers_utils.gguf_utils import (\n"
        "    check_gguf_file, detect_multimodal, is_gguf as gguf\n)\n\n\n" + config,
        **(extra or {}),
    }
    return {k: v.encode() for k, v in files.items()}


def scope_at(texts: dict[str, bytes], path: str, needle: str) -> Any:
    line = next(i for i, t in enumerate(texts[path].decode().split("\n"), 1) if needle in t)
    sources = Sources(texts)
    loaders = Loaders(texts)
    callers = Callers(texts, sources.tree, loaders, Formats(texts, sources.tree).conditions)
    return callers.scope(path, line)


def test_a_format_probe_is_named_from_its_own_suffix_test_and_side_file_patterns() -> None:
    texts = world("")
    formats = Formats(texts, Sources(texts).tree)
    probes = formats.probes("vllm/transformers_utils/gguf_utils.py")
    assert probes == {
        "check_gguf_file": "gguf checkpoint",
        "is_gguf": "gguf checkpoint",  # answers with a probe
        "detect_multimodal": "gguf checkpoint with mmproj",
    }  # names() tests a suffix only to filter a listing: it decides nothing
    assert formats.probes(START) == {
        "check_gguf_file": "gguf checkpoint",
        "detect_multimodal": "gguf checkpoint with mmproj",
        "gguf": "gguf checkpoint",
    }


@pytest.mark.parametrize(
    ("config", "condition"),
    [
        (
            "def get_config(model, c):\n    mm = detect_multimodal(model)\n"
            "    if mm is not None:\n        return PretrainedConfig.gone(c)\n    return c\n",
            "gguf checkpoint with mmproj",
        ),
        (
            "def get_config(model, c):\n    if gguf(model) and c:\n"
            "        return PretrainedConfig.gone(c)\n    return c\n",
            "gguf checkpoint",
        ),
        (
            "def get_config(model, c):\n    if not check_gguf_file(model):\n        return c\n"
            "    return PretrainedConfig.gone(c)\n",
            "gguf checkpoint",
        ),
    ],
    ids=["mmproj-result", "and-probe", "early-return"],
)
def test_code_under_a_test_of_the_checkpoint_format_is_scoped_to_it(
    config: str, condition: str
) -> None:
    found = scope_at(world(config), START, ".gone(")
    assert not found.everywhere and found.conditions == (condition,)
    assert (found.architectures, found.model_types, found.processors) == ((), (), ())


@pytest.mark.parametrize(
    "config",
    [
        "def get_config(model, c):\n    return PretrainedConfig.gone(c)\n",  # at start-up
        "def get_config(model, c):\n    if not check_gguf_file(model):\n"
        "        return PretrainedConfig.gone(c)\n    return c\n",  # the other checkpoints
        "def get_config(model, c):\n    if not gguf(model):\n        c = 1\n"
        "    return PretrainedConfig.gone(c)\n",  # no exit: the rest runs for all
        "def get_config(model, c):\n    if names(model):\n"
        "        return PretrainedConfig.gone(c)\n    return c\n",  # no format probe
    ],
    ids=["start-up", "negated", "no-exit", "not-a-probe"],
)
def test_the_same_call_reached_for_every_checkpoint_stays_vllm_wide(config: str) -> None:
    assert scope_at(world(config), START, ".gone(").everywhere


def test_a_helper_called_only_under_a_format_test_is_scoped_to_it() -> None:
    helper = "from transformers import PretrainedConfig\n\n\ndef patch(c):\n    return c.gone\n"
    extra = {"vllm/transformers_utils/patching.py": helper}
    config = (
        "from vllm.transformers_utils.patching import patch\n\n\n"
        "def get_config(model, c):\n    if check_gguf_file(model):\n        c = patch(c)\n"
        "    return c\n"
    )
    texts = world(config, extra)
    assert scope_at(texts, "vllm/transformers_utils/patching.py", "c.gone").conditions == (
        "gguf checkpoint",
    )
    # one more caller outside the test: vLLM-wide
    texts = world(config + "\n\ndef other(c):\n    return patch(c)\n", extra)
    assert scope_at(texts, "vllm/transformers_utils/patching.py", "c.gone").everywhere


PROCESSORS = """import importlib

_CLASS_TO_MODULE = {
    "EdgeProcessor": "vllm.transformers_utils.processors.edge",
    "OtherProcessor": "vllm.transformers_utils.processors.other",
}


def __getattr__(name):
    if name in _CLASS_TO_MODULE:
        return getattr(importlib.import_module(_CLASS_TO_MODULE[name]), name)
    raise AttributeError(name)
"""


def processor_world(lookup: str, eager: str = "") -> dict[str, bytes]:
    files = {
        "vllm/__init__.py": "from vllm.transformers_utils.processor import get_processor\n",
        "vllm/transformers_utils/__init__.py": "",
        "vllm/transformers_utils/processor.py": (
            f"from vllm.transformers_utils import processors\n{eager}\n\n"
            f"def get_processor(name):\n    return {lookup}\n"
        ),
        "vllm/transformers_utils/processors/__init__.py": PROCESSORS,
        "vllm/transformers_utils/processors/edge.py": "from transformers import gone\n",
        "vllm/transformers_utils/processors/other.py": "from transformers import gone\n",
    }
    return {k: v.encode() for k, v in files.items()}


def test_a_processor_module_a_lazy_table_loads_by_a_config_name_is_scoped_to_it() -> None:
    loaders = Loaders(processor_world("getattr(processors, name, None)"))
    edge = loaders.scope("vllm/transformers_utils/processors/edge.py", 1)
    assert not edge.everywhere and edge.processors == ("EdgeProcessor",)
    assert edge.architectures == edge.model_types == edge.conditions == ()


@pytest.mark.parametrize(
    ("lookup", "eager"),
    [
        (
            "getattr(processors, name, None)",
            "from vllm.transformers_utils.processors.edge import X",
        ),
        ("getattr(processors, name, None)", "from vllm.transformers_utils.processors import Edge"),
        ('getattr(processors, "EdgeProcessor")', ""),  # looked up by a constant, not a config
    ],
    ids=["module-imported-at-start-up", "class-imported-through-the-table", "constant-lookup"],
)
def test_a_processor_module_start_up_loads_stays_vllm_wide(lookup: str, eager: str) -> None:
    texts = processor_world(lookup, eager.replace("Edge", "EdgeProcessor"))
    loaders = Loaders(texts)
    assert loaders.scope("vllm/transformers_utils/processors/edge.py", 1).everywhere
    other = loaders.scope("vllm/transformers_utils/processors/other.py", 1)
    assert other.everywhere is (lookup.count('"') > 0)


def test_scoped_findings_are_kept_and_read_back_and_break_no_architecture() -> None:
    gguf = Incompatibility(
        code=Code.REMOVED_ATTRIBUTE, name="from_text_vision_configs", module="m", file="f",
        line=1, conditions=("gguf checkpoint with mmproj",),
    )  # fmt: skip
    edge = Incompatibility(
        code=Code.MISSING_NAME, name="get_image_size", module="m", file="f", line=2,
        processors=("EdgeProcessor",),
    )  # fmt: skip
    report = CompatReport(vllm="0.14.1", transformers="5.0.0", reference="", findings=(gguf, edge))
    assert report.compatible and not report.blocking
    assert report.broken_architectures == ("gguf checkpoint with mmproj", "processor EdgeProcessor")
    assert report.breaks("Gemma3ForConditionalGeneration", "gemma3") == ()
    back = CompatReport.from_entry(Fields(report.to_dict(), "test"))
    assert back.findings == report.findings


@pytest.fixture(scope="module")
def answer(runtime_world: indexserver.Server, tmp_path_factory: pytest.TempPathFactory) -> Any:
    mp = pytest.MonkeyPatch()
    mp.setenv("ENVKIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    try:
        res = run_cli(
            "compat", "vllm==0.28.0", "transformers==5.5.3", "--json",
            "--index-url", indexserver.url(runtime_world),
        )  # fmt: skip
        assert res.code in (0, 1), res.err
        human = run_cli(
            "compat", "vllm==0.28.0", "transformers==5.5.3",
            "--index-url", indexserver.url(runtime_world),
        )  # fmt: skip
        yield output("compat", res.out), human.out
    finally:
        mp.undo()


def test_compat_scopes_a_gguf_mmproj_call_and_a_lazy_processor_and_says_so(answer: Any) -> None:
    data, human = answer
    found = {f["name"]: f for f in data["findings"]}
    gguf, edge = found["from_text_vision_configs"], found["get_image_size"]
    assert gguf["conditions"] == ["gguf checkpoint with mmproj"] and not gguf["processors"]
    assert gguf["file"] == "vllm/transformers_utils/gguf_utils.py"
    assert edge["processors"] == ["Cosmos3EdgeProcessor"] and not edge["conditions"]
    assert not (gguf["architectures"] or edge["architectures"] or edge["model_types"])
    assert data["ok"] is True  # neither breaks vLLM as a whole
    assert "breaks only: a gguf checkpoint with mmproj" in human
    assert "processor Cosmos3EdgeProcessor" in human


FRAGMENTS = [
    "def f(m):\n", "    if m.endswith('.gguf'):\n", "        return True\n", "    return None\n",
    "x = f(m)\n", "if x is not None:\n", "    y = 1\n", "if not f(m):\n", "    return\n",
    "    pass\n", "'mmproj-*.gguf'\n", "elif m.suffix == '.bin':\n", "from vllm.a import f\n",
]  # fmt: skip


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=30), max_size=25))
def test_any_text_gives_conditions_or_none_never_an_error(lines: list[str]) -> None:
    text = "".join(lines).encode()
    texts = {"vllm/a.py": PROBES.encode(), "vllm/b.py": text}
    formats = Formats(texts, Sources(texts).tree)
    for line in range(0, text.count(b"\n") + 2):
        found = formats.conditions("vllm/b.py", line)
        assert isinstance(found, tuple) and all(isinstance(c, str) for c in found)
