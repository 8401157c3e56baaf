"""The one error hierarchy of envkit.

Every failure a user can meet is an :class:`EnvkitError`. Each carries what went wrong as data
and renders itself as one paragraph: what was wrong, where, and what to do. The command line
turns them into exit codes (see :data:`EXIT_CODES`); nothing else calls ``sys.exit``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from envkit.results import Result, Severity
from envkit.wording import counted

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    EXIT_OK: "everything asked for holds",
    EXIT_CHECK_FAILED: "a check, resolution, install or build failed",
    EXIT_BAD_INPUT: "bad input or configuration (profile, arguments, missing tools)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM); the last line says what is where",
}


class EnvkitError(Exception):
    """Base of every user-facing failure. ``exit_code`` says how the CLI ends."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} {self.hint}".strip()

    def to_dict(self) -> dict[str, object]:
        return {"error": type(self).__name__, "message": self.message, "hint": self.hint}


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a file: where (file, key path, line) and what."""

    file: str
    key: str
    message: str
    line: int | None = None

    def location(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.key:
            where += f" [{self.key}]"
        return where

    @property
    def result(self) -> Result:
        """The problem as the one result record: an error whose subject is
        ``file [key]:line`` and whose evidence is the file, key and line."""
        subject = self.file + (f" [{self.key}]" if self.key else "")
        subject += f":{self.line}" if self.line is not None else ""
        facts = {"file": self.file, "key": self.key, "line": str(self.line or "")}
        return Result(code="profile-invalid", severity=Severity.ERROR, subject=subject,
                      message=self.message, evidence={k: v for k, v in facts.items() if v},
                      fix="fix the profile file (format: docs/profiles.md)")  # fmt: skip

    def to_dict(self) -> dict[str, object]:
        return {**self.result.to_dict(), "file": self.file, "key": self.key, "line": self.line}


class ProfileError(EnvkitError):
    """A profile file could not be read or is not valid; carries every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        lines = [f"{p.location()}: {p.message}" for p in self.problems]
        super().__init__(
            f"Invalid profile ({counted(len(lines), 'problem')}): " + "; ".join(lines) + ".",
            "Fix the profile file (format: docs/profiles.md) and run the command again.",
        )

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data["problems"] = [p.to_dict() for p in self.problems]
        return data


class ProfileNotFound(EnvkitError):
    """No profile of that name in the profiles folder."""


class BadInput(EnvkitError):
    """An argument or option the user gave cannot be used."""


class ToolNotFound(EnvkitError):
    """A program envkit needs (uv, an interpreter) is not on this machine."""


class UnusableInterpreter(BadInput):
    """The interpreter given with --python does not run, or does not fit the profile."""


class CommandFailed(EnvkitError):
    """A subprocess (uv) ended with a non-zero exit code."""

    exit_code = EXIT_CHECK_FAILED

    def __init__(
        self, command: Sequence[str], returncode: int, output: str, what: str, hint: str = ""
    ) -> None:
        self.command = tuple(command)
        self.returncode = returncode
        self.output = output
        tail = _tail(output)
        super().__init__(
            f"{what} failed: `{shlex.join(self.command)}` exited with code {returncode}."
            + (f" Its last output: {tail}" if tail else ""),
            hint,
        )

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data.update(command=list(self.command), returncode=self.returncode, output=self.output)
        return data


class OutputTooLarge(EnvkitError):
    """A child process wrote more than envkit reads of it (``io.process.run``'s cap): it was
    stopped there, and what it wrote is not kept."""

    exit_code = EXIT_CHECK_FAILED

    def __init__(self, program: str, stream: str, limit: int) -> None:
        self.program, self.stream, self.limit = program, stream, limit
        super().__init__(
            f"{program} wrote more than {limit:,} bytes to its {stream}; envkit stopped it "
            "there and kept none of it.",
            "Run it by hand to see what it prints: something it runs first (a "
            "sitecustomize.py, a .pth file) may print without end.",
        )


class NoSolution(EnvkitError):
    """A resolution that failed: no release (or set of them) meets what was asked."""

    exit_code = EXIT_CHECK_FAILED


class EnvironmentBroken(EnvkitError):
    """The venv's on-disk state is not one envkit can repair by itself."""

    exit_code = EXIT_CHECK_FAILED


class ServeRefused(EnvkitError):
    """``envkit serve`` would not start vLLM: the plan has no command for the model on this
    GPU, or the port is taken."""

    exit_code = EXIT_CHECK_FAILED


