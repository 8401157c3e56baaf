"""The GPU kernels of each published vLLM and torch build, before install: envkit's table.

``data/gpu-kernels.json`` holds, per vLLM release with CUDA wheels on the package index, what
its default Linux wheel's compiled modules carry (per module: its fatbin containers grouped
by target, its NEEDED CUDA libraries), for x86_64 and, where the release publishes one, for
aarch64 (GH200, GB200, DGX Spark; the entry's wheel names its platform), the torch release
it pins; and per torch build (version, CUDA) the same for ``libtorch_cuda.so`` and its
siblings, with ``torch.version.cuda``.
Every entry names its wheel and sha256. It is made by reading those wheels by range, never
installing them (:mod:`envkit.gpu.published.kernelgen`, :mod:`envkit.gpu.published.wheelkernels`);
regenerate it
(incremental: a wheel whose sha256 is unchanged is not read again) with::

    python -m envkit.gpu.published.kernelupdate --out src/envkit/data/gpu-kernels.json \\
        [--index-url URL] [--pytorch-index URL] [--vllm 0.8.5,0.9.0] [--platform linux-aarch64]

A release that publishes no wheel for a platform is listed under ``no_wheel`` (a fact read
from the index, said as such for aarch64 cells, nodes and drafts), never guessed.

Lookups: :func:`vllm_build`, :func:`torch_build` (the default build, or one CUDA build), each
build's :meth:`~VllmBuild.on` a capability (runs / no-kernel-image / unknown, with a line of
what the build has), :func:`vllm_cuda_major`, and :func:`vllm_release_verdict`: whether vLLM
*and* the default build of the torch it pins run on a GPU. A build the table does not hold is
``unknown``, never a guess; an entry that fails validation is left out (and so unknown).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.version import Version

from envkit.errors import UnreadableFile
from envkit.gpu.arch import Capability
from envkit.gpu.published.kernelbuilds import (
    PLATFORMS,
    X86,
    KernelTable,
    TorchBuild,
    VllmBuild,
    version_of,
    wheel_platform,
)
from envkit.gpu.published.kernelverdict import BuildVerdict, ReleaseVerdict, Verdict
from envkit.gpu.published.wheelkernels import WheelKernels
from envkit.io.cache import BadEntry, Fields
from envkit.io.files import MiB, read_small_text

__all__ = [
    "PLATFORMS",
    "X86",
    "BuildVerdict",
    "KernelTable",
    "ReleaseVerdict",
    "TorchBuild",
    "Verdict",
    "VllmBuild",
    "dumps",
    "load",
    "shipped",
    "torch_build",
    "vllm_build",
    "vllm_cuda_major",
    "vllm_release_verdict",
]
MAX_TABLE = 32 * MiB
ABOUT = (
    "What the compiled modules of each vLLM release's default Linux x86_64 wheel on the "
    "package index carry (fatbin containers grouped by SASS/PTX targets, NEEDED CUDA "
    "libraries), the torch release it pins, and the same for that torch release's default "
    "build (libtorch_cuda.so and siblings, torch.version.cuda); read from the wheels by range, "
    "never installed. Regenerate: python -m envkit.gpu.published.kernelupdate --out "
    "src/envkit/data/gpu-kernels.json"
)


def dumps(table: KernelTable) -> str:
    """The table as JSON, one line per module (so that a regeneration diffs by module)."""
    doc = table.to_document()
    lines = ["{"]
    for key in ("about", "generated", "source", "notes", "no_wheel"):
        lines.append(f" {json.dumps(key)}: {json.dumps(doc[key])},")
    for section in ("vllm", "torch"):
        lines.append(f" {json.dumps(section)}: [")
        for n, entry in enumerate(doc[section]):
            head = {k: v for k, v in entry.items() if k != "modules"}
            lines.append(f'  {json.dumps(head)[:-1]}, "modules": [')
            modules = [f"   {json.dumps(m)}" for m in entry["modules"]]
            lines.append(",\n".join(modules))
            lines.append("  ]}" + ("," if n < len(doc[section]) - 1 else ""))
        lines.append(" ]" + ("," if section == "vllm" else ""))
    return "\n".join(line for line in lines if line) + "\n}\n"


def load(text: str, where: str = "gpu-kernels.json") -> KernelTable:
    """The table in ``text``, every entry checked: one that fails is left out (its reason in
    ``problems``). BadEntry when the document itself is not a table."""
    return _assemble(_document(text, where), where)


def _document(text: str, where: str) -> Fields:
    if len(text) > MAX_TABLE:
        raise BadEntry(f"{where} is larger than {MAX_TABLE:,} characters")

    def no_constant(name: str) -> Any:
        raise BadEntry(f"{name} is not JSON")

    try:
        return Fields(json.loads(text, parse_constant=no_constant), where)
    except (ValueError, RecursionError) as exc:
        raise BadEntry(f"{where} is not a JSON table ({exc})") from None


def _vllm_builds(
    entries: tuple[Fields, ...], where: str, problems: list[str]
) -> dict[tuple[str, str], VllmBuild]:
    """The vLLM entries that pass, by (version, platform): the first of a key wins."""
    vllm: dict[tuple[str, str], VllmBuild] = {}
    for entry in entries:
        try:
            read = WheelKernels.from_entry(entry)
            key = (read.version, wheel_platform(read.filename))
            if read.project != "vllm" or key in vllm:
                raise BadEntry(f"{where}.vllm: {read.project} {read.version} is out of place")
            vllm[key] = VllmBuild(read.version, read, entry.text("source"))
        except (BadEntry, TypeError, KeyError) as exc:
            problems.append(str(exc))
    return vllm


def _torch_builds(
    entries: tuple[Fields, ...], where: str, problems: list[str]
) -> tuple[TorchBuild, ...]:
    """The torch entries that pass (one default build per release and platform), sorted."""
    torch: dict[tuple[str, str, str], TorchBuild] = {}
    for entry in entries:
        try:
            read = WheelKernels.from_entry(entry)
            public = Version(read.version).public
            build = TorchBuild(
                public, read.torch_cuda, entry.flag("default"), read, entry.text("source")
            )
            plat = build.platform
            defaults = [
                b
                for b in torch.values()
                if b.default and b.version == public and b.platform == plat
            ]
            if (
                read.project != "torch"
                or (public, build.cuda, plat) in torch
                or (build.default and defaults)
            ):
                raise BadEntry(f"{where}.torch: {read.project} {read.version} is out of place")
            torch[(public, build.cuda, plat)] = build
        except (BadEntry, TypeError, KeyError) as exc:
            problems.append(str(exc))
    return tuple(
        sorted(torch.values(), key=lambda b: (Version(b.version), b.platform, not b.default))
    )


def _assemble(doc: Fields, where: str) -> KernelTable:
    problems: list[str] = []
    vllm = _vllm_builds(doc.tables("vllm"), where, problems)
    torch = _torch_builds(doc.tables("torch"), where, problems)
    return KernelTable(
        about=doc.text("about", ""),
        generated=doc.text("generated", ""),
        source=doc.text("source", ""),
        notes=doc.texts("notes", ()),
        vllm=tuple(sorted(vllm.values(), key=lambda b: (Version(b.version), b.platform))),
        torch=torch,
        problems=tuple(problems),
        no_wheel=_no_wheel(doc, where, problems),
    )


class LazyTable(KernelTable):
    """The shipped table as :func:`load` reads it, but a release's vLLM or torch entries are
    checked when a lookup first asks for that release (check-model and plan ask for a few of
    100+), the whole sections (and ``problems``) once, when first asked for: same answers,
    each entry left out by the same rule."""

    _doc: Fields
    _where: str
    _rows: dict[tuple[Version, str], list[Fields]]
    _found: dict[tuple[Version, str], VllmBuild | None]  # each release asked, as checked
    _torch_rows: dict[tuple[Version, str], list[Fields]]
    _torch_found: dict[tuple[Version, str], KernelTable]  # a release's builds, as checked

    def __init__(self, text: str, where: str = "gpu-kernels.json") -> None:
        doc = _document(text, where)
        head = (doc.text("about", ""), doc.text("generated", ""), doc.text("source", ""))
        for name, value in zip(("about", "generated", "source"), head, strict=True):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "notes", doc.texts("notes", ()))
        object.__setattr__(self, "no_wheel", _no_wheel(doc, where, []))
        rows: dict[tuple[Version, str], list[Fields]] = {}
        for entry in doc.tables("vllm"):  # by release, in the document's order
            version, wheel = entry.data.get("version"), entry.data.get("wheel")
            if isinstance(version, str) and isinstance(wheel, str) and version_of(version):
                key = (Version(version), wheel_platform(wheel))
                rows.setdefault(key, []).append(entry)
        object.__setattr__(self, "_doc", doc)
        object.__setattr__(self, "_where", where)
        object.__setattr__(self, "_rows", rows)
        object.__setattr__(self, "_found", {})
        torch_rows: dict[tuple[Version, str], list[Fields]] = {}
        for entry in doc.tables("torch"):  # by public release, in the document's order
            version, wheel = entry.data.get("version"), entry.data.get("wheel")
            if isinstance(version, str) and isinstance(wheel, str) and version_of(version):
                key = (Version(Version(version).public), wheel_platform(wheel))
                torch_rows.setdefault(key, []).append(entry)
        object.__setattr__(self, "_torch_rows", torch_rows)
        object.__setattr__(self, "_torch_found", {})

    @functools.cached_property
    def _whole(self) -> KernelTable:
        return _assemble(self._doc, self._where)

    @functools.cached_property
    def vllm(self) -> tuple[VllmBuild, ...]:
        return self._whole.vllm

    @functools.cached_property
    def torch(self) -> tuple[TorchBuild, ...]:
        return self._whole.torch

    @functools.cached_property
    def problems(self) -> tuple[str, ...]:
        return self._whole.problems

    def vllm_build(self, version: str, platform: str = X86) -> VllmBuild | None:
        wanted = version_of(version)
        if wanted is None:
            return None  # no entry's version fails to parse: load left those out
        if "_whole" in self.__dict__:
            return super().vllm_build(version, platform)
        key = (wanted, platform)
        if key not in self._found:  # the first of its entries that passes, as load keeps
            passed = _vllm_builds(tuple(self._rows.get(key, ())), self._where, [])
            self._found[key] = next(iter(passed.values()), None)
        return self._found[key]

    def torch_build(
        self, version: str, cuda: str | None = None, platform: str = X86
    ) -> TorchBuild | None:
        wanted = version_of(version.split("+")[0])
        if wanted is None:
            return None  # as for vllm_build
        if "_whole" in self.__dict__:
            return super().torch_build(version, cuda, platform)
        key = (wanted, platform)
        if key not in self._torch_found:  # the release's builds, as load keeps them
            builds = _torch_builds(tuple(self._torch_rows.get(key, ())), self._where, [])
            self._torch_found[key] = KernelTable("", "", "", (), builds)
        return self._torch_found[key].torch_build(version, cuda, platform)


def _no_wheel(doc: Fields, where: str, problems: list[str]) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    for entry in doc.tables("no_wheel") if "no_wheel" in doc.data else ():
        platform, version = entry.text("platform"), entry.text("vllm")
        if platform not in PLATFORMS or version_of(version) is None:
            problems.append(f"{where}.no_wheel: {platform!r} {version!r} is out of place")
            continue
        found.append((platform, version))
    return tuple(sorted(set(found), key=lambda pv: (pv[0], Version(pv[1]))))


@functools.cache
def packaged() -> KernelTable:
    """The table shipped with envkit; an empty one (every lookup unknown) naming the problem
    when it cannot be read."""
    try:
        text = (resources.files("envkit") / "data" / "gpu-kernels.json").read_text()
        return LazyTable(text)
    except (OSError, BadEntry, UnicodeError) as exc:
        return KernelTable("", "", "", (), (), (f"envkit's gpu-kernels.json: {exc}",))


def refreshed_path() -> Path:
    """Where ``envkit refresh`` writes the table it brings up to date: the user's data
    folder (``gpu-kernels.json`` beside the user's profiles)."""
    from platformdirs import user_data_path

    return user_data_path("envkit") / "gpu-kernels.json"


def shipped() -> KernelTable:
    """The table every lookup reads: the one ``envkit refresh`` wrote to the user's data
    folder when it is valid and not older than envkit's own, else envkit's own."""
    path = refreshed_path()
    try:
        info = path.stat()
    except OSError:
        return packaged()
    return _refreshed(str(path), info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=4)
def _refreshed(path: str, _mtime: int, _size: int) -> KernelTable:
    own = packaged()
    try:
        table = load(read_small_text(path, MAX_TABLE, what="kernel table", follow=False))
    except (UnreadableFile, BadEntry, UnicodeError):
        return own
    return table if table.generated >= own.generated and not table.problems else own


def vllm_build(version: str, platform: str = X86) -> VllmBuild | None:
    """vLLM ``version``'s default wheel for ``platform`` in the shipped table; None when it
    is not there."""
    return shipped().vllm_build(version, platform)


def torch_build(version: str, cuda: str | None = None, platform: str = X86) -> TorchBuild | None:
    """torch ``version``'s default build (``cuda`` None) or its ``cuda`` build for
    ``platform`` in the shipped table; None when it is not there."""
    return shipped().torch_build(version, cuda, platform)


def vllm_cuda_major(version: str) -> int | None:
    """The CUDA runtime major vLLM ``version``'s default wheel needs (12 for 0.8.5, 13 for
    0.2x); None when the table does not hold it."""
    build = vllm_build(version)
    return build.cuda_major if build is not None else None


def vllm_release_verdict(
    version: str, capability: Capability, platform: str = X86
) -> ReleaseVerdict:
    """Whether vLLM ``version``'s default wheel *and* the default build of the torch release
    it pins have kernel images for a GPU of ``capability``, from the shipped table (the
    solver and check-model ask this before anything is installed). ``runs`` only when both
    do; ``no-kernel-image`` when either has none; ``unknown`` when the table lacks either
    (a release that pins no exact torch, a build not read), never a guess."""
    return shipped().release_verdict(version, capability, platform)
