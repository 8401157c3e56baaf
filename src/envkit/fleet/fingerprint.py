"""One node's facts as a typed ``Fingerprint``, its JSON shape, and reading it back.

A fingerprint crosses machines: written by ``envkit fingerprint --json`` on a node (run by
``srun``, ``kubectl exec``, ``ssh`` or a Ray task) and read here. What is read is input like
any other: a regular file under :data:`MAX_FILE` (``io.files``), JSON without NaN or deep
nesting, and every field checked where it enters (type, range, length, count), a problem
named with its key path (``fingerprint.gpus[0].memory``) and the file. Variables whose name
or value looks secret are masked again on reading (:func:`mask_variables`), whoever wrote it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from envkit.errors import BadInput, UnreadableFile
from envkit.io import redaction
from envkit.io.escaping import MISSING, described
from envkit.io.files import MiB, read_small_text
from envkit.io.typedjson import JsonObject

FORMAT = 1  # the fingerprint's own shape version (inside envkit's JSON document)
MAX_FILE = 16 * MiB  # a fingerprint with every distribution of a large venv is ~1 MB
MAX_DISTRIBUTIONS = 20_000
MAX_GPUS = 64
MAX_DEVICES = 256  # InfiniBand devices listed
MAX_VARIABLES = 1_000
MAX_TEXT = 4_096  # characters in one string (a path, a variable's value)
MAX_NAMES = 20  # modified files named per distribution
MAX_BYTES = 2**62  # memory and /dev/shm sizes
MASK = "***"


class Files(str, Enum):
    """Whether a distribution's installed files are the ones its RECORD lists (sha256)."""

    INTACT = "intact"  # every file RECORD hashes is there with that hash
    MODIFIED = "modified"  # some file is missing or has another hash
    UNRECORDED = "unrecorded"  # no RECORD, or a RECORD without hashes: nothing to compare
    UNCHECKED = "unchecked"  # not looked at (--no-hashes)


@dataclass(frozen=True)
class GpuFact:
    index: int
    name: str
    capability: str  # '8.0'
    memory: int | None  # bytes; None where nvidia-smi says [N/A]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "compute_capability": self.capability,
            "memory": self.memory,
        }


@dataclass(frozen=True)
class Distribution:
    name: str  # canonical (packaging's canonicalize_name)
    version: str
    files: Files = Files.UNCHECKED
    modified: tuple[str, ...] = ()  # the first files that differ (at most MAX_NAMES)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "files": self.files.value,
            "modified": list(self.modified),
        }


@dataclass(frozen=True, kw_only=True)
class Fingerprint:
    """What one node is: the facts ``fleet check`` judges."""

    host: str
    platform: str  # the matrix platform name: linux-x86_64
    machine: str  # platform_machine, for the lock's markers
    python: str  # the fingerprinted environment's Python, 3.11.7
    environment: str  # its prefix (the venv, or the interpreter's own)
    gpus: tuple[GpuFact, ...] = ()
    driver: str = ""  # the NVIDIA driver, '' without a GPU
    driver_cuda: str = ""  # the highest CUDA it runs (nvidia-smi's header)
    gpu_problem: str = ""  # why nvidia-smi's answer could not be used ('' when it could)
    distributions: tuple[Distribution, ...] = ()
    ray: str = ""  # the Ray installed there, '' when none
    shm: int | None = None  # /dev/shm's size in bytes, None without one
    infiniband: tuple[str, ...] = ()  # /sys/class/infiniband and /dev/infiniband entries
    variables: Mapping[str, str] = field(default_factory=dict)  # VLLM_*, NCCL_* (masked)

    def version_of(self, name: str) -> str | None:
        found = next((d for d in self.distributions if d.name == name), None)
        return found.version if found is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "host": self.host,
            "platform": self.platform,
            "machine": self.machine,
            "python": self.python,
            "environment": self.environment,
            "gpus": [g.to_dict() for g in self.gpus],
            "driver": self.driver or None,
            "driver_cuda": self.driver_cuda or None,
            "gpu_problem": self.gpu_problem,
            "distributions": [d.to_dict() for d in self.distributions],
            "ray": self.ray or None,
            "shm": self.shm,
            "infiniband": list(self.infiniband),
            "variables": dict(sorted(self.variables.items())),
        }


def mask_variables(found: Mapping[str, str]) -> dict[str, str]:
    """The variables with every secret-looking value masked (by name or by shape) and URL
    credentials cut from the others: on values, before anything encodes them."""
    return {
        name: MASK if redaction.is_secret_variable(name, value) else redaction.redact(value)
        for name, value in found.items()
    }


class _Bad(Exception):
    def __init__(self, path: str, wanted: str, value: object) -> None:
        super().__init__(f"{path}: expected {wanted}, got {described(value)}")


