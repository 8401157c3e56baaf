"""``vllm serve`` arguments and ``VLLM_*`` variables checked against the profile's vLLM release.

What the release accepts is read from its wheel (``releases.serveflags``), never from an
installed vLLM. Each argument is walked as vLLM's parser walks it (``--a_b`` is ``--a-b``,
``--x.key`` is ``--x``, ``-O3``, values taken by the flag's arity, an unambiguous abbreviation
accepted as argparse does); a flag the release lacks is dated (the last release that had it,
bisected) and its replacement named when that release's help called it deprecated in favour of
another flag, or its inverse exists (``--disable-X`` for ``--enable-X``). A variable the release's
``envs.py`` does not read is ignored by it. A release whose parser envkit cannot read gives an
``unreadable-release`` error, never "ok".

``plan``, ``serve``, ``explain`` and ``upgrade`` call :func:`lint_args`; ``envkit lint`` too.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.errors import BadInput, WheelError
from envkit.index.session import IndexSession
from envkit.profiles.profile import Profile
from envkit.releases.serveflags import FlagReader, ServeFlags
from envkit.results import Result, Severity

CODES = (
    "unknown-flag",
    "removed-flag",
    "renamed-flag",
    "removed-variable",
    "model-positional",
    "model-flag",
    "unreadable-release",
)
MAX_ARGS = 4_096  # words checked in one command (a real one has a few dozen)
MAX_WORD = 64 * 1024  # characters of one word (a JSON config is a few KB)
MAX_DATED = 8  # subjects dated by bisection in one check (each may read a few wheels)


# a finding of lint is a result (code one of CODES; subject the flag or variable, e.g.
# "--enable-reasoning"; evidence the release whose parser said it; fix names the
# replacement, the last release that had it, the profile, the values)
LintFinding = Result


@dataclass(frozen=True)
class LintReport:
    vllm: str
    findings: tuple[LintFinding, ...]
    profile: str = ""
    checked: tuple[str, ...] = ()  # the flags and variables looked at, in order

    @property
    def ok(self) -> bool:
        """No error (warnings and notes may remain)."""
        return not any(f.failed for f in self.findings)

    @property
    def errors(self) -> tuple[LintFinding, ...]:
        return tuple(f for f in self.findings if f.failed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "profile": self.profile,
            "vllm": self.vllm,
            "checked": list(self.checked),
            "findings": [f.to_dict() for f in self.findings],
        }


def vllm_pin(profile: Profile) -> Version:
    """The vLLM release ``profile`` pins. Raises BadInput when it pins none."""
    text = profile.expected_versions().get("vllm", "")
    try:
        return Version(text)
    except InvalidVersion:
        raise BadInput(
            f"Profile {profile.name} pins no vLLM release (vllm==X), so there is no parser to "
            "check the arguments against.",
            f"Pin one in {profile.path}, e.g. vllm==0.8.5.",
        ) from None


def lint_args(
    profile: Profile,
    args: Sequence[str],
    env: Mapping[str, str] = {},
    *,
    session: IndexSession | None = None,
    typed: bool = True,
) -> LintReport:
    """``args`` (the words after ``vllm serve``) and ``env`` checked against the vLLM release
    ``profile`` pins; ``typed``: words as a person gives them, a leading ``vllm serve`` left
    out (a deployment file's are exactly what vLLM gets: lint.files). Raises BadInput
    (no pin, too many or too long words) and NetworkError (the index did not answer: no
    verdict)."""
    version = vllm_pin(profile)
    words = _checked_words(args, typed)
    if session is None:
        from envkit.io.urls import index_url

        session = IndexSession(index_url())
    reader = FlagReader(session)
    try:
        release = reader.flags(version)
    except WheelError as exc:
        release = ServeFlags(version=str(version), unreadable=exc.message)
    check = _Check(profile, version, release, reader)
    if not release.readable:
        check.add(
            "unreadable-release", "error", f"vllm {version}",
            f"envkit cannot read vLLM {version}'s argument parser from its wheel: "
            f"{release.unreadable}",
            f"The arguments for {profile.name} are not checked; run vllm serve --help with "
            f"vLLM {version} to compare them by hand.",
        )  # fmt: skip
    else:
        if not typed and words[:2] == ["vllm", "serve"]:  # what runs the words said it already
            check.add(
                "unknown-flag", "error", "vllm serve",
                "The words begin with vllm serve again: what they are handed to (the "
                "image's entrypoint, the script's vllm serve) starts vLLM's server already, "
                f"and vLLM {version} refuses the extra words.",
                f"Drop 'vllm serve' from the command ({check.where}).",
            )  # fmt: skip
            words = words[2:]
        check.walk(words)
    check.variables(env)
    return LintReport(str(version), tuple(check.findings), profile.name, tuple(check.checked))


def _checked_words(args: Sequence[str], typed: bool) -> list[str]:
    words = list(args)
    if len(words) > MAX_ARGS:
        raise BadInput(f"{len(words):,} arguments; envkit lint checks at most {MAX_ARGS:,}.")
    for word in words:
        if not isinstance(word, str) or len(word) > MAX_WORD:
            raise BadInput(f"An argument is longer than {MAX_WORD:,} characters.")
    if typed and words[:2] == ["vllm", "serve"]:
        words = words[2:]
    elif typed and words[:1] == ["serve"]:
        words = words[1:]
    return words


class _Check:
    def __init__(
        self, profile: Profile, version: Version, release: ServeFlags, reader: FlagReader
    ) -> None:
        self.profile = profile
        self.version = version
        self.release = release
        self.reader = reader
        self.findings: list[LintFinding] = []
        self.checked: list[str] = []
        self.dated = 0
        self.where = f"profile {profile.name} pins vLLM {version}"

    def add(self, code: str, severity: str, subject: str, message: str, fix: str) -> None:
        finding = Result(code=code, severity=Severity(severity), subject=subject,
                         message=message, evidence=(self.where,), fix=fix)  # fmt: skip
        if finding not in self.findings:
            self.findings.append(finding)

    def walk(self, words: list[str]) -> None:
        i, positionals = 0, 0
        while i < len(words):
            word = words[i]
            i += 1
            if word == "--":
                positionals += len(words) - i
                break
            if word.startswith("--"):
                name, eq, _value = word.partition("=")
                flag = "--" + name[2:].split(".", 1)[0].replace("_", "-")
                self.checked.append(flag)
                arity = self._flag(flag, word)
                i = i if eq else _take(words, i, arity)
            elif word.startswith("-") and len(word) > 1 and not _number(word):
                self.checked.append(word)
                i = self._short(word, words, i)
            else:
                positionals += 1
                if positionals == 1:
                    self._positional(word)
                else:
                    self.add(
                        "unknown-flag", "error", word,
                        f"vLLM {self.version}'s vllm serve takes one positional argument (the "
                        f"model); {word!r} is another, so it refuses the command.",
                        f"Remove {word!r} or give it to the flag it belongs to ({self.where}).",
                    )  # fmt: skip

    def _flag(self, flag: str, word: str) -> str:
        """The flag's arity in the release ("" unknown); findings for what is wrong with it."""
        flags = self.release.flags
        if flag == "--model" and self.release.positional_model:
            self._model_flag()
        if flag in flags:
            self._deprecated(flag)
            return flags[flag]
        longer = [f for f in flags if f.startswith(flag) and f.startswith("--")]
        if len(longer) == 1 and flag != "--":
            self.add(
                "unknown-flag", "warning", flag,
                f"vLLM {self.version} has no {flag}; its parser takes it as an abbreviation "
                f"of {longer[0]}, which a later release may make ambiguous.",
                f"Write {longer[0]} in full ({self.where}).",
            )  # fmt: skip
            return flags[longer[0]]
        return self._missing(flag)

    def _short(self, word: str, words: list[str], i: int) -> int:
        flags = self.release.flags
        if word in flags:
            return _take(words, i, flags[word])
        if word.startswith("-O") and ("-O" in flags or "--optimization-level" in flags):
            return i if len(word) > 2 else _take(words, i, "1")  # -O3, -O 3
        if word[:2] in flags and flags[word[:2]] not in ("0", ""):
            return i  # -q awq: the value attached
        self._missing(word)
        return _take(words, i, "")

    def _positional(self, word: str) -> None:
        self.checked.append("MODEL")
        if not self.release.positional_model:
            self.add(
                "model-positional", "error", word,
                f"vLLM {self.version}'s vllm serve takes no positional model; {word!r} is "
                "refused as an unrecognised argument.",
                f"Give the model as --model {word} ({self.where}).",
            )  # fmt: skip

    def _model_flag(self) -> None:
        how = self.release.model_flag
        if how == "error":
            self.add(
                "model-flag", "error", "--model",
                f"vLLM {self.version}'s vllm serve refuses --model: it takes the model "
                "positionally (vllm serve MODEL ...).",
                f"Give the model as the first argument after vllm serve ({self.where}).",
            )  # fmt: skip
        elif how == "warning":
            self.add(
                "model-flag", "warning", "--model",
                f"vLLM {self.version}'s vllm serve takes the model positionally; --model "
                "works but is deprecated and warned about at start.",
                f"Give the model as the first argument after vllm serve ({self.where}).",
            )  # fmt: skip

    def _deprecated(self, flag: str) -> None:
        if flag not in self.release.deprecated:
            return
        instead = self.release.deprecated[flag]
        base = instead.split(".", 1)[0]
        if instead and base in self.release.flags:
            self.add(
                "renamed-flag", "warning", flag,
                f"vLLM {self.version} still accepts {flag} but calls it deprecated in favour "
                f"of {instead}.",
                f"Use {instead} instead ({self.where}).",
            )  # fmt: skip
        else:
            self.add(
                "removed-flag", "warning", flag,
                f"vLLM {self.version} still accepts {flag} but calls it deprecated.",
                f"Plan to drop {flag}: a later release removes it ({self.where}).",
            )  # fmt: skip

    def _missing(self, flag: str) -> str:
        """Findings for a flag the release lacks; its arity where an older release knew it."""
        typo = difflib.get_close_matches(flag, list(self.release.flags), n=1, cutoff=0.9)
        dated = not typo and self.dated < MAX_DATED
        last = self._date(lambda s: flag in s.flags) if dated else ""
        if last:
            older = self.reader.flags(Version(last))
            instead = self._replacement(flag, older)
            if instead:
                # a switch replaced by a flag that takes a value: the value is the user's to give
                takes = self.release.flags.get(instead, "")
                valued = older.flags.get(flag) == "0" and takes in ("1", "+")
                use = (
                    f"Use {instead} VALUE instead of {flag}: {instead} takes a value, {flag} "
                    "took none"
                    if valued
                    else f"Use {instead} instead of {flag}"
                )
                self.add(
                    "renamed-flag", "error", flag,
                    f"vLLM {self.version} has no {flag}; vLLM {last} was the last release with "
                    f"it, and {instead} replaces it.",
                    f"{use} ({self.where}).",
                )  # fmt: skip
            else:
                self.add(
                    "removed-flag", "error", flag,
                    f"vLLM {self.version} has no {flag}: vLLM {last} was the last release with "
                    "it, and vllm serve refuses the command.",
                    f"Remove {flag} ({self.where}), or use a profile pinning vLLM {last} or "
                    "older.",
                )  # fmt: skip
            return older.flags.get(flag, "")
        newest = self.reader.first_after(lambda s: flag in s.flags, self.version) if (
            self.dated < MAX_DATED
        ) else ""  # fmt: skip
        close = difflib.get_close_matches(flag, list(self.release.flags), n=1, cutoff=0.8)
        if newest:
            fix = f"vLLM {newest} has it: use a profile pinning it, or remove {flag}"
        elif close:
            fix = f"Did you mean {close[0]}?"
        else:
            fix = f"Remove {flag}; vllm serve --help lists what vLLM {self.version} takes"
        self.add(
            "unknown-flag",
            "error",
            flag,
            f"vLLM {self.version}'s vllm serve has no {flag}"
            + (", and no release envkit read before it had it" if dated else "")
            + "; it refuses the command.",
            f"{fix} ({self.where}).",
        )
        return ""

    def _replacement(self, flag: str, older: ServeFlags) -> str:
        flags = self.release.flags
        hint = older.deprecated.get(flag, "")
        if hint and hint.split(".", 1)[0] in flags:
            return hint
        for prefix, inverse in (("--disable-", "--enable-"), ("--enable-", "--disable-")):
            if flag.startswith(prefix) and inverse + flag[len(prefix) :] in flags:
                return inverse + flag[len(prefix) :]
        if flag.startswith("--no-") and "--" + flag[5:] in flags:
            return "--" + flag[5:]
        dashed = flag.replace("_", "-")
        return dashed if dashed != flag and dashed in flags else ""

    def _date(self, has: Any) -> str:
        if self.dated >= MAX_DATED:
            self.dated += 1
            return ""
        self.dated += 1
        return self.reader.last_with(has, self.version)

    def variables(self, env: Mapping[str, str]) -> None:
        names = sorted(k for k in env if k.startswith("VLLM_"))
        if not names:
            return
        self.checked.extend(names)
        if self.release.variables_unreadable:
            self.add(
                "unreadable-release", "warning", "vllm/envs.py",
                f"envkit cannot read which variables vLLM {self.version} reads: "
                f"{self.release.variables_unreadable}",
                f"The VLLM_* variables for {self.profile.name} are not checked.",
            )  # fmt: skip
            return
        known = set(self.release.variables)
        for name in names:
            if name in known:
                continue
            last = self._date(lambda s, n=name: n in s.variables)
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.85)
            if last:
                message = (
                    f"vLLM {self.version} ignores {name}={env[name]!r}: its envs.py no longer "
                    f"reads it (vLLM {last} was the last release that did)."
                )
            else:
                message = (
                    f"vLLM {self.version} ignores {name}={env[name]!r}: its envs.py does not "
                    "read it, nor did any release envkit read before it."
                )
            fix = f"Did you mean {close[0]}? " if close else ""
            self.add(
                "removed-variable", "warning", name, message,
                f"{fix}Remove {name} ({self.where}); it has no effect there.",
            )  # fmt: skip


def _take(words: list[str], i: int, arity: str) -> int:
    """The index after the values a flag of ``arity`` takes from ``words[i:]``."""
    if arity == "0":
        return i
    if arity.isdigit():
        return min(len(words), i + int(arity))
    if arity in ("+", "*"):
        while i < len(words) and not _option(words[i]):
            i += 1
        return i
    # "1"-like "?" and unknown: one value when the next word is not an option
    return i + 1 if i < len(words) and not _option(words[i]) else i


def _option(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not _number(word)


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
