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
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.errors import UnreadableFile
from envkit.gpu.arch import Capability
from envkit.gpu.published.kernelverdict import (
    BuildVerdict,
    ReleaseVerdict,
    Verdict,
    build_verdict,
    has,
    release,
    unknown,
)
from envkit.gpu.published.wheelkernels import WheelKernels
from envkit.io.cache import BadEntry, Fields
from envkit.io.files import MiB, read_small_text

__all__ = [
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
PLATFORMS = ("linux-x86_64", "linux-aarch64")
X86 = PLATFORMS[0]


def wheel_platform(filename: str) -> str:
    """The matrix platform a Linux wheel's file name is for: linux-aarch64 or linux-x86_64."""
    return "linux-aarch64" if filename.endswith("aarch64.whl") else X86


ABOUT = (
    "What the compiled modules of each vLLM release's default Linux x86_64 wheel on the "
    "package index carry (fatbin containers grouped by SASS/PTX targets, NEEDED CUDA "
    "libraries), the torch release it pins, and the same for that torch release's default "
    "build (libtorch_cuda.so and siblings, torch.version.cuda); read from the wheels by range, "
    "never installed. Regenerate: python -m envkit.gpu.published.kernelupdate --out "
    "src/envkit/data/gpu-kernels.json"
)


@dataclass(frozen=True)
class VllmBuild:
    """A vLLM release's default wheel, as read."""

    version: str
    wheel: WheelKernels
    source: str  # where it was read ('the package index')

    @property
    def platform(self) -> str:
        return wheel_platform(self.wheel.filename)

    @property
    def torch(self) -> str:
        """The torch release it pins ('2.6.0'); '' when its metadata gives a range or none."""
        from envkit.gpu.published import kernelgen  # the index readers: not for a lookup

        return kernelgen.pinned_torch(self.wheel.requires_torch)

    @property
    def cuda_majors(self) -> tuple[int, ...]:
        """The CUDA runtime majors its core modules need (libcudart.so.N), lowest first."""
        return tuple(sorted({n for m in self.wheel.core for n in m.cuda_majors()}))

    @property
    def cuda_major(self) -> int | None:
        """The lowest CUDA runtime major the release needs: a machine must provide libcudart
        of that major (12 for vLLM 0.8.5); None when its core modules name none."""
        majors = self.cuda_majors
        return max(majors) if majors else None

    def targets(self) -> str:
        """What its core modules' main containers carry, in one line."""
        return has(self.wheel.core)

    def on(self, capability: Capability) -> BuildVerdict:
        return build_verdict(f"vLLM {self.version}", self.wheel, capability)


@dataclass(frozen=True)
class TorchBuild:
    """One torch build (version, CUDA), as read."""

    version: str  # '2.6.0' (without the local '+cu124')
    cuda: str  # torch.version.cuda: '12.4'; '' for a CPU build
    default: bool  # the package index's default build of the release
    wheel: WheelKernels
    source: str

    @property
    def platform(self) -> str:
        return wheel_platform(self.wheel.filename)

    @property
    def label(self) -> str:
        arm = ", aarch64" if self.platform != X86 else ""
        return f"torch {self.version} (CUDA {self.cuda or 'none'}{arm})"

    def targets(self) -> str:
        return has(self.wheel.core)

    def on(self, capability: Capability) -> BuildVerdict:
        if not self.cuda and not self.wheel.core:
            # torch.version.cuda is None and no libtorch_cuda: a CPU-only build (the package
            # index's default aarch64 wheels of torch 2.8-2.10), which runs on no GPU at all
            why = f"{self.label} is a CPU-only build ({self.wheel.filename}): no GPU kernels"
            return BuildVerdict(self.label, capability, Verdict.NO_KERNEL_IMAGE, "", why)
        return build_verdict(self.label, self.wheel, capability)


@dataclass(frozen=True)
class KernelTable:
    about: str
    generated: str
    source: str
    vllm: tuple[VllmBuild, ...]
    torch: tuple[TorchBuild, ...]
    problems: tuple[str, ...] = ()  # entries left out on loading, and why
    notes: tuple[str, ...] = ()  # what the generator could not read, and why
    no_wheel: tuple[tuple[str, str], ...] = ()  # (platform, vLLM version): publishes none

    def vllm_build(self, version: str, platform: str = X86) -> VllmBuild | None:
        wanted = _version(version)
        return next(
            (b for b in self.vllm if _version(b.version) == wanted and b.platform == platform),
            None,
        )

    def publishes_no_wheel(self, version: str, platform: str) -> bool:
        """Whether the index was read and vLLM ``version`` has no wheel for ``platform``."""
        wanted = _version(version)
        return any(p == platform and _version(v) == wanted for p, v in self.no_wheel)

    def torch_build(
        self, version: str, cuda: str | None = None, platform: str = X86
    ) -> TorchBuild | None:
        """The default build of torch ``version``, or its build for ``cuda`` ('12.4'), for
        ``platform``."""
        wanted = _version(version.split("+")[0])
        for build in self.torch:
            if _version(build.version) != wanted or build.platform != platform:
                continue
            if (cuda is None and build.default) or (cuda is not None and _same_cuda(build, cuda)):
                return build
        return None

    def release_verdict(
        self, version: str, capability: Capability, platform: str = X86
    ) -> ReleaseVerdict:
        """:func:`vllm_release_verdict` on this table."""
        label = f"vLLM {version}"
        build = self.vllm_build(version, platform)
        if build is None and self.publishes_no_wheel(version, platform):
            vllm = unknown(label, capability, f"publishes no {platform} wheel")
            torch = unknown("its torch", capability, f"not read (no {platform} wheel of vLLM)")
        elif build is None:
            vllm = unknown(label, capability, "not in envkit's kernel table")
            torch = unknown("its torch", capability, "not known (vLLM not in the table)")
        else:
            vllm = build.on(capability)
            tb = self.torch_build(build.torch, None, platform) if build.torch else None
            if tb is not None:
                torch = tb.on(capability)
            elif build.torch:
                torch = unknown(f"torch {build.torch}", capability, "not in envkit's table")
            else:
                pin = build.wheel.requires_torch or "nothing"
                torch = unknown("its torch", capability, f"not pinned (it asks {pin})")
        return release(version, capability, vllm, torch)

    def to_document(self) -> dict[str, Any]:
        return {
            "about": self.about,
            "generated": self.generated,
            "source": self.source,
            "notes": list(self.notes),
            "no_wheel": [{"platform": p, "vllm": v} for p, v in self.no_wheel],
            "vllm": [{**b.wheel.to_entry(), "source": b.source} for b in self.vllm],
            "torch": [
                {**b.wheel.to_entry(), "default": b.default, "source": b.source} for b in self.torch
            ],
        }


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


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _same_cuda(build: TorchBuild, cuda: str) -> bool:
    return build.cuda.split(".")[:2] == cuda.strip().split(".")[:2]


def load(text: str, where: str = "gpu-kernels.json") -> KernelTable:
    """The table in ``text``, every entry checked: one that fails is left out (its reason in
    ``problems``). BadEntry when the document itself is not a table."""
    if len(text) > MAX_TABLE:
        raise BadEntry(f"{where} is larger than {MAX_TABLE:,} characters")

    def no_constant(name: str) -> Any:
        raise BadEntry(f"{name} is not JSON")

    try:
        doc = Fields(json.loads(text, parse_constant=no_constant), where)
    except (ValueError, RecursionError) as exc:
        raise BadEntry(f"{where} is not a JSON table ({exc})") from None
    problems: list[str] = []
    vllm: dict[tuple[str, str], VllmBuild] = {}
    for entry in doc.tables("vllm"):
        try:
            read = WheelKernels.from_entry(entry)
            key = (read.version, wheel_platform(read.filename))
            if read.project != "vllm" or key in vllm:
                raise BadEntry(f"{where}.vllm: {read.project} {read.version} is out of place")
            vllm[key] = VllmBuild(read.version, read, entry.text("source"))
        except (BadEntry, TypeError, KeyError) as exc:
            problems.append(str(exc))
    torch: dict[tuple[str, str, str], TorchBuild] = {}
    for entry in doc.tables("torch"):
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
    return KernelTable(
        about=doc.text("about", ""),
        generated=doc.text("generated", ""),
        source=doc.text("source", ""),
        notes=doc.texts("notes", ()),
        vllm=tuple(sorted(vllm.values(), key=lambda b: (Version(b.version), b.platform))),
        torch=tuple(
            sorted(torch.values(), key=lambda b: (Version(b.version), b.platform, not b.default))
        ),
        problems=tuple(problems),
        no_wheel=_no_wheel(doc, where, problems),
    )


def _no_wheel(doc: Fields, where: str, problems: list[str]) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    for entry in doc.tables("no_wheel") if "no_wheel" in doc.data else ():
        platform, version = entry.text("platform"), entry.text("vllm")
        if platform not in PLATFORMS or _version(version) is None:
            problems.append(f"{where}.no_wheel: {platform!r} {version!r} is out of place")
            continue
        found.append((platform, version))
    return tuple(sorted(set(found), key=lambda pv: (pv[0], Version(pv[1]))))


@functools.cache
def packaged() -> KernelTable:
    """The table shipped with envkit; an empty one (every lookup unknown) naming the problem
    when it cannot be read."""
    try:
        text = resources.files("envkit").joinpath("data", "gpu-kernels.json").read_text()
        return load(text)
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
