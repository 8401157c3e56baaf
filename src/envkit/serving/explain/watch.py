"""The streaming matcher: feed a boot log's lines one at a time and ask, at any moment,
whether vLLM has failed in a known way, stopped at a known stall point, or started.

``explain`` feeds it a whole file; ``serve`` can feed it vLLM's output as it arrives::

    watch = BootWatch()
    for number, raw in enumerate(process_output, 1):
        watch.feed(raw, number)
        if watch.status() is not Status.STARTING: ...

Memory is bounded whatever the log's length: a few evidence lines per code, a few unknown
error lines, the facts (:mod:`logfacts`, bounded too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from envkit.serving.explain.logfacts import FactReader, Facts
from envkit.serving.explain.logread import TRIGGERS, LogLine, normalise
from envkit.serving.explain.signatures import Code, Role, Signature, match

MAX_EVIDENCE = 5  # lines kept per code
MAX_UNKNOWN = 8  # error lines kept that no signature reads

_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::|$)")
_WARNING_TEXT = re.compile(r"\b[A-Z]\w*Warning:|\bNCCL WARN\b")
_FRAME = re.compile(r"^\s*(?:File \"|\^+$|~+\^*~*$|Traceback \(most recent call last\))")


class Status(str, Enum):
    STARTING = "starting"  # nothing decided yet
    FAILED = "failed"  # a known or unknown failure
    STALLED = "stalled"  # the last progress is a known stall point
    HEALTHY = "healthy"  # vLLM said it serves, after any failure


@dataclass(frozen=True)
class Hit:
    """One line a signature read."""

    code: Code
    role: Role
    line: LogLine
    groups: Mapping[str, str] = field(default_factory=dict)
    warning: bool = False  # printed as a warning (counted only once the start failed)


@dataclass(frozen=True)
class Scan:
    """Everything a watch saw, frozen: hits per code in the order first seen (each with up
    to MAX_EVIDENCE lines and the count), wrappers, unknown error lines, facts."""

    hits: Mapping[Code, tuple[Hit, ...]]
    counts: Mapping[Code, int]
    wrappers: tuple[Hit, ...]
    unknown: tuple[LogLine, ...]
    failed_at: int | None  # first failing line
    healthy_at: int | None  # last healthy-start line
    stall: Hit | None
    facts: Facts
    last_line: int
    status: Status = Status.STARTING
    started: Hit | None = None  # the healthy-start line


class BootWatch:
    """Feed lines (:meth:`feed` raw, :meth:`feed_line` normalised); ask :meth:`status`,
    :meth:`failure`, :meth:`stall_point`, :meth:`healthy`, or take the :meth:`scan`."""

    def __init__(self) -> None:
        self.reader = FactReader()
        self._hits: dict[Code, list[Hit]] = {}
        self._counts: dict[Code, int] = {}
        self._wrappers: list[Hit] = []
        self._unknown: list[LogLine] = []
        self._first_fail: int | None = None
        self._last_fail = 0
        self._healthy: int | None = None
        self._started: Hit | None = None
        self._stall: Hit | None = None
        self._progress = 0
        self._remote_frame = False  # a frame of a model's own code since the last Traceback
        self._last = 0

    def feed(self, raw: str | bytes, number: int) -> list[Hit]:
        """One raw line as vLLM printed it (prefixes, colours and all)."""
        data = raw.encode("utf-8", "replace") if isinstance(raw, str) else raw
        low = data.lower()
        self._last = max(self._last, number)
        if not any(t in low for t in TRIGGERS):
            return []
        return [h for line in normalise(number, data) if (h := self.feed_line(line))]

    def feed_line(self, line: LogLine) -> Hit | None:
        """One normalised line (:func:`logread.normalise`)."""
        self._last = max(self._last, line.number)
        text = line.text
        self.reader.read(line)
        if "Traceback (most recent" in text:
            self._remote_frame = False
            self._failing(line.number)
            return None
        if "transformers_modules" in text:
            self._remote_frame = True
        found = match(text)
        if found is None:
            self._unknown_error(line)
            return None
        hit = self._hit(found.signature, found.groups, line)
        self._remote_frame = self._remote_frame and hit is None  # frames lead to one error
        if hit is not None:
            self._record(hit)
        return hit

    def _hit(self, sig: Signature, groups: Mapping[str, str], line: LogLine) -> Hit | None:
        warning = line.level == "WARNING" or bool(_WARNING_TEXT.search(line.text))
        if sig.role is Role.CAUSE and warning and not sig.warning_ok:
            return None  # a warning that only sounds like a cause (a red herring)
        code = sig.code
        if code is Code.TRANSFORMERS_TOO_NEW and self._remote_frame:
            code, groups = Code.REMOTE_CODE_TRANSFORMERS, {**groups, "variant": "breaks"}
        if code is Code.ARCHITECTURE_UNSUPPORTED:
            for name in re.findall(r"\w+", groups.get("architectures", "")):
                self.reader.note_architecture(name)
            if "architecture" in groups:
                self.reader.note_architecture(groups["architecture"])
        return Hit(code, sig.role, line, dict(groups), warning)

    def _record(self, hit: Hit) -> None:
        number = hit.line.number
        if hit.role is Role.HEALTHY:
            self._healthy, self._started = number, hit
        elif hit.role is Role.PROGRESS:
            self._progress = number
        elif hit.role is Role.STALL:
            self._stall = hit
            self._keep(hit)
        elif hit.role is Role.WRAPPER:
            self._failing(number)
            if len(self._wrappers) < MAX_EVIDENCE:
                self._wrappers.append(hit)
        else:
            if not hit.warning:
                self._failing(number)
            self._keep(hit)

    def _keep(self, hit: Hit) -> None:
        kept = self._hits.setdefault(hit.code, [])
        self._counts[hit.code] = self._counts.get(hit.code, 0) + 1
        if len(kept) < MAX_EVIDENCE:
            kept.append(hit)

    def _failing(self, number: int) -> None:
        if self._first_fail is None:
            self._first_fail = number
        self._last_fail = max(self._last_fail, number)

    def _unknown_error(self, line: LogLine) -> None:
        text = line.text.strip()
        if line.level == "WARNING" or _WARNING_TEXT.search(text) or _FRAME.match(text):
            return
        if line.level == "ERROR" or _EXCEPTION.match(text):
            self._failing(line.number)
            if len(self._unknown) < MAX_UNKNOWN:
                self._unknown.append(line)

    # the questions
    def healthy(self) -> bool:
        """vLLM said it serves, and nothing failed after that."""
        return self._healthy is not None and self._healthy > self._last_fail

    def failure(self) -> Hit | None:
        """The earliest known failure so far (a cause printed as an error; a cause printed
        as a warning once the start has failed), or None."""
        if self._first_fail is None or self.healthy():
            return None
        causes = [h for hits in self._hits.values() for h in hits if h.role is Role.CAUSE]
        return min(causes, key=lambda h: (h.line.number, h.warning), default=None)

    def wrapper(self) -> Hit | None:
        """The first line that only points up to a cause (the engine's wrapper), or None:
        whatever the cause, the start has failed."""
        return self._wrappers[0] if self._wrappers else None

    def stall_point(self) -> Hit | None:
        """The known stall point vLLM printed last, with no progress, failure or healthy
        start after it (whether it is hanging is the caller's clock's to say)."""
        if self._stall is None or self._first_fail is not None or self.healthy():
            return None
        return self._stall if self._stall.line.number > self._progress else None

    def status(self) -> Status:
        if self.healthy():
            return Status.HEALTHY
        if self._first_fail is not None:
            return Status.FAILED
        return Status.STALLED if self.stall_point() else Status.STARTING

    def scan(self) -> Scan:
        return Scan(
            hits={code: tuple(hits) for code, hits in self._hits.items()},
            counts=dict(self._counts),
            wrappers=tuple(self._wrappers),
            unknown=tuple(self._unknown),
            failed_at=self._first_fail,
            healthy_at=self._healthy,
            stall=self.stall_point(),
            facts=self.reader.facts(),
            last_line=self._last,
            status=self.status(),
            started=self._started,
        )
