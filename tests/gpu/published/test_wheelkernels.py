"""A wheel's compiled modules read from a served index by range, never installed: each module
streamed into a scratch file, its fatbin and NEEDED CUDA libraries read, the file deleted; a
damaged or oversized module is an answer, the read cached under the wheel's sha256."""

from __future__ import annotations

import os
import random
import struct
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version
from properties import examples

from envkit.errors import WheelError
from envkit.gpu.arch import Capability
from envkit.gpu.binaries.images import Verdict
from envkit.gpu.published import wheelkernels
from envkit.gpu.published.wheelkernels import Limits, WheelKernels, read_wheel
from envkit.gpu.roles import Role
from envkit.index import wheels
from envkit.index.pages import WheelFile, pick_linux_wheel
from envkit.index.session import IndexSession
from envkit.io.http import Http

import elfbuild
import indexserver
import kernelwheels

pytestmark = elfbuild.needs_cxx


def served(server: indexserver.Server, project: str, version: str) -> WheelFile:
    session = IndexSession(indexserver.url(server))
    wheel = pick_linux_wheel(session.wheels(project, Version(version)), Version(version))
    assert wheel is not None
    return wheel


def read(
    folder: Path, project: str = "vllm", version: str = "0.8.5", **options: object
) -> tuple[WheelKernels, indexserver.Server]:
    with indexserver.serve(folder) as server:
        server.hashes = True
        wheel = served(server, project, version)
        found = read_wheel(wheel, project, Http(), **options)  # type: ignore[arg-type]
    return found, server


def scratch() -> list[str]:
    """This process's scratch folders (envkit-kernels-PID-...)."""
    mine = f"envkit-kernels-{os.getpid()}-*"
    return sorted(p.name for p in Path(tempfile.gettempdir()).glob(mine))


def test_a_vllm_wheel_is_read_module_by_module(tmp_path: Path) -> None:
    kernelwheels.vllm(tmp_path)
    before = scratch()
    found, server = read(tmp_path, use_cache=False)
    assert scratch() == before  # every scratch file deleted
    assert found.requires_torch == "==2.6.0" and found.torch_cuda == ""
    assert len(found.sha256) == 64 and found.filename.endswith(kernelwheels.VLLM_TAG + ".whl")
    roles = {m.member: m.role for m in found.modules}
    assert roles == {
        "vllm/_C.abi3.so": Role.CORE,
        "vllm/_moe_C.abi3.so": Role.CORE,
        "vllm/cumem_allocator.abi3.so": Role.OPTIONAL,
        "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so": Role.OPTIONAL,
    }
    core = {m.member.split("/")[-1]: m for m in found.core}
    held = core["_C.abi3.so"].images
    assert held is not None and held.containers == 4
    assert [sorted(map(str, s)) for s in held.main] == [
        ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]
    ]
    assert held.on(Capability(9, 0)).verdict is Verdict.RUNS
    assert held.on(Capability(8, 6)).verdict is Verdict.RUNS_PARTLY
    assert held.on(Capability(12, 0)).verdict is Verdict.NO_KERNEL_IMAGE
    assert core["_C.abi3.so"].needed == ("libcudart.so.12",)
    assert core["_C.abi3.so"].cuda_majors() == (12,)
    plain = next(m for m in found.modules if "cumem" in m.member)
    assert plain.images is None and not plain.damaged and plain.needed == ()
    assert found.read_bytes > 0 and server.sent == found.read_bytes


def test_a_read_is_kept_under_the_wheels_sha256(tmp_path: Path) -> None:
    kernelwheels.vllm(tmp_path, "0.9.0")
    first, _ = read(tmp_path, version="0.9.0")
    again, server = read(tmp_path, version="0.9.0")
    assert again == first
    assert not any(p.startswith("/files/") for p in server.paths)  # nothing fetched


def test_a_torch_wheel_gives_its_cuda_and_core_libraries(tmp_path: Path) -> None:
    kernelwheels.torch(tmp_path)
    found, _ = read(tmp_path, "torch", "2.6.0", use_cache=False)
    assert found.torch_cuda == "12.4" and found.requires_torch == ""
    assert {m.member: m.role for m in found.modules} == {
        "torch/lib/libc10_cuda.so": Role.CORE,
        "torch/lib/libtorch_cuda.so": Role.CORE,
    }
    cuda = next(m for m in found.modules if m.member.endswith("libtorch_cuda.so"))
    assert cuda.images is not None and str(cuda.images.sass[0]) == "sm_50"


def test_releases_before_c_count_every_top_level_module_as_core(tmp_path: Path) -> None:
    built = kernelwheels.modules()
    kernelwheels.vllm(
        tmp_path,
        "0.1.4",
        {
            "vllm/attention_ops.cpython-311-x86_64-linux-gnu.so": built["_C"],
            "vllm/cache_ops.cpython-311-x86_64-linux-gnu.so": built["_moe_C"],
            "vllm/sub/../escape.so": built["_C"],  # a name that climbs: never read
        },
        torch="torch>=2.0.0",
        tag="cp311-cp311-manylinux1_x86_64",
    )
    found, _ = read(tmp_path, version="0.1.4", use_cache=False)
    assert [m.role for m in found.modules] == [Role.CORE, Role.CORE]
    assert all(".." not in m.member for m in found.modules)


