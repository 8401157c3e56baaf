"""vLLM's compiled kernels against the torch beside them, on tiny shared objects compiled
here with the system's C++ compiler: an extension that needs a c10 function and a torch
library that does (or does not) define it, in the same or the other C++ ABI."""

from __future__ import annotations

import shutil
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.gpu.binaries.torchabi import is_torch_symbol
from envkit.gpu.installed.linkage import PackageLinkage, site_linkage

import elfbuild
from helpers import envkit

CXX = shutil.which("g++") or shutil.which("c++")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++) on this machine")

# the shape of vLLM's use of torch: a c10 function taking a std::string
LIBRARY = (
    "namespace c10 { void check_fail(const char* f, const std::string& m) { (void)f; (void)m; } }\n"
)
EXTENSION = (
    "namespace c10 { void check_fail(const char* f, const std::string& m); }\n"
    'extern "C" void init_kernels() { c10::check_fail("f", "m"); }\n'
)


def compile_so(source: str, out: Path, *, abi: int = 1) -> Path:
    """A shared object from C++ ``source`` (with <string>), built for C++ ABI ``abi``
    (g++'s output, kept across runs by elfbuild)."""
    return elfbuild.compile_so(
        "#include <string>\n" + source, out, f"-D_GLIBCXX_USE_CXX11_ABI={abi}"
    )


def site(root: Path, *, extension_abi: int = 0, torch_abi: int = 0, defines: bool = True) -> Path:
    """A site-packages folder with vllm/_C.abi3.so and torch/lib/libc10.so."""
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    compile_so(EXTENSION, root / "vllm" / "_C.abi3.so", abi=extension_abi)
    library = LIBRARY if defines else "namespace c10 { void other() {} }\n"
    compile_so(library, root / "torch" / "lib" / "libc10.so", abi=torch_abi)
    return root


def vllm_of(root: Path) -> PackageLinkage:
    found = site_linkage(root)
    assert found is not None
    (vllm,) = [p for p in found.packages if p.package == "vllm"]
    return vllm


@needs_cxx
def test_kernels_that_link(tmp_path: Path) -> None:
    found = site_linkage(site(tmp_path / "sp"))
    assert found is not None and found.links and found.libraries == ("libc10.so",)
    vllm = vllm_of(tmp_path / "sp")
    assert vllm.modules == ("vllm/_C.abi3.so",) and vllm.symbols == 1


@needs_cxx
@pytest.mark.parametrize(
    ("extension_abi", "torch_abi", "defines"),
    [(0, 1, True), (1, 0, True), (0, 0, False)],
    ids=["old-abi-kernels-new-abi-torch", "new-abi-kernels-old-abi-torch", "symbol-gone"],
)
def test_kernels_that_do_not_link(
    tmp_path: Path, extension_abi: int, torch_abi: int, defines: bool
) -> None:
    """The failure behind 'undefined symbol' in vllm/_C.abi3.so: torch 2.6.0's CUDA 12.6
    build (new ABI) under vLLM 0.8.5 (old ABI), or a torch that dropped the function."""
    root = site(tmp_path, extension_abi=extension_abi, torch_abi=torch_abi, defines=defines)
    found = vllm_of(root)
    assert not found.links and not found.unreadable
    ((where, symbol),) = found.missing
    assert where == "vllm/_C.abi3.so" and symbol.startswith("_ZN3c1010check_fail")
    assert ("Ss" in symbol) == (extension_abi == 0)  # the old ABI's std::string


def test_nothing_to_link_and_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    assert site_linkage(tmp_path) is None  # no torch/lib: nothing to link against
    (tmp_path / "torch" / "lib").mkdir(parents=True)
    found = site_linkage(tmp_path)
    assert found is not None and found.packages == ()  # pure Python: no extension modules
    (tmp_path / "vllm" / "_C.abi3.so").write_bytes(b"\x7fELF" + b"\0" * 12 + b"not elf")
    damaged = vllm_of(tmp_path)
    assert damaged.unreadable and not damaged.links


