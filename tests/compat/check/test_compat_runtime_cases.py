"""envkit compat on the shapes behind its last disagreements with run time (issue 20):
fallback imports, attribute probes, helpers only some models call, RoPE conflicts said once
and scoped to architectures, names a model's own class or a module ``__getattr__`` answers,
config classes a top-level catalogue lacks, and RoPE dicts nested by layer type
(runtime_world's wheels, served on a local index with range requests)."""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import pytest
from packaging.version import Version

from envkit.compat.check import nestedrope
from envkit.compat.check.sources import Sources
from envkit.compat.vllm.callers import Callers
from envkit.compat.vllm.guards import dead_lines, within
from envkit.compat.vllm.loading import Loaders

import indexserver
from helpers import output, run_cli


def compat(world: indexserver.Server, transformers: str) -> dict[str, Any]:
    res = run_cli(
        "compat", "vllm==0.28.0", f"transformers=={transformers}", "--json",
        "--index-url", indexserver.url(world),
    )  # fmt: skip
    assert res.code in (0, 1), res.err
    return output("compat", res.out)


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in data["findings"]}


@pytest.fixture(scope="module")
def answers(runtime_world: indexserver.Server, tmp_path_factory: pytest.TempPathFactory) -> Any:
    mp = pytest.MonkeyPatch()
    mp.setenv("ENVKIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    try:
        yield {t: compat(runtime_world, t) for t in ("5.5.3", "4.57.6")}
    finally:
        mp.undo()


def test_a_fallback_import_runs_only_when_the_first_one_fails(answers: Any) -> None:
    # 5.x has the new name: the except branch's old one, missing there, cannot run; 4.x has
    # only the old one, which the except branch imports
    for transformers in ("5.5.3", "4.57.6"):
        found = by_name(answers[transformers])
        assert {"ALLOWED_LAYER_TYPES", "ALLOWED_ATTENTION_LAYER_TYPES"}.isdisjoint(found)


def test_an_attribute_read_under_a_probe_of_what_the_release_lacks_cannot_run(
    answers: Any,
) -> None:
    per_layer = by_name(answers["5.5.3"])["per_layer_config"]
    # getattr(config, "is_heterogeneous", False) is False where no class has it: only the
    # bare read in the other helper is a finding
    assert (per_layer["line"], per_layer["places"]) == (11, 1)


def test_a_helper_of_a_start_up_file_breaks_only_what_calls_it(answers: Any) -> None:
    per_layer = by_name(answers["5.5.3"])["per_layer_config"]
    # imported by start-up code, but called by one model file and by a convertor that a
    # table keyed by model type selects
    assert per_layer["architectures"] == ["Gemma4ForConditionalGeneration"]
    assert per_layer["model_types"] == ["gemma4", "gemma4_text"]
    assert answers["5.5.3"]["ok"] is True


def test_a_config_conflict_is_said_once_for_the_architectures_serving_it(answers: Any) -> None:
    conflicts = [f for f in answers["5.5.3"]["findings"] if f["code"] == "config-conflict"]
    longrope = [f for f in conflicts if f["name"].startswith("rope_type=longrope")]
    assert len(longrope) == 1  # both config modules write it: one finding naming both
    [phi] = longrope
    assert phi["model_types"] == ["phi3", "phi4_multimodal"]
    assert phi["architectures"] == ["Phi3ForCausalLM"]  # the registry's, named after phi3
    assert "configuration_phi3.py" in phi["detail"]
    assert "configuration_phi4_multimodal.py" in phi["detail"]
    assert (phi["config_key"], phi["config_values"]) == ("type", ["su", "yarn"])


def test_a_rope_dict_nested_by_layer_type_fails_a_loader_wanting_rope_type(
    answers: Any,
) -> None:
    nested = by_name(answers["5.5.3"])["rope_type missing from a RoPE dict nested by layer type"]
    assert (nested["file"], nested["line"]) == ("vllm/transformers_utils/config.py", 22)
    assert nested["model_types"] == ["gemma3", "gemma3_text"]
    assert nested["architectures"] == ["Gemma3ForConditionalGeneration"]
    assert nested["config_key"] is None  # every config of the model type, not some
    assert "sliding_attention/full_attention" in nested["detail"]


def test_a_name_a_module_getattr_answers_is_no_finding(answers: Any) -> None:
    found = by_name(answers["5.5.3"])
    # __getattr__ = deprecate_attr(__name__, rename={...}): it answers the renamed name,
    # and may answer others (undecided, never a finding)
    assert {"Gemma3ProcessorKwargs", "Gemma3NeverKwargs"}.isdisjoint(found)
    assert "transformers.models.gemma3.processing_gemma3" in answers["5.5.3"]["undecided"]


def test_an_attribute_a_models_own_class_defines_is_undecided(answers: Any) -> None:
    data = answers["4.57.6"]
    # 4.x's base tokenizer lacks add_bos_token, the Gemma tokenizer PaliGemma uses has it
    assert "add_bos_token" not in by_name(data)
    assert any(u.startswith("add_bos_token (") for u in data["undecided"])


def test_a_config_class_the_catalogue_lacks_is_a_missing_name(answers: Any) -> None:
    found = by_name(answers["4.57.6"])
    # the models' configuration modules, read whole, settle config classes of the
    # top-level catalogue: FalconH1Config is in none, GemmaConfig is
    falcon = found["FalconH1Config"]
    assert (falcon["code"], falcon["architectures"]) == ("missing-name", ["FalconH1ForCausalLM"])
    assert "GemmaConfig" not in found
    assert "FalconH1Config" not in by_name(answers["5.5.3"])


def test_a_module_raising_on_the_release_at_import_refuses_it(answers: Any) -> None:
    refused = by_name(answers["4.57.6"])["transformers 4.57.6"]
    assert refused["code"] == "refused-release"
    assert (refused["file"], refused["line"]) == ("vllm/transformers_utils/requirement.py", 6)
    assert refused["architectures"] == [] and refused["model_types"] == []  # vLLM itself
    assert refused["detail"] == "vLLM raises: Support for transformers 4 was removed"
    assert answers["4.57.6"]["ok"] is False
    # a function raising below a release it is not: only when called, and not a refusal
    assert not any(f["code"] == "refused-release" for f in answers["5.5.3"]["findings"])


class Probe:
    """A release providing only the names it is given (and lacking the attributes named)."""

    def __init__(self, names: set[str], lacking: frozenset[str] = frozenset()) -> None:
        self.version = Version("5.0.0")
        self.names, self.lacking = names, lacking

    def module_exists(self, module: str) -> bool | None:
        return True

    def provides(self, module: str, name: str) -> bool | None:
        return name in self.names

    def has_member(self, module: str, cls: str, name: str) -> bool | None:
        return None

    def lacks(self, name: str) -> bool:
        return name in self.lacking


FALLBACK = """
try:
    from transformers.x import New
    FLAG = True
except ImportError:
    from transformers.x import Old as New  # the handler
"""


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(textwrap.dedent(text).splitlines(), 1) if needle in line)


