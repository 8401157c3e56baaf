"""How the other commands obey `envkit compat`: lock refuses pins that fail it; build,
verify and doctor look the installed pair up. A pair that cannot be checked (an index envkit
cannot read) is said, never turned into a verdict."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from envkit.compat.report import CompatReport, load_cached
from envkit.errors import EnvkitError
from envkit.io.escaping import shell_command
from envkit.profiles.profile import Profile

if TYPE_CHECKING:  # the checker's imports (0.16 s) only where a pair is checked afresh
    from envkit.compat.check.checker import Checker


def lock_refusals(
    profiles: Iterable[Profile], checker: Checker, note: Callable[[str], None]
) -> dict[str, str]:
    """Profile name -> why its cells must not be locked: pins that fail compat, naming the
    first finding. A pair that cannot be checked (an index envkit cannot read) is said
    through ``note`` and not refused: a network failure is never a verdict."""
    refused: dict[str, str] = {}
    for profile in profiles:
        pair = profile.pair()
        if pair is None:
            continue
        try:
            report = checker.check(Version(pair[0]), Version(pair[1]))
        except EnvkitError as exc:
            note(f"compat of {profile.name}'s pins not checked: {exc.message}")
            continue
        if not report.compatible:
            refused[profile.name] = (
                f"vLLM {report.vllm} + transformers {report.transformers} fail compat: "
                f"{report.summary(shown=1)}; "
                f"see {shell_command(['envkit', 'compat', profile.name])}"
            )
    return refused


def lookup(checker: Checker) -> Callable[[str, str], CompatReport | str]:
    """For verify and doctor: the pair's report, or why it could not be made (an index
    envkit cannot read is no verdict)."""

    def look(vllm: str, transformers: str) -> CompatReport | str:
        try:
            return checker.check(Version(vllm), Version(transformers))
        except EnvkitError as exc:
            return f"compat not checked: {exc.message}"
        except InvalidVersion:
            return _not_versions(vllm, transformers)

    return look


def _not_versions(vllm: str, transformers: str) -> str:
    """Why the installed pair has no verdict: which of its two versions is not one."""
    said = []
    for name, text in (("vLLM", vllm), ("transformers", transformers)):
        try:
            Version(text)
        except InvalidVersion:
            empty = not text.strip()  # a dist-info whose METADATA is gone or says none
            said.append(
                f"the installed {name} has no version in its metadata"
                if empty
                else f"{name} {text!r:.40} is not a version"
            )
    return "compat not checked: " + " and ".join(said)


def cached_first(
    index: str, make: Callable[[], Checker]
) -> Callable[[str, str], CompatReport | str]:
    """:func:`lookup`, the pair's cached report read first as the checker would read it
    (``load_cached``), the checker made by ``make`` only when there is none: verify of a
    pair checked before loads none of its modules."""
    from envkit.index.session import active_snapshot

    made: list[Callable[[str, str], CompatReport | str]] = []

    def look(vllm: str, transformers: str) -> CompatReport | str:
        known = active_snapshot()  # the index the checker's session would read, as it picks it
        try:
            where = known.index if known is not None else index
            cached = load_cached(Version(vllm), Version(transformers), where)
        except EnvkitError as exc:
            return f"compat not checked: {exc.message}"
        except InvalidVersion:
            return _not_versions(vllm, transformers)
        if cached is not None:
            return cached
        if not made:
            made.append(lookup(make()))
        return made[0](vllm, transformers)

    return look
