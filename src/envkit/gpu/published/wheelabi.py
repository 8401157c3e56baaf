"""The torch symbols a published wheel's compiled modules need, and which of them a torch
wheel's libraries define: linkage (:mod:`envkit.gpu.installed.linkage`) checked before install.

:func:`wheel_needs` opens a wheel on its index (by range, or from the disk for a file://
index: :func:`~envkit.index.wheels.open_wheel`) and reads its METADATA. A wheel that does not
require torch is not looked into further: a module linking torch would not load without it,
so a package that does declares it (flash-attn, xformers, torchvision, vLLM). Otherwise each
compiled module (``*.so``) is streamed into a scratch file, read for its NEEDED entries and
its undefined dynamic symbols (:mod:`envkit.gpu.binaries.elf`), and deleted; the torch ones are kept
(:func:`~envkit.gpu.installed.linkage.is_torch_symbol`). :func:`torch_defines` streams torch's
``torch/lib`` libraries the same way, smallest first, and stops as soon as every symbol
asked is found: a wheel that links only c10 and ATen's CPU side never fetches
``libtorch_cuda.so``.

Both answers are kept in envkit's cache under the wheel's sha256 (the same bytes always give
them): a wheel's needs whole, a torch wheel's answers per symbol asked, merged as new ones
are asked. A module that cannot be read is an answer with its reason; a wheel that cannot
be read raises WheelError, an index that cannot be reached NetworkError: no verdict either way.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from envkit.errors import FileSystemError, WheelError
from envkit.gpu.binaries import dynsym, elf
from envkit.gpu.binaries.torchabi import TORCH_LIBRARIES, is_torch_symbol
from envkit.gpu.published.wheelkernels import LIMITS, Limits, shared_object
from envkit.index.wheels import LocalZip, RemoteZip, open_wheel
from envkit.io.atomicfile import create_binary, temporary_folder
from envkit.io.cache import TORCH_DEFINES, TORCH_NEEDS, BadEntry, Fields, is_sha256
from envkit.io.http import Http
from envkit.releases.registry import requirements

MAX_SYMBOLS = 200_000  # torch symbols one wheel's modules need (vLLM 0.8.5's _C: about 1,500)
MAX_LIBRARIES = 64  # torch/lib of torch 2.6.0 has 16 files
# compressed bytes of one wheel's modules fetched in all (vLLM 0.8.5's: 323 MB; torch's
# libraries are bounded per library, and read only until every symbol asked is found)
MAX_WHEEL_MODULES = 4096 * 1024**2
# the torch release in a wheel's local version: flash-attn's +cu12torch2.6cxx11abiFALSE
_BUILT_FOR = re.compile(r"torch([0-9]{1,2})\.?([0-9]{1,2})(?![0-9])")
_defines_lock = threading.Lock()  # one merge of a torch wheel's answers at a time


@dataclass(frozen=True)
class ModuleNeeds:
    """One compiled module of a wheel: whether it names a torch library in NEEDED, the torch
    symbols it leaves undefined, or why it could not be read."""

    member: str
    links_torch: bool = False
    symbols: tuple[str, ...] = ()  # sorted
    damaged: str = ""

    @property
    def needs_torch(self) -> bool:
        return not self.damaged and (self.links_torch or bool(self.symbols))


@dataclass(frozen=True)
class WheelNeeds:
    """What one wheel's compiled modules need of torch (nothing read when it does not
    require torch)."""

    filename: str
    requires_torch: bool
    torch_spec: str  # its metadata's torch specifier ('' when unpinned or not required)
    modules: tuple[ModuleNeeds, ...] = ()

    @property
    def built_for(self) -> str:
        """The torch release its file name says it was built for ('2.6'), or ''."""
        return built_for(self.filename)

    def to_entry(self) -> dict[str, Any]:
        return {
            "wheel": self.filename,
            "requires_torch": self.requires_torch,
            "torch_spec": self.torch_spec,
            "modules": [
                {
                    "member": m.member,
                    "links_torch": m.links_torch,
                    "symbols": list(m.symbols),
                    "damaged": m.damaged,
                }
                for m in self.modules
            ],
        }

    @classmethod
    def from_entry(cls, f: Fields) -> WheelNeeds:
        modules = f.tables("modules")
        if len(modules) > LIMITS.modules:
            raise BadEntry(f"{f.where}.modules lists more than {LIMITS.modules}")
        found = []
        for m in modules:
            if not shared_object(m.text("member")):
                raise BadEntry(f"{m.where}.member is not a wheel's shared object")
            symbols = m.texts("symbols")
            if len(symbols) > MAX_SYMBOLS or not all(map(is_torch_symbol, symbols)):
                raise BadEntry(f"{m.where}.symbols holds names that are not torch's")
            found.append(
                ModuleNeeds(m.text("member"), m.flag("links_torch"), symbols, m.text("damaged"))
            )
        return cls(f.text("wheel"), f.flag("requires_torch"), f.text("torch_spec"), tuple(found))


def built_for(filename: str) -> str:
    """The torch release in a wheel's local version (``+cu12torch2.6cxx11abiFALSE`` ->
    ``2.6``), '' when it names none.

    >>> built_for("flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp312-cp312-linux_x86_64.whl")
    '2.6'
    >>> built_for("xformers-0.0.29.post3-cp312-cp312-manylinux_2_28_x86_64.whl")
    ''
    """
    try:
        version = parse_wheel_filename(filename)[1]
    except InvalidWheelFilename:
        return ""
    found = _BUILT_FOR.search(version.local or "")
    return f"{found.group(1)}.{found.group(2)}" if found else ""


def is_pure(filename: str) -> bool:
    """Whether a wheel's tags say it holds no compiled code for a platform (``none-any``)."""
    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return False
    return all(t.platform == "any" for t in tags)


