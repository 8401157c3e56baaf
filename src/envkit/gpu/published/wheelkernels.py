"""What a published wheel's compiled modules hold, read without installing it.

:func:`read_wheel` opens a wheel on the index by range (:class:`~envkit.index.wheels.RemoteZip`:
its directory, its METADATA, torch's ``torch/version.py``), then streams each compiled module
it looks at into a scratch file (``RemoteZip.inflate``: a compressed cap, an inflated cap and a
time budget per module), reads the file's ``.nv_fatbin`` containers
(:mod:`envkit.gpu.binaries.fatbin`,
grouped by :mod:`envkit.gpu.binaries.images`) and its NEEDED CUDA libraries
(:mod:`envkit.gpu.binaries.elf`,
:mod:`envkit.gpu.binaries.cudalibs`), and deletes it at once: one module on disk at a time.

The modules looked at:

- vLLM: every shared object under ``vllm/``. Its **core** modules are those directly under
  ``vllm/`` named as :data:`~envkit.gpu.installed.assess.CORE_VLLM` says (``_C.abi3.so``, and
  ``_C.cpython-310-x86_64-linux-gnu.so`` in releases built per Python); releases before
  0.2.3, which had no ``_C`` (``activation_ops``, ``attention_ops``...), count every module
  directly under ``vllm/`` as core. Everything else (``vllm_flash_attn``, FlashMLA, DeepGEMM)
  is optional kernels.
- torch: the :data:`~envkit.gpu.installed.assess.CORE_TORCH` libraries in ``torch/lib`` (core) and
  ``libtorch_cuda_linalg.so`` (optional).

A module that cannot be read (not inflatable, over a cap, not an ELF file, a fatbin section
that does not hold together) is an answer with its reason (``damaged``), never an exception.
A failure of the network is not an answer: it raises, and nothing is kept. Each answer is kept
in envkit's cache under the wheel's sha256 (the same bytes always hold the same modules).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from envkit.errors import FileSystemError, WheelError
from envkit.gpu.arch import Target
from envkit.gpu.binaries import cudalibs, fatbin
from envkit.gpu.binaries.images import (
    Images,
    from_groups,
    group_entry,
    groups_from_entry,
    images,
)
from envkit.gpu.roles import Role
from envkit.io.atomicfile import create_binary, temporary_folder
from envkit.io.cache import GPU_KERNELS, BadEntry, Fields, is_sha256
from envkit.io.files import MiB
from envkit.io.redaction import redact
from envkit.releases.torchversion import CUDA_VERSION, version_cuda

if TYPE_CHECKING:  # the readers of the index, imported where a wheel is read: the shipped
    # table's entries are made of WheelKernels (check-model, plan) without them
    from envkit.index.pages import WheelFile
    from envkit.index.wheels import RemoteZip
    from envkit.io.http import Http

PROJECTS = ("vllm", "torch")
TORCH_OPTIONAL = ("libtorch_cuda_linalg.so",)
MAX_MODULES = 64  # compiled modules read of one wheel (vLLM 0.33.0 has 14)
_SHARED = re.compile(r"[A-Za-z0-9_.+-]+\.so(\.[0-9]+)*")


@dataclass(frozen=True)
class Limits:
    """The work one module may take: compressed bytes fetched, inflated bytes written,
    seconds (libtorch_cuda.so of torch 2.10.0: 681 MB compressed, 1.04 GB inflated)."""

    compressed: int = 2048 * MiB
    inflated: int = 4096 * MiB  # fatbin.MAX_SECTION: a larger file is refused anyway
    seconds: float = 1800.0
    modules: int = MAX_MODULES


LIMITS = Limits()


@dataclass(frozen=True)
class ModuleKernels:
    """One compiled module of a wheel: its fatbin containers grouped by their targets, the
    CUDA libraries it needs (NEEDED sonames, ``libcudart.so.12``), or why it is unreadable."""

    member: str  # its path in the wheel
    role: Role  # CORE or OPTIONAL
    inflated: int = 0  # bytes
    groups: tuple[tuple[frozenset[Target], int], ...] = ()  # () without a fatbin
    entries: int = 0
    needed: tuple[str, ...] = ()  # the CUDA sonames among its NEEDED entries, in order
    damaged: str = ""  # why it could not be read; '' when it was

    @functools.cached_property  # built once: check-model asks it for every GPU envkit knows
    def images(self) -> Images | None:
        """What its kernels run on; None when it has no kernels or could not be read."""
        return from_groups(self.groups, self.entries) if self.groups and not self.damaged else None

    def cuda_majors(self, family: cudalibs.Family = cudalibs.Family.CUDART) -> tuple[int, ...]:
        """The majors of one CUDA library family it needs: (12,) for libcudart.so.12."""
        libs = (cudalibs.classify(n) for n in self.needed)
        return tuple(sorted({x.major for x in libs if x and x.family is family and x.major}))

    def to_entry(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "role": self.role.value,
            "bytes": self.inflated,
            "entries": self.entries,
            "groups": [group_entry(targets, count) for targets, count in self.groups],
            "needed": list(self.needed),
            "damaged": self.damaged,
        }

    @classmethod
    def from_entry(cls, f: Fields) -> ModuleKernels:
        member = f.text("member")
        if not _member_name(member):
            raise BadEntry(f"{f.where}.member {member!r:.80} is not a wheel's shared object")
        role = f.text("role")
        if role not in (Role.CORE.value, Role.OPTIONAL.value):
            raise BadEntry(f"{f.where}.role {role!r:.40} is neither core nor optional")
        needed = f.texts("needed", ())
        if any(cudalibs.classify(n) is None for n in needed):
            raise BadEntry(f"{f.where}.needed lists a soname that is not a CUDA library")
        return cls(
            member=member,
            role=Role(role),
            inflated=f.whole("bytes"),
            groups=groups_from_entry(f),
            entries=f.whole("entries", high=fatbin.MAX_ENTRIES),
            needed=needed,
            damaged=f.text("damaged", ""),
        )


def shared_object(name: str) -> bool:
    """Whether a wheel's member ``name`` is a shared object envkit may stream into a scratch
    file by its plain name: short, relative, no ``..``, its name a library's."""
    path = PurePosixPath(name)
    return (
        0 < len(name) <= 300
        and not path.is_absolute()
        and ".." not in path.parts
        and _SHARED.fullmatch(path.name) is not None
    )


