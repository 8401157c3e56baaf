"""The one module that runs uv.

uv is found as pypa/build finds it: the ``uv`` package's binary, then ``$UV``, then ``PATH``.
Every invocation goes through :meth:`Uv.run`: streamed to the terminal when the user watches,
captured when output is machine-read, and on failure raised as one :class:`CommandFailed`.
A uv started here dies with envkit (Linux parent-death signal), so a killed build never leaves
uv writing into a folder that recovery is about to remove.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import CommandFailed, ToolNotFound


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


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(frozen=True)
class Completed:
    args: tuple[str, ...]
    returncode: int
    output: str


Runner = Callable[[Sequence[str], bool, "Mapping[str, str] | None"], Completed]
"""Runs a full command line; ``stream`` says whether the user watches; ``env`` replaces
the environment when not None."""


def subprocess_runner(
    args: Sequence[str], stream: bool, env: Mapping[str, str] | None
) -> Completed:
    """Run a command; let it write to our terminal, or capture everything."""
    proc = subprocess.Popen(
        list(args),
        stdout=None if stream else subprocess.PIPE,
        stderr=None if stream else subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=None if env is None else dict(env),
        text=True,
        preexec_fn=_die_with_parent if os.name == "posix" else None,
    )
    try:
        out, _ = proc.communicate()
    except BaseException:
        # Ctrl-C or an error in envkit: stop the child before anything is cleaned up.
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    return Completed(tuple(args), proc.returncode, out or "")


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
    ) -> Completed:
        command = [self.binary, *args]
        env = {k: v for k, v in os.environ.items() if k not in unset_env} if unset_env else None
        done = self.runner(command, stream, env)
        if done.returncode != 0:
            output = done.output if not stream else "(uv's output is shown above)"
            raise CommandFailed(["uv", *args], done.returncode, output, what, hint)
        return done

    def version(self) -> str:
        out = self.run(["--version"], what="uv --version").output.split()
        return out[1] if len(out) > 1 else "unknown"

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
    ) -> None:
        args = ["pip", "install", "--python", str(python)]
        if constraints is not None:
            args += ["--constraints", str(constraints)]
        args += list(options)
        if not stream:
            args.append("--quiet")
        args += ["--", *requirements]
        self.run(
            args,
            what="Installing the profile",
            stream=stream,
            unset_env=unset_env,
            hint="The environment at --venv was not touched. Check the profile's requirements "
            "and constraints, the index (--index-url, --torch-index) and the network.",
        )
