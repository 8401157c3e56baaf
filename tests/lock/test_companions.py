"""Distributions that must be at one release (lock.companions): the FlashInfer trio at lock
time on a local index, with the real uv, and the rule itself by property."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wheelhouse
from helpers import PY, envkit

CELL = f"py{PY}-linux-x86_64-any"


@pytest.fixture(scope="module")
def short_index(tmp_path_factory: pytest.TempPathFactory) -> str:
    """flashinfer-python 0.6.14 and flashinfer-cubin only up to 0.6.13, as the default
    index has them."""
    return wheelhouse.write_index(
        tmp_path_factory.mktemp("flashinfer-short"),
        [
            wheelhouse.flashinfer("flashinfer-python", "0.6.14"),
            wheelhouse.flashinfer("flashinfer-cubin", "0.6.13"),
        ],
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    """flashinfer-python 0.6.14; flashinfer-cubin 0.6.13 and 0.6.14; a jit-cache for CUDA
    12.8 (its local part is its build, not another release)."""
    return wheelhouse.write_index(
        tmp_path_factory.mktemp("flashinfer-index"),
        [
            wheelhouse.flashinfer("flashinfer-python", "0.6.14"),
            wheelhouse.flashinfer("flashinfer-cubin", "0.6.13"),
            wheelhouse.flashinfer("flashinfer-cubin", "0.6.14"),
            wheelhouse.flashinfer("flashinfer-jit-cache", "0.6.14+cu128"),
        ],
    )


def project(root: Path, requirements: list[str], constraints: list[str] = ()) -> Path:  # type: ignore[assignment]
    (root / "envs").mkdir(exist_ok=True)
    listed = ", ".join(f'"{r}"' for r in requirements)
    pinned = ", ".join(f'"{c}"' for c in constraints)
    (root / "envs" / "fi.toml").write_text(
        f'python = ">=3.9"\nrequirements = [{listed}]\nconstraints = [{pinned}]\n\n'
        f'[matrix]\npython = ["{PY}"]\nplatforms = ["linux-x86_64"]\n'
    )
    return root


def lock(root: Path, index: str) -> tuple[int, dict[str, str]]:
    res = envkit("lock", "fi", "--json", "--index-url", index, cwd=root)
    (cell,) = res.json()["cells"]
    return res.code, cell


def test_a_trio_at_two_releases_fails_the_cell_with_the_exact_pin(
    tmp_path: Path, short_index: str
) -> None:
    """As with vLLM 0.26.0, which pins flashinfer-python alone: an unpinned
    flashinfer-cubin resolves to the newest the index has, another release."""
    index = short_index
    root = project(tmp_path, ["flashinfer-python==0.6.14", "flashinfer-cubin"])
    code, cell = lock(root, index)
    assert (code, cell["cell"], cell["state"]) == (1, CELL, "incompatible")
    reason = cell["reason"]
    assert "this cell resolved flashinfer-python 0.6.14, flashinfer-cubin 0.6.13" in reason
    path = root / "envs" / "fi.toml"
    assert f"in profile fi ({path}), add `flashinfer-cubin==0.6.14` to its constraints" in reason
    assert not (root / "constraints" / "fi" / f"{CELL}.txt").exists()
    # recorded: --check says it again, naming the cell beside the reason
    text = envkit("lock", "fi", "--check", cwd=root)
    assert text.code == 1 and f"fi/{CELL}: FlashInfer must be one release" in text.out
    assert "flashinfer-cubin==0.6.14" in text.out


def test_a_pin_of_the_profile_in_the_way_is_named(tmp_path: Path, index: str) -> None:
    root = project(
        tmp_path, ["flashinfer-python==0.6.14", "flashinfer-cubin"], ["flashinfer-cubin==0.6.13"]
    )
    _code, cell = lock(root, index)
    said = "replace `flashinfer-cubin==0.6.13` with `flashinfer-cubin==0.6.14`"
    assert said in cell["reason"]


def test_the_trio_at_one_release_locks(tmp_path: Path, index: str) -> None:
    """The pin the failure named is enough; the jit-cache's +cu128 is its CUDA build."""
    root = project(
        tmp_path,
        ["flashinfer-python==0.6.14", "flashinfer-cubin", "flashinfer-jit-cache"],
        ["flashinfer-cubin==0.6.14"],
    )
    code, cell = lock(root, index)
    assert (code, cell["state"]) == (0, "locked"), cell["reason"]
    txt = (root / "constraints" / "fi" / f"{CELL}.txt").read_text()
    assert "flashinfer-jit-cache==0.6.14+cu128" in txt


VERSIONS = st.sampled_from(["0.6.13", "0.6.14", "0.6.14+cu128", "0.6.14+cu130", "0.6.8.post1"])
TRIO = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")


@given(st.dictionaries(st.sampled_from(TRIO), VERSIONS))
def test_a_mismatch_is_exactly_two_public_releases(found: dict[str, str]) -> None:
    from envkit.lock.companions import mismatches, public

    found_m = mismatches(found)
    releases = {public(v) for v in found.values()}
    assert bool(found_m) == (len(releases) > 1)
    for m in found_m:
        # the pins move every other package to the first one's release, and only those
        leader = next(p for p in TRIO if p in found)
        assert m.target == public(found[leader])
        moved = {p: m.target for p in m.off}
        assert {public(v) for v in {**found, **moved}.values()} == {m.target}
        assert m.pins == tuple(f"{p}=={m.target}" for p in m.off)


@given(st.dictionaries(st.text(max_size=30), st.text(max_size=30), max_size=20))
def test_any_resolution_is_judged_without_error(found: dict[str, str]) -> None:
    from envkit.lock.companions import mismatches

    for m in mismatches(found):
        assert len(m.versions) >= 2