class NetworkError(EnvkitError):
    """A server (package index, Hub, vLLM) could not be reached, or answered too slowly, too
    much, or in a shape envkit cannot use. ``status`` is the HTTP status when there was one.

    Never a verdict: a check that meets one ends with exit 2 and records nothing.
    """

    def __init__(
        self, message: str, hint: str = "", *, url: str = "", status: int = 0, kind: str = ""
    ) -> None:
        super().__init__(message, hint)
        self.url = url  # redacted
        self.status = status
        # what went wrong, for callers that explain it: refused, timeout, connect-timeout,
        # unreachable (DNS, TLS, protocol), status, too-large, bad-answer
        self.kind = kind or ("status" if status else "")

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        data.update(url=self.url or None, status=self.status or None)
        return data


class TooLarge(NetworkError):
    """A server's answer is larger than envkit reads for that request."""


class KnowledgeMissing(NetworkError):
    """What a command needs from the index is not in the knowledge snapshot in use
    (``--knowledge``): with one, envkit uses no network at all. Never a verdict."""


class BadSnapshot(BadInput):
    """A knowledge snapshot that envkit cannot use: not one it writes, of another format,
    or changed since it was written (a digest or an entry's sha256 differs)."""


class WheelError(EnvkitError):
    """A wheel or source file is not one envkit can read (broken zip, missing member, too
    large once inflated, source it cannot parse)."""


class StaleLocks(EnvkitError):
    """Published locks that are stale, missing or unresolvable where current ones are needed."""

    exit_code = EXIT_CHECK_FAILED


class StaleLock(BadInput):
    """A build was asked to install a published lock that is no longer current."""


class FileSystemError(EnvkitError):
    """A file or folder envkit must write cannot be written (read-only, full disk, ...)."""

    def __init__(self, path: object, exc: OSError, what: str = "write") -> None:
        reason = exc.strerror or type(exc).__name__
        super().__init__(
            f"Cannot {what} {str(path)!r}: {reason}; the file there, if any, is as it was.",
            "Check the folder's permissions and free space, then run the command again.",
        )
        self.path = str(path)
        self.errno = exc.errno


class UnreadableFile(BadInput):
    """A file envkit reads (profile, model file, lock, marker, cache entry) is missing, is not
    a regular file, is larger than envkit reads, or cannot be read; found before reading.
    ``kind`` says which: missing, not-regular, symlink, too-large, not-text, unreadable."""

    def __init__(self, path: object, reason: str, kind: str, what: str = "file") -> None:
        super().__init__(
            f"The {what} {str(path)!r} {reason}.",
            "Give a regular file (not a pipe, device or folder) of the expected size.",
        )
        self.path = str(path)
        self.reason = reason
        self.kind = kind


class Interrupted(EnvkitError):
    """Ctrl-C or SIGTERM; the message says truthfully what is where now."""

    exit_code = EXIT_INTERRUPTED


TRACEBACK_VARIABLE = "ENVKIT_TRACEBACK"  # set (not 0): a bug shows its traceback instead


class InternalError(EnvkitError):
    """A failure none of envkit's handlers took: a bug in envkit. Said as one paragraph (the
    exception, where it was raised) with exit 1, as Python ends on one; ``ENVKIT_TRACEBACK=1``
    shows the traceback instead."""

    exit_code = EXIT_CHECK_FAILED

    @classmethod
    def of(cls, exc: BaseException) -> InternalError:
        import traceback
        from pathlib import Path

        package = Path(__file__).resolve().parent  # envkit's own folder, wherever installed
        frames = traceback.extract_tb(exc.__traceback__)
        ours = [f for f in frames if package in Path(f.filename).resolve().parents]
        where = ""
        if ours or frames:
            frame = (ours or frames)[-1]
            path = Path(frame.filename).resolve()
            name = f"envkit/{path.relative_to(package).as_posix()}" if ours else frame.filename
            where = f" (in {name}:{frame.lineno}, {frame.name})"
        said = str(exc)
        if len(said) > 300:
            said = said[:300] + "... (cut at 300 characters)"
        return cls(
            f"Internal error: {type(exc).__name__}{': ' if said else ''}{said}{where}.",
            f"This is a bug in envkit, not in what you gave it: run the command again with "
            f"{TRACEBACK_VARIABLE}=1 to see the traceback, and report it with the command.",
        )


def _tail(output: str, lines: int = 12, width: int = 1500) -> str:
    """The last meaningful lines of a tool's output, folded into one paragraph."""
    kept = [line.strip() for line in output.strip().splitlines() if line.strip()][-lines:]
    text = " | ".join(kept)
    return text[-width:]