def wheel_needs(
    url: str,
    filename: str,
    sha256: str,
    http: Http,
    *,
    limits: Limits = LIMITS,
    total: int = MAX_WHEEL_MODULES,
    progress: Callable[[str], None] = lambda _m: None,
) -> WheelNeeds:
    """What the compiled modules of the wheel at ``url`` need of torch (module docstring):
    at most ``limits.modules`` modules, ``total`` compressed bytes in all, each within
    ``limits``. Raises WheelError, NetworkError, FileSystemError."""
    cacheable = is_sha256(sha256)
    if cacheable:
        known = TORCH_NEEDS.load(sha256, WheelNeeds.from_entry)
        if known is not None and known.filename == filename:
            return known
    with open_wheel(url, http) as archive:
        names = sorted(archive.members)
        meta = next(
            (n for n in names if n.endswith(".dist-info/METADATA") and n.count("/") == 1), ""
        )
        small = archive.read([meta]) if meta else {}
        if meta not in small:
            raise WheelError(f"{filename} has no METADATA in its .dist-info folder.")
        wanted, _python = requirements(small[meta].decode("utf-8", "replace"))
        requires = "torch" in wanted
        modules: list[ModuleNeeds] = []
        if requires:
            chosen = [n for n in names if shared_object(n)]
            if len(chosen) > limits.modules:
                raise WheelError(
                    f"{filename} holds {len(chosen)} compiled modules; envkit reads at most "
                    f"{limits.modules} of one wheel."
                )
            size = sum(archive.members[n].compress_size for n in chosen)
            if size > total:
                raise WheelError(
                    f"{filename}'s compiled modules are {size:,} bytes compressed; envkit "
                    f"fetches at most {total:,} of one wheel."
                )
            for member in chosen:
                size = archive.members[member].compress_size
                progress(f"{filename}: {member} ({size / 1e6:.0f} MB)")
                modules.append(_module_needs(archive, member, limits))
    found = WheelNeeds(filename, requires, wanted.get("torch", ""), tuple(modules))
    if cacheable:
        TORCH_NEEDS.store(sha256, found.to_entry())
    return found


def torch_defines(
    url: str,
    filename: str,
    sha256: str,
    wanted: frozenset[str],
    http: Http,
    *,
    limits: Limits = LIMITS,
    progress: Callable[[str], None] = lambda _m: None,
) -> frozenset[str]:
    """Which of ``wanted`` the libraries of the torch wheel at ``url`` (``torch/lib``)
    define. Raises WheelError (a library that cannot be read among them: no answer),
    NetworkError, FileSystemError."""
    cacheable = is_sha256(sha256)
    defined, absent = _known(sha256) if cacheable else (set(), set())
    rest = set(wanted) - defined - absent
    if rest:
        with open_wheel(url, http) as archive:
            libraries = sorted(
                (i for n, i in archive.members.items() if _torch_library(n)),
                key=lambda i: (i.file_size, i.filename),
            )
            if len(libraries) > MAX_LIBRARIES:
                raise WheelError(f"{filename} holds more than {MAX_LIBRARIES} torch libraries.")
            for info in libraries:
                if not rest:
                    break
                progress(f"{filename}: {info.filename} ({info.compress_size / 1e6:.0f} MB)")
                found = _library_defines(archive, info.filename, frozenset(rest), limits)
                if isinstance(found, str):
                    raise WheelError(f"{info.filename} in {filename} cannot be read: {found}.")
                defined |= found
                rest -= found
        absent |= rest
        if cacheable:
            _remember(sha256, set(wanted & defined), set(wanted & absent))
    return frozenset(wanted & defined)


