"""envkit processes forked from a warm interpreter, for the tests that kill and signal them.

A test that kills or signals envkit needs a process of its own, and ``python -m envkit``
spends most of its CPU importing envkit (a quarter of a second each, some forty times in the
fault tests). A zygote per worker, started once with ``sys.executable -c`` and envkit's
command modules imported, forks one child per run instead: the child takes the run's folder,
environment, argv and standard streams, then runs envkit's ``__main__`` as ``python -m
envkit`` would, and ends as a Python process ends (its exit code, or the signal that killed
it). Signals, kills, stops and every fault step are as real as in a fresh process; what a
child does not repeat is the interpreter's start-up, whose faults (``startup``,
``command-import`` before the imports) tests/cli/test_interrupt.py injects in fresh ones. A
run whose environment differs in what an interpreter reads when it starts (``PYTHON*``, the
locale) gets a fresh process. The zygote only imports, so nothing it computed stands for a
run's own (tempfile's folder is asked again); once it has imported, it freezes what it holds
(``gc.freeze``), so a child's garbage collections pass by what it inherited, never garbage
to it.

A child is the zygote's, not the worker's: :func:`forked_cpu` counts the CPU of those that
ended (with the processes each waited for), which ENVKIT_TEST_CPU's per-test figures add.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from helpers import Result

# Answers: "PID" once a run is forked, "PID CODE CPU" once it has ended (in any order).
_ZYGOTE = r"""
import importlib, json, os, select, sys
for name in WARM:  # what the children run
    importlib.import_module(name)
for name in WARM_IF_INSTALLED:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        pass
# a package that reads the run's environment when imported is imported by the run itself
loaded = sorted(m for m in sys.modules if m.split(".")[0] in COLD)
assert not loaded, f"the zygote imported {loaded}"


