"""What one vLLM release's ``vllm serve`` accepts, read from its wheel without installing it.

The flags of its argument parser (``releases.parsersource``: ``vllm/engine/arg_utils.py``, the
frontend's ``cli_args.py``, ``entrypoints/cli/serve.py``, the config dataclasses the newer
releases generate flags from), whether it takes the model positionally, and the ``VLLM_*``
variables its ``vllm/envs.py`` reads (the keys of ``environment_variables``). Each release is
read once and cached (``io.cache.SERVE_FLAGS``); a release whose parser envkit cannot read is
recorded as such (``unreadable``), never as an empty parser.

:meth:`FlagReader.last_with` finds the newest release before a given one that still had a flag
or a variable: the last release of each minor series is probed going back, then the releases
between the series that has it and the newer one that does not are bisected (a flag stays from
the release that adds it until the one that drops it, as ``compat.check.removed_in`` assumes of
removals), within :data:`MAX_PROBES` series.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from envkit.errors import WheelError
from envkit.index.session import IndexSession
from envkit.io.cache import SERVE_FLAGS, BadEntry, Fields
from envkit.io.urls import index_key

if TYPE_CHECKING:  # a cached release reads none of the wheel and source readers
    from envkit.io.http import Http

ARG_UTILS = "vllm/engine/arg_utils.py"
CLI_SERVE = "vllm/entrypoints/cli/serve.py"
FRONTENDS = ("vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/common/cli_args.py")
PARSER_HOMES = ("vllm/utils.py", "vllm/utils/__init__.py", "vllm/utils/argparse_utils.py")
ENVS = "vllm/envs.py"
CONFIG_FILE = "vllm/config.py"
CONFIG_FOLDER = "vllm/config/"
MAX_CONFIG_FILES = 200  # vllm/config/ holds about 40
MAX_PROBES = 64  # minor series probed to date a flag (vLLM has about 35; each read is cached)
ARITIES = {"0", "1", "?", "*", "+", ""} | {str(n) for n in range(2, 10)}


@dataclass(frozen=True, kw_only=True)
class ServeFlags:
    """What ``vllm serve`` of one release accepts."""

    version: str
    flags: dict[str, str] = field(default_factory=dict)  # option string -> arity
    deprecated: dict[str, str] = field(default_factory=dict)  # flag -> replacement ("" none)
    positional_model: bool = False
    model_flag: str = ""  # --model with vllm serve: "" accepted, "warning", "error"
    variables: tuple[str, ...] = ()
    unreadable: str = ""  # why the parser could not be read ("" when it was)
    variables_unreadable: str = ""
    wheel: str = ""
    bytes_read: int = 0
    seconds: float = 0.0
    cached: bool = False

    @property
    def readable(self) -> bool:
        return not self.unreadable

    def has_flag(self, flag: str) -> bool:
        return flag in self.flags

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "flags": dict(sorted(self.flags.items())),
            "deprecated": dict(sorted(self.deprecated.items())),
            "positional_model": self.positional_model,
            "model_flag": self.model_flag,
            "variables": list(self.variables),
            "unreadable": self.unreadable,
            "variables_unreadable": self.variables_unreadable,
            "wheel": self.wheel,
            "bytes_read": self.bytes_read,
            "seconds": self.seconds,
        }

    @classmethod
    def from_entry(cls, f: Fields) -> ServeFlags:
        version = f.text("version")
        if str(Version(version)) != version:
            raise BadEntry(f"{version} is not a release")
        flags = f.text_map("flags")
        if any(not k.startswith("-") or v not in ARITIES for k, v in flags.items()):
            raise BadEntry("a flag that is not an option string with a known arity")
        model_flag = f.text("model_flag", "")
        if model_flag not in ("", "warning", "error"):
            raise BadEntry("model_flag is not '', warning or error")
        return cls(
            version=version,
            flags=flags,
            deprecated=f.text_map("deprecated"),
            positional_model=f.flag("positional_model", False),
            model_flag=model_flag,
            variables=f.texts("variables", ()),
            unreadable=f.text("unreadable", ""),
            variables_unreadable=f.text("variables_unreadable", ""),
            wheel=f.text("wheel", ""),
            bytes_read=f.whole("bytes_read", 0),
            seconds=f.number("seconds", 0.0),
            cached=True,
        )


def read_release(version: str, texts: dict[str, str]) -> ServeFlags:
    """A release's serve flags and variables from its source files (path -> text)."""
    from envkit.releases.parsersource import read_parser

    parser: dict[str, Any] = {}
    try:
        facts = read_parser(texts, (ARG_UTILS, *FRONTENDS, CLI_SERVE), skip=(ENVS,))
        parser = {
            "flags": facts.flags,
            "deprecated": facts.hints,
            "positional_model": facts.positional_model,
            "model_flag": facts.model_flag,
        }
    except WheelError as exc:
        parser = {"unreadable": str(exc)}
    variables: tuple[str, ...] = ()
    why = ""
    try:
        variables = read_variables(texts.get(ENVS, ""))
    except WheelError as exc:
        why = str(exc)
    return ServeFlags(version=version, variables=variables, variables_unreadable=why, **parser)