@needs_cxx
def test_verify_and_doctor_fail_a_venv_whose_kernels_do_not_link(built_copy: Path) -> None:
    """In a built venv, vllm gains an extension and torch a library of the other C++ ABI:
    verify and doctor say so (exit 1) with the symbol, and pass again once they match."""
    project = built_copy
    sp = next((project / ".venv" / "lib").glob("python3*/site-packages"))
    compile_so(EXTENSION, sp / "vllm" / "_C.abi3.so", abi=0)
    compile_so(LIBRARY, sp / "torch" / "lib" / "libc10.so", abi=1)
    res = envkit("verify", "good", "--json", cwd=project)
    assert res.code == 1
    (check,) = [c for c in res.json()["checks"] if c["kind"] == "kernels"]
    assert check["status"] == "fail" and "_ZN3c1010check_fail" in check["detail"]
    assert "envkit build good" in check["fix"]
    diagnosis = envkit("doctor", "--venv", ".venv", "--json", cwd=project)
    assert diagnosis.code == 1
    (finding,) = [f for f in diagnosis.json()["findings"] if f["code"] == "kernels-do-not-link"]
    assert finding["severity"] == "error" and "vllm/_C.abi3.so needs" in finding["message"]
    compile_so(LIBRARY, sp / "torch" / "lib" / "libc10.so", abi=0)
    diagnosis = envkit("doctor", "--venv", ".venv", "--json", cwd=project)
    assert not [f for f in diagnosis.json()["findings"] if f["code"].startswith("kernels")]
    res = envkit("verify", "good", "--json", cwd=project)
    res.assert_ok()
    (check,) = [c for c in res.json()["checks"] if c["kind"] == "kernels"]
    assert check["status"] == "pass" and "needs 1 torch symbol" in check["found"]


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(tail=st.binary(max_size=400), elf_class=st.sampled_from([b"\x01", b"\x02", b"\x09"]))
def test_any_bytes_as_an_extension_are_one_answer(
    tmp_path: Path, tail: bytes, elf_class: bytes
) -> None:
    """Whatever an extension module's bytes are (a damaged download, another format), the
    answer is a SiteLinkage, never an exception."""
    package = tmp_path / "vllm"
    package.mkdir(exist_ok=True)
    (package / "_C.abi3.so").write_bytes(b"\x7fELF" + elf_class + b"\x01\x01" + tail)
    (tmp_path / "torch" / "lib").mkdir(parents=True, exist_ok=True)
    found = site_linkage(tmp_path)
    assert found is not None
    assert all(p.links or p.unreadable or p.missing for p in found.packages)


@needs_cxx
def test_a_damaged_extension_is_one_answer(tmp_path: Path) -> None:
    """Real shared objects with bytes overwritten anywhere: a SiteLinkage, never an exception."""
    import random

    root = site(tmp_path / "sp")
    good = (root / "vllm" / "_C.abi3.so").read_bytes()
    rng = random.Random(20261130)
    for _ in range(300):
        data = bytearray(good)
        for _flip in range(rng.randint(1, 6)):
            # the ELF header, the section headers at the end, or anywhere
            at = rng.choice(
                [rng.randrange(64), len(data) - rng.randrange(1, 2000), rng.randrange(len(data))]
            )
            data[at : at + 2] = rng.randbytes(2)
        (root / "vllm" / "_C.abi3.so").write_bytes(bytes(data))
        assert site_linkage(root) is not None


# --- torch's stable C ABI, damaged hash tables, every package that links torch ---------

# c10::check_fail(const char*, const std::string&) in the new C++ ABI, by its mangled name (an
# asm label: no header to parse, each stub builds in about 0.1 s)
CHECK_FAIL = "_ZN3c1010check_failEPKcRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
SHIMS = ("aoti_torch_get_device_index", "aoti_torch_get_dtype", "torch_list_size")


def uses(*names: str) -> str:
    """C++ that calls ``names`` (C functions, or CHECK_FAIL by its label), left undefined."""
    lines = [f'extern "C" void f{i}() __asm__("{name}");' for i, name in enumerate(names)]
    calls = " ".join(f"f{i}();" for i in range(len(names)))
    return "\n".join([*lines, f'extern "C" void init_module() {{ {calls} }}', ""])


def defines(*names: str) -> str:
    return "".join(
        f'extern "C" void d{i}() __asm__("{name}");\nextern "C" void d{i}() {{}}\n'
        for i, name in enumerate(names)
    )


def torch_lib(root: Path, *, shims: bool = True, hash_style: str = "gnu") -> Path:
    """torch/lib with libc10.so (c10::check_fail) and libtorch_cpu.so (the stable ABI's
    shims, or nothing of them)."""
    lib = root / "torch" / "lib"
    elfbuild.compile_so(defines(CHECK_FAIL), lib / "libc10.so", f"-Wl,--hash-style={hash_style}")
    elfbuild.compile_so(defines(*SHIMS) if shims else "int other;\n", lib / "libtorch_cpu.so")
    return lib


