"""Helpers shared by the tests: profile texts and the CLI run as a subprocess."""

from __future__ import annotations

import copy
import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema

if TYPE_CHECKING:
    import pytest

    from conftest import Indexes

ROOT = Path(__file__).resolve().parent.parent  # the checkout
FIXTURES = ROOT / "tests" / "fixtures"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def made_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """A folder that ``make`` fills once a run, however many xdist workers ask for it (the
    xdist recipe): the first to ask makes it in the run's temporary folder, the workers' common
    parent, holding a lock that the others wait on, then read what it made. ``name`` is the
    folder's, one per thing made. A failed ``make`` leaves no ``.made`` marker: the next
    worker to ask clears the folder, makes it again and fails as itself. Under ``-n 0`` the
    one process makes it in its own temporary folder. What is made is shared: a test that
    changes it copies it first."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = factory.mktemp(name)
        make(folder)
        return folder
    run = factory.getbasetemp().parent  # this run's, above each worker's own
    folder, made = run / name, run / f"{name}.made"
    with open(run / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not made.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            made.touch()
    return folder


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


def locked_matrix(factory: pytest.TempPathFactory, indexes: Indexes) -> Path:
    """A project whose 4-cell profile (``matrix_profile([PY, OTHER])``, envs/m.toml) is locked
    by ``envkit lock m``, once a run (made_once): tests/lock/test_lock.py and test_pylocks.py
    copy it (a second lock writes the same bytes, test_lock shows)."""

    def make(root: Path) -> None:
        (root / "envs").mkdir()
        (root / "envs" / "m.toml").write_text(matrix_profile([PY, OTHER]))
        envkit("lock", "m", *lock_args(indexes), cwd=root).assert_ok()

    return made_once(factory, "locked-m", make)


# the JSON Schemas envkit ships
def schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(_loaded_schema(name))
    return data


@functools.cache
def _loaded_schema(name: str) -> dict[str, Any]:
    """Read once per process. That each file holds against its metaschema is one test's
    (tests/test_schemas.py), run once a run: checking it here cost every worker half a
    second while collecting, for a fact about a file that does not change while tests run."""
    text = (resources.files("envkit") / "schemas" / f"{name}.schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@functools.cache
def _output_validator(command: str) -> jsonschema.Draft202012Validator:
    outputs = _loaded_schema("outputs")  # its metaschema check is test_schemas' own
    return jsonschema.Draft202012Validator({**outputs, "$ref": f"#/$defs/{command}"})


def valid_output(command: str, data: Any) -> None:
    """``data`` holds against the schema of ``command``'s --json output (else its
    best-matching error is raised, as jsonschema.validate raises it)."""
    error = jsonschema.exceptions.best_match(_output_validator(command).iter_errors(data))
    if error is not None:
        raise error


def output(command: str, text: str) -> dict[str, Any]:
    """``text`` parsed and validated against the schema of ``command``'s --json output."""
    data: dict[str, Any] = json.loads(text)
    valid_output(command, data)
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
                valid_output("result", item)
                found.append(item)
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return found


def said(err: str) -> str:
    """stderr without its progress lines (``envkit: [ 1.2 s] step``, one per long step)."""
    import re

    return "".join(re.split(r"(?m)^envkit: \[ *[0-9]+\.[0-9] s\] .*\n", err))
