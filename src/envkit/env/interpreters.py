"""Finding an installed Python interpreter that fits a profile.

envkit never downloads a Python. It looks, in this order, on ``PATH`` (``python3.X``,
``python3``, ``python``), in pyenv's versions (``$PYENV_ROOT`` or ``~/.pyenv``) and in
uv-managed Pythons (``$UV_PYTHON_INSTALL_DIR`` or uv's data folder), asks each candidate
its version, and takes the newest that fits. When none fits it says where it looked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version
from platformdirs import user_data_path

from envkit.errors import OutputTooLarge, ToolNotFound, UnusableInterpreter
from envkit.io import process
from envkit.profiles.profile import python_specifier

ANSWER_CAP = 64 * 1024  # its answer is one line of JSON
_ASK = "import sys, json; print(json.dumps([list(sys.version_info[:3]), sys.executable]))"


@dataclass(frozen=True)
class Interpreter:
    path: Path
    version: Version


def search_places() -> list[tuple[str, Path]]:
    """Where interpreters are looked for, as (kind, folder), in order."""
    places: list[tuple[str, Path]] = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry:
            places.append(("PATH", Path(entry)))
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    places.append(("pyenv", pyenv))
    uv_dir = os.environ.get("UV_PYTHON_INSTALL_DIR")
    places.append(("uv", Path(uv_dir) if uv_dir else user_data_path("uv") / "python"))
    return places


def _candidates() -> Iterator[tuple[Path, str]]:
    """(path, version hinted by its name or folder, or '') for every place."""
    for kind, folder in search_places():
        if not folder.is_dir():
            continue
        if kind == "PATH":
            try:
                names = sorted(os.listdir(folder), reverse=True)
            except OSError:
                continue
            for name in names:
                match = re.fullmatch(r"python(3(?:\.\d+)?)?", name)
                if match:
                    yield folder / name, match.group(1) or ""
        else:
            for sub in sorted(folder.iterdir(), reverse=True):
                hint = re.match(r"(?:cpython-)?(\d+\.\d+(?:\.\d+)?)", sub.name)
                for name in ("bin/python3", "python.exe"):
                    if (sub / name).is_file():
                        yield sub / name, hint.group(1) if hint else ""
                        break


def _hint_may_fit(hint: str, spec: SpecifierSet) -> bool:
    if hint.count(".") == 2:
        return Version(hint) in spec
    if hint.count(".") == 1:
        return any(Version(f"{hint}.{patch}") in spec for patch in range(0, 40))
    return True


def ask_version(path: Path) -> Interpreter | None:
    """Run ``path`` once to learn its version; None when it does not run."""
    try:
        done = process.run([str(path), "-c", _ASK], timeout=15, max_output=ANSWER_CAP)
        if done.returncode != 0:
            return None
        version, executable = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError, OutputTooLarge):
        return None
    return Interpreter(Path(executable), Version(".".join(str(v) for v in version)))


def find_interpreter(spec_text: str, requested: str | None = None) -> Interpreter:
    """An interpreter fitting the profile's ``python`` (and ``--python``, when given).

    Raises :class:`ToolNotFound` naming every place looked, or :class:`UnusableInterpreter` when an
    interpreter named by path does not run or does not fit.
    """
    spec = python_specifier(spec_text)
    if requested and (os.sep in requested or Path(requested).is_file()):
        found = ask_version(Path(requested))
        if found is None:
            raise UnusableInterpreter(
                f"--python {requested!r} is not a Python interpreter that runs.",
                "Give the path of a python executable, or a version such as 3.12.",
            )
        if found.version not in spec:
            raise UnusableInterpreter(
                f"--python {requested!r} is Python {found.version}, but the profile asks for "
                f"Python {spec_text}.",
                "Pass an interpreter of that version, or edit the profile's `python` key.",
            )
        return found
    if requested:
        try:
            spec = spec & python_specifier(requested)
        except ValueError:
            raise UnusableInterpreter(
                f"--python {requested!r} is neither a path nor a version.",
                "Give a path to a python executable, or a version such as 3.12.",
            ) from None
    best: Interpreter | None = None
    seen: dict[Path, Version] = {}
    for path, hint in _candidates():
        if hint and not _hint_may_fit(hint, spec):
            continue
        real = path.resolve()
        if real in seen:
            continue
        found = ask_version(path)
        if found is None:
            continue
        seen[real] = found.version
        if found.version in spec and (best is None or found.version > best.version):
            best = Interpreter(path, found.version)
    if best is not None:
        return best
    places = "; ".join(f"{kind}: {folder}" for kind, folder in search_places())
    versions = ", ".join(sorted({str(v) for v in seen.values()})) or "none that fit the name"
    wanted = f"Python {spec_text}" + (f" and --python {requested}" if requested else "")
    raise ToolNotFound(
        f"No installed interpreter fits {wanted}. Looked in {places}; versions found there "
        f"and asked: {versions}.",
        "Install that Python (pyenv install, apt, or `uv python install`), or pass "
        "--python /path/to/python.",
    )
