"""The facts probe: ``env/inside_venv.py`` run inside a venv's own interpreter (never envkit's),
once per command, returning what verify and doctor judge as one typed ``VenvFacts``.

The probe's answer is input like any other: it is parsed once, here, and every field is checked
(type, count, length) with its key path in the message (``facts.imports['vllm'].seconds``), as
packaging's pylock does. A probe that hangs, cannot start, crashes or answers nonsense is one
EnvironmentBroken message.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from envkit.errors import EnvironmentBroken, OutputTooLarge, UnreadableFile
from envkit.io import process
from envkit.io.atomicfile import temporary_folder
from envkit.io.escaping import MISSING, described
from envkit.io.files import MiB, read_small_text
from envkit.io.typedjson import JsonObject

MAX_FACTS = 64 * MiB  # what the probe writes: versions, paths, symbol lists

MAX_ANSWER = 64 * 1024 * 1024  # a probe answer larger than this is not facts
MAX_ITEMS = 100_000  # entries in any one list or table of the answer
MAX_TEXT = 1_000_000  # characters in any one string of the answer


@dataclass(frozen=True)
class Installed:
    """One copy of a distribution as ``importlib.metadata`` sees it inside the venv."""

    version: str
    location: str
    installer: str
    editable: str = ""  # the project folder of an editable install
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class PathCopy:
    """A sys.path entry holding a module of that top-level name."""

    index: int
    entry: str


@dataclass(frozen=True)
class ImportFacts:
    ok: bool
    error: str = ""
    file: str = ""
    seconds: float = 0.0
    copies: tuple[PathCopy, ...] = ()


@dataclass(frozen=True)
class ProbeFacts:
    ok: bool
    module: str = ""
    error: str = ""


@dataclass(frozen=True)
class TorchFacts:
    ok: bool
    error: str = ""
    version: str = ""
    file: str = ""
    cuda: str | None = None  # None: a CPU build
    cuda_available: bool = False
    cuda_error: str = ""


@dataclass(frozen=True)
class VenvFacts:
    """What one run of the probe saw inside the interpreter."""

    executable: str
    prefix: str
    base_prefix: str
    version: str
    sys_path: tuple[str, ...] = ()
    pythonpath: tuple[str, ...] = ()
    user_site: str = ""
    site_packages: tuple[str, ...] = ()
    distributions: Mapping[str, tuple[Installed, ...]] = field(default_factory=dict)
    imports: Mapping[str, ImportFacts] = field(default_factory=dict)
    probes: Mapping[str, ProbeFacts] = field(default_factory=dict)
    torch: TorchFacts | None = None

    @property
    def is_venv(self) -> bool:
        return self.prefix != self.base_prefix

    def copies(self, name: str) -> tuple[Installed, ...]:
        """Every installed copy of distribution ``name`` (canonical name), in sys.path order."""
        return self.distributions.get(name, ())


class _Reader(JsonObject):
    """Typed access to one JSON object of the answer, failing with the key path."""

    max_text = MAX_TEXT
    max_items = MAX_ITEMS

    def fail(self, path: str, wanted: str, value: object) -> Exception:
        return _bad(path, wanted, value)

    def text(self, key: str, default: str | None = None) -> str:
        if key not in self.data:
            if default is None:
                raise self.fail(self.at(key), "a string", MISSING)
            return default
        return self.text_of(self.data[key], self.at(key))

    def optional_text(self, key: str) -> str | None:
        value = self.data.get(key)
        return None if value is None else self.text(key)

    def flag(self, key: str, default: bool = False) -> bool:
        return self.flag_of(self.data.get(key, default), self.at(key))

    def number(self, key: str, default: float = 0.0) -> float:
        return self.number_of(self.data.get(key, default), self.at(key))

    def texts(self, key: str) -> tuple[str, ...]:
        return tuple(self.text_of(v, f"{self.at(key)}[{i}]") for i, v in enumerate(self.items(key)))

    def items(self, key: str) -> list[object]:
        return self.list_of(self.data.get(key, []), self.at(key))

    def table(self, key: str) -> dict[str, object]:
        return self.object_of(self.data.get(key, {}), self.at(key))


def _bad(path: str, wanted: str, value: object) -> EnvironmentBroken:
    return EnvironmentBroken(
        f"The verification probe answered nonsense at {path}: expected {wanted}, got "
        f"{described(value)}.",
        "The venv's interpreter or its sitecustomize is not a plain Python; rebuild the venv "
        "with `envkit build`.",
    )


def _installed(data: object, path: str) -> Installed:
    r = _Reader(data, path)
    return Installed(
        version=r.text("version"),
        location=r.text("location", ""),
        installer=r.text("installer", ""),
        editable=r.text("editable", ""),
        requires=r.texts("requires"),
    )


def _import(data: object, path: str) -> ImportFacts:
    r = _Reader(data, path)
    copies = []
    for i, item in enumerate(r.items("copies")):
        c = _Reader(item, f"{r.at('copies')}[{i}]")
        copies.append(PathCopy(index=int(c.number("index")), entry=c.text("entry")))
    return ImportFacts(
        ok=r.flag("ok"),
        error=r.text("error", ""),
        file=r.text("file", ""),
        seconds=r.number("seconds"),
        copies=tuple(copies),
    )


def _probe(data: object, path: str) -> ProbeFacts:
    r = _Reader(data, path)
    return ProbeFacts(ok=r.flag("ok"), module=r.text("module", ""), error=r.text("error", ""))


def _torch(data: object, path: str) -> TorchFacts:
    r = _Reader(data, path)
    return TorchFacts(
        ok=r.flag("ok"),
        error=r.text("error", ""),
        version=r.text("version", ""),
        file=r.text("file", ""),
        cuda=r.optional_text("cuda"),
        cuda_available=r.flag("cuda_available"),
        cuda_error=r.text("cuda_error", ""),
    )


def parse_facts(data: object) -> VenvFacts:
    """The probe's JSON answer as ``VenvFacts``; EnvironmentBroken naming the first bad key."""
    r = _Reader(data, "facts")
    dists = {}
    for name, copies in r.table("distributions").items():
        where = f"{r.at('distributions')}[{name!r}]"
        listed = r.list_of(copies, where)
        dists[name] = tuple(_installed(c, f"{where}[{i}]") for i, c in enumerate(listed))
    imports = {
        name: _import(v, f"{r.at('imports')}[{name!r}]") for name, v in r.table("imports").items()
    }
    probes = {
        name: _probe(v, f"{r.at('probes')}[{name!r}]") for name, v in r.table("probes").items()
    }
    torch = r.data.get("torch")
    return VenvFacts(
        executable=r.text("executable"),
        prefix=r.text("prefix"),
        base_prefix=r.text("base_prefix"),
        version=r.text("version"),
        sys_path=r.texts("sys_path"),
        pythonpath=r.texts("pythonpath"),
        user_site=r.text("user_site", ""),
        site_packages=r.texts("site_packages"),
        distributions=dists,
        imports=imports,
        probes=probes,
        torch=None if torch is None else _torch(torch, r.at("torch")),
    )


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def collect_facts(
    python: Path, spec: Mapping[str, object], where: Path, timeout: float = 900
) -> VenvFacts:
    """Run ``env/inside_venv.py`` with ``spec`` in the interpreter ``python``; its facts.

    Raises EnvironmentBroken when the probe hangs, cannot start, crashes or answers nonsense.
    """
    venv = where
    source = resources.files("envkit.env").joinpath("inside_venv.py").read_text(encoding="utf-8")
    with temporary_folder("facts") as tmp:
        script, spec_file, out_file = (Path(tmp) / n for n in ("probe.py", "spec.json", "out"))
        script.write_text(source, encoding="utf-8")
        spec_file.write_text(json.dumps(dict(spec)), encoding="utf-8")
        try:
            done = process.run(
                [str(python), str(script), str(spec_file), str(out_file)], timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise EnvironmentBroken(
                f"Verification in {venv} did not finish within {timeout:.0f} s.",
                "An import hangs there; run its python and import the profile's modules by hand.",
            ) from None
        except OSError as exc:
            raise EnvironmentBroken(
                f"Cannot run {python}: {exc.strerror}.", "Rebuild the venv with `envkit build`."
            ) from None
        except OutputTooLarge as exc:  # its answer goes to a file: the streams are only noise
            raise EnvironmentBroken(
                f"The verification probe in {venv} wrote more than {exc.limit:,} bytes to its "
                f"{exc.stream}; envkit stopped {python} there and kept none of it.",
                f"Something that venv's python runs at start prints without end (a "
                f"sitecustomize.py, a .pth file, PYTHONSTARTUP); run `{python} -c pass` to "
                "see it, then remove it or rebuild the venv with `envkit build`.",
            ) from None
        crashed = done.returncode != 0 or not out_file.is_file()
        try:
            text = "" if crashed else read_small_text(out_file, MAX_ANSWER, what="probe output")
            data = json.loads(text) if text else None
        except (UnreadableFile, ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            tail = " | ".join((done.stderr or "").strip().splitlines()[-5:])
            raise EnvironmentBroken(
                f"The verification probe crashed in {venv} (exit {done.returncode}): {tail}",
                "The interpreter itself is broken; rebuild the venv with `envkit build`.",
            )
    return parse_facts(data)
