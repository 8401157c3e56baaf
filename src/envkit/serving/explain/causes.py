"""``envkit explain``: the root cause of a vLLM boot log, the other real problems, the
evidence with line numbers, what it means and a fix built from envkit's knowledge.

The root cause is the earliest causal error: a wrapper (``Engine core initialization
failed. See root cause above.``) only points up to it and is the answer only when nothing
above it is known; a cause printed as a warning counts only once the start failed; a cause
that another explains (an NCCL error after /dev/shm ran out) yields to it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, BinaryIO

from envkit.errors import BadInput
from envkit.io.files import open_regular
from envkit.results import Result, Severity
from envkit.serving.explain.envpins import Installed
from envkit.serving.explain.fixcontext import Builder, Context, Fix, unknown_fix
from envkit.serving.explain.fixmemory import BUILDERS as MEMORY
from envkit.serving.explain.fixmemory import gpu_occupied, occupied
from envkit.serving.explain.fixsoftware import BUILDERS as SOFTWARE
from envkit.serving.explain.fixstart import BUILDERS as START
from envkit.serving.explain.fixstart import loaded_before
from envkit.serving.explain.knowledge import Knowledge, pinning
from envkit.serving.explain.logfacts import Facts
from envkit.serving.explain.logread import MAX_LINE, LogLine, ReadStats, candidates, normalise
from envkit.serving.explain.signatures import Code, Role
from envkit.serving.explain.watch import BootWatch, Hit, Scan, Status

BUILDERS: Mapping[Code, Builder] = {
    **MEMORY,
    **SOFTWARE,
    **START,
    Code.GPU_OCCUPIED: gpu_occupied,
}
MAX_TEXT = 500  # characters of an evidence line the text view shows (it says what it cut)
MAX_JSON_TEXT = MAX_LINE  # --json carries the whole line as read (a longer one cut at read)
# the causes that are no failure: a healthy start, a log that ends before anything was
# decided (not-a-vllm-log stays an error: explain exits 1 on it, the log is not what it reads)
NOT_A_FAILURE = {Code.NONE: Severity.OK, Code.INCOMPLETE: Severity.UNKNOWN}


class Verdict(str, Enum):
    """What the log shows of the start (``status`` in --json)."""

    FAILED = "failed"
    STALLED = "stalled"
    HEALTHY = "healthy"
    INCOMPLETE = "incomplete"  # it ends mid-boot: neither failed nor started (exit 0)
    NOT_VLLM = "not-vllm"  # nothing in it is vLLM's


# a cause that follows from another when both are in the log
EXPLAINED_BY: Mapping[Code, tuple[Code, ...]] = {
    Code.NCCL_ERROR: (Code.SHM_TOO_SMALL, Code.FABRIC_MANAGER, Code.CUDA_FORWARD_COMPAT),
    Code.CUDA_RUNTIME_MISSING: (Code.DRIVER_TOO_OLD, Code.FABRIC_MANAGER, Code.CUDA_FORWARD_COMPAT),
    Code.CUDA_OOM: (Code.FREE_MEMORY, Code.KV_CACHE_TOO_SMALL),
    Code.TRANSFORMERS_TOO_NEW: (
        Code.REMOTE_CODE_TRANSFORMERS,
        Code.REMOTE_CODE_PROMPT,
        Code.CONFIG_CONFLICT,
    ),
    Code.NO_KERNEL_IMAGE: (Code.PTX_TOOLCHAIN,),
}


@dataclass(frozen=True)
class Evidence:
    line: int
    text: str  # the whole line as read, up to MAX_JSON_TEXT characters
    read_cut: bool = False  # the physical line was longer than the reader keeps

    @property
    def more(self) -> int:
        """Characters of ``text`` past MAX_TEXT (what the text view leaves out)."""
        return max(0, len(self.text) - MAX_TEXT)

    @property
    def shown(self) -> str:
        """The line as the text view shows it: up to MAX_TEXT characters, saying what it cut
        (the result's evidence)."""
        shown = f"{self.line}: {self.text[:MAX_TEXT]}"
        if self.more:
            shown += f" … (+{self.more} characters; --json carries the whole line)"
        if self.read_cut:
            shown += " … (the line went on past 64 KiB; the rest is not shown)"
        return shown

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text, "read_cut": self.read_cut}


