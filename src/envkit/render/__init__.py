"""The one place that prints: text for people, JSON for programs.

Results go to stdout; progress, notes and errors to stderr (with ``--json``, an error is also
a JSON object on stdout, so a program always gets one document). ``term`` owns the streams,
the terminal's width and colour; the other modules format one command group's results each
(``env``, ``models``, ``locks``, ``serving``, as ``cli/`` groups the commands) and write
only through ``term.echo``. The command line calls ``render.NAME`` for all of them.

The modules are imported when a name of theirs is first asked for (``render.plan`` loads
``render.serving``), so a command loads the formatting of its own results alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# a name its own module shares: imported now, as loading the module later would set the
# package's attribute to the module
from envkit.render.image import image

if TYPE_CHECKING:
    from envkit.render.env import build, profiles, report, show
    from envkit.render.export import exported
    from envkit.render.fleet import fingerprint, fleet_check
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

# name -> the module of envkit.render that defines it
_HOMES = {
    "JSON_VERSION": "term",
    "ServeLog": "serving",
    "broken_profiles": "term",
    "build": "env",
    "compat": "models",
    "diagnosis": "serving",
    "drafted": "models",
    "emit_json": "term",
    "error": "term",
    "exit_codes_help": "term",
    "explanation": "serving",
    "exported": "export",
    "fingerprint": "fleet",
    "finish": "term",
    "fleet_check": "fleet",
    "github_matrix": "locks",
    "histories": "models",
    "interrupted": "term",
    "lock_check": "locks",
    "lock_results": "locks",
    "log_diff": "serving",
    "matrix": "locks",
    "model_report": "models",
    "note": "term",
    "plan": "serving",
    "probe": "serving",
    "profiles": "env",
    "progress": "term",
    "published": "locks",
    "report": "env",
    "scans": "models",
    "serve_ready": "serving",
    "serve_result": "serving",
    "serve_start": "serving",
    "set_wide": "term",
    "show": "env",
    "site": "models",
    "start": "term",
    "table": "term",
    "usage_error": "term",
}


def __getattr__(name: str) -> Any:
    """The name from its module, imported on first use (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"envkit.render.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


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
