"""Reading the kernel table's facts from the indexes: every vLLM release's default wheel, the
default wheel of each torch release they pin, and, from the PyTorch index where it is given
and reachable, that torch release's other CUDA builds.

:func:`harvest` walks the releases, picks the wheel uv would install on Linux x86_64 for
CPython 3.12 (``index.pages.pick_linux_wheel``: a ``cp312`` wheel, else ``abi3``, else the
newest CPython's) and reads it with :func:`envkit.gpu.published.wheelkernels.read_wheel`, unless the
caller already holds a read of the same bytes (the same sha256). A release that cannot be read
is a note, never a stop; :mod:`envkit.gpu.published.kerneltable` turns the answer into the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urljoin

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envkit.errors import EnvkitError, NetworkError
from envkit.gpu.published.wheelkernels import LIMITS, Limits, WheelKernels, read_wheel
from envkit.index.pages import WheelFile, file_sha256, html_entries, pick_linux_wheel
from envkit.index.session import IndexSession
from envkit.io.http import Http, MiB, status_error
from envkit.io.redaction import redact
from envkit.io.urls import DEFAULT_INDEX
from envkit.releases.torchbuilds import BACKENDS

MAX_PAGE = 16 * MiB  # a PyTorch index page (cu124/torch/ lists about 600 files)


@dataclass(frozen=True)
class TorchRead:
    """One torch build read: the wheel, whether it is the package index's default build,
    and where it came from."""

    wheel: WheelKernels
    default: bool
    source: str


@dataclass(frozen=True)
class Harvest:
    """What one run read (or kept, the same sha256 already known) and what it could not."""

    vllm: tuple[tuple[WheelKernels, str], ...]  # (read, source), oldest first
    torch: tuple[TorchRead, ...]
    notes: tuple[str, ...]  # a release not read, and why
    fetched: int  # bytes fetched from the indexes
    seconds: float
    kept: int  # wheels not read again: their sha256 was known
    no_wheel: tuple[str, ...] = ()  # vLLM releases with no wheel for the platform read


def index_source(index: str) -> str:
    """How the table names an index: 'the package index', or the URL (credentials left out)
    of another one."""
    if index.rstrip("/") == DEFAULT_INDEX:
        return "the package index"
    return f"the index {redact(index.rstrip('/'))}"


def pinned_torch(requires: str) -> str:
    """The torch release a specifier pins ('==2.6.0' -> '2.6.0'); '' for a range or none."""
    try:
        specs = list(SpecifierSet(requires))
    except InvalidSpecifier:
        return ""
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
        return ""
    try:
        return str(Version(specs[0].version))
    except InvalidVersion:
        return ""


class _Reader:
    def __init__(
        self,
        http: Http,
        known: Mapping[str, WheelKernels],
        limits: Limits,
        progress: Callable[[str], None],
    ) -> None:
        self.http, self.known, self.limits, self.progress = http, known, limits, progress
        self.notes: list[str] = []
        self.kept = 0

    def read(self, wheel: WheelFile, project: str, label: str) -> WheelKernels | None:
        if not wheel.sha256:
            self.note(f"{label}: {wheel.filename} not read: the index gives no sha256 for it")
            return None
        same = self.known.get(wheel.sha256)
        if same is not None and same.filename == wheel.filename:
            self.kept += 1
            self.progress(f"{label}: {wheel.filename} kept (its sha256 is unchanged)")
            return same
        size = f" ({wheel.size / 1e6:.0f} MB)" if wheel.size else ""
        self.progress(f"{label}: reading {wheel.filename}{size}")
        try:
            return read_wheel(wheel, project, self.http, limits=self.limits, progress=self.progress)
        except EnvkitError as exc:
            self.note(f"{label}: {wheel.filename} not read: {exc.message}")
            return None

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.progress(text)


def harvest(
    index: str,
    http: Http,
    *,
    pytorch_index: str = "",
    versions: Iterable[str] | None = None,
    known: Mapping[str, WheelKernels] | None = None,
    limits: Limits = LIMITS,
    progress: Callable[[str], None] = lambda _m: None,
    platform: str = "linux-x86_64",
) -> Harvest:
    """The vLLM releases on ``index`` (``versions`` alone when given) and the torch releases
    they pin, their wheels for ``platform`` (linux-x86_64 or linux-aarch64), read or taken
    from ``known`` (earlier reads by sha256)."""
    machine = platform.removeprefix("linux-")
    started, before = time.monotonic(), http.traffic.bytes
    session = IndexSession(index, http=http, use_cache=False)
    reader = _Reader(http, known or {}, limits, progress)
    source = index_source(index)
    releases = session.releases("vllm")
    if versions is not None:
        wanted = {Version(v) for v in versions}
        releases = [v for v in releases if v in wanted]
        for missing in sorted(wanted - set(releases)):
            reader.note(f"vllm {missing}: not a release on {source}")
    vllm: list[tuple[WheelKernels, str]] = []
    no_wheel: list[str] = []
    for number, version in enumerate(releases, 1):
        label = f"[{number}/{len(releases)}] vllm {version}"
        wheel = pick_linux_wheel(session.wheels("vllm", version), version, machine=machine)
        if wheel is None:
            no_wheel.append(str(version))
            reader.note(f"{label}: no Linux {machine} wheel")
            continue
        found = reader.read(wheel, "vllm", label)
        if found is not None and not any(m.groups for m in found.modules):
            reader.note(f"{label}: {wheel.filename} holds no GPU kernels")
        elif found is not None:
            vllm.append((found, source))
    pins = sorted({p for w, _ in vllm if (p := pinned_torch(w.requires_torch))}, key=Version)
    torch: list[TorchRead] = []
    for number, pin in enumerate(pins, 1):
        label = f"[{number}/{len(pins)}] torch {pin}"
        wheel = pick_linux_wheel(
            session.wheels("torch", Version(pin)), Version(pin), machine=machine
        )
        if wheel is None:
            reader.note(f"{label}: no Linux {machine} wheel on {source}")
            continue
        found = reader.read(wheel, "torch", label)
        if found is not None:
            torch.append(TorchRead(found, True, source))
    if pytorch_index:
        others = _other_builds(pytorch_index.rstrip("/"), http, pins, torch, reader, machine)
        torch.extend(others)
    return Harvest(
        vllm=tuple(vllm),
        torch=tuple(torch),
        notes=tuple(reader.notes),
        fetched=http.traffic.bytes - before,
        seconds=round(time.monotonic() - started, 1),
        kept=reader.kept,
        no_wheel=tuple(no_wheel),
    )


def _other_builds(
    index: str,
    http: Http,
    pins: list[str],
    defaults: list[TorchRead],
    reader: _Reader,
    machine: str = "x86_64",
) -> list[TorchRead]:
    """Each pinned torch release's CUDA builds on the PyTorch index (one page per backend,
    ``cu124/torch/``) but the default build's own CUDA; nothing, with a note, when the index
    does not answer."""
    default_cuda = {r.wheel.version: _series(r.wheel.torch_cuda) for r in defaults}
    source = f"the PyTorch index {redact(index)}"
    found: list[TorchRead] = []
    for cuda in BACKENDS:
        tag = "cu" + cuda.replace(".", "")
        try:
            files = _backend_files(index, tag, http)
        except NetworkError as exc:
            if exc.status:
                continue  # no page for this backend
            reader.note(f"{source} was not reachable ({exc.message}); other CUDA builds not read")
            return found
        for pin in pins:
            if default_cuda.get(pin) == cuda:
                continue  # the default build is this one
            local = Version(f"{pin}+{tag}")
            wheel = pick_linux_wheel(files, local, machine=machine)
            if wheel is None:
                continue
            read = reader.read(wheel, "torch", f"torch {local}")
            if read is not None:
                found.append(TorchRead(read, False, source))
    return found


def _backend_files(index: str, tag: str, http: Http) -> list[WheelFile]:
    url = f"{index}/{tag}/torch/"
    answer = http.request("GET", url, max_bytes=MAX_PAGE)
    if answer.status != 200:
        raise status_error(url, answer.status)
    files = []
    for entry in html_entries(answer.text(), url):
        name, href = str(entry.get("filename", "")), str(entry.get("url", ""))
        try:
            _name, version, _build, _tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if version.local == tag:
            files.append(
                WheelFile(
                    name, urljoin(answer.url, href), None, version, None, None, file_sha256(entry)
                )
            )
    return files


def _series(cuda: str) -> str:
    """'12.4.1' -> '12.4': a CUDA build as the PyTorch index names its backends."""
    return ".".join(cuda.split(".")[:2])
