"""The one module that runs uv.

uv is found as pypa/build finds it: the ``uv`` package's binary, then ``$UV``, then ``PATH``.
Every invocation goes through :meth:`Uv.run`: streamed to the terminal when the user watches,
captured when output is machine-read, and on failure raised as one :class:`CommandFailed`.
Children are started through process.run: they die with envkit, and Ctrl-C stops them.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from envkit.errors import CommandFailed, NetworkError, ToolNotFound
from envkit.io import process
from envkit.io.redaction import redact


def find_uv() -> str:
    """Path of the uv binary: the ``uv`` package, then ``$UV``, then ``PATH``."""
    try:
        import uv as uv_package

        found = uv_package.find_uv_bin()
        if found and Path(found).is_file():
            return str(found)
    except (ImportError, FileNotFoundError):
        pass
    env = os.environ.get("UV")
    if env and Path(env).is_file():
        return env
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    raise ToolNotFound(
        "uv was not found: not in the installed 'uv' package, not in $UV, not on PATH.",
        "Install it with `pip install uv` (envkit depends on it), or set UV=/path/to/uv.",
    )


Runner = Callable[
    [Sequence[str], bool, "Mapping[str, str] | None", "Path | None"], process.Completed
]
"""Runs a full command line; ``stream`` says whether the user watches; ``env`` replaces
the environment when not None; ``cwd`` is the working folder."""


def subprocess_runner(
    args: Sequence[str], stream: bool, env: Mapping[str, str] | None, cwd: Path | None
) -> process.Completed:
    """Run a command; let it write to our terminal, or capture everything."""
    return process.run(args, capture=not stream, merge_stderr=True, env=env, cwd=cwd)


# A binary's version does not change while its file does not: what `uv --version` said, by
# the binary's real path and its file's identity (device, inode, size, modification time).
# Every lock names the version; a process running several (the test suite) asks uv once.
_VERSIONS: dict[tuple[str, int, int, int, int], str] = {}


def _file_key(binary: str) -> tuple[str, int, int, int, int] | None:
    try:
        real = os.path.realpath(binary)
        st = os.stat(real)
    except OSError:
        return None  # uv's own run says what is wrong with it
    return (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Uv:
    """uv, invoked as a program."""

    def __init__(self, binary: str | None = None, runner: Runner = subprocess_runner) -> None:
        self.binary = binary or find_uv()
        self.runner = runner

    def run(
        self,
        args: Sequence[str],
        *,
        what: str,
        stream: bool = False,
        unset_env: Sequence[str] = (),
        hint: str = "",
        cwd: Path | None = None,
    ) -> process.Completed:
        command = [self.binary, *args]
        env = {k: v for k, v in os.environ.items() if k not in unset_env} if unset_env else None
        done = self.runner(command, stream, env, cwd)
        if done.returncode != 0:
            output = done.stdout if not stream else "(uv's output is shown above)"
            unreachable = network_failure(output, args)
            if unreachable is not None:
                raise unreachable
            raise CommandFailed(command, done.returncode, output, what, hint)
        return done

    def version(self) -> str:
        """uv's version, asked once per process for each binary file (see ``_VERSIONS``)."""
        key = _file_key(self.binary) if self.runner is subprocess_runner else None
        if key is not None and key in _VERSIONS:
            return _VERSIONS[key]
        out = self.run(["--version"], what="uv --version").stdout.split()
        found = out[1] if len(out) > 1 else "unknown"
        if key is not None:
            _VERSIONS[key] = found
        return found

    def create_venv(self, path: Path, python: str, *, stream: bool) -> None:
        args = ["venv", "--relocatable", "--no-project", "--python", python, str(path)]
        if not stream:
            args.insert(1, "--quiet")
        self.run(
            args,
            what="Creating the virtual environment",
            stream=stream,
            hint="The environment at --venv was not touched. Check the interpreter (--python).",
        )

    def pip_install(
        self,
        python: Path,
        requirements: Sequence[str],
        *,
        constraints: Path | None,
        options: Sequence[str],
        stream: bool,
        unset_env: Sequence[str] = (),
    ) -> tuple[str, ...]:
        """Install into ``python``'s environment; the argv that ran (for markers and reports)."""
        args = ["pip", "install", "--python", str(python)]
        if constraints is not None:
            args += ["--constraints", str(constraints)]
        args += list(options)
        if not stream:
            args.append("--quiet")
        if requirements:
            args += ["--", *requirements]
        self.run(
            args,
            what="Installing the profile",
            stream=stream,
            unset_env=unset_env,
            hint="The environment at --venv was not touched. Check the profile's requirements "
            "and constraints, the index (--index-url, --torch-index) and the network.",
        )
        return (self.binary, *args)

    def pip_compile(
        self,
        folder: Path,
        output: str,
        *,
        python_version: str,
        platform: str,
        interpreter: str,
        options: Sequence[str],
        unset_env: Sequence[str] = (),
    ) -> None:
        """Resolve ``requirements.in`` with ``constraints.txt`` in ``folder`` into ``output``.

        Run inside ``folder`` with relative names, so uv's annotations hold no temporary paths.
        ``interpreter`` is the Python uv would build a source distribution's metadata with;
        naming it spares uv its interpreter discovery, which runs every Python on ``PATH``
        (through pyenv's shell shims, that was nine tenths of a warm resolution).
        """
        args = [
            "pip",
            "compile",
            "requirements.in",
            "--constraints",
            "constraints.txt",
            "--python-version",
            python_version,
            "--python-platform",
            platform,
            "--python",
            interpreter,
            "--generate-hashes",
            "--no-header",
            "--quiet",
            "--output-file",
            output,
            *options,
        ]
        self.run(
            args,
            what=f"Resolving for Python {python_version} on {platform}",
            unset_env=unset_env,
            cwd=folder,
        )


# How uv words a request that got no answer (DNS, refused, timeout, TLS), as opposed to an
# answer it did not like. A failure of this kind is never a verdict on the profile.
_NO_ANSWER = re.compile(r"error sending request for url \((?P<url>[^)\s]+)\)")


def network_failure(output: str, args: Sequence[str]) -> NetworkError | None:
    """A NetworkError when uv failed because an index could not be reached; else None."""
    match = _NO_ANSWER.search(output)
    if match is None:
        return None
    url = redact(match.group("url"))
    hint = (
        "Check the network and the index URL (--index-url, UV_DEFAULT_INDEX); nothing was changed."
    )
    if "--torch-backend" in args and "/whl/" in url:
        hint = (
            "The PyTorch index is out of reach from this machine: pass --torch-index default "
            "to take torch from the default index (verification still demands the profile's "
            "CUDA build), or --torch-index URL for a mirror. Nothing was changed."
        )
    cause = [ln.strip() for ln in output.splitlines() if ln.strip().startswith("cause:")]
    why = redact(cause[-1].removeprefix("cause:").strip()) if cause else "no answer"
    return NetworkError(f"Cannot reach {url}: {why}.", hint, url=url, kind="unreachable")
