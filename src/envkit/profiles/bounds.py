"""vLLM's own per-architecture transformers bounds, as its test registry declares them.

Each vLLM source distribution carries ``tests/models/registry.py``: per architecture an
example checkpoint and, for some, ``min_transformers_version`` / ``max_transformers_version``
with a reason. vLLM's tests skip an architecture when the installed transformers is below the
minimum or above the maximum (plain version comparison, so ``max 4.48`` excludes 4.48.1).

Not every test applies every bound. ``tests/models/test_initialization.py``, where vLLM
itself builds each architecture, calls ``check_transformers_version`` with its own
arguments: up to vLLM 0.13 with none (both bounds apply); from 0.14 with
``check_max_version=False, check_version_reason="vllm"``, so a maximum applies only when the
bound's reason (a dict by then: ``{"vllm": ..., "hf": ...}``) names vLLM; one whose reason
concerns only the Hugging Face reference runner (``"hf"``), or that gives none, stops only
the tests comparing with that runner. :class:`InitPolicy` is those arguments, read per
release, and each bound records the directions only the reference runner's tests apply
(``hf_only``). This module is the data and the parsing (``ast``, never executed);
releases/testregistry.py fetches.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit import syntax
from envkit.io.cache import Fields

TOO_OLD = "transformers-too-old"
TOO_NEW = "transformers-too-new"
HF_ONLY = "transformers-bound-hf-only"  # violated, but vLLM's own initialization test runs it
_EXAMPLES_CLASS = "_HfExamplesInfo"
_CHECK = "check_transformers_version"
_MAX_TEXT = 200  # a reason or an example name longer than this is cut


@dataclass(frozen=True, kw_only=True)
class Bound:
    architecture: str
    minimum: str = ""  # min_transformers_version
    maximum: str = ""  # max_transformers_version
    reason: str = ""
    example: str = ""  # the example checkpoint vLLM tests with
    hf_only: tuple[str, ...] = ()  # "min" / "max": only the reference runner's tests apply it

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

    def refuses(self, transformers: str) -> str:
        """TOO_OLD or TOO_NEW when the bound excludes the release and vLLM's own
        initialization test applies it, else ''."""
        code = self.excludes(transformers)
        return "" if not code or self._direction(code) in self.hf_only else code

    def hf_only_for(self, transformers: str) -> bool:
        """The bound excludes the release, but only the reference runner's tests apply it."""
        code = self.excludes(transformers)
        return bool(code) and self._direction(code) in self.hf_only

    @staticmethod
    def _direction(code: str) -> str:
        return "min" if code == TOO_OLD else "max"

    def describe(self) -> str:
        parts = [
            f">= {self.minimum}" if self.minimum else "",
            f"<= {self.maximum}" if self.maximum else "",
        ]
        return "transformers " + ", ".join(p for p in parts if p)

    def describe_tier(self) -> str:
        """:meth:`describe`, saying which directions only the reference runner's tests apply."""
        only = "/".join(self.hf_only)
        return self.describe() + (f" ({only}: reference runner's tests only)" if only else "")

    def to_dict(self) -> dict[str, str]:
        return {
            "min": self.minimum,
            "max": self.maximum,
            "reason": self.reason,
            "example": self.example,
            "hf_only": ",".join(self.hf_only),
        }

    @classmethod
    def from_dict(cls, architecture: str, data: Mapping[str, Any]) -> Bound:
        return cls(
            architecture=architecture,
            minimum=str(data.get("min") or ""),
            maximum=str(data.get("max") or ""),
            reason=str(data.get("reason") or ""),
            example=str(data.get("example") or ""),
            hf_only=tuple(d for d in str(data.get("hf_only") or "").split(",") if d),
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
            hf_only=tuple(d for d in f.text("hf_only", "").split(",") if d in ("min", "max")),
        )
        for version in (bound.minimum, bound.maximum):
            if version:
                Version(version)  # InvalidVersion (a ValueError) refuses the entry
        return bound


