"""Attributes a release's base classes lack but its model-specific classes define.

A removed- or missing-attribute finding rests on transformers' base classes: the reference's
define ``name`` and the checked release's do not. The object vLLM reads it from is often a
model's own subclass, though (the tokenizer a checkpoint names, its config class): transformers
4.x defines ``add_bos_token`` on the Gemma and Llama tokenizers, not on the base class that 5.x
moved it to. When some model-specific class of the same kind in the checked release defines
the name (``def name``, a class attribute or ``self.name = ...``), the read may well work:
the name is not surely gone, and is counted under undecided.

The kind is the base class's module (``tokenization_utils_base``: the models'
``tokenization_*.py``; ``configuration_utils``: ``configuration_*.py``; image processors,
processors, feature extractors). Only the kinds of names vLLM reads are read from the wheel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from envkit.compat import receivers
from envkit.compat.transformers.transformers_source import TransformersRelease

# base module name prefix -> the prefix of the models' modules of that kind (first match)
KINDS = (
    ("image_processing_", "image_processing_"),
    ("tokenization_", "tokenization_"),
    ("configuration_", "configuration_"),
    ("processing_", "processing_"),
    ("feature_extraction_", "feature_extraction_"),
    ("sequence_feature_extraction", "feature_extraction_"),
)
MAX_FILES = 1000  # a kind with more model modules than this is not read (undecided stays out)


def kind_of(origin: str) -> str | None:
    """The model modules' prefix for a base class given as ``module.Class``."""
    module = origin.rpartition(".")[0]
    if module.count(".") != 1:  # transformers.<base module>, not a model's own
        return None
    last = module.rpartition(".")[2]
    return next((prefix for base, prefix in KINDS if last.startswith(base)), None)


def model_modules(members: Iterable[str], prefix: str) -> list[str]:
    pattern = re.compile(r"transformers/models/[^/]+/" + re.escape(prefix) + r"[^/]*\.py")
    return sorted(n for n in members if pattern.fullmatch(n))


def defined_by_models(
    release: TransformersRelease,
    gone: Mapping[str, str],
    read: Iterable[str],
    configs: Mapping[str, bytes],
) -> set[str]:
    """The names of ``gone`` (name -> ``module.Class`` that had it) that vLLM ``read``s and
    some model-specific class of the same kind in ``release`` defines. ``configs``: the
    release's config modules, read already."""
    wanted: dict[str, set[str]] = {}
    for name in read:
        prefix = kind_of(gone.get(name, ""))
        if prefix:
            wanted.setdefault(prefix, set()).add(name)
    found: set[str] = set()
    for prefix, names in sorted(wanted.items()):
        paths = model_modules(release.zip.members, prefix)
        if not paths or len(paths) > MAX_FILES:
            continue
        have = {p: configs[p] for p in paths if p in configs}
        missing = [p for p in paths if p not in have]
        texts = {**have, **(release.zip.read(missing) if missing else {})}
        if prefix == "processing_":  # image_processing_* matches too: not this kind
            texts = {p: t for p, t in texts.items() if "/image_processing_" not in p}
        found |= receivers.defined_by_vllm(texts, names)
    return found
