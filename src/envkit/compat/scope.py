"""Which architectures a vLLM source file serves: a compat finding in a model's own file (or
in a helper only model files import) breaks those architectures alone, not vLLM."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping

from envkit.index.asttables import SourceError, module_tables
from envkit.releases.registry import VLLM_LAYOUTS

MODELS_DIR = "vllm/model_executor/models/"
# a model file importing another one: vllm.model_executor.models.x, or from .x import
_MODEL_IMPORT = re.compile(rb"vllm\.model_executor\.models\.(\w+)|^[ \t]*from \.(\w+) import", re.M)


def architectures_by_file(texts: Mapping[str, bytes]) -> dict[str, tuple[str, ...]]:
    """``vllm/model_executor/models/llama.py`` -> the architectures the registry maps to it."""
    for path, names in VLLM_LAYOUTS:
        if path not in texts:
            continue
        try:
            tables = module_tables(texts[path].decode("utf-8", "replace"), filename=path)
        except SourceError:
            return {}
        table = next((tables[n] for n in names if isinstance(tables.get(n), dict)), None)
        if table is None:
            continue
        out: dict[str, set[str]] = defaultdict(set)
        for arch, value in table.items():
            if isinstance(value, (tuple, list)) and value and isinstance(value[0], str):
                out[f"{MODELS_DIR}{value[0]}.py"].add(str(arch))
        _helpers(texts, out)
        return {k: tuple(sorted(v)) for k, v in out.items()}
    return {}


def _helpers(texts: Mapping[str, bytes], scopes: dict[str, set[str]]) -> None:
    """A helper module among the model files (a vision tower, shared layers) breaks the
    architectures of the model files importing it: propagate them, until nothing changes."""
    imports = {
        path: {m.decode() for pair in _MODEL_IMPORT.findall(text) for m in pair if m}
        for path, text in texts.items()
        if path.startswith(MODELS_DIR) and path.count("/") == 3
    }
    helpers = [p for p in imports if p not in scopes and not p.endswith("__init__.py")]
    for _round in range(8):
        changed = False
        for helper in helpers:
            name = helper[len(MODELS_DIR) : -3]
            found = set().union(
                *(scopes.get(p, set()) for p, used in imports.items() if name in used)
            )
            if not found <= scopes.get(helper, set()):
                scopes[helper] = scopes.get(helper, set()) | found
                changed = True
        if not changed:
            return
