"""vLLM's compiled kernels against the torch beside them, on tiny shared objects compiled
here with the system's C++ compiler: an extension that needs a c10 function and a torch
library that does (or does not) define it, in the same or the other C++ ABI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envkit.gpu.linkage import linkage, linkage_on

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
    """A shared object from C++ ``source`` (with <string>), built for C++ ABI ``abi``."""
    assert CXX is not None
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".cpp")
    src.write_text("#include <string>\n" + source)
    subprocess.run(
        [CXX, "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", str(src), "-o", str(out)],
        check=True,
    )
    src.unlink()
    return out


def site(root: Path, *, extension_abi: int = 0, torch_abi: int = 0, defines: bool = True) -> Path:
    """A site-packages folder with vllm/_C.abi3.so and torch/lib/libc10.so."""
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    compile_so(EXTENSION, root / "vllm" / "_C.abi3.so", abi=extension_abi)
    library = LIBRARY if defines else "namespace c10 { void other() {} }\n"
    compile_so(library, root / "torch" / "lib" / "libc10.so", abi=torch_abi)
    return root


@needs_cxx
def test_kernels_that_link(tmp_path: Path) -> None:
    found = linkage_on(["", str(tmp_path / "nothing"), str(site(tmp_path / "sp"))])
    assert found is not None and found.links
    assert found.extensions == ("_C.abi3.so",) and found.needed == 1
    assert found.libraries == ("libc10.so",)


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
    found = linkage(root / "vllm", root / "torch" / "lib")
    assert found is not None and not found.links and not found.unreadable
    ((where, symbol),) = found.missing
    assert where == "_C.abi3.so" and symbol.startswith("_ZN3c1010check_fail")
    assert ("Ss" in symbol) == (extension_abi == 0)  # the old ABI's std::string


def test_nothing_to_link_and_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (tmp_path / "torch" / "lib").mkdir(parents=True)
    assert linkage_on([str(tmp_path)]) is None  # pure Python: no extension modules
    assert linkage_on([str(tmp_path / "vllm")]) is None  # no vllm package on that path
    (tmp_path / "vllm" / "_C.abi3.so").write_bytes(b"\x7fELF" + b"\0" * 12 + b"not elf")
    found = linkage(tmp_path / "vllm", tmp_path / "torch" / "lib")
    assert found is not None and found.unreadable and not found.links


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
    assert res.code == 0, res.out
    (check,) = [c for c in res.json()["checks"] if c["kind"] == "kernels"]
    assert check["status"] == "pass" and "need 1 torch symbols" in check["found"]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tail=st.binary(max_size=400), elf_class=st.sampled_from([b"\x01", b"\x02", b"\x09"]))
def test_any_bytes_as_an_extension_are_one_answer(
    tmp_path: Path, tail: bytes, elf_class: bytes
) -> None:
    """Whatever an extension module's bytes are (a damaged download, another format), the
    answer is a Linkage, never an exception."""
    package = tmp_path / "vllm"
    package.mkdir(exist_ok=True)
    (package / "_C.abi3.so").write_bytes(b"\x7fELF" + elf_class + b"\x01\x01" + tail)
    (tmp_path / "torch" / "lib").mkdir(parents=True, exist_ok=True)
    found = linkage(package, tmp_path / "torch" / "lib")
    assert found is not None and (found.links or found.unreadable or found.missing)


@needs_cxx
def test_a_damaged_extension_is_one_answer(tmp_path: Path) -> None:
    """Real shared objects with bytes overwritten anywhere: a Linkage, never an exception."""
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
        found = linkage(root / "vllm", root / "torch" / "lib")
        assert found is not None