@dataclass(frozen=True, kw_only=True)
class InitPolicy:
    """How a release's initialization test calls ``check_transformers_version``."""

    check_min: bool = True
    check_max: bool = True
    reason_key: str = ""  # check_version_reason: a bound whose reason names it always applies

    def hf_only(self, reasons: tuple[str, ...]) -> tuple[str, ...]:
        """The directions of a bound with these reason keys the test does not apply."""
        named = bool(self.reason_key) and self.reason_key in reasons
        return tuple(
            d for d, checked in (("min", self.check_min), ("max", self.check_max))
            if not checked and not named
        )  # fmt: skip


def parse_policy(text: str) -> InitPolicy:
    """The arguments of the first ``check_transformers_version(...)`` call in an
    initialization test (the defaults when there is none). Raises SyntaxError / ValueError
    for what is not Python."""
    tree = syntax.parse_module(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == _CHECK:
            words = {k.arg: k.value for k in node.keywords if k.arg}
            flags = {
                name: not (isinstance(v, ast.Constant) and v.value is False)
                for name, v in words.items()
                if name in ("check_min_version", "check_max_version")
            }
            reason = words.get("check_version_reason")
            return InitPolicy(
                check_min=flags.get("check_min_version", True),
                check_max=flags.get("check_max_version", True),
                reason_key=_text(reason) if reason is not None else "",
            )
    return InitPolicy()


def parse_registry(
    text: str, filename: str = "tests/models/registry.py", policy: InitPolicy | None = None
) -> dict[str, Bound]:
    """The bounded architectures of a test registry source: every ``"Arch": _HfExamplesInfo(
    "org/name", min_transformers_version=..., ...)`` entry of a module-level dict, each with
    the directions ``policy`` (the release's initialization test) does not apply. Entries
    without a bound are left out. Raises SyntaxError / ValueError for what is not Python."""
    policy = policy or InitPolicy()
    tree = syntax.parse_module(text, filename)
    out: dict[str, Bound] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            bound = _entry(key.value, value, policy)
            if bound is not None and (bound.minimum or bound.maximum):
                out[key.value] = bound
    return out


def _entry(architecture: str, value: ast.expr, policy: InitPolicy) -> Bound | None:
    if not isinstance(value, ast.Call):
        return None
    called = value.func.id if isinstance(value.func, ast.Name) else getattr(value.func, "attr", "")
    if called != _EXAMPLES_CLASS:
        return None
    words = {k.arg: _text(k.value) for k in value.keywords if k.arg}
    reasons = next(
        (_reasons(k.value) for k in value.keywords if k.arg == "transformers_version_reason"),
        {},
    )
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
        reason=(words.get("transformers_version_reason") or _joined(reasons))[:_MAX_TEXT],
        example=example[:_MAX_TEXT],
        hf_only=tuple(
            d for d in policy.hf_only(tuple(reasons)) if (minimum if d == "min" else maximum)
        ),
    )


def _reasons(node: ast.expr) -> dict[str, str]:
    """``{"vllm": "...", "hf": "..."}`` (vLLM 0.14 on) -> its keys and texts."""
    if not isinstance(node, ast.Dict):
        return {}
    return {
        k.value: _text(v)
        for k, v in zip(node.keys, node.values, strict=True)
        if isinstance(k, ast.Constant) and isinstance(k.value, str)
    }


def _joined(reasons: Mapping[str, str]) -> str:
    return "; ".join(f"{k}: {v}" for k, v in reasons.items() if v)


def _text(node: ast.expr) -> str:
    """A string literal's value (implicitly joined literals included, and a parenthesised
    ``"a" "b"``), else ''."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.strip()
    if isinstance(node, ast.JoinedStr):
        return "".join(
            p.value for p in node.values if isinstance(p, ast.Constant) and isinstance(p.value, str)
        ).strip()
    return ""