def _known(sha256: str) -> tuple[set[str], set[str]]:
    entry = TORCH_DEFINES.load(sha256, _defines_entry)
    return (set(entry[0]), set(entry[1])) if entry is not None else (set(), set())


def _remember(sha256: str, defined: set[str], absent: set[str]) -> None:
    with _defines_lock:  # the locker's threads may ask of the same torch wheel at once
        known_defined, known_absent = _known(sha256)
        TORCH_DEFINES.store(
            sha256,
            {
                "defined": sorted(known_defined | defined),
                "absent": sorted((known_absent | absent) - defined),
            },
        )


def _defines_entry(f: Fields) -> tuple[tuple[str, ...], tuple[str, ...]]:
    defined, absent = f.texts("defined"), f.texts("absent")
    if len(defined) + len(absent) > 4 * MAX_SYMBOLS:
        raise BadEntry(f"{f.where} holds more answers than envkit asks")
    return defined, absent


def _torch_library(name: str) -> bool:
    return name.startswith("torch/lib/") and name.count("/") == 2 and shared_object(name)


def _inflated(
    archive: RemoteZip | LocalZip, member: str, folder: Path, limits: Limits
) -> Path | str:
    """``member`` streamed into a file in ``folder``, or why it could not be."""
    path = folder / PurePosixPath(member).name  # a plain name: shared_object matched it
    try:
        out = create_binary(path)
        if out is None:
            raise FileSystemError(path, FileExistsError(17, "exists"), "create")
        with out:
            archive.inflate(
                member,
                out,
                max_compressed=limits.compressed,
                max_inflated=limits.inflated,
                seconds=limits.seconds,
            )
    except WheelError as exc:
        return exc.message
    except OSError as exc:
        raise FileSystemError(path, exc, "write") from None
    return path


def _module_needs(archive: RemoteZip | LocalZip, member: str, limits: Limits) -> ModuleNeeds:
    with temporary_folder("kernels") as folder:
        path = _inflated(archive, member, folder, limits)
        if isinstance(path, str):
            return ModuleNeeds(member, damaged=path)
        links, undefined = elf.links(path), dynsym.undefined(path)
    if isinstance(links, elf.Unreadable) or isinstance(undefined, elf.Unreadable):
        why = links if isinstance(links, elf.Unreadable) else undefined
        return ModuleNeeds(member, damaged=str(why))
    symbols = sorted(filter(is_torch_symbol, undefined))
    if len(symbols) > MAX_SYMBOLS:
        return ModuleNeeds(member, damaged=f"more than {MAX_SYMBOLS} torch symbols")
    linked = any(n.startswith(TORCH_LIBRARIES) for n in links.needed)
    return ModuleNeeds(member, linked, tuple(symbols))


def _library_defines(
    archive: RemoteZip | LocalZip, member: str, rest: frozenset[str], limits: Limits
) -> frozenset[str] | str:
    with temporary_folder("kernels") as folder:
        path = _inflated(archive, member, folder, limits)
        if isinstance(path, str):
            return path
        found = dynsym.defines(path, rest)
    return found.reason if isinstance(found, elf.Unreadable) else found


def readable(symbol: str) -> str:
    """A mangled C++ name's qualified name, its arguments left out
    (``_ZN3c1010check_failEPKc...`` -> ``c10::check_fail(...)``); the symbol itself when it is
    not a plain nested name (a C function, a template, an operator), or longer than any
    ELF name envkit reads. Linear in its length.

    >>> readable("_ZN3c1010check_failEPKcRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE")
    'c10::check_fail(...)'
    >>> readable("_ZNK2at10TensorBase4sizeEl"), readable("aoti_torch_get_dtype")
    ('at::TensorBase::size(...) const', 'aoti_torch_get_dtype')
    """
    if not symbol.startswith("_ZN") or len(symbol) > elf.MAX_NAME:
        return symbol
    at, const = 3, False
    while at < len(symbol) and symbol[at] in "rVKRO":
        const = const or symbol[at] == "K"
        at += 1
    parts: list[str] = []
    while at < len(symbol) and symbol[at] != "E":
        if symbol.startswith(("C1", "C2", "D0", "D1", "D2"), at) and parts:
            parts.append(("~" if symbol[at] == "D" else "") + parts[-1])
            at += 2
            continue
        digits = at
        while at < len(symbol) and symbol[at] in "0123456789" and at - digits < 5:
            at += 1
        if at == digits or at + int(symbol[digits:at]) > len(symbol):
            return symbol  # a template, an operator, a substitution: left mangled
        size = int(symbol[digits:at])
        parts.append(symbol[at : at + size])
        at += size
    if at >= len(symbol) or not parts:
        return symbol
    return "::".join(parts) + "(...)" + (" const" if const else "")