def read_variables(text: str) -> tuple[str, ...]:
    """The ``VLLM_*`` names ``vllm/envs.py`` reads (its ``environment_variables`` table)."""
    if not text:
        raise WheelError(f"The wheel has no {ENVS}.")
    from envkit.releases.asttables import OPAQUE, SourceError, module_tables

    try:
        table = module_tables(text, filename=ENVS).get("environment_variables")
    except SourceError as exc:
        raise WheelError(str(exc)) from None
    if not isinstance(table, dict) or table is OPAQUE:
        raise WheelError(f"{ENVS}: environment_variables is not a table envkit can read.")
    return tuple(sorted(k for k in table if isinstance(k, str)))


def wanted_members(members: dict[str, Any]) -> list[str]:
    """The members a release's parser and variables are read from (within caps)."""
    fixed = [ARG_UTILS, CLI_SERVE, *FRONTENDS, *PARSER_HOMES, ENVS, CONFIG_FILE]
    config = sorted(n for n in members if n.startswith(CONFIG_FOLDER) and n.endswith(".py"))[
        :MAX_CONFIG_FILES
    ]
    return [n for n in fixed if n in members] + config


def _key(version: Version | str, index: str) -> str:
    return f"vllm-{version}.{index_key(index)}"


class FlagReader:
    """``vllm serve``'s flags per release over one index session, cached per release (and
    kept in memory for the run)."""

    def __init__(self, session: IndexSession) -> None:
        self.session = session
        self._read: dict[Version, ServeFlags] = {}

    @classmethod
    def for_index(
        cls, index: str, *, http: Http | None = None, progress: Callable[[str], None] | None = None
    ) -> FlagReader:
        return cls(IndexSession(index, http=http, progress=progress or (lambda _m: None)))

    def flags(self, version: Version) -> ServeFlags:
        """What release ``version`` accepts. Raises NetworkError (the index did not answer)
        and WheelError (no wheel of that release, or a broken one)."""
        if version not in self._read:
            self._read[version] = self._flags(version)
        return self._read[version]

    def _flags(self, version: Version) -> ServeFlags:
        session = self.session
        if session.use_cache:
            cached = SERVE_FLAGS.load(_key(version, session.index), ServeFlags.from_entry)
            if cached is not None and cached.version == str(version):
                return cached
        from envkit.index.wheels import RemoteZip

        session.progress(f"reading vllm {version}'s serve flags from its wheel")
        start = time.monotonic()
        before = session.http.traffic.bytes
        wheel = session.pick("vllm", version)
        archive = RemoteZip(wheel.url, session.http)
        files = archive.read(wanted_members(archive.members))
        texts = {k: v.decode("utf-8", "replace") for k, v in files.items()}
        found = read_release(str(version), texts)
        result = ServeFlags(
            **{
                **found.to_dict(),
                "variables": found.variables,
                "wheel": wheel.filename,
                "bytes_read": session.http.traffic.bytes - before,
                "seconds": round(time.monotonic() - start, 3),
            }
        )
        SERVE_FLAGS.store(_key(version, session.index), result.to_dict())
        return result

    def last_with(self, has: Callable[[ServeFlags], bool], before: Version) -> str:
        """The newest release older than ``before`` for which ``has`` holds ("" when none of
        the releases probed has it, or a probe cannot decide)."""
        older = [v for v in self.session.releases("vllm") if v < before]
        return self._search(older, has)

    def first_after(self, has: Callable[[ServeFlags], bool], after: Version) -> str:
        """Whether the newest release has it, when ``after`` does not: its version, else ""."""
        newer = [v for v in self.session.releases("vllm") if v > after]
        if not newer:
            return ""
        newest = self._probe(newer[-1])
        return str(newer[-1]) if newest is not None and has(newest) else ""

    def _probe(self, version: Version) -> ServeFlags | None:
        try:
            found = self.flags(version)
        except WheelError:
            return None
        return found if found.readable else None

    def _search(self, older: list[Version], has: Callable[[ServeFlags], bool]) -> str:
        """The newest of ``older`` for which ``has`` holds: the last release of each minor
        series is probed, newest first, then the releases between the series that has it and
        the newer one that does not are bisected."""
        if not older:
            return ""
        position = {v: i for i, v in enumerate(older)}
        lasts: dict[tuple[int, ...], Version] = {}
        for version in older:
            lasts[version.release[:2]] = version
        without = len(older)  # older[without:] lack it (the target is past the end)
        found = -1
        for probes, version in enumerate(reversed(list(lasts.values()))):
            if probes >= MAX_PROBES:
                return ""
            flags = self._probe(version)
            if flags is not None and has(flags):
                found = position[version]
                break
            if flags is not None:
                without = position[version]
        if found < 0:
            return ""
        low, high = found, without  # older[low] has it; older[high] (or the target) not
        while high - low > 1:
            mid = (low + high) // 2
            flags = self._probe(older[mid])
            if flags is None:
                break  # cannot decide past here: the newest known to have it
            if has(flags):
                low = mid
            else:
                high = mid
        return str(older[low])
