"""verify's check of the distributions that must be at one release together
(:data:`envkit.lock.companions.GROUPS`): one ``companions`` check per group of which a venv
holds two or more, failing with the ``uv pip install`` that moves the others, in that venv,
to the release of the one they follow."""

from __future__ import annotations

from pathlib import Path

from envkit.env.checks import check
from envkit.env.facts import VenvFacts, venv_python
from envkit.io.escaping import shell_command
from envkit.lock.companions import GROUPS, Mismatch, changes, mismatches
from envkit.profiles.profile import Profile
from envkit.results import Result, Severity


def names() -> list[str]:
    """Every distribution of every group, for the probe to report."""
    return [p for g in GROUPS for p in g.packages]


def companion_checks(profile: Profile, facts: VenvFacts, venv: Path) -> list[Result]:
    """One check per group with two or more of its distributions in the venv (``venv``: its
    path as the user sees it)."""
    found = {p: copies[0].version for p in names() if (copies := facts.copies(p))}
    wrong = {m.group.name: m for m in mismatches(found)}
    checks = []
    for group in GROUPS:
        present = [(p, found[p]) for p in group.packages if p in found]
        if len(present) < 2:
            continue
        m = wrong.get(group.name)
        shown = ", ".join(f"{p} {v}" for p, v in present)
        checks.append(
            check(
                kind="companions",
                name=group.name,
                status=Severity.ERROR if m else Severity.OK,
                expected=f"{', '.join(p for p, _v in present)} at one release",
                found=shown,
                detail=group.why if m else "",
                fix=_fix(profile, m, venv) if m else "",
            )
        )
    return checks


def _fix(profile: Profile, m: Mismatch, venv: Path) -> str:
    command = ["uv", "pip", "install", "--python", str(venv_python(venv)), *m.pins]
    where = f" ({m.group.where})" if m.group.where else ""
    return (
        f"{shell_command(command)}{where}; and, so that the next build and lock keep it, "
        f"{changes(profile, m)}"
    )
