"""Finding an installed Python interpreter that fits a profile.

envkit never downloads a Python. It looks, in this order, on ``PATH`` (``python3.X``,
``python3``, ``python``), in pyenv's versions (``$PYENV_ROOT`` or ``~/.pyenv``) and in
uv-managed Pythons (``$UV_PYTHON_INSTALL_DIR`` or uv's data folder), asks each candidate
its version, and takes the newest that fits. When none fits it says where it looked.

An answer is remembered (in this process, and in the user cache for the next) under what
identifies the binary that gave it, as uv keys its own: the path asked, the file it resolves
to (device, inode, size, modification and change times), a venv's ``pyvenv.cfg`` beside it,
and the environment variables an interpreter reads as it starts. A replaced binary is a new
key, so it is asked again. A script (pyenv's shims, any ``#!`` wrapper) is never remembered:
what it runs depends on the environment and the folder it is run from.
"""

from __future__ import annotations

import ast
import hashlib
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

from envkit.errors import EnvkitError, OutputTooLarge, ToolNotFound, UnusableInterpreter
from envkit.io import process
from envkit.io.cache import PYTHONS, BadEntry, Fields
from envkit.io.files import open_regular
from envkit.profiles.profile import python_specifier

ANSWER_CAP = 64 * 1024  # its answer is one line: a Python literal of ASCII characters
# no import: ``-c`` puts the current folder first on sys.path, where a json.py would answer
_ASK = "import sys; print(ascii((tuple(sys.version_info[:3]), sys.executable)))"
# what an interpreter reads from the environment as it starts (home, paths, libraries)
_STARTUP_VARIABLES = ("PYTHON", "LD_", "DYLD_")


@dataclass(frozen=True)
class Interpreter:
    path: Path
    version: Version


_asked: dict[str, Interpreter] = {}  # this process's answers, by the binary's key


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


def _hint_may_beat(hint: str, best: Version) -> bool:
    """Whether an interpreter named for ``hint`` may be newer than ``best`` (the first found
    of a version stays the choice)."""
    parts = [int(p) for p in hint.split(".")]
    if len(parts) == 3:
        return Version(hint) > best
    return tuple(parts) >= best.release[: len(parts)]


def ask_version(path: Path) -> Interpreter | None:
    """``path``'s version and ``sys.executable``; None when it does not run. The answer
    remembered for the same binary is used when there is one (see the module's notes)."""
    key = binary_key(path)
    if key is not None:
        known = _asked.get(key) or PYTHONS.load(key, _entry)
        if known is not None:
            _asked[key] = known
            return known
    found = _ask(path)
    if found is not None and key is not None and binary_key(path) == key:  # not replaced
        _asked[key] = found
        PYTHONS.store(key, {"version": str(found.version), "executable": str(found.path)})
    return found


def _ask(path: Path) -> Interpreter | None:
    """Run ``path`` once to learn its version."""
    try:
        done = process.run([str(path), "-c", _ASK], timeout=15, max_output=ANSWER_CAP)
        if done.returncode != 0:
            return None
        answer = ast.literal_eval(done.stdout.strip())
    except (OSError, subprocess.TimeoutExpired, ValueError, SyntaxError, OutputTooLarge):
        return None
    except (MemoryError, RecursionError):  # a literal nested without end
        return None
    match answer:
        case ((int() as major, int() as minor, int() as micro), str() as executable):
            return Interpreter(Path(executable), Version(f"{major}.{minor}.{micro}"))
    return None


def binary_key(path: Path) -> str | None:
    """What identifies the answer ``path`` gives, as a cache key; None for a script (a
    shim) or a path that is not a regular file."""
    try:
        where = str(path) if path.is_absolute() else os.path.join(os.getcwd(), str(path))
        real = os.path.realpath(where)
        with open_regular(real, what="interpreter") as binary:
            if binary.read(2) == b"#!":
                return None
            found = os.fstat(binary.fileno())
    except (EnvkitError, OSError):
        return None
    parts: list[object] = [
        where,
        real,
        [found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns],
    ]
    for cfg in (Path(where).parent / "pyvenv.cfg", Path(where).parent.parent / "pyvenv.cfg"):
        try:
            seen = cfg.stat()
        except OSError:
            continue
        parts.append([str(cfg), seen.st_ino, seen.st_size, seen.st_mtime_ns])
    parts.append(sorted((k, v) for k, v in os.environ.items() if k.startswith(_STARTUP_VARIABLES)))
    text = json.dumps(parts, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii", "backslashreplace")).hexdigest()


def _entry(fields: Fields) -> Interpreter:
    try:
        version = Version(fields.text("version"))
    except ValueError:
        raise BadEntry("not a version") from None
    if len(version.release) != 3 or version.pre or version.dev or version.post or version.local:
        raise BadEntry("not a version as an interpreter says it")
    executable = fields.text("executable")
    if not os.path.isabs(executable):
        raise BadEntry("not an absolute path")
    return Interpreter(Path(executable), version)


def _newest(spec: SpecifierSet) -> tuple[Interpreter | None, dict[Path, Version]]:
    """The newest candidate fitting ``spec`` (the first found of its version), and every
    version asked, by the file each candidate resolves to."""
    best: Interpreter | None = None
    seen: dict[Path, Version] = {}
    for path, hint in _candidates():
        if hint and not _hint_may_fit(hint, spec):
            continue
        if best is not None and hint and not _hint_may_beat(hint, best.version):
            continue  # its name says it is no newer than the one found: the same choice
        real = path.resolve()
        if real in seen:
            continue
        found = ask_version(path)
        if found is None:
            continue
        seen[real] = found.version
        if found.version in spec and (best is None or found.version > best.version):
            best = Interpreter(path, found.version)
    return best, seen


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
    best, seen = _newest(spec)
    if best is not None:
        return best
    if requested and not any(  # Python 3.0.0 to 3.39.99: only where nothing was found
        f"3.{minor}.{patch}" in spec for minor in range(40) for patch in range(100)
    ):
        raise UnusableInterpreter(  # no Python at all is both: none to look for
            f"--python {requested} is outside the Python the profile asks for ({spec_text}).",
            "Pass a version the profile allows, or edit the profile's `python` key.",
        )
    # each folder once (a PATH may name one twice), in the order looked in
    places = "; ".join(dict.fromkeys(f"{kind}: {folder}" for kind, folder in search_places()))
    versions = ", ".join(sorted({str(v) for v in seen.values()})) or "none that fit the name"
    wanted = f"Python {spec_text}" + (f" and --python {requested}" if requested else "")
    raise ToolNotFound(
        f"No installed interpreter fits {wanted}. Looked in {places}; versions found there "
        f"and asked: {versions}.",
        "Install that Python (pyenv install, apt, or `uv python install`), or pass "
        "--python /path/to/python.",
    )