def test_damaged_modules_are_answers(tmp_path: Path) -> None:
    built = kernelwheels.modules()
    kernelwheels.vllm(
        tmp_path,
        files={
            "vllm/_C.abi3.so": built["broken"],  # a fatbin container that overruns
            "vllm/_moe_C.abi3.so": b"not an ELF file" * 10,
            "vllm/_C_stable_libtorch.abi3.so": built["cuda13"],
        },
    )
    found, _ = read(tmp_path, use_cache=False)
    why = {m.member.split("/")[-1]: m.damaged for m in found.modules}
    assert "overruns" in why["_C.abi3.so"]
    assert "not an ELF file" in why["_moe_C.abi3.so"]
    assert why["_C_stable_libtorch.abi3.so"] == ""
    stable = next(m for m in found.modules if "stable" in m.member)
    assert stable.cuda_majors() == (13,)


def test_oversized_modules_are_refused_before_they_are_fetched(tmp_path: Path) -> None:
    kernelwheels.vllm(tmp_path)
    small = Limits(compressed=64, inflated=1 << 30)
    found, server = read(tmp_path, limits=small, use_cache=False)
    assert all("envkit fetches" in m.damaged for m in found.modules)
    assert server.sent < 64 * 1024 * 3  # the directory and METADATA only
    found, _ = read(tmp_path, limits=Limits(inflated=1024), use_cache=False)
    assert all("envkit reads" in m.damaged for m in found.modules)
    with pytest.raises(WheelError, match="at most 2"):
        read(tmp_path, limits=Limits(modules=2), use_cache=False)


def _data_span(path: Path, name: str) -> tuple[int, int]:
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
    data = path.read_bytes()
    names, extra = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + names + extra
    return start, start + info.compress_size


def test_a_changed_byte_is_damage_never_a_traceback(tmp_path: Path) -> None:
    """Any byte of a module's compressed data changed: the module is damaged (inflate or
    CRC-32 fails), or read as before where the change leaves the same bytes (a padding bit);
    never raised."""
    path = kernelwheels.vllm(tmp_path, files={"vllm/_C.abi3.so": kernelwheels.modules()["_C"]})
    start, end = _data_span(path, "vllm/_C.abi3.so")
    original = path.read_bytes()
    http = Http()
    with indexserver.serve(tmp_path) as server:
        wheel = served(server, "vllm", "0.8.5")

        @settings(
            max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow]
        )
        @given(at=st.floats(0, 0.999), value=st.integers(0, 255))
        def check(at: float, value: int) -> None:
            data = bytearray(original)
            data[start + int(at * (end - start))] = value
            path.write_bytes(bytes(data))
            (module,) = read_wheel(wheel, "vllm", http, use_cache=False).modules
            assert module.damaged or (module.images is not None and module.images.containers == 4)

        check()


def test_a_member_larger_than_listed_is_cut_off(tmp_path: Path) -> None:
    """A directory that lists a member smaller than its data inflates to: stopped there."""
    path = kernelwheels.vllm(tmp_path, files={"vllm/_C.abi3.so": kernelwheels.modules()["_C"]})
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("vllm/_C.abi3.so")
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x01\x02")  # the central directory's first header
    while at >= 0:
        (name_length,) = struct.unpack_from("<H", data, at + 28)
        if data[at + 46 : at + 46 + name_length] == b"vllm/_C.abi3.so":
            struct.pack_into("<I", data, at + 24, info.file_size // 2)  # uncompressed size
        at = data.find(b"PK\x01\x02", at + 4)
    path.write_bytes(bytes(data))
    found, _ = read(tmp_path, use_cache=False)
    assert "more bytes than listed" in found.modules[0].damaged


def test_streaming_in_many_ranges_gives_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member fetched in ranges far smaller than itself, a few in flight, in order."""
    monkeypatch.setattr(wheels, "STREAM_CHUNK", 1000)
    monkeypatch.setattr(wheels, "INFLATE_PIECE", 777)
    payload = random.Random(0).randbytes(40_000) + kernelwheels.modules()["_C"]  # incompressible
    path = kernelwheels.vllm(tmp_path, files={"vllm/_C.abi3.so": payload})
    out = tmp_path / "out.bin"
    with indexserver.serve(tmp_path) as server, out.open("wb") as sink:
        archive = wheels.RemoteZip(f"{indexserver.url(server)[:-7]}/files/{path.name}", Http())
        size = archive.inflate(
            "vllm/_C.abi3.so", sink, max_compressed=1 << 30, max_inflated=1 << 30, seconds=60
        )
        requests = sum(p.startswith("/files/") for p in server.paths)
    assert size == len(payload) and out.read_bytes() == payload
    assert requests > 20
    with pytest.raises(WheelError, match="has no member"):
        archive.inflate("nothing", sink, max_compressed=1, max_inflated=1, seconds=1)


def test_a_wheel_without_metadata_or_over_a_local_url_is_refused(tmp_path: Path) -> None:
    local = WheelFile("vllm-1-py3-none-any.whl", "file:///x.whl", None, Version("1"), None, None)
    with pytest.raises(WheelError, match="over HTTP"):
        read_wheel(local, "vllm", Http(), use_cache=False)
    with pytest.raises(WheelError, match="vllm and torch"):
        read_wheel(local, "xformers", Http())
    assert wheelkernels.PROJECTS == ("vllm", "torch")