def test_a_fallback_runs_when_the_first_import_fails_or_cannot_be_told() -> None:
    tree = ast.parse(FALLBACK)
    handler = _line(FALLBACK, "# the handler")
    assert within(dead_lines(tree, Probe({"New"})), handler)
    assert not within(dead_lines(tree, Probe({"Old"})), handler)
    # a body doing more than importing may raise for reasons of its own
    busy = FALLBACK.replace("    FLAG = True", "    FLAG = setup()")
    assert not within(dead_lines(ast.parse(busy), Probe({"New"})), handler)


PROBED = """
def f(config):
    if getattr(config, "flag", False):
        return config.gone  # under the probe
    if hasattr(config, "flag") and config.ready:
        return config.gone  # under hasattr
    if getattr(config, "flag", 1):
        return config.gone  # a truthy default
"""


def test_probes_of_an_attribute_the_release_lacks_answer_false() -> None:
    dead = dead_lines(ast.parse(PROBED), Probe(set(), frozenset({"flag"})))
    assert within(dead, _line(PROBED, "# under the probe"))
    assert within(dead, _line(PROBED, "# under hasattr"))
    assert not within(dead, _line(PROBED, "# a truthy default"))
    assert dead_lines(ast.parse(PROBED), Probe(set())) == []  # not known to lack it


LOOPED = """
def patch_dict(rope):
    if "rope_type" not in rope:
        raise ValueError("no rope_type")


def patch(config):
    if nested(config.rope_parameters):
        for layer in config.rope_parameters.values():
            patch_dict(layer)
    else:
        patch_dict(config.rope_parameters)
"""


def test_a_loader_checking_each_layer_types_dict_takes_nested_ones() -> None:
    tree = ast.parse(LOOPED)
    assert nestedrope.required_keys(tree, "config.py") == []
    whole = ast.parse(LOOPED.replace("for layer in config.rope_parameters.values():", "if 1:"))
    [rule] = nestedrope.required_keys(whole, "config.py")
    assert (rule.key, rule.function, rule.line) == ("rope_type", "patch_dict", 4)


def test_a_helper_used_other_than_by_calls_keeps_its_files_scope() -> None:
    helper = "from transformers import X\n\n\ndef helper(c):\n    return c.gone\n"
    files = {
        "vllm/__init__.py": "from vllm.start import run\n",
        "vllm/start.py": "from vllm.helpers import helper\n\nHOOKS = [helper]\n",
        "vllm/helpers.py": helper,
        "vllm/model_executor/models/registry.py": '_VLLM_MODELS = {"AForCausalLM": ("a", "A")}\n',
        "vllm/model_executor/models/a.py": "from vllm.helpers import helper\n\nhelper(None)\n",
    }
    texts = {k: v.encode() for k, v in files.items()}
    sources = Sources(texts)
    callers = Callers(texts, sources.tree, Loaders(texts))
    assert callers.scope("vllm/helpers.py", 5).everywhere  # passed around as a value
    texts["vllm/start.py"] = b"import vllm.helpers\n"
    sources = Sources(texts)
    narrowed = Callers(texts, sources.tree, Loaders(texts)).scope("vllm/helpers.py", 5)
    assert narrowed.architectures == ("AForCausalLM",) and not narrowed.everywhere