@dataclass(frozen=True)
class Cause:
    code: Code
    summary: str
    line: int | None
    evidence: tuple[Evidence, ...]
    count: int  # lines that read so (evidence shows the first few)
    meaning: str
    fix: tuple[str, ...]
    details: tuple[str, ...]
    next: tuple[str, ...]

    @property
    def result(self) -> Result:
        """The cause as the one result record: ``ok`` for a healthy start, ``unknown`` when the
        log ends mid-boot, else an error (as explain's exit code says); its evidence the lines
        read so as the text shows them, its fix the steps one a line. The text view draws
        these from it; ``meaning``, ``details``, ``next`` and ``count`` are the explanation's
        own, beside it."""
        severity = NOT_A_FAILURE.get(self.code, Severity.ERROR)
        return Result(code=self.code.value, severity=severity,
                      subject=f"line {self.line}" if self.line else "", message=self.summary,
                      evidence=tuple(e.shown for e in self.evidence),
                      fix="\n".join(self.fix))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "result": self.result.to_dict(),
            "code": self.code.value,
            "summary": self.summary,
            "line": self.line,
            "evidence": [e.to_dict() for e in self.evidence],
            "count": self.count,
            "meaning": self.meaning,
            "fix": list(self.fix),
            "details": list(self.details),
            "next": list(self.next),
        }


@dataclass(frozen=True)
class Check:
    what: str
    log: str  # what the log shows ("" when it does not say)
    environment: str
    same: bool | None  # None: one side does not say

    @property
    def result(self) -> Result:
        """``ok`` when the log and the environment agree, an error when they differ,
        ``unknown`` when one side does not say."""
        severity = {True: Severity.OK, False: Severity.ERROR, None: Severity.UNKNOWN}[self.same]
        return Result(code="log-matches-environment", severity=severity, subject=self.what,
                      message=f"{self.what}: log {self.log or '-'}, environment "
                      f"{self.environment or '-'}",
                      evidence={"log": self.log, "environment": self.environment})  # fmt: skip


@dataclass(frozen=True)
class Confirmation:
    source: str
    checks: tuple[Check, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "checks": [
                {
                    **c.result.to_dict(),
                    "what": c.what,
                    "log": c.log or None,
                    "environment": c.environment or None,
                    "same": c.same,
                }
                for c in self.checks
            ],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Explanation:
    source: str
    status: Verdict
    cause: Cause
    also: tuple[Cause, ...]
    facts: Facts
    stats: ReadStats
    environment: Confirmation | None = None

    @property
    def ok(self) -> bool:
        return self.status is Verdict.HEALTHY

    @property
    def exit_ok(self) -> bool:
        """Exit 0: a healthy start, or a log that ends before anything was decided."""
        return self.status in (Verdict.HEALTHY, Verdict.INCOMPLETE)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "log": self.source,
            "status": self.status.value,
            "cause": self.cause.to_dict(),
            "also": [c.to_dict() for c in self.also],
            "facts": self.facts.to_dict(),
            "environment": self.environment.to_dict() if self.environment else None,
            "read": {"lines": self.stats.lines, "bytes": self.stats.bytes, "cut": self.stats.cut},
        }


@contextmanager
def open_log(argument: str) -> Iterator[tuple[BinaryIO, str]]:
    """The log a LOG argument names (``-``: standard input), as a binary stream."""
    if argument == "-":
        yield sys.stdin.buffer, "standard input"
        return
    path = Path(argument)
    if not path.is_file():
        raise BadInput(
            f"The log {argument!r} is not a file.",
            "Give the file vLLM's output went to, or - to read standard input.",
        )
    with open_regular(path, what="log") as stream:
        yield stream, argument


def scan_stream(stream: BinaryIO, name: str) -> tuple[Scan, ReadStats]:
    """The whole stream through the fast path (only lines holding a trigger are matched)."""
    stats = ReadStats()
    watch = BootWatch()
    for number, raw in candidates(stream, name, stats):
        for line in normalise(number, raw):
            watch.feed_line(line)
    return watch.scan(), stats


def _recode(code: Code, hits: tuple[Hit, ...], ctx: Context) -> Code:
    """Context over message: what the rest of the log says a message means here."""
    if code is Code.CUDA_OOM and occupied(hits, ctx):
        return Code.GPU_OCCUPIED  # nothing free before any weight: another process
    if code is Code.MODEL_TYPE_UNKNOWN and loaded_before(hits, ctx):
        return Code.MODEL_TYPE_LOADED
    if code is Code.ENGINE_CORE_FAILED and any(
        _KILLED.search(h.groups.get("procs", "")) for h in hits
    ):
        return Code.HOST_OOM  # the engine died of SIGKILL: the host's OOM killer
    return code


_KILLED = re.compile(r":\s*-9\b")


def _cause(code: Code, hits: tuple[Hit, ...], count: int, ctx: Context) -> Cause:
    code = _recode(code, hits, ctx)
    fix: Fix = BUILDERS.get(code, unknown_fix(code))(hits, ctx)
    return Cause(
        code=code,
        summary=fix.summary,
        line=hits[0].line.number if hits else None,
        evidence=tuple(
            Evidence(h.line.number, h.line.text[:MAX_JSON_TEXT], h.line.cut) for h in hits
        ),
        count=count,
        meaning=fix.meaning,
        fix=fix.steps,
        details=fix.details,
        next=fix.next,
    )