def module(
    out: Path, lib: Path, *names: str, needs: tuple[str, ...] = ("c10", "torch_cpu")
) -> Path:
    link = [f"-L{lib}", "-Wl,--no-as-needed", *(f"-l{n}" for n in needs)]
    return elfbuild.compile_so(uses(*names), out, *link, "-Wl,--unresolved-symbols=ignore-all")


@needs_cxx
def test_the_stable_abi_is_torchs_too(tmp_path: Path) -> None:
    """vLLM 0.33.0's _C_stable_libtorch.abi3.so needs 88 torch symbols, all of the stable C
    ABI (aoti_torch_*, torch_*) and none of C++: counted, and checked like the rest."""
    lib = torch_lib(tmp_path)
    (tmp_path / "vllm" / "__init__.py").parent.mkdir(parents=True)
    module(tmp_path / "vllm" / "_C_stable_libtorch.abi3.so", lib, *SHIMS)
    assert lib == tmp_path / "torch" / "lib"
    found = vllm_of(tmp_path)
    assert found.links and found.symbols == 3
    torch_lib(tmp_path / "old", shims=False)
    shutil.copytree(tmp_path / "vllm", tmp_path / "old" / "vllm")
    old = vllm_of(tmp_path / "old")
    assert not old.links
    assert sorted(symbol for _, symbol in old.missing) == sorted(SHIMS)


@pytest.mark.parametrize(
    ("name", "torch"),
    [
        (CHECK_FAIL, True),
        ("_ZNK3c106Device3strB5cxx11Ev", True),
        ("_ZTIN3c109ErrorE", True),  # typeinfo for c10::Error
        ("_ZTVN5torch8autograd4NodeE", True),  # a vtable
        ("_ZN3c10lsERSoNS_10DeviceTypeE", True),  # c10::operator<<
        ("_ZN2at4_ops5empty4callEv", True),
        ("_ZThn8_N6caffe25Error4whatEv", True),  # a thunk
        ("aoti_torch_new_tensor_handle", True),
        ("torch_library_impl", True),
        ("THPVariableClass", True),
        ("_ZNSt13runtime_errorC1EPKc", False),  # std::, though torch's libraries export it
        ("_ZdlPvm", False),
        ("cudaLaunchKernel", False),
        ("_ZN3c1", False),
    ],
)
def test_which_symbols_are_torchs(name: str, torch: bool) -> None:
    assert is_torch_symbol(name) is torch