def serve():
    running, pending = {}, b""
    while True:
        ready, _, _ = select.select([0, *running], [], [])
        for fd in ready:
            if fd != 0:
                pid = running.pop(fd)
                os.close(fd)
                _, status, used = os.wait4(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                os.write(1, f"{pid} {code} {used.ru_utime + used.ru_stime}\n".encode())
                continue
            chunk = os.read(0, 1 << 16)
            if not chunk:
                sys.exit(0)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                run = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    for fd in running:
                        os.close(fd)
                    return run
                running[os.pidfd_open(pid)] = pid
                os.write(1, f"{pid}\n".encode())


# what the zygote imported is never garbage to a child: frozen, a child's collections pass it
# by instead of walking every object of it (and writing to each one's page, copying it from
# the zygote's), which had been half a forked run's CPU (--version 0.16 s, 0.05 s frozen);
# what a child makes itself is collected as in a fresh process
import gc
gc.freeze()
run = serve()
os.chdir(run["cwd"])
os.environ.clear()
os.environ.update(run["env"])
streams = [(os.devnull, os.O_RDONLY), (run["out"], os.O_WRONLY), (run["err"], os.O_WRONLY)]
for fd, (path, mode) in enumerate(streams):
    opened = os.open(path, mode)
    os.dup2(opened, fd)
    os.close(opened)
import runpy, tempfile
tempfile.tempdir = None
sys.path[0] = os.getcwd()
sys.argv = [sys.argv[0], *run["argv"]]
del run, streams, opened, serve, name, loaded, importlib, WARM, WARM_IF_INSTALLED, COLD
runpy.run_module("envkit", run_name="__main__", alter_sys=True)
"""
# the modules the forked commands (build, verify, lock, publish) load, commands and the
# modules each imports when it runs: a child that loads one anew pays for it at every run
WARM = (
    "envkit.cli.app",
    "envkit.cli.env",
    "envkit.cli.locks",
    "envkit.env.build",
    "envkit.render.env",
    "envkit.render.locks",
    "envkit.lock.locker",
    "envkit.compat.check.checker",
    "envkit.gpu.published.wheelabi",
)
# check-model with a Hub repo id (tests/io/test_hub.py): huggingface_hub's dependencies,
# where installed; none reads an HF_* variable when imported (tqdm reads TQDM_*, below)
WARM_IF_INSTALLED = (
    "envkit.cli.models",
    "envkit.io.hub",
    "asyncio",
    "configparser",
    "csv",
    "filelock",
    "http.cookiejar",
    "httpx2",
    "httpcore2",  # what its client loads when first made
    "idna",
    "mimetypes",
    "tqdm.auto",
    "typing_extensions",
    "yaml",
)
# read the run's environment when imported (huggingface_hub: HF_ENDPOINT, HF_HOME,
# HF_HUB_OFFLINE into its constants): never in the zygote, each child imports them anew
COLD = ("huggingface_hub",)
# what an interpreter, or a module the zygote imported, reads when it starts
_STARTUP_VARIABLES = ("PYTHON", "LC_", "LANG", "TQDM_")
_forked_cpu = [0.0]


def forked_cpu() -> float:
    """CPU seconds of every forked child that has ended, with the processes it waited for."""
    return _forked_cpu[0]


def _at_startup(name: str) -> bool:
    return name.startswith(_STARTUP_VARIABLES)


_GIVEN = f"WARM_IF_INSTALLED = {WARM_IF_INSTALLED!r}\nCOLD = {COLD!r}"


class _Zygote:
    def __init__(self) -> None:
        self.env = {k: v for k, v in os.environ.items() if _at_startup(k)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"WARM = {WARM!r}\n{_GIVEN}\n{_ZYGOTE}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(os.environ),
        )
        self.ended: dict[int, int] = {}
        self._pending = b""

    def fits(self, env: dict[str, str]) -> bool:
        started = {k: v for k, v in env.items() if _at_startup(k)}
        return self.proc.poll() is None and started == self.env

    def fork(self, request: dict[str, object]) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            for fields in self._answers(None):
                if len(fields) == 1:
                    return int(fields[0])

    def collect(self, timeout: float | None) -> None:
        """Note the runs that ended, waiting up to ``timeout`` seconds for an answer."""
        for _fields in self._answers(timeout):
            pass

    def _answers(self, timeout: float | None) -> list[list[str]]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return []
        chunk = os.read(fd, 1 << 16)
        assert chunk, "the zygote ended"
        self._pending += chunk
        *lines, rest = self._pending.split(b"\n")
        self._pending = rest
        answers = [line.decode().split() for line in lines]
        for fields in answers:
            if len(fields) == 3:
                self.ended[int(fields[0])] = int(fields[1])
                _forked_cpu[0] += float(fields[2])
        return answers

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


_zygotes: list[_Zygote] = []


def _stop_zygotes() -> None:
    while _zygotes:
        _zygotes.pop().stop()


def _zygote(env: dict[str, str]) -> _Zygote:
    if not (_zygotes and _zygotes[0].fits(env)):
        if not _zygotes:
            import atexit

            atexit.register(_stop_zygotes)
        _stop_zygotes()
        _zygotes.append(_Zygote())
    return _zygotes[0]


class Forked:
    """A running envkit (``python -m envkit ARGS`` as :class:`subprocess.Popen` starts it,
    stdin from /dev/null), with the few of Popen's ways the tests use. ``stdout``: a file the
    child opens as its stdout instead (a terminal's device, ``os.ttyname`` of a pty's side),
    whose text :meth:`communicate` does not read back."""

    def __init__(
        self, args: list[str], cwd: Path, env: dict[str, str], *, stdout: Path | None = None
    ) -> None:
        self.args = args
        self._folder = Path(tempfile.mkdtemp(prefix="envkit-forked-"))
        self._out, self._err = self._folder / "out", self._folder / "err"
        self._out.touch()
        self._err.touch()
        self._zygote = _zygote(env)
        request = {"argv": args, "cwd": str(cwd), "env": env, "err": str(self._err)}
        self.pid = self._zygote.fork({**request, "out": str(stdout or self._out)})
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._zygote.collect(0)
            self.returncode = self._zygote.ended.pop(self.pid, None)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        ends = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            left = None if ends is None else ends - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(["envkit", *self.args], timeout or 0)
            self._zygote.collect(left)
        return code

    def err_so_far(self) -> str:
        """What it has written to stderr so far (it may still be running)."""
        return self._err.read_text()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Its stdout and stderr, once it has ended (killed when ``timeout`` passes first)."""
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.send_signal(9)
            self.wait()
            raise
        finally:
            out, err = self._out.read_text(), self._err.read_text()
            shutil.rmtree(self._folder, ignore_errors=True)
        return out, err


Started = Forked | subprocess.Popen[str]


def start_forked(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Started:
    """``python -m envkit ARGS`` with ``env`` its whole environment (as Popen's ``env``;
    None: this one's), forked from the warm interpreter; a fresh process (stdout and stderr
    piped, as text) when ``env`` differs in what an interpreter reads at start-up, or off
    Linux."""
    full = dict(os.environ) if env is None else env
    mine, theirs = ({k: v for k, v in e.items() if _at_startup(k)} for e in (os.environ, full))
    if mine == theirs and hasattr(os, "pidfd_open"):  # Linux: the zygote waits on pidfds
        return Forked(list(args), cwd, full)
    return subprocess.Popen(
        [sys.executable, "-m", "envkit", *args],
        cwd=cwd,
        env=full,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def envkit_forked(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Result:
    """:func:`helpers.envkit_process` (``env`` added to this environment), forked from the
    warm interpreter: for runs killed, signalled or interrupted at a named step, or that
    need a process of their own for what they import."""
    proc = start_forked(*args, cwd=cwd, env={**os.environ, **(env or {})})
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode is not None
    return Result(proc.returncode, out, err)
