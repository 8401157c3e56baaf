"""vLLM's own per-architecture transformers bounds, as its test registry declares them.

Each vLLM source distribution carries ``tests/models/registry.py``: per architecture an
example checkpoint and, for some, ``min_transformers_version`` / ``max_transformers_version``
with a reason. vLLM's tests skip an architecture when the installed transformers is below the
minimum or above the maximum (plain version comparison, so ``max 4.48`` excludes 4.48.1).
This module is the data and the parsing (``ast``, never executed); vllmtests.py fetches.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.io.cache import Fields

TOO_OLD = "transformers-too-old"
TOO_NEW = "transformers-too-new"
_EXAMPLES_CLASS = "_HfExamplesInfo"
_MAX_TEXT = 200  # a reason or an example name longer than this is cut


@dataclass(frozen=True, kw_only=True)
class Bound:
    architecture: str
    minimum: str = ""  # min_transformers_version
    maximum: str = ""  # max_transformers_version
    reason: str = ""
    example: str = ""  # the example checkpoint vLLM tests with

    def excludes(self, transformers: str) -> str:
        """TOO_OLD or TOO_NEW when vLLM's tests would skip this architecture with that
        transformers release, else ''."""
        try:
            have = Version(transformers)
            if self.minimum and have < Version(self.minimum):
                return TOO_OLD
            if self.maximum and have > Version(self.maximum):
                return TOO_NEW
        except InvalidVersion:
            return ""
        return ""

    def describe(self) -> str:
        parts = [
            f">= {self.minimum}" if self.minimum else "",
            f"<= {self.maximum}" if self.maximum else "",
        ]
        return "transformers " + ", ".join(p for p in parts if p)

    def to_dict(self) -> dict[str, str]:
        return {
            "min": self.minimum,
            "max": self.maximum,
            "reason": self.reason,
            "example": self.example,
        }

    @classmethod
    def from_dict(cls, architecture: str, data: Mapping[str, Any]) -> Bound:
        return cls(
            architecture=architecture,
            minimum=str(data.get("min") or ""),
            maximum=str(data.get("max") or ""),
            reason=str(data.get("reason") or ""),
            example=str(data.get("example") or ""),
        )

    @classmethod
    def from_entry(cls, architecture: str, f: Fields) -> Bound:
        """A bound as envkit's cache holds it: versions or '' and texts (BadEntry, or
        InvalidVersion, otherwise)."""
        bound = cls(
            architecture=architecture,
            minimum=f.text("min", ""),
            maximum=f.text("max", ""),
            reason=f.text("reason", ""),
            example=f.text("example", ""),
        )
        for version in (bound.minimum, bound.maximum):
            if version:
                Version(version)  # InvalidVersion (a ValueError) refuses the entry
        return bound


def parse_registry(text: str, filename: str = "tests/models/registry.py") -> dict[str, Bound]:
    """The bounded architectures of a test registry source: every ``"Arch": _HfExamplesInfo(
    "org/name", min_transformers_version=..., ...)`` entry of a module-level dict. Entries
    without a bound are left out. Raises SyntaxError / ValueError for what is not Python."""
    tree = ast.parse(text, filename=filename)
    out: dict[str, Bound] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            bound = _entry(key.value, value)
            if bound is not None and (bound.minimum or bound.maximum):
                out[key.value] = bound
    return out


def _entry(architecture: str, value: ast.expr) -> Bound | None:
    if not isinstance(value, ast.Call):
        return None
    called = value.func.id if isinstance(value.func, ast.Name) else getattr(value.func, "attr", "")
    if called != _EXAMPLES_CLASS:
        return None
    words = {k.arg: _text(k.value) for k in value.keywords if k.arg}
    example = _text(value.args[0]) if value.args else words.get("default", "")
    minimum, maximum = (
        words.get("min_transformers_version", ""),
        words.get("max_transformers_version", ""),
    )
    for version in (minimum, maximum):
        if version:
            try:
                Version(version)
            except InvalidVersion:
                return None  # not a version vLLM's own check could compare: not a bound
    return Bound(
        architecture=architecture,
        minimum=minimum,
        maximum=maximum,
        reason=words.get("transformers_version_reason", "")[:_MAX_TEXT],
        example=example[:_MAX_TEXT],
    )


def _text(node: ast.expr) -> str:
    """A string literal's value (implicitly joined literals included), else ''."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.strip()
    return ""