def _ordered_causes(scan: Scan, failed: bool) -> list[tuple[Code, tuple[Hit, ...]]]:
    found = []
    for code, hits in scan.hits.items():
        real = tuple(h for h in hits if h.role is Role.CAUSE and (failed or not h.warning))
        if real:
            found.append((code, real))
    found.sort(key=lambda item: (item[1][0].line.number, item[1][0].warning))
    if found:
        present = {code for code, _ in found}
        root = found[0][0]
        explainers = [c for c in EXPLAINED_BY.get(root, ()) if c in present]
        if explainers:
            found.sort(key=lambda item: item[0] != explainers[0])
    return found


def _hits_of(lines: tuple[LogLine, ...]) -> tuple[Hit, ...]:
    return tuple(Hit(Code.UNKNOWN, Role.CAUSE, line) for line in lines)


def explain(
    scan: Scan,
    stats: ReadStats,
    knowledge: Knowledge,
    *,
    source: str = "",
    installed: Installed | None = None,
    profile: str = "",
    venv: str = "",
    gpu: str = "",
    passed: tuple[str, ...] = (),
) -> Explanation:
    """The explanation of a scanned log (see the module's docstring for the rules).
    ``profile``, ``venv``, ``gpu`` and ``passed`` are what the start used (serve's profile,
    venv, --gpu and the vllm serve arguments it passed): the fixes name them and never
    suggest again what was passed."""
    ctx = Context(scan.facts, knowledge, scan, installed, profile, venv, gpu, tuple(passed))
    failed = scan.status is Status.FAILED
    causes = _ordered_causes(scan, failed)
    made = [_cause(code, hits, scan.counts.get(code, len(hits)), ctx) for code, hits in causes]
    if scan.status is Status.HEALTHY:
        started = (scan.started,) if scan.started else ()
        root, also = (
            _cause(Code.NONE, started, len(started), ctx),
            tuple(made),
        )  # what went wrong on the way and was got over
    elif scan.status is Status.STALLED and scan.stall is not None:
        root, also = _cause(Code.ENCODER_CACHE_PROFILING, (scan.stall,), 1, ctx), tuple(made)
    elif made:
        root, also = made[0], tuple(made[1:])
    elif scan.wrappers and not scan.unknown:
        root, also = _cause(Code.ENGINE_CORE_FAILED, scan.wrappers, len(scan.wrappers), ctx), ()
    elif not scan.facts.vllm_seen and not (passed or gpu):  # another program's (serve's never)
        hits = _hits_of(scan.unknown)
        root, also = _cause(Code.NOT_VLLM, hits, len(hits), ctx), ()
    elif scan.status is Status.STARTING:  # nothing decided: the log ends mid-boot
        root, also = _cause(Code.INCOMPLETE, (), 0, ctx), ()
    else:  # errors no signature reads: shown as they are
        hits = _hits_of(scan.unknown)
        root, also = _cause(Code.UNKNOWN, hits, len(hits), ctx), ()
    status = {
        Code.NOT_VLLM: Verdict.NOT_VLLM,
        Code.INCOMPLETE: Verdict.INCOMPLETE,
    }.get(root.code) or {
        Status.HEALTHY: Verdict.HEALTHY,
        Status.STALLED: Verdict.STALLED,
    }.get(scan.status, Verdict.FAILED)
    return Explanation(
        source=source,
        status=status,
        cause=root,
        also=also,
        facts=scan.facts,
        stats=stats,
        environment=confirm(scan.facts, root.code, installed, knowledge) if installed else None,
    )


def confirm(facts: Facts, code: Code, installed: Installed, knowledge: Knowledge) -> Confirmation:
    """Whether the environment asked about (a venv, a profile's pins) is the one the log
    shows: the vLLM version, the transformers it holds against the pin for that vLLM."""
    checks = []
    env_vllm = installed.get("vllm")
    checks.append(
        Check(
            "vllm",
            facts.vllm_version,
            env_vllm,
            facts.vllm_version == env_vllm if facts.vllm_version and env_vllm else None,
        )
    )
    env_tf = installed.get("transformers")
    if facts.transformers_version:
        checks.append(
            Check(
                "transformers",
                facts.transformers_version,
                env_tf,
                facts.transformers_version == env_tf if env_tf else None,
            )
        )
    vllm = facts.vllm_version or env_vllm
    notes = []
    for pinned in pinning(knowledge, vllm)[:1]:
        same = env_tf == pinned.transformers if env_tf else None
        checks.append(
            Check(
                f"transformers pinned for vLLM {vllm} ({pinned.name})",
                pinned.transformers,
                env_tf,
                same,
            )
        )
        if same is False and code is Code.TRANSFORMERS_TOO_NEW:
            notes.append(
                f"confirmed: {installed.source} holds transformers {env_tf}, not the "
                f"{pinned.transformers} {pinned.name} pins for vLLM {vllm}"
            )
    for name, versions in installed.copies.items():
        notes.append(
            f"{name} is installed {len(versions)} times ({', '.join(versions)}): a mixed install"
        )
    return Confirmation(installed.source, tuple(checks), tuple(notes))
