"""Wheels whose compiled modules link torch, for checking them against a torch wheel before
install (gpu.wheelabi, lock.extensions): tiny g++-built shared objects (elfbuild) packed in
wheels, and a torch wheel whose torch/lib holds libc10.so."""

from __future__ import annotations

from functools import cache

import elfbuild
import wheelhouse

PLATFORM = "py3-none-manylinux_2_17_x86_64"
# c10::missing_symbol(): no torch library of the index defines it
MISSING = "_ZN3c1014missing_symbolEv"


@cache
def shared() -> dict[str, bytes]:
    """name -> a shared object: torch's libc10.so, a module needing what it defines, one
    needing a c10 function it does not, and a file that is not ELF at all."""
    built = elfbuild.built()
    libs = built.libc10.parent
    stale = elfbuild.compile_so(
        f'extern "C" void gone() __asm__("{MISSING}");\n'
        'extern "C" void init_stale() { gone(); }\n',
        built.root / "abi" / "stale_C.so",
        f"-L{libs}",
        "-Wl,--no-as-needed",
        "-lc10",
    )
    return {
        "libc10": built.libc10.read_bytes(),
        "good": built.ext_c10.read_bytes(),
        "stale": stale.read_bytes(),
        "plain": built.plain.read_bytes(),
    }


def torch_wheel() -> wheelhouse.Wheel:
    so = shared()
    return wheelhouse.Wheel(
        "torch",
        "2.6.0",
        {
            "torch/__init__.py": "__version__ = '2.6.0'\n",
            "torch/version.py": "cuda = '12.4'\n",
            "torch/lib/libc10.so": so["libc10"],
            "torch/lib/libcudart.so.12": elfbuild.built().cudart12.read_bytes(),
        },
        tag=PLATFORM,
    )


def extension(name: str, version: str, module: bytes, torch: str = "torch") -> wheelhouse.Wheel:
    return wheelhouse.Wheel(
        name,
        version,
        {
            f"{name}/__init__.py": "",
            f"{name}/_C.so": module,
            f"{name}/helper.so": shared()["plain"],
        },
        requires=[torch],
        tag=PLATFORM,
    )
