"""new-profile never drafts a vLLM release that pins a release the index does not list: uv
could not install it from there (vLLM 0.34.0 pinned flashinfer-python 0.7.3, which was never
published, and its draft's lock was unresolvable). Only the pins that hold on the solved
Python and platform count; extras and torch's family (the CUDA tests' own) are left out."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from envkit.releases.pins import exact_pins, marker_environment

import indexserver
import registry_world
from conftest import _published
from helpers import envkit, output
from indexserver import url
from registry_world import MODELS
from wheelhouse import Wheel

QWEN35 = MODELS / "Qwen3.5-9B"
PINS = [
    "flashinfer-python==0.7.3",
    "xgrammar==9.9.9; platform_machine == 'aarch64'",  # not on x86_64: no verdict from it
    "pytest==0.0.1; extra == 'dev'",  # an extra: not installed with vLLM
]


def _world(published: bool) -> list[Wheel]:
    """registry_world with vLLM 0.33.0 (the one release listing Qwen3.5) pinning PINS, and
    flashinfer-python 0.7.3 published or not."""
    wheels = [
        dataclasses.replace(w, requires=[*w.requires, *PINS])
        if (w.name, w.version) == ("vllm", "0.33.0")
        else w
        for w in registry_world.wheels()
    ]
    flashinfer = Wheel("flashinfer-python", "0.7.3" if published else "0.7.4")
    return [*wheels, flashinfer]


def _serving(factory: pytest.TempPathFactory, published: bool) -> Iterator[indexserver.Server]:
    name = "pins-listed" if published else "pins-unlisted"
    world = functools.partial(_world, published)
    with _published(factory, name, world, registry_world.upload_times) as server:
        yield server


@pytest.fixture(scope="module")
def unlisted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[indexserver.Server]:
    yield from _serving(tmp_path_factory, False)


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[indexserver.Server]:
    yield from _serving(tmp_path_factory, True)


def draft(folder: Path, world: indexserver.Server, *args: str):  # type: ignore[no-untyped-def]
    return envkit(
        "--envs", str(folder), "new-profile", "q", "--for-model", str(QWEN35),
        "--index-url", url(world), "--cuda", "13.0", "--force", *args, cwd=folder.parent,
    )  # fmt: skip


def test_a_release_pinning_what_the_index_lacks_is_never_drafted(
    unlisted: indexserver.Server, tmp_path: Path
) -> None:
    res = draft(tmp_path / "envs", unlisted)
    said = " ".join((res.out + res.err).split())
    assert res.code == 1, said
    assert "pins flashinfer-python==0.7.3, which the index does not list" in said
    assert "xgrammar" not in said and "pytest==" not in said
    assert not (tmp_path / "envs" / "q.toml").exists()


def test_the_same_release_is_drafted_once_its_pin_is_published(
    listed: indexserver.Server, tmp_path: Path
) -> None:
    res = draft(tmp_path / "envs", listed, "--json")
    data = output("new-profile", res.assert_ok().out)
    assert data["solution"]["vllm"] == "0.33.0"
    assert "flashinfer" not in " ".join(data["solution"]["rejected"])


def test_the_pins_are_those_that_hold_where_the_draft_runs() -> None:
    metadata = "Metadata-Version: 2.1\nName: vllm\nVersion: 1\n" + "".join(
        f"Requires-Dist: {r}\n"
        for r in [
            *PINS,
            "torch==2.14.0",
            "numpy>=1.26",
            "compressed-tensors==0.9.*",
            "Outlines_Core==0.1.26; python_version < '3.13'",
            "broken ==",
        ]
    )
    x86 = exact_pins(metadata, marker_environment("3.12", "linux-x86_64"))
    assert x86 == {"flashinfer-python": "0.7.3", "torch": "2.14.0", "outlines-core": "0.1.26"}
    arm = exact_pins(metadata, marker_environment("3.13", "linux-aarch64"))
    assert arm == {"flashinfer-python": "0.7.3", "xgrammar": "9.9.9", "torch": "2.14.0"}
    assert exact_pins("", marker_environment("3.12", "linux-x86_64")) == {}
