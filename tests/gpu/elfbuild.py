"""Tiny shared objects compiled once per test process with the system's g++, in the shapes
real wheels have: torch's libraries (libc10.so defining a c10 function, libtorch_cpu.so the
stable C ABI's shims), CUDA runtime stubs with their sonames (libcudart.so.12 / .so.13), and
extension modules that need them (NEEDED entries, undefined c10 and stable-ABI symbols).

Each compile's output is kept in a folder of the machine's (``compiled``), named by the
sha256 of all that decides it: the compiler's and linker's versions, the source, the output's
name and the flags, with each file or folder a flag names (``-L``, a version script) by its
content. g++ and ld are deterministic, so the copy given is byte for byte what g++ writes
for that input; only the first run on a machine (and each xdist worker's share of it) pays
for the compiles."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import platformdirs
import pytest
from elftools.elf.elffile import ELFFile

CXX = shutil.which("g++") or shutil.which("c++")
needs_cxx = pytest.mark.skipif(
    CXX is None or shutil.which("objcopy") is None, reason="no g++ and objcopy on this machine"
)

# c10::check_fail(const char*, const std::string&) in the new C++ ABI, named by its mangled
# name (an asm label), so that no header is parsed: each stub compiles in about 0.1 s
CHECK_FAIL = "_ZN3c1010check_failEPKcRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
C10 = f'extern "C" void check_fail() __asm__("{CHECK_FAIL}");\nextern "C" void check_fail() {{}}\n'
# the stable ABI's shims as torch 2.14's libtorch_cpu.so defines them (C functions)
STABLE_NAMES = ("aoti_torch_get_device_index", "aoti_torch_get_dtype", "torch_list_size")
STABLE = "".join(f'extern "C" int {name}() {{ return 0; }}\n' for name in STABLE_NAMES)
CUDART = 'extern "C" int cudaGetDeviceCount() { return 0; }\n'
USES_C10 = (
    f'extern "C" void check_fail() __asm__("{CHECK_FAIL}");\n'
    'extern "C" void init_kernels() { check_fail(); }\n'
)
USES_STABLE = (
    "".join(f'extern "C" int {name}();\n' for name in STABLE_NAMES)
    + 'extern "C" int init_stable() { return '
    + " + ".join(f"{name}()" for name in STABLE_NAMES)
    + "; }\n"
)
USES_CUDART = (
    'extern "C" int cudaGetDeviceCount();\nextern "C" int gpus() { return cudaGetDeviceCount(); }\n'
)


def compile_so(source: str, out: Path, *flags: str) -> Path:
    """A shared object from C++ ``source``, linked with ``flags``: g++'s output for them,
    from the machine's cache when g++ has made it before (see the module)."""
    assert CXX is not None
    out.parent.mkdir(parents=True, exist_ok=True)
    key = _key(source, out.name, flags)
    kept = CACHE / key[:2] / key
    if not kept.is_file():
        _compile(source, out, flags)
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            part = kept.with_name(f"{key}.{os.getpid()}.part")
            shutil.copyfile(out, part)
            os.replace(part, kept)  # whole or absent: xdist workers share the folder
        except OSError:
            pass  # a cache that cannot be written only costs the next run its compiles
        return out
    shutil.copyfile(kept, out)
    return out


CACHE = Path(platformdirs.user_cache_dir("envkit-tests")) / "elf"


def _compile(source: str, out: Path, flags: tuple[str, ...]) -> None:
    assert CXX is not None
    src = out.parent / (out.name + ".cpp")
    src.write_text(source)
    subprocess.run([CXX, "-shared", "-fPIC", str(src), "-o", str(out), *flags], check=True)
    src.unlink()


@cache
def _toolchain() -> str:
    """The compiler's and the linker's versions (what else decides g++'s output)."""
    assert CXX is not None

    def said(*argv: str) -> str:
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    linker = said(CXX, "-print-prog-name=ld").strip()
    return f"{CXX}\n{said(CXX, '--version')}\n{linker}\n{said(linker, '--version')}"


def _named(path: Path) -> str:
    """The content of a file, or of every file in a folder by its name, as a digest."""
    digest = hashlib.sha256()
    for each in sorted(path.rglob("*")) if path.is_dir() else [path]:
        if each.is_file():
            digest.update(f"{each.relative_to(path) if each != path else ''}\0".encode())
            digest.update(hashlib.sha256(each.read_bytes()).digest())
    return digest.hexdigest()


