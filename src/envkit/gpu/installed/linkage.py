"""Do the compiled extension modules link against the torch installed beside them?

vLLM's extension modules (``vllm/_C.abi3.so`` and its siblings), and those of every other
package built against torch (flash-attn, flashinfer, xformers, sgl-kernel...), call into one
torch build by symbol: ``c10::``, ``at::`` and ``torch::`` functions whose mangled names
also encode the C++ ABI (``std::string`` is ``Ss`` in the old ABI and
``NSt7__cxx1112basic_string...`` in the new one), and, for modules built on torch's stable
ABI (vLLM 0.33.0's ``_C_stable_libtorch.abi3.so``), C functions: the ``aoti_torch_*`` shims
and the ``torch_*`` ones (88 of them there, and no C++ symbol at all). When the torch beside
them does not define one, ``import vllm._C`` fails with ``undefined symbol`` on the GPU
machine, while ``import vllm`` on a CPU machine only warns. The dynamic symbol tables say it
before anything runs: every undefined torch symbol of each extension must be defined by a
library in ``torch/lib``, looked up through the libraries' hash tables as the dynamic loader
does (``envkit.gpu.binaries.elf``: every chain step counted, so a damaged table is a "damaged
library"
answer, never a hang).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envkit.gpu.binaries import dynsym, elf
from envkit.gpu.binaries.filecache import FileCache
from envkit.gpu.binaries.torchabi import is_torch_symbol
from envkit.gpu.installed import modules

MAX_EXTENSIONS = 64  # vLLM ships a handful; more is not a vLLM package


@dataclass(frozen=True)
class PackageLinkage:
    """One package's extension modules that link torch, against torch/lib."""

    package: str  # vllm, flash_attn, xformers...
    modules: tuple[str, ...]  # relative to site-packages
    symbols: int  # distinct torch symbols they need (C++ and stable C ABI)
    missing: tuple[tuple[str, str], ...]  # (module, symbol) no torch library defines
    unreadable: tuple[tuple[str, str], ...] = ()  # (module or library, why)
    other_torch: tuple[tuple[str, str], ...] = ()  # (module, the torch release it is for)

    @property
    def links(self) -> bool:
        return not self.missing and not self.unreadable


@dataclass(frozen=True)
class SiteLinkage:
    """Every package of a site-packages whose modules link torch, checked against torch/lib."""

    libraries: tuple[str, ...]  # torch/lib files searched
    packages: tuple[PackageLinkage, ...]
    truncated: str = ""  # a cap that cut the walk of site-packages short

    @property
    def links(self) -> bool:
        return all(p.links for p in self.packages) and not self.truncated


def site_linkage(
    site_packages: Path, cache: FileCache | None = None, walk: modules.Walk | None = None
) -> SiteLinkage | None:
    """Every package under ``site_packages`` with an extension module that links torch
    (NEEDED libtorch*/libc10*), each such module's torch symbols checked against
    ``torch/lib``; None when there is no torch/lib there. A package's files that cannot be
    read, and torch libraries whose tables do not hold together, are its ``unreadable``; a
    module whose name says it is for another torch release than the installed one
    (``..._torch24-cpu.so`` beside torch 2.14, loaded only by that release) is set aside in
    ``other_torch``. ``walk`` is the site's modules when the caller has them already."""
    cache = cache or FileCache()
    torch_lib = site_packages / "torch" / "lib"
    if not torch_lib.is_dir():
        return None
    walk = walk or modules.extension_modules(site_packages, cache)
    libraries = sorted(p for p in torch_lib.glob("*.so*") if p.is_file())
    # a package links torch when a module names a torch library; vLLM's modules are always
    # read (one that leaves torch's libraries out of NEEDED still needs their symbols)
    linking = {m.package for m in walk.modules if m.links_torch or m.package == "vllm"}
    installed = modules.torch_release(site_packages)
    members: dict[str, list[str]] = {}
    needs: dict[str, frozenset[str]] = {}
    unreadable: dict[str, list[tuple[str, str]]] = {}
    other: dict[str, list[tuple[str, str]]] = {}
    for module in walk.modules:
        if module.package not in linking:
            continue
        if tagged := modules.for_other_torch(module.path.name, installed):
            other.setdefault(module.package, []).append((module.relative, tagged))
            continue
        symbols = cache.get(module.path, dynsym.undefined)
        if isinstance(module.links, elf.Unreadable) or isinstance(symbols, elf.Unreadable):
            why = module.links if isinstance(module.links, elf.Unreadable) else symbols
            unreadable.setdefault(module.package, []).append((module.relative, str(why)))
            continue
        wanted = frozenset(filter(is_torch_symbol, symbols))
        if module.links_torch or wanted:  # a module of pure C needs nothing of torch
            members.setdefault(module.package, []).append(module.relative)
            needs[module.relative] = wanted
    defined, damaged = _defined(libraries, frozenset().union(*needs.values()), cache)
    packages = []
    for name in sorted(linking):
        mine = members.get(name, [])
        wanted = frozenset().union(*(needs[m] for m in mine))
        missing = [(m, symbol) for m in mine for symbol in sorted(needs[m] - defined)]
        packages.append(
            PackageLinkage(
                package=name,
                modules=tuple(mine),
                symbols=len(wanted),
                missing=() if damaged else tuple(missing),
                unreadable=tuple(unreadable.get(name, []) + (damaged if wanted else [])),
                other_torch=tuple(other.get(name, [])),
            )
        )
    shown = tuple(p.name for p in libraries)
    return SiteLinkage(shown, tuple(packages), walk.truncated)


def _defined(
    libraries: list[Path], wanted: frozenset[str], cache: FileCache
) -> tuple[set[str], list[tuple[str, str]]]:
    """Which of ``wanted`` the libraries define, and the libraries that could not be read
    (as ``torch/lib/NAME``, why)."""
    defined: set[str] = set()
    damaged: list[tuple[str, str]] = []
    for lib in libraries:
        rest = wanted - defined
        if not rest:
            break

        def lookup(path: Path, rest: frozenset[str] = rest) -> frozenset[str] | elf.Unreadable:
            return dynsym.defines(path, rest)

        found = cache.get(lib, lookup, key=f":{hash(rest)}")
        if isinstance(found, elf.Unreadable):
            damaged.append((f"torch/lib/{lib.name}", f"damaged library: {found}"))
        else:
            defined |= found
    return defined, damaged
