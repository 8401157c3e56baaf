"""Do vLLM's compiled kernels link against the torch installed beside them?

vLLM's extension modules (``vllm/_C.abi3.so`` and its siblings) are built against one torch
build and call into it by symbol: ``c10::``, ``at::`` and ``torch::`` functions whose
mangled names also encode the C++ ABI (``std::string`` is ``Ss`` in the old ABI and
``NSt7__cxx1112basic_string...`` in the new one). When the torch beside them does not define
one of those symbols, ``import vllm._C`` fails with ``undefined symbol`` on the GPU machine,
while ``import vllm`` on a CPU machine only warns. The dynamic symbol tables say it before
anything runs: every undefined torch symbol of each extension must be defined by a library
in ``torch/lib``. Read with pyelftools (section tables and the hash table's lookups only:
about 0.2 s for vLLM 0.8.5 against torch's 1.4 GB of libraries).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.hash import ELFHashSection, GNUHashSection
from elftools.elf.sections import SymbolTableSection

from envkit.findings import Finding, Severity

# the namespaces whose symbols torch's own libraries define (c10, at, torch; const members too)
TORCH_SYMBOLS = ("_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch")
MAX_EXTENSIONS = 64  # vLLM ships a handful; more is not a vLLM package
MAX_SYMBOLS = 200_000  # per library's dynamic table, read only without a hash table


@dataclass(frozen=True)
class Linkage:
    extensions: tuple[str, ...]  # the extension modules read, relative to the package
    needed: int  # distinct torch symbols they need
    missing: tuple[tuple[str, str], ...]  # (extension, symbol) torch's libraries lack
    libraries: tuple[str, ...]  # torch/lib files that were searched
    unreadable: str = ""  # why it could not be decided ('' when it was)

    @property
    def links(self) -> bool:
        return not self.missing and not self.unreadable

    def problem(self) -> str:
        """One sentence on what does not link ('' when all does), for verify and doctor."""
        if not self.missing:
            return ""
        where, symbol = self.missing[0]
        more = f" and {len(self.missing) - 1} more" if len(self.missing) > 1 else ""
        return (
            f"vllm/{where} needs {symbol}{more}, which no library in torch/lib defines: "
            "vLLM's kernels fail to load there (undefined symbol); another torch version or "
            "build (C++ ABI, CUDA) than vLLM was built with is installed"
        )


def linkage_on(sys_path: Iterable[object], package: str = "vllm") -> Linkage | None:
    """The linkage of ``package``'s extensions against the torch that ``sys_path`` (as the
    facts probe reports it) imports first; None when either is absent or the package has no
    extension modules."""
    entries = [str(entry) for entry in sys_path]
    home = _first(entries, Path(package) / "__init__.py")
    torch = _first(entries, Path("torch") / "lib")
    if home is None or torch is None:
        return None
    return linkage(home / package, torch / "torch" / "lib")


def linkage(package: Path, torch_lib: Path) -> Linkage | None:
    """Every extension module under ``package`` against the libraries in ``torch_lib``;
    None without extension modules. A file that cannot be read is an ``unreadable`` answer."""
    extensions = sorted(package.rglob("*.so"))[:MAX_EXTENSIONS]
    if not extensions:
        return None
    names = tuple(str(p.relative_to(package)) for p in extensions)
    libraries = sorted(p for p in torch_lib.glob("*.so*") if p.is_file())
    shown = tuple(p.name for p in libraries)
    try:
        needs = {str(p.relative_to(package)): _undefined(p) for p in extensions}
        wanted = set().union(*needs.values())
        defined: set[str] = set()
        for lib in libraries:
            defined |= _defined(lib, wanted - defined)
    except (OSError, ELFError, ValueError, KeyError, AssertionError) as exc:
        reason = f"{type(exc).__name__}: {exc}"[:200]
        return Linkage(names, 0, (), shown, unreadable=reason)
    missing = tuple(
        (ext, symbol) for ext, symbols in needs.items() for symbol in sorted(symbols - defined)
    )
    return Linkage(names, len(wanted), missing, shown)


def _first(sys_path: list[str], marker: Path) -> Path | None:
    for entry in sys_path:
        if entry and (Path(entry) / marker).exists():
            return Path(entry)
    return None


def _undefined(path: Path) -> set[str]:
    """The torch symbols an extension needs (strong undefined entries of .dynsym)."""
    with path.open("rb") as handle:
        table = ELFFile(handle).get_section_by_name(".dynsym")
        if not isinstance(table, SymbolTableSection):
            return set()
        return {
            s.name
            for s in table.iter_symbols()
            if s["st_shndx"] == "SHN_UNDEF"
            and s["st_info"]["bind"] != "STB_WEAK"
            and s.name.startswith(TORCH_SYMBOLS)
        }


def _defined(path: Path, wanted: set[str]) -> set[str]:
    """Which of ``wanted`` the library defines, through its hash table when it has one."""
    if not wanted:
        return set()
    with path.open("rb") as handle:
        elf = ELFFile(handle)
        lookup = elf.get_section_by_name(".gnu.hash") or elf.get_section_by_name(".hash")
        if isinstance(lookup, (GNUHashSection, ELFHashSection)):
            found = {name: lookup.get_symbol(name) for name in wanted}
            return {n for n, s in found.items() if s is not None and s["st_shndx"] != "SHN_UNDEF"}
        table = elf.get_section_by_name(".dynsym")
        if not isinstance(table, SymbolTableSection):
            return set()
        out = set()
        for index, symbol in enumerate(table.iter_symbols()):
            if index > MAX_SYMBOLS:
                raise ValueError(f"{path.name} has more than {MAX_SYMBOLS} dynamic symbols")
            if symbol.name in wanted and symbol["st_shndx"] != "SHN_UNDEF":
                out.add(symbol.name)
        return out


def findings(sys_path: Iterable[object]) -> list[Finding]:
    """doctor's findings: vLLM's kernels against the torch the interpreter imports."""
    linked = linkage_on(sys_path)
    if linked is None or linked.links:
        return []
    if linked.unreadable:
        return [Finding(severity=Severity.WARNING, code="kernels-not-checked", message=(
            f"vLLM's extension modules could not be read: {linked.unreadable}"))]  # fmt: skip
    return [Finding(code="kernels-do-not-link", message=linked.problem(), fix=(
        "install the torch version vLLM pins from the default index, or rebuild: "
        "envkit build PROFILE"))]  # fmt: skip
