"""Helpers shared by the tests: profile texts and the CLI run as a subprocess."""

from __future__ import annotations

import copy
import functools
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema

if TYPE_CHECKING:
    from conftest import Indexes

ROOT = Path(__file__).resolve().parent.parent  # the checkout
FIXTURES = ROOT / "tests" / "fixtures"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def profile_text(
    *,
    constraints: tuple[str, ...] = ("transformers==4.51.3",),
    python: str = PY,
    backend: str = "cu124",
    extra: str = "",
) -> str:
    cons = ", ".join(f'"{c}"' for c in constraints)
    return f'''description = "test profile"
python = "{python}"
requirements = ["vllm==0.8.5"]
constraints = [{cons}]
{extra}
[torch]
backend = "{backend}"

[verify]
imports = ["vllm", "transformers", "torch"]
probes = ["transformers.PreTrainedTokenizerBase.all_special_tokens_extended"]
'''


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.out)
        return data

    def assert_ok(self) -> Result:
        """Exit 0, or a failure that shows what envkit said."""
        assert self.code == 0, f"exit {self.code}, expected 0\n{self._said()}"
        return self

    def assert_fails(self, code: int, *, mentioning: str | tuple[str, ...] = ()) -> Result:
        """Exit ``code`` with every text of ``mentioning`` in stdout or stderr."""
        assert self.code == code, f"exit {self.code}, expected {code}\n{self._said()}"
        said = self.out + self.err
        wanted = (mentioning,) if isinstance(mentioning, str) else mentioning
        missing = [text for text in wanted if text not in said]
        assert not missing, f"{missing} not said\n{self._said()}"
        return self

    def _said(self) -> str:
        return f"--- stdout\n{self.out}--- stderr\n{self.err}"


