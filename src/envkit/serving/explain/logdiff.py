"""``envkit explain --diff A B``: two boot logs of one start with one change.

From vLLM's own dumps on each side (``non-default args``, ``args: Namespace``, variable
dumps, the ``vllm serve`` command line) come the environment variables and arguments that
differ. For each, did vLLM acknowledge it? ``named``: a line other than the dumps names it;
``unknown-to-vllm``: vLLM said it does not know the variable; ``path-changed``: no line
names it, but the runs differ (a line in one log and not the other, numbers masked);
``not-acknowledged``: the two runs took the same path. And whether the failure changed.

Each log is read twice, every line (the second time only for the changed names); what is
kept is bounded (:data:`MAX_KEYS` distinct lines a side).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from envkit.serving.explain.causes import Cause, explain, open_log
from envkit.serving.explain.fixmemory import WSL2_PIN_SWITCH, switch_read
from envkit.serving.explain.knowledge import Knowledge
from envkit.serving.explain.logfacts import Facts
from envkit.serving.explain.logread import ReadStats, every_line, normalise
from envkit.serving.explain.watch import BootWatch

MAX_KEYS = 50_000  # distinct normalised lines kept a side
MAX_SHOWN = 8  # lines shown a side, or per name
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")


@dataclass(frozen=True)
class SideLine:
    side: str  # "a" or "b"
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class Change:
    name: str
    a: str | None  # None: not set in that log
    b: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class Acknowledgement:
    name: str
    kind: str  # "env" or "arg"
    verdict: str  # named, unknown-to-vllm, path-changed, not-acknowledged
    evidence: tuple[SideLine, ...]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "verdict": self.verdict,
            "evidence": [e.to_dict() for e in self.evidence],
            "note": self.note or None,
        }


@dataclass(frozen=True)
class LogDiff:
    a: str
    b: str
    changed_env: tuple[Change, ...]
    changed_args: tuple[Change, ...]
    acknowledged: tuple[Acknowledgement, ...]
    same_failure: bool
    cause_a: Cause
    cause_b: Cause
    only_in_a: tuple[SideLine, ...]
    only_in_b: tuple[SideLine, ...]
    counts: tuple[int, int]  # lines only in a, only in b
    capped: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "a": self.a,
            "b": self.b,
            "changed_env": [c.to_dict() for c in self.changed_env],
            "changed_args": [c.to_dict() for c in self.changed_args],
            "acknowledged": [a.to_dict() for a in self.acknowledged],
            "same_failure": self.same_failure,
            "cause_a": self.cause_a.to_dict(),
            "cause_b": self.cause_b.to_dict(),
            "only_in_a": {"count": self.counts[0], "lines": [s.to_dict() for s in self.only_in_a]},
            "only_in_b": {"count": self.counts[1], "lines": [s.to_dict() for s in self.only_in_b]},
            "capped": self.capped,
        }


@dataclass
class _Side:
    name: str
    facts: Facts
    cause: Cause
    keys: dict[str, tuple[int, str]]
    capped: bool


def _read(path: str, knowledge: Knowledge) -> _Side:
    watch = BootWatch()
    keys: dict[str, tuple[int, str]] = {}
    capped = False
    stats = ReadStats()
    with open_log(path) as (stream, name):
        for number, raw in every_line(stream, name, stats):
            for line in normalise(number, raw):
                watch.feed_line(line)
                if not line.text or number in watch.reader.dumps:
                    continue
                key = _NUMBERS.sub("#", line.text)
                if key not in keys:
                    if len(keys) < MAX_KEYS:
                        keys[key] = (number, line.text[:300])
                    else:
                        capped = True
    scan = watch.scan()
    cause = explain(scan, stats, knowledge, source=name).cause
    return _Side(name, scan.facts, cause, keys, capped)


def _changes(a: dict[str, str], b: dict[str, str], ignore: frozenset[str]) -> list[Change]:
    names = sorted((set(a) | set(b)) - ignore)
    return [Change(n, a.get(n), b.get(n)) for n in names if a.get(n) != b.get(n)]


def _naming(
    path: str, side: str, names: list[str], dumps: frozenset[int]
) -> dict[str, list[SideLine]]:
    """The lines of ``path`` (other than its dumps) that name each of ``names``."""
    spelled = {
        n: {n.lower(), n.replace("_", "-"), n.replace("_", " ")} if n.islower() else {n.lower()}
        for n in names
    }
    found: dict[str, list[SideLine]] = {n: [] for n in names}
    stats = ReadStats()
    with open_log(path) as (stream, name):
        for number, raw in every_line(stream, name, stats):
            if number in dumps:
                continue
            text = raw.decode("utf-8", "replace").lower()
            for n, forms in spelled.items():
                if len(found[n]) < MAX_SHOWN and any(f in text for f in forms):
                    line = normalise(number, raw)[-1]
                    found[n].append(SideLine(side, number, line.text[:300]))
    return found


def diff(path_a: str, path_b: str, knowledge: Knowledge) -> LogDiff:
    """Compare two boot logs (see the module's docstring). Raises BadInput for a log that
    cannot be read."""
    a, b = _read(path_a, knowledge), _read(path_b, knowledge)
    env = _changes(dict(a.facts.env), dict(b.facts.env), frozenset())
    # the model's path may differ by mount point; the tag is the same argument
    args = _changes(dict(a.facts.args), dict(b.facts.args), frozenset({"subparser"}))
    only_a = sorted(v for k, v in a.keys.items() if k not in b.keys)
    only_b = sorted(v for k, v in b.keys.items() if k not in a.keys)
    names = [c.name for c in env] + [c.name for c in args]
    named_a = _naming(path_a, "a", names, a.facts.dump_lines) if names else {}
    named_b = _naming(path_b, "b", names, b.facts.dump_lines) if names else {}
    acks = []
    for change, kind in [(c, "env") for c in env] + [(c, "arg") for c in args]:
        evidence = (*named_a.get(change.name, ()), *named_b.get(change.name, ()))
        if evidence:
            verdict = "named"
        elif change.name in a.facts.unknown_env or change.name in b.facts.unknown_env:
            verdict = "unknown-to-vllm"
        elif only_a or only_b:
            verdict = "path-changed"
        else:
            verdict = "not-acknowledged"
        vllm = a.facts.vllm_version or b.facts.vllm_version
        note = switch_read(vllm) if change.name == WSL2_PIN_SWITCH and vllm else ""
        acks.append(Acknowledgement(change.name, kind, verdict, evidence[: MAX_SHOWN * 2], note))
    failed = a.cause.code.value != "none" and b.cause.code.value != "none"
    return LogDiff(
        a=a.name,
        b=b.name,
        changed_env=tuple(env),
        changed_args=tuple(args),
        acknowledged=tuple(acks),
        same_failure=failed and a.cause.code == b.cause.code,
        cause_a=a.cause,
        cause_b=b.cause,
        only_in_a=tuple(SideLine("a", n, t) for n, t in only_a[:MAX_SHOWN]),
        only_in_b=tuple(SideLine("b", n, t) for n, t in only_b[:MAX_SHOWN]),
        counts=(len(only_a), len(only_b)),
        capped=a.capped or b.capped,
    )
