"""``explain LOG`` as one flow: the versions to confirm against (a venv's METADATA, else a
profile's pins), the log scanned, the root cause explained, and envkit lint's check of the
log's arguments against the profile's release. The command line parses and renders; this
assembles."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.serving.explain import causes
from envkit.serving.explain.envpins import Installed, from_profile, from_venv

if TYPE_CHECKING:
    from envkit.profiles.profile import Profile
    from envkit.serving.explain.knowledge import Knowledge


@dataclass(frozen=True, slots=True)
class Explained:
    """The explanation, and envkit lint's findings on the log's arguments (shown first)."""

    explanation: causes.Explanation
    notes: tuple[str, ...] = ()


def installed_for(venv: Path | None, profile: Profile | None) -> Installed | None:
    """What to confirm against: the venv's versions, else the profile's pins, else none.
    BadInput for a venv that holds no site-packages."""
    if venv is not None:
        return from_venv(venv)
    return from_profile(profile) if profile is not None else None


def explain_log(
    log: str, knowledge: Knowledge, *, profile: Profile | None = None, venv: Path | None = None
) -> Explained:
    """``log``: a file, or ``-`` for standard input. BadInput for a log that cannot be read."""
    installed = installed_for(venv, profile)
    with causes.open_log(log) as (stream, name):
        scan, stats = causes.scan_stream(stream, name)
    result = causes.explain(
        scan,
        stats,
        knowledge,
        source=name,
        installed=installed,
        profile=profile.name if profile else "",
        venv=str(venv) if venv is not None else "",
    )
    notes: list[str] = []
    if profile is not None and (scan.facts.args or scan.facts.env):  # envkit lint's check
        from envkit.serving.lint.use import args_from_log, lint_notes

        recorded = args_from_log(scan.facts.args)
        notes = lint_notes(profile, recorded, scan.facts.env, what="the log's arguments")[1]
    return Explained(result, tuple(notes))