def envkit(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """Run the CLI in this process (``cli.main``) from ``cwd`` with ``env`` added: the same
    code path as the ``envkit`` command, without starting an interpreter per call."""
    saved_cwd = os.getcwd()
    saved_env = {k: os.environ.get(k) for k in env or {}}
    try:
        os.chdir(cwd)
        os.environ.update(env or {})
        return run_cli(*args)
    finally:
        os.chdir(saved_cwd)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def envkit_process(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> Result:
    """Run the real CLI in a subprocess, where the process boundary is what is tested."""
    done = subprocess.run(
        [sys.executable, "-m", "envkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def build_args(index: str, *extra: str) -> list[str]:
    return ["--index-url", index, "--torch-index", "default", "--python", sys.executable, *extra]


def install_into(venv: Path, index: str, requirement: str) -> None:
    """Change a built venv behind envkit's back, with the real uv (drift on purpose)."""
    from envkit.io.uv import find_uv

    subprocess.run(
        [
            find_uv(),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            "--default-index",
            index,
            requirement,
        ],
        check=True,
    )


def shadow_transformers(folder: Path, version: str = "5.0.0", installer: str = "pip") -> Path:
    """A second transformers outside the venv, as pip --user or PYTHONPATH would leave it."""
    (folder / "transformers").mkdir(parents=True)
    (folder / "transformers" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    info = folder / f"transformers-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: transformers\nVersion: {version}\n"
    )
    (info / "INSTALLER").write_text(f"{installer}\n")
    return folder


def run_cli(*args: str) -> Result:
    """Run ``cli.main`` in this process (no interpreter start-up), capturing its output.

    Any exception that escapes ``main`` fails the calling test: envkit must turn every
    failure into a message and an exit code."""
    import contextlib
    import io

    from envkit import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return Result(code, out.getvalue(), err.getvalue())


# lock matrices (the lock, pylock, schema and trust tests share them)
OTHER = "3.12" if PY != "3.12" else "3.11"


def matrix_profile(pythons: list[str], python: str = ">=3.9", extra: str = "") -> str:
    return f'''description = "lock test"
python = "{python}"
requirements = ["vllm==0.8.5"{extra}]
constraints = ["transformers==4.51.3"]

[torch]
backend = "cu124"

[verify]
imports = ["vllm", "transformers", "torch"]

[matrix]
python = [{", ".join(f'"{p}"' for p in pythons)}]
platforms = ["linux-x86_64", "linux-aarch64"]
backends = ["cu124"]
'''


def lock_args(indexes: Indexes, *extra: str) -> list[str]:
    return ["--index-url", indexes.default, "--torch-index", "default", *extra]


# the JSON Schemas envkit ships
def schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(_checked_schema(name))
    return data


@functools.cache
def _checked_schema(name: str) -> dict[str, Any]:
    """Read and checked against the metaschema once per process (a second or so for the
    outputs schema): the file does not change while the tests run."""
    text = resources.files("envkit").joinpath("schemas", f"{name}.schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(data)
    return data


@functools.cache
def _output_validator(command: str) -> jsonschema.Draft202012Validator:
    outputs = _checked_schema("outputs")  # checked already: validate() would check it again
    return jsonschema.Draft202012Validator({**outputs, "$ref": f"#/$defs/{command}"})


def output(command: str, text: str) -> dict[str, Any]:
    """``text`` parsed and validated against the schema of ``command``'s --json output."""
    data: dict[str, Any] = json.loads(text)
    error = jsonschema.exceptions.best_match(_output_validator(command).iter_errors(data))
    if error is not None:
        raise error  # as jsonschema.validate raises it
    return data


RESULT_FIELDS = {"code", "severity", "subject", "message", "evidence", "fix"}


def results_in(data: Any) -> list[dict[str, Any]]:
    """Every result record in a JSON document (an object holding the six fields of
    ``envkit.results.Result``), each validated against the one ``$defs/result``."""
    found: list[dict[str, Any]] = []
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if set(item) >= RESULT_FIELDS:
                error = jsonschema.exceptions.best_match(
                    _output_validator("result").iter_errors(item)
                )
                if error is not None:
                    raise error
                found.append(item)
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return found


def said(err: str) -> str:
    """stderr without its progress lines (``envkit: [ 1.2 s] step``, one per long step)."""
    import re

    return "".join(re.split(r"(?m)^envkit: \[ *[0-9]+\.[0-9] s\] .*\n", err))


# -- envkit processes forked from a warm interpreter ------------------------------------------
#
# A test that kills or signals envkit needs a process of its own, and `python -m envkit`
# spends most of its CPU importing envkit (a quarter of a second each, some thirty times in
# the fault tests). A zygote per worker, started once with `sys.executable -c` and envkit's
# command modules imported, forks one child per run instead: the child takes the run's
# folder, environment, argv and standard streams, then runs envkit's __main__ as
# `python -m envkit` would, ending as a Python process ends (its exit code, or the signal
# that killed it). A signal, a kill and every fault step are as real as in a fresh process;
# what the child does not repeat is interpreter start-up, whose faults (`startup`,
# `command-import`) tests/cli/test_interrupt.py injects in fresh ones. A run whose
# environment differs in what the interpreter reads when it starts (PYTHON*, locale) gets a
# fresh process. The zygote imports only, so nothing it computed can stand for the run's own
# (tempfile's folder is asked again). The children's CPU is the zygote's, which tells each
# child's (forked_cpu(): ENVKIT_TEST_CPU's per-test figures add it).

_ZYGOTE = r"""
import json, os, runpy, sys
import envkit.cli.app, envkit.cli.env, envkit.cli.locks  # what the children run
requests, answers = sys.stdin.buffer, sys.stdout.fileno()
while True:
    line = requests.readline()
    if not line:
        sys.exit(0)
    run = json.loads(line)
    pid = os.fork()
    if pid == 0:
        break
    os.write(answers, f"{pid}\n".encode())
    _, status, used = os.wait4(pid, 0)
    cpu = used.ru_utime + used.ru_stime
    os.write(answers, f"{os.waitstatus_to_exitcode(status)} {cpu}\n".encode())
os.chdir(run["cwd"])
os.environ.clear()
os.environ.update(run["env"])
streams = [(os.devnull, os.O_RDONLY), (run["out"], os.O_WRONLY), (run["err"], os.O_WRONLY)]
for fd, (path, mode) in enumerate(streams):
    opened = os.open(path, mode)
    os.dup2(opened, fd)
    os.close(opened)
import tempfile
tempfile.tempdir = None
sys.path[0] = os.getcwd()
sys.argv = [sys.argv[0], *run["argv"]]
runpy.run_module("envkit", run_name="__main__", alter_sys=True)
"""
_STARTUP_VARIABLES = ("PYTHON", "LC_", "LANG")


class _Zygote:
    def __init__(self) -> None:
        self.env = {k: v for k, v in os.environ.items() if _at_startup(k)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(os.environ),
        )

    def fits(self, env: dict[str, str]) -> bool:
        started = {k: v for k, v in env.items() if _at_startup(k)}
        return self.proc.poll() is None and started == self.env

    def run(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> Result:
        import select
        import tempfile

        assert self.proc.stdin is not None and self.proc.stdout is not None
        with tempfile.TemporaryDirectory(prefix="forked-") as folder:
            out, err = Path(folder) / "out", Path(folder) / "err"
            out.touch()
            err.touch()
            request = {"argv": args, "cwd": str(cwd), "env": env, "out": str(out)}
            self.proc.stdin.write((json.dumps({**request, "err": str(err)}) + "\n").encode())
            self.proc.stdin.flush()
            pid = int(self.proc.stdout.readline())
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                _forked_cpu[0] += float(self.proc.stdout.readline().split()[1])
                raise subprocess.TimeoutExpired(["envkit", *args], timeout)
            code, cpu = self.proc.stdout.readline().split()
            _forked_cpu[0] += float(cpu)
            return Result(int(code), out.read_text(), err.read_text())

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


_zygotes: list[_Zygote] = []
_forked_cpu = [0.0]


def forked_cpu() -> float:
    """CPU seconds of every forked child so far (with the processes each waited for): the
    worker's own count of children misses them, as they are the zygote's."""
    return _forked_cpu[0]


def _at_startup(name: str) -> bool:
    return name.startswith(_STARTUP_VARIABLES)


def _stop_zygotes() -> None:
    while _zygotes:
        _zygotes.pop().stop()


def envkit_forked(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Result:
    """The CLI in a process of its own, as :func:`envkit_process` runs it, forked from a warm
    interpreter (see _ZYGOTE above): for runs that are killed, signalled or interrupted at a
    named step (ENVKIT_FAULT), many times over."""
    full = {**os.environ, **(env or {})}
    if not (_zygotes and _zygotes[0].fits(full)):
        if any(os.environ.get(k) != v for k, v in (env or {}).items() if _at_startup(k)):
            return envkit_process(*args, cwd=cwd, env=env, timeout=timeout)
        if not _zygotes:
            import atexit

            atexit.register(_stop_zygotes)
        _stop_zygotes()
        _zygotes.append(_Zygote())
    return _zygotes[0].run(list(args), cwd, full, timeout)