class _Obj(JsonObject):
    """Typed access to one JSON object, failing with the key path."""

    max_text = MAX_TEXT

    def fail(self, path: str, wanted: str, value: object) -> Exception:
        return _Bad(path, wanted, value)

    def text(self, key: str, *, empty: bool = True, null: bool = False) -> str:
        value = self.data.get(key, MISSING)
        if (value is None or value is MISSING) and null:
            return ""
        return self.text_of(value, self.at(key), empty=empty)

    def size(self, key: str, top: int) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        try:
            return self.whole_of(value, self.at(key), top)
        except _Bad:  # said with what else it may be
            wanted = f"a whole number from 0 to {top}, or null"
            raise self.fail(self.at(key), wanted, value) from None

    def items(self, key: str, cap: int) -> list[Any]:
        return self.list_of(self.data.get(key, []), self.at(key), cap)


def _gpu(data: object, path: str) -> GpuFact:
    o = _Obj(data, path)
    index = o.size("index", MAX_GPUS)
    capability = o.text("compute_capability", empty=False)
    head, _, tail = capability.partition(".")
    if not (head.isdigit() and tail.isdigit() and len(head) <= 2 and len(tail) <= 2):
        raise _Bad(o.at("compute_capability"), "a compute capability such as 8.0", capability)
    return GpuFact(index or 0, o.text("name"), capability, o.size("memory", MAX_BYTES))


def _distribution(data: object, path: str) -> Distribution:
    o = _Obj(data, path)
    files = o.text("files")
    try:
        state = Files(files)
    except ValueError:
        raise _Bad(o.at("files"), " or ".join(f.value for f in Files), files) from None
    names = o.items("modified", MAX_NAMES)
    modified = tuple(
        _Obj({"v": n}, f"{o.at('modified')}[{i}]").text("v") for i, n in enumerate(names)
    )
    # a version '' is a dist-info whose METADATA gives none: what the node holds, judged there
    return Distribution(o.text("name", empty=False), o.text("version"), state, modified)


def from_dict(data: object, path: str = "fingerprint") -> Fingerprint:
    """The fingerprint in ``data`` (as :meth:`Fingerprint.to_dict` writes it); ValueError
    naming the key path of the first field that is not what it must be."""
    try:
        o = _Obj(data, path)
        if o.data.get("format") != FORMAT:
            raise _Bad(o.at("format"), str(FORMAT), o.data.get("format"))
        gpus = tuple(
            _gpu(g, f"{o.at('gpus')}[{i}]") for i, g in enumerate(o.items("gpus", MAX_GPUS))
        )
        dists = tuple(
            _distribution(d, f"{o.at('distributions')}[{i}]")
            for i, d in enumerate(o.items("distributions", MAX_DISTRIBUTIONS))
        )
        raw = o.data.get("variables", {})
        if not isinstance(raw, dict) or len(raw) > MAX_VARIABLES:
            raise _Bad(o.at("variables"), f"an object of at most {MAX_VARIABLES} entries", raw)
        variables = {
            _Obj({"k": k}, o.at("variables")).text("k", empty=False): _Obj(
                raw, o.at("variables")
            ).text(k)
            for k in raw
        }
        devices = o.items("infiniband", MAX_DEVICES)
        return Fingerprint(
            host=o.text("host", empty=False),
            platform=o.text("platform", empty=False),
            machine=o.text("machine"),
            python=o.text("python", empty=False),
            environment=o.text("environment"),
            gpus=gpus,
            driver=o.text("driver", null=True),
            driver_cuda=o.text("driver_cuda", null=True),
            gpu_problem=o.text("gpu_problem"),
            distributions=dists,
            ray=o.text("ray", null=True),
            shm=o.size("shm", MAX_BYTES),
            infiniband=tuple(
                _Obj({"v": d}, f"{o.at('infiniband')}[{i}]").text("v")
                for i, d in enumerate(devices)
            ),
            variables=mask_variables(variables),
        )
    except _Bad as exc:
        raise ValueError(str(exc)) from None


def read(path: Path) -> Fingerprint:
    """The fingerprint in the file at ``path`` (``envkit fingerprint --json``'s output):
    BadInput naming the file and the key when it is not one."""
    try:
        text = read_small_text(path, MAX_FILE, what="fingerprint")
        document = json.loads(text, parse_constant=_no_constant)
    except UnreadableFile:
        raise
    except (ValueError, RecursionError) as exc:
        raise BadInput(
            f"{path} is not a fingerprint: not JSON ({str(exc)[:200]}).",
            "Make it with `envkit fingerprint --json > FILE` on the node.",
        ) from None
    body = document.get("fingerprint") if isinstance(document, dict) else None
    try:
        return from_dict(body)
    except ValueError as exc:
        raise BadInput(
            f"{path} is not a fingerprint envkit can read: {exc}.",
            "Make it with `envkit fingerprint --json > FILE` on the node, with the same "
            "envkit release as here.",
        ) from None


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")
