"""Which architectures serve a model type (``qwen3_5``, the ``model_type`` of config.json).

Two sources, both as envkit reads them without running anything:

- transformers' auto model tables (``models/auto/modeling_auto.py``: ``("qwen2_vl",
  "Qwen2VLForConditionalGeneration")`` pairs), read from a release's wheel by range and
  cached per release and index;
- vLLM's model registry as the scans hold it (the architecture names): a class named
  after the model type (``Qwen3_5ForConditionalGeneration`` for ``qwen3_5``: the name
  before ``For...``/``Model``, without case and underscores) serves it, which also finds
  what vLLM serves with its own config class and transformers has no table for.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from packaging.version import Version

from envkit import syntax
from envkit.index.wheels import RemoteZip
from envkit.io.cache import MODEL_TYPES
from envkit.io.urls import index_key
from envkit.releases.registry import Scanner

MODELING_AUTO = "transformers/models/auto/modeling_auto.py"
MODEL_TYPE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")  # config.json's model_type: no capitals
_SUFFIX = re.compile(r"(For[A-Z][A-Za-z]*|LMHeadModel|Model)$")


def model_types(scanner: Scanner, version: Version) -> dict[str, tuple[str, ...]]:
    """Architecture -> the model types transformers ``version`` maps to it (its auto model
    tables: ``("llama", "LlamaForCausalLM")`` pairs), cached per release and index."""
    key = f"model-types-{version}.{index_key(scanner.index)}"
    known = MODEL_TYPES.load(key, lambda f: {arch: f.texts(arch) for arch in list(f.data)})
    if known is not None:
        return known
    wheel = scanner.pick("transformers", version)
    scanner.progress(f"reading transformers {version}'s auto model tables from its wheel")
    text = RemoteZip(wheel.url, scanner.http).read([MODELING_AUTO]).get(MODELING_AUTO, b"")
    found: dict[str, set[str]] = {}
    try:
        tree = syntax.parse_module(text.decode("utf-8", "replace"))
    except (SyntaxError, ValueError, RecursionError):
        tree = ast.Module(body=[], type_ignores=[])
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2:
            first, second = node.elts
            if (
                isinstance(first, ast.Constant)
                and isinstance(second, ast.Constant)
                and isinstance(first.value, str)
                and isinstance(second.value, str)
                and second.value[:1].isupper()
            ):
                found.setdefault(second.value, set()).add(first.value)
    out = {arch: tuple(sorted(names)) for arch, names in found.items()}
    MODEL_TYPES.store(key, {arch: list(names) for arch, names in out.items()})
    return out


def named_after(model_type: str, architectures: Iterable[str]) -> set[str]:
    """The architectures whose class name is the model type's (vLLM's registry names)."""

    def key(text: str) -> str:
        return re.sub(r"[_-]", "", text).lower()

    wanted = key(model_type)
    return {a for a in architectures if key(_SUFFIX.sub("", a)) == wanted and _SUFFIX.search(a)}


def serving(
    model_type: str, tables: dict[str, tuple[str, ...]], vllm_architectures: Iterable[str]
) -> tuple[str, ...]:
    """The architectures that serve ``model_type``: those transformers' ``tables`` map it to
    and those of vLLM's registry named after it, sorted."""
    mapped = {arch for arch, types in tables.items() if model_type in types}
    return tuple(sorted(mapped | named_after(model_type, vllm_architectures)))