def _member_name(name: str) -> bool:
    return shared_object(name) and PurePosixPath(name).parts[0] in ("vllm", "torch")


@dataclass(frozen=True)
class WheelKernels:
    """What one wheel's compiled modules hold, and the facts around them: the torch vLLM's
    metadata pins, the CUDA torch's ``torch/version.py`` names."""

    project: str  # vllm or torch
    version: str
    filename: str
    sha256: str
    wheel_bytes: int
    modules: tuple[ModuleKernels, ...]
    requires_torch: str = ""  # vLLM: the torch specifier of its metadata ('==2.6.0')
    torch_cuda: str = ""  # torch: torch.version.cuda ('' for a CPU build)
    read_bytes: int = 0  # fetched from the index to read it

    @functools.cached_property  # asked for every verdict on the build
    def core(self) -> tuple[ModuleKernels, ...]:
        return tuple(m for m in self.modules if m.role is Role.CORE)

    @property
    def optional(self) -> tuple[ModuleKernels, ...]:
        return tuple(m for m in self.modules if m.role is Role.OPTIONAL)

    def to_entry(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "version": self.version,
            "wheel": self.filename,
            "sha256": self.sha256,
            "wheel_bytes": self.wheel_bytes,
            "read_bytes": self.read_bytes,
            "requires_torch": self.requires_torch,
            "torch_cuda": self.torch_cuda,
            "modules": [m.to_entry() for m in self.modules],
        }

    @classmethod
    def from_entry(cls, f: Fields) -> WheelKernels:
        """An entry as the table or the cache holds it, every field checked (BadEntry)."""
        project, version = f.text("project"), f.text("version")
        try:
            canonical = str(Version(version)) == version
        except InvalidVersion:
            canonical = False
        if project not in PROJECTS or not canonical:
            raise BadEntry(f"{f.where}: {project!r:.40} {version!r:.40} is not a release")
        sha256, filename = f.text("sha256"), f.text("wheel")
        if not is_sha256(sha256):
            raise BadEntry(f"{f.where}.sha256 is not 64 hex digits")
        if not (filename.endswith(".whl") and "/" not in filename and len(filename) <= 300):
            raise BadEntry(f"{f.where}.wheel {filename!r:.80} is not a wheel's file name")
        cuda = f.text("torch_cuda", "")
        if cuda and not CUDA_VERSION.fullmatch(cuda):
            raise BadEntry(f"{f.where}.torch_cuda {cuda!r:.40} is not a CUDA version")
        modules = f.tables("modules")
        if len(modules) > MAX_MODULES:
            raise BadEntry(f"{f.where}.modules lists more than {MAX_MODULES}")
        return cls(
            project=project,
            version=version,
            filename=filename,
            sha256=sha256,
            wheel_bytes=f.whole("wheel_bytes", 0),
            modules=tuple(ModuleKernels.from_entry(m) for m in modules),
            requires_torch=f.text("requires_torch", ""),
            torch_cuda=cuda,
            read_bytes=f.whole("read_bytes", 0),
        )


