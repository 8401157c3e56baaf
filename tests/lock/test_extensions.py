"""Locked wheels that link torch, checked against the cell's torch at lock time (lock.extensions,
gpu.wheelabi): their compiled modules are tiny g++-built shared objects (tests/gpu/elfbuild.py),
packed in wheels on a local index beside a torch wheel whose torch/lib holds libc10.so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import wheelhouse
from helpers import PY, envkit

sys.path.insert(0, str(Path(__file__).parent.parent / "gpu"))
import elfbuild
from abiwheels import PLATFORM, extension, shared, torch_wheel

pytestmark = elfbuild.needs_cxx


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    so = shared()
    return wheelhouse.write_index(
        tmp_path_factory.mktemp("abi-index"),
        [
            torch_wheel(),
            extension("goodext", "1.0", so["good"]),
            extension("staleext", "2.0+cu12torch2.5", so["stale"]),
            extension("pinnedext", "3.0", so["stale"], torch="torch==2.6.0"),
            extension("plainext", "1.0", so["stale"]),  # says nothing of its torch
            extension("brokenext", "1.0", b"\x7fELF not really"),
            # an addon per torch release, loaded by torch's version (as torch-c-dlpack-ext's)
            addon(
                "addonext",
                {"libaddon_torch25-cuda.so": so["stale"], "libaddon_torch26-cuda.so": so["good"]},
            ),
            addon("oldaddon", {"libaddon_torch25-cuda.so": so["stale"]}),  # none for torch 2.6
            addon("staleaddon", {"libaddon_torch2.6-cpu.so": so["stale"]}),
            # links nothing of torch and does not require it: never looked into
            wheelhouse.Wheel("fastmath", "1.0", {"fastmath/_m.so": so["plain"]}, tag=PLATFORM),
        ],
    )


def addon(name: str, modules: dict[str, bytes]) -> wheelhouse.Wheel:
    """A package whose modules are each named for the torch release it is loaded beside."""
    return wheelhouse.Wheel(
        name,
        "1.0",
        {f"{name}/{file}": data for file, data in modules.items()},
        requires=["torch"],
        tag=PLATFORM,
    )


def project(root: Path, *requirements: str) -> Path:
    (root / "envs").mkdir(exist_ok=True)
    listed = ", ".join(f'"{r}"' for r in requirements)
    (root / "envs" / "x.toml").write_text(
        f'python = ">=3.9"\nrequirements = [{listed}]\n\n[torch]\nbackend = "cu124"\n\n'
        f'[matrix]\npython = ["{PY}"]\nplatforms = ["linux-x86_64"]\nbackends = ["cu124"]\n'
    )
    return root


def lock(root: Path, index: str) -> tuple[int, dict[str, str], str]:
    res = envkit("lock", "x", "--json", "--index-url", index, "--torch-index", "default", cwd=root)
    (cell,) = res.json()["cells"]
    return res.code, cell, res.err


def test_an_extension_built_for_the_pinned_torch_locks(tmp_path: Path, index: str) -> None:
    code, cell, err = lock(project(tmp_path, "goodext==1.0", "fastmath==1.0"), index)
    assert (code, cell["state"]) == (0, "locked"), cell["reason"]
    assert "not checked" not in err


def test_an_extension_built_for_another_torch_fails_the_cell_with_the_fix(
    tmp_path: Path, index: str
) -> None:
    code, cell, _err = lock(project(tmp_path, "goodext==1.0", "staleext==2.0"), index)
    assert (code, cell["state"]) == (1, "incompatible")
    reason = cell["reason"]
    assert "staleext 2.0+cu12torch2.5 does not link against torch 2.6.0" in reason
    assert "staleext/_C.so needs 1 torch symbol its libraries do not define" in reason
    assert "c10::missing_symbol(...)" in reason  # demangled, without a new dependency
    assert "this build is for torch 2.5" in reason
    assert "pin a staleext build for torch 2.6.0 in the constraints of profile x" in reason
    assert "torch==2.5.*" in reason
    assert "goodext" not in reason  # the one that links is not blamed
    assert not (tmp_path / "constraints" / "x" / f"py{PY}-linux-x86_64-cu124.txt").exists()


def test_an_addon_for_another_torch_release_is_not_judged_against_this_one(
    tmp_path: Path, index: str
) -> None:
    """Of a package's addons named by torch release, the pinned torch's is judged, the others
    are loaded only beside theirs and are not (said through a note, never a verdict)."""
    code, cell, err = lock(project(tmp_path, "addonext==1.0"), index)
    assert (code, cell["state"]) == (0, "locked"), cell["reason"]
    said = " ".join(err.split())
    assert (
        "1 module of addonext 1.0" in said
        and " is for other torch releases" in said
        and "libaddon_torch25-cuda.so" in said
    )
    assert "its package loads the one for its torch" in said
    # its only addon is for another release: said as such, still a note and not a verdict
    code, cell, err = lock(project(tmp_path, "oldaddon==1.0"), index)
    assert (code, cell["state"]) == (0, "locked"), cell["reason"]
    said = " ".join(err.split())
    assert "none is for torch 2.6.0, so its package has no such module to load beside it" in said
    code, cell, _err = lock(project(tmp_path, "staleaddon==1.0"), index)
    assert (code, cell["state"]) == (1, "incompatible")
    assert "staleaddon/libaddon_torch2.6-cpu.so needs 1 torch symbol" in cell["reason"]


@pytest.mark.parametrize(
    ("package", "said"),
    [
        ("pinnedext==3.0", "though its metadata asks for torch==2.6.0"),
        ("plainext==1.0", "it does not say which torch it was built for"),
    ],
)
def test_the_fix_says_what_the_wheel_says_of_its_torch(
    tmp_path: Path, index: str, package: str, said: str
) -> None:
    code, cell, _err = lock(project(tmp_path, package), index)
    assert (code, cell["state"]) == (1, "incompatible")
    assert said in cell["reason"]


def test_a_module_that_cannot_be_read_is_said_and_no_verdict(tmp_path: Path, index: str) -> None:
    code, cell, err = lock(project(tmp_path, "brokenext==1.0"), index)
    assert (code, cell["state"]) == (0, "locked")
    assert "brokenext/_C.so of brokenext 1.0" in err and "not checked against torch" in err


def test_an_unreachable_wheel_is_no_verdict(tmp_path: Path) -> None:
    """A wheel the index named but that cannot be fetched: said, never pass or fail."""
    from envkit.io.http import Http
    from envkit.lock.cells import Cell
    from envkit.lock.extensions import abi_reason
    from envkit.profiles.profile import load_profile

    root = project(tmp_path, "goodext==1.0")
    pylock = tmp_path / "pylock.toml"
    gone = "http://127.0.0.1:9/files"
    pylock.write_text(
        'lock-version = "1.0"\ncreated-by = "uv"\n\n'
        f'[[packages]]\nname = "torch"\nversion = "2.6.0"\n'
        f'wheels = [{{ url = "{gone}/torch-2.6.0-{PLATFORM}.whl" }}]\n\n'
        f'[[packages]]\nname = "goodext"\nversion = "1.0"\n'
        f'wheels = [{{ url = "{gone}/goodext-1.0-{PLATFORM}.whl" }}]\n'
    )
    said: list[str] = []
    cell = Cell(profile="x", python=PY, platform="linux-x86_64", backend="cu124")
    profile = load_profile(root / "envs" / "x.toml")
    assert abi_reason(profile, cell, pylock, Http(), note=said.append) == ""
    assert len(said) == 1 and "goodext 1.0's torch symbols in x / " in said[0]
    assert "not checked" in said[0]


def test_a_crafted_name_is_cut_in_the_reason(tmp_path: Path) -> None:
    """Names come from the wheel: a 64 KiB symbol or member name leaves a reason that reads."""
    from envkit.gpu.published.wheelabi import ModuleNeeds, WheelNeeds
    from envkit.lock.extensions import _reason
    from envkit.lock.pylocks import LockedWheel
    from envkit.profiles.profile import load_profile

    profile = load_profile(project(tmp_path, "goodext==1.0") / "envs" / "x.toml")
    symbol, member = "_ZN3c10" + "x" * 65_000, "a/" + "b" * 20_000 + ".so"
    needs = WheelNeeds("w-1.0-py3-none-any.whl", True, "", (ModuleNeeds(member, True, (symbol,)),))
    wheel = LockedWheel(name="w", version="1.0", url="file:///w-1.0-py3-none-any.whl", sha256="")
    reason = _reason(profile, wheel, needs, [(member, [symbol])], "2.6.0")
    assert len(reason) < 1000 and "w 1.0 does not link against torch 2.6.0" in reason