def _key(source: str, name: str, flags: tuple[str, ...]) -> str:
    digest = hashlib.sha256(f"{_toolchain()}\0{source}\0{name}\0".encode())
    for flag in flags:
        head, _, tail = ("-L", "", flag[2:]) if flag.startswith("-L") else flag.rpartition("=")
        if head and tail.startswith("/") and Path(tail).exists():
            flag = f"{head}={_named(Path(tail))}"  # where it is does not matter, only what
        digest.update(f"{flag}\0".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class Built:
    root: Path
    libc10: Path  # GNU hash (the toolchain's default)
    libc10_sysv: Path  # the same with only a SysV .hash
    libtorch_cpu: Path  # the stable ABI's shims
    cudart12: Path  # soname libcudart.so.12
    cudart13: Path  # soname libcudart.so.13
    ext_c10: Path  # needs c10::check_fail; NEEDED libc10.so, libcudart.so.12
    ext_stable: Path  # needs the stable ABI only; NEEDED libtorch_cpu.so, libcudart.so.13
    plain: Path  # links nothing of torch or CUDA


@cache
def built() -> Built:
    """Every stub, compiled once per process into a folder removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="envkit-gpu-"))
    atexit.register(shutil.rmtree, root, True)
    libs = root / "lib"
    cudart12 = compile_so(CUDART, libs / "libcudart.so.12", "-Wl,-soname,libcudart.so.12")
    cudart13 = compile_so(CUDART, libs / "libcudart.so.13", "-Wl,-soname,libcudart.so.13")
    libc10 = compile_so(C10, libs / "libc10.so", "-Wl,--hash-style=gnu")
    sysv = compile_so(C10, root / "sysv" / "libc10.so", "-Wl,--hash-style=sysv")
    cpu = compile_so(STABLE, libs / "libtorch_cpu.so", "-Wl,--hash-style=gnu")
    link = (f"-L{libs}", "-Wl,--no-as-needed")
    ext_c10 = compile_so(
        USES_C10 + USES_CUDART, root / "ext" / "_C.abi3.so", *link, "-lc10", "-l:libcudart.so.12"
    )
    ext_stable = compile_so(
        USES_STABLE + USES_CUDART,
        root / "ext" / "_C_stable_libtorch.abi3.so",
        *link,
        "-ltorch_cpu",
        "-l:libcudart.so.13",
    )
    plain = compile_so('extern "C" int nothing() { return 0; }\n', root / "ext" / "plain.so")
    return Built(root, libc10, sysv, cpu, cudart12, cudart13, ext_c10, ext_stable, plain)


def section(path: Path, name: str) -> tuple[int, int]:
    """(offset, size) of a section in the file."""
    with path.open("rb") as handle:
        found = ELFFile(handle).get_section_by_name(name)
        assert found is not None, name
        return int(found["sh_offset"]), int(found["sh_size"])


def loop_sysv_chain(library: Path, out: Path) -> Path:
    """A copy of a SysV-hashed library whose every bucket leads into a chain that points
    at itself: the dynamic loader's walk (and pyelftools') never ends."""
    data = bytearray(library.read_bytes())
    at, _ = section(library, ".hash")
    nbuckets, nchains = struct.unpack_from("<II", data, at)
    for bucket in range(nbuckets):
        struct.pack_into("<I", data, at + 8 + 4 * bucket, 1)
    struct.pack_into("<I", data, at + 8 + 4 * nbuckets + 4, 1)  # chain[1] = 1
    assert nchains > 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(bytes(data))
    return out


def endless_gnu_chain(library: Path, out: Path) -> Path:
    """A copy of a GNU-hashed library whose chains have no last entry (no odd hash), and
    whose bloom filter lets every name through."""
    data = bytearray(library.read_bytes())
    at, size = section(library, ".gnu.hash")
    nbuckets, symoffset, bloom_size, _shift = struct.unpack_from("<IIII", data, at)
    for word in range(bloom_size):
        struct.pack_into("<Q", data, at + 16 + 8 * word, 2**64 - 1)
    buckets = at + 16 + 8 * bloom_size
    for bucket in range(nbuckets):
        struct.pack_into("<I", data, buckets + 4 * bucket, symoffset)
    for chained in range(buckets + 4 * nbuckets, at + size - 3, 4):
        struct.pack_into("<I", data, chained, 2)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(bytes(data))
    return out