def read_wheel(
    wheel: WheelFile,
    project: str,
    http: Http,
    *,
    limits: Limits = LIMITS,
    use_cache: bool = True,
    progress: Callable[[str], None] = lambda _m: None,
) -> WheelKernels:
    """What the compiled modules of ``wheel`` (a vLLM or torch wheel on an index) hold.
    Kept in the cache under the wheel's sha256 when the index gave one. Raises WheelError
    when the wheel itself cannot be read (no zip directory, no METADATA), NetworkError when
    the index cannot be, FileSystemError when no scratch file can be written."""
    if project not in PROJECTS:
        raise WheelError(f"envkit reads the kernels of vllm and torch wheels, not {project}.")
    if use_cache and is_sha256(wheel.sha256):
        known = GPU_KERNELS.load(wheel.sha256, WheelKernels.from_entry)
        if known is not None and (known.filename, known.version) == (
            wheel.filename,
            str(wheel.version),
        ):
            return known
    if not wheel.url.lower().startswith(("http://", "https://")):
        raise WheelError(f"{redact(wheel.url)}: envkit reads kernels from wheels over HTTP(S).")
    from envkit.index.wheels import RemoteZip
    from envkit.releases.registry import requirements

    before = http.traffic.bytes
    archive = RemoteZip(wheel.url, http)
    names = sorted(archive.members)
    chosen = _modules(project, names)
    if len(chosen) > limits.modules:
        raise WheelError(
            f"{wheel.filename} holds {len(chosen)} compiled modules; envkit reads at most "
            f"{limits.modules}.",
            "The wheel is not laid out as vLLM's and torch's are.",
        )
    meta = next((n for n in names if n.endswith(".dist-info/METADATA") and n.count("/") == 1), "")
    small = archive.read([meta, "torch/version.py"] if project == "torch" else [meta])
    if meta not in small:
        raise WheelError(f"{wheel.filename} has no METADATA in its .dist-info folder.")
    requires, _python = requirements(small[meta].decode("utf-8", "replace"))
    modules = []
    for member, role in chosen:
        size = archive.members[member].compress_size
        progress(f"{project} {wheel.version}: {member} ({size / 1e6:.0f} MB)")
        modules.append(_module(archive, member, role, limits))
    found = WheelKernels(
        project=project,
        version=str(wheel.version),
        filename=wheel.filename,
        sha256=wheel.sha256,
        wheel_bytes=wheel.size or 0,
        modules=tuple(modules),
        requires_torch=requires.get("torch", "") if project == "vllm" else "",
        torch_cuda=_torch_cuda(small, wheel.filename) if project == "torch" else "",
        read_bytes=http.traffic.bytes - before,
    )
    if is_sha256(wheel.sha256):
        GPU_KERNELS.store(wheel.sha256, found.to_entry())
    return found


def _modules(project: str, names: list[str]) -> list[tuple[str, Role]]:
    """The compiled members to read, with their roles (the module docstring says which)."""
    from envkit.gpu.roles import CORE_TORCH, CORE_VLLM  # assess reads ELF: only when reading

    if project == "torch":
        libs = [
            (n, PurePosixPath(n).name)
            for n in names
            if n.startswith("torch/lib/") and n.count("/") == 2 and _member_name(n)
        ]
        return [
            (n, Role.CORE if base in CORE_TORCH else Role.OPTIONAL)
            for n, base in libs
            if base in CORE_TORCH or base in TORCH_OPTIONAL
        ]
    shared = [n for n in names if n.startswith("vllm/") and _member_name(n)]
    top = [n for n in shared if n.count("/") == 1]
    named = {n for n in top if n.split("/")[1].split(".")[0] in CORE_VLLM}
    core = named or set(top)  # before _C (0.2.3), every top-level module was a kernel op
    return [(n, Role.CORE if n in core else Role.OPTIONAL) for n in shared]


def _module(archive: RemoteZip, member: str, role: Role, limits: Limits) -> ModuleKernels:
    """One module streamed into a scratch file, read, and deleted."""
    with temporary_folder("kernels") as folder:
        path = folder / PurePosixPath(member).name  # a plain name: _SHARED matched it
        try:
            out = create_binary(path)
            if out is None:
                raise FileSystemError(path, FileExistsError(17, "exists"), "create")
            with out:
                size = archive.inflate(
                    member,
                    out,
                    max_compressed=limits.compressed,
                    max_inflated=limits.inflated,
                    seconds=limits.seconds,
                )
        except WheelError as exc:
            return ModuleKernels(member, role, damaged=exc.message)
        except OSError as exc:
            raise FileSystemError(path, exc, "write") from None
        return _facts(member, role, size, path)


def _facts(member: str, role: Role, size: int, path: Path) -> ModuleKernels:
    """The fatbin and the CUDA libraries of the module inflated at ``path``."""
    from envkit.gpu.binaries import elf  # pyelftools: only where a module is read, not its entry

    links = elf.links(path)
    if isinstance(links, elf.Unreadable):
        return ModuleKernels(member, role, size, damaged=links.reason)
    needed = tuple(n for n in links.needed if cudalibs.classify(n) is not None)
    read = fatbin.read(path)
    if isinstance(read, fatbin.Damaged):
        return ModuleKernels(member, role, size, needed=needed, damaged=read.reason)
    if read is None or not read.containers:
        return ModuleKernels(member, role, size, needed=needed)
    held = images(read)
    return ModuleKernels(member, role, size, held.groups, held.entries, needed)


def _torch_cuda(small: dict[str, bytes], filename: str) -> str:
    """torch.version.cuda from ``torch/version.py`` ('' for a CPU build)."""
    return version_cuda(small, filename)
