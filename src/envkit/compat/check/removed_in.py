"""Which transformers release removed what a compat finding names (``compat --removed-in``).

Between the reference release (which has it) and the checked one (which does not), the
releases are bisected: each step reads one more transformers wheel's directory and the few
modules the findings need. A finding whose subject the reference lacks too, or that a step
cannot decide, keeps an empty ``removed_in``: unknown, not guessed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from packaging.version import Version

from envkit.compat.check.checker import Checker, Code, CompatReport, Incompatibility, store
from envkit.compat.transformers.transformers_source import TransformersRelease

Opener = Callable[[Version], TransformersRelease]
# what a release can remove (a name registered or a config field rejected is no removal)
_DATED = (Code.MISSING_MODULE, Code.MISSING_NAME, Code.REMOVED_ATTRIBUTE)


def has(release: TransformersRelease, finding: Incompatibility) -> bool | None:
    """Whether ``release`` still provides what ``finding`` says is missing (None: unknown)."""
    if finding.code is Code.MISSING_MODULE:
        release.load([finding.name, finding.name.rpartition(".")[0]])
        return release.module_exists(finding.name) is not False
    if finding.code is Code.MISSING_NAME:
        release.load([finding.module])
        return release.provides(finding.module, finding.name)
    module, _dot, cls = finding.module.rpartition(".")
    members = release.members_of([(module, cls)]).get((module, cls))
    return None if members is None else finding.name in members


def removed_in(
    findings: Sequence[Incompatibility],
    releases: Sequence[Version],
    reference: Version,
    target: Version,
    open_release: Opener,
) -> tuple[Incompatibility, ...]:
    """The findings with ``removed_in`` set where the bisection decides it."""
    between = sorted(r for r in releases if reference < r <= target and not r.is_prerelease)
    opened: dict[Version, TransformersRelease] = {}

    def at(version: Version) -> TransformersRelease:
        if version not in opened:
            opened[version] = open_release(version)
        return opened[version]

    out = []
    for finding in findings:
        found = ""
        if between and finding.code in _DATED:
            found = _bisect(finding, [reference, *between], at)
        out.append(dataclasses.replace(finding, removed_in=found))
    return tuple(out)


def _bisect(
    finding: Incompatibility,
    versions: Sequence[Version],
    at: Callable[[Version], TransformersRelease],
) -> str:
    """``versions[0]`` should have it and ``versions[-1]`` not: the first release without."""
    if has(at(versions[0]), finding) is not True:
        return ""  # the reference lacks it too: not a removal envkit can date
    low, high = 0, len(versions) - 1  # versions[low] has it, versions[high] does not
    while high - low > 1:
        mid = (low + high) // 2
        answer = has(at(versions[mid]), finding)
        if answer is None:
            return ""
        if answer:
            low = mid
        else:
            high = mid
    return str(versions[high])


def date(checker: Checker, report: CompatReport) -> CompatReport:
    """``report`` with each finding's ``removed_in`` looked for (stored back in the cache)."""
    if report.dated or not report.reference or not report.findings:
        return report
    checker.progress("bisecting transformers releases for when each finding's subject went")
    files = checker.files("transformers")

    def open_release(version: Version) -> TransformersRelease:
        release = TransformersRelease(checker.pick("transformers", version), checker.http)
        release.load(["transformers"])
        return release

    dated = removed_in(
        report.findings,
        sorted({f.version for f in files}),
        Version(report.reference),
        Version(report.transformers),
        open_release,
    )
    report = dataclasses.replace(report, findings=dated, dated=True, cached=False)
    store(report, checker.index)
    return report