def finish_within(seconds: float, work: Callable[[], object]) -> object:
    """``work()``'s answer, failing the test (not hanging it) if it takes longer."""
    answer: list[object] = []
    thread = threading.Thread(target=lambda: answer.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still working after {seconds} s"
    return answer[0]


@needs_cxx
@pytest.mark.parametrize("style", ["sysv", "gnu"])
def test_a_hash_chain_that_loops_is_a_damaged_library(tmp_path: Path, style: str) -> None:
    """libc10.so whose hash chain points at itself (.hash) or has no last entry
    (.gnu.hash): pyelftools' lookup never returns; this one says 'damaged library' at once."""
    lib = torch_lib(tmp_path, hash_style=style)
    (tmp_path / "vllm").mkdir()
    module(tmp_path / "vllm" / "_C.abi3.so", lib, CHECK_FAIL)
    data = bytearray((lib / "libc10.so").read_bytes())
    with (lib / "libc10.so").open("rb") as handle:
        table = ELFFile(handle).get_section_by_name(".hash" if style == "sysv" else ".gnu.hash")
        assert table is not None
        at, size = int(table["sh_offset"]), int(table["sh_size"])
    if style == "sysv":
        (nbuckets,) = struct.unpack_from("<I", data, at)
        for bucket in range(nbuckets):
            struct.pack_into("<I", data, at + 8 + 4 * bucket, 1)
        struct.pack_into("<I", data, at + 8 + 4 * nbuckets + 4, 1)  # chain[1] = 1
    else:
        nbuckets, symoffset, bloom, _ = struct.unpack_from("<IIII", data, at)
        for word in range(bloom):
            struct.pack_into("<Q", data, at + 16 + 8 * word, 2**64 - 1)
        buckets = at + 16 + 8 * bloom
        for bucket in range(nbuckets):
            struct.pack_into("<I", data, buckets + 4 * bucket, symoffset)
        for chained in range(buckets + 4 * nbuckets, at + size - 3, 4):
            struct.pack_into("<I", data, chained, 2)  # even: no chain ever ends
    (lib / "libc10.so").write_bytes(bytes(data))
    found = finish_within(10, lambda: vllm_of(tmp_path))
    assert isinstance(found, PackageLinkage) and not found.links and not found.missing
    ((where, why),) = found.unreadable
    assert where == "torch/lib/libc10.so" and why.startswith("damaged library")
    assert ("loops" if style == "sysv" else "runs past the symbol table") in why


@needs_cxx
def test_every_package_that_links_torch(tmp_path: Path) -> None:
    """vLLM, a top-level flash-attn module (named by its RECORD), and a module that links
    torch and truly needs none of its symbols (vLLM's cumem_allocator): each package says
    how many modules and symbols were checked; a module that names no torch library in
    NEEDED is not one of them, and a file of a torch-linking package that cannot be read is
    said as such."""
    lib = torch_lib(tmp_path)
    module(tmp_path / "vllm" / "_C.abi3.so", lib, CHECK_FAIL, SHIMS[0])
    module(tmp_path / "vllm" / "cumem_allocator.abi3.so", lib)
    (tmp_path / "vllm" / "broken.so").write_bytes(b"\x7fELF" + bytes(100))
    flash = "flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so"
    module(tmp_path / flash, lib, *SHIMS, "_ZN3c10missingEv")
    (tmp_path / "flash_attn-2.8.3.dist-info").mkdir()
    (tmp_path / "flash_attn-2.8.3.dist-info" / "RECORD").write_text(f"{flash},sha256=x,1\n")
    module(tmp_path / "numpy" / "core.so", lib, "memcpy", needs=())  # nothing of torch
    site = site_linkage(tmp_path)
    assert site is not None and not site.links and not site.truncated
    counted = {p.package: (p.modules, p.symbols, p.missing) for p in site.packages}
    assert counted == {
        "flash_attn": ((flash,), 4, ((flash, "_ZN3c10missingEv"),)),
        "vllm": (("vllm/_C.abi3.so", "vllm/cumem_allocator.abi3.so"), 2, ()),
    }
    ((where, why),) = next(p for p in site.packages if p.package == "vllm").unreadable
    assert where == "vllm/broken.so" and "not a readable ELF file" in why
    assert site.libraries == ("libc10.so", "libtorch_cpu.so")
    assert site_linkage(tmp_path / "numpy") is None  # no torch/lib there


@needs_cxx
def test_modules_for_another_torch_release_are_set_aside(tmp_path: Path) -> None:
    """torch-c-dlpack-ext ships one addon per torch release (..._torch24-cpu.so up to
    _torch29) and loads the installed release's: the others are not checked against it."""
    lib = torch_lib(tmp_path)
    (tmp_path / "torch" / "version.py").write_text("__version__ = '2.6.0+cu124'\ncuda = '12.4'\n")
    pkg = tmp_path / "torch_c_dlpack_ext"
    module(pkg / "libtorch_c_dlpack_addon_torch24-cpu.so", lib, "_ZN3c10goneEv")
    module(pkg / "libtorch_c_dlpack_addon_torch26-cpu.so", lib, CHECK_FAIL)
    site = site_linkage(tmp_path)
    assert site is not None and site.links
    (linked,) = site.packages
    assert linked.modules == ("torch_c_dlpack_ext/libtorch_c_dlpack_addon_torch26-cpu.so",)
    assert linked.other_torch == (
        ("torch_c_dlpack_ext/libtorch_c_dlpack_addon_torch24-cpu.so", "2.4"),
    )


@needs_cxx
def test_a_gnu_hash_whose_chains_no_bucket_reaches_are_left_out(tmp_path: Path) -> None:
    """torch 2.14's libtorch_global_deps.so: a .gnu.hash of one empty bucket and no chains,
    though its symbol offset leaves four symbols after it. Valid: nothing is defined."""
    (tmp_path / "hidden.map").write_text("{ local: *; };\n")
    lib = elfbuild.compile_so(
        'extern "C" void f(); extern "C" void g() { f(); }\n',
        tmp_path / "torch" / "lib" / "libtorch_global_deps.so",
        f"-Wl,--version-script={tmp_path / 'hidden.map'}",
        "-Wl,--hash-style=gnu",
    )
    data = bytearray(lib.read_bytes())
    with lib.open("rb") as handle:
        table = ELFFile(handle).get_section_by_name(".gnu.hash")
        assert table is not None
        at = int(table["sh_offset"])
    struct.pack_into("<I", data, at + 4, 1)  # symoffset 1: chains for symbols 1.. "missing"
    lib.write_bytes(bytes(data))
    (tmp_path / "vllm").mkdir()
    module(tmp_path / "vllm" / "_C.abi3.so", lib.parent, CHECK_FAIL, needs=())
    found = vllm_of(tmp_path)
    assert not found.unreadable
    assert found.missing == (("vllm/_C.abi3.so", CHECK_FAIL),)
