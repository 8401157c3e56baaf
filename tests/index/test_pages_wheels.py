"""Choosing the wheel uv would install on Linux x86_64 for CPython 3.12, and the sha256 an
index page gives for each file (PEP 691 ``hashes``, PEP 503 ``#sha256=``)."""

from __future__ import annotations

from packaging.version import Version

from envkit.index.pages import WheelFile, file_sha256, pick_linux_wheel


def files(*names: str) -> list[WheelFile]:
    return [
        WheelFile(n, f"https://x/{n}", None, Version(n.split("-")[1]), None, None) for n in names
    ]


def picked(*names: str, version: str = "1.0") -> str | None:
    found = pick_linux_wheel(files(*names), Version(version))
    return found.filename if found else None


def test_the_wheel_for_cpython_312_is_picked() -> None:
    assert (
        picked(
            "torch-1.0-cp311-cp311-manylinux1_x86_64.whl",
            "torch-1.0-cp312-cp312-manylinux_2_28_aarch64.whl",
            "torch-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
            "torch-1.0-cp312-cp312-win_amd64.whl",
        )
        == "torch-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    )
    # abi3 for CPython 3.8 on loads on 3.12; one for 3.13 does not
    assert (
        picked(
            "vllm-1.0-cp313-abi3-manylinux1_x86_64.whl", "vllm-1.0-cp38-abi3-manylinux1_x86_64.whl"
        )
        == "vllm-1.0-cp38-abi3-manylinux1_x86_64.whl"
    )


def test_older_releases_and_build_tags() -> None:
    """A release built only for older Pythons gives its newest CPython's wheel; a rebuilt
    wheel (build tag 1) wins over the first one, as uv picks it."""
    assert (
        picked(
            "vllm-1.0-cp310-cp310-manylinux1_x86_64.whl",
            "vllm-1.0-cp311-cp311-manylinux1_x86_64.whl",
            "vllm-1.0-cp39-cp39-manylinux1_x86_64.whl",
        )
        == "vllm-1.0-cp311-cp311-manylinux1_x86_64.whl"
    )
    assert (
        picked(
            "vllm-1.0-cp38-abi3-manylinux_2_35_x86_64.whl",
            "vllm-1.0-1-cp38-abi3-manylinux_2_35_x86_64.whl",
        )
        == "vllm-1.0-1-cp38-abi3-manylinux_2_35_x86_64.whl"
    )
    assert picked("torch-1.0-cp312-cp312-linux_x86_64.whl") is not None  # the PyTorch index's
    assert picked("vllm-1.0-cp38-abi3-macosx_11_0_arm64.whl") is None
    odd = WheelFile("vllm-1.0.whl", "https://x/vllm-1.0.whl", None, Version("1.0"), None, None)
    assert pick_linux_wheel([odd], Version("1.0")) is None  # not a wheel's name
    assert picked("vllm-1.0-cp38-abi3-manylinux1_x86_64.whl", version="2.0") is None


def test_the_sha256_a_page_gives() -> None:
    digest = "0f" * 32
    assert file_sha256({"hashes": {"sha256": digest}}) == digest
    assert file_sha256({"hashes": {"sha256": digest.upper()}}) == digest
    assert file_sha256({"url": f"/files/x.whl#sha256={digest}"}) == digest
    for bad in (
        {"hashes": {"sha256": "xyz"}},
        {"hashes": {"md5": digest}},
        {"hashes": "sha256"},
        {"url": f"/files/x.whl#md5={digest}"},
        {"url": "/files/x.whl"},
        {},
    ):
        assert file_sha256(bad) == ""
