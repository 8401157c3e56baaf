"""The one place that prints: text for people, JSON for programs.

Results go to stdout; progress, notes and errors to stderr (with ``--json``, an error is also
a JSON object on stdout, so a program always gets one document). ``term`` owns the streams,
the terminal's width and colour; the other modules format one command group's results each
(``env``, ``models``, ``locks``, ``serving``, as ``cli/`` groups the commands) and write
only through ``term.echo``. The command line calls ``render.NAME`` for all of them.
"""

from __future__ import annotations

from envkit.render.env import build, profiles, report, show
from envkit.render.export import exported
from envkit.render.fleet import fingerprint, fleet_check
from envkit.render.image import image
from envkit.render.locks import github_matrix, lock_check, lock_results, matrix, published
from envkit.render.models import compat, drafted, histories, model_report, scans, site
from envkit.render.serving import (
    ServeLog,
    diagnosis,
    explanation,
    log_diff,
    plan,
    probe,
    serve_ready,
    serve_result,
    serve_start,
)
from envkit.render.term import (
    JSON_VERSION,
    broken_profiles,
    emit_json,
    error,
    exit_codes_help,
    finish,
    interrupted,
    note,
    progress,
    set_wide,
    start,
    table,
    usage_error,
)

__all__ = [
    "JSON_VERSION",
    "ServeLog",
    "broken_profiles",
    "build",
    "compat",
    "diagnosis",
    "drafted",
    "emit_json",
    "error",
    "exit_codes_help",
    "explanation",
    "exported",
    "fingerprint",
    "finish",
    "fleet_check",
    "github_matrix",
    "histories",
    "image",
    "interrupted",
    "lock_check",
    "lock_results",
    "log_diff",
    "matrix",
    "model_report",
    "note",
    "plan",
    "probe",
    "profiles",
    "progress",
    "published",
    "report",
    "scans",
    "serve_ready",
    "serve_result",
    "serve_start",
    "set_wide",
    "show",
    "site",
    "start",
    "table",
    "usage_error",
]
