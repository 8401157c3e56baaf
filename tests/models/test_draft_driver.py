"""new-profile states the NVIDIA driver its draft needs: a comment above [torch], ``driver``
in its output; and says loudly when no --cuda was given and no GPU found, so nothing was
checked against a driver."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from envkit.gpu.arch import Capability
from envkit.gpu.driver import DriverVersion, Gpu
from envkit.gpu.installed import detect
from envkit.profiles.profile import load_profile

import indexserver
from helpers import envkit, output
from indexserver import url
from registry_world import MODELS

QWEN35 = MODELS / "Qwen3.5-9B"
DRIVER_130 = {"cuda": "13.0", "linux_driver": "580.65.06", "minor_compat_floor": "580.65.06"}
ABOVE = (
    "# The driver this build needs: CUDA 13.0 or newer (NVIDIA driver 580.65.06 or newer);\n"
    '# on such a driver, nvidia-smi\'s header says "CUDA Version: 13.0" or higher.\n'
)
UNCHECKED = "# Not checked against a GPU: no --cuda was given and no GPU was found when drafting.\n"


def draft(folder: Path, world: indexserver.Server, *args: str):  # type: ignore[no-untyped-def]
    return envkit(
        "--envs", str(folder), "new-profile", "q", "--for-model", str(QWEN35),
        "--index-url", url(world), "--force", *args, cwd=folder.parent,
    )  # fmt: skip


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "smi", lambda: detect.Smi(present=False))


def test_a_draft_without_a_driver_says_which_it_needs_loudly(
    no_gpu: None, world: indexserver.Server, tmp_path: Path
) -> None:
    folder = tmp_path / "envs"
    res = draft(folder, world, "--json")
    data = output("new-profile", res.assert_ok().out)
    assert data["driver"] == DRIVER_130 and data["driver_assumed"] is True
    text = (folder / "q.toml").read_text()
    assert ABOVE + UNCHECKED + "[torch]\n" in text  # the comment sits on the table's header
    profile = load_profile(folder / "q.toml")  # still a valid profile, [torch] as before
    assert (profile.torch.backend, profile.torch.cuda) == ("cu130", "13.0")
    assert tomlkit.parse(text).unwrap()["torch"] == {"backend": "cu130", "cuda": "13.0"}
    said = " ".join(draft(folder, world).assert_ok().out.split())
    assert "driver: CUDA 13.0 or newer (NVIDIA driver 580.65.06 or newer)" in said
    assert (
        "warning: no --cuda was given and no GPU was found, so the draft was not checked "
        "against a driver: it takes CUDA 13.0, so the machine that serves it needs CUDA 13.0 "
        "or newer (NVIDIA driver 580.65.06 or newer)"
    ) in said


def test_a_draft_for_a_known_driver_states_its_need_without_a_warning(
    no_gpu: None, world: indexserver.Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "envs"
    given = draft(folder, world, "--cuda", "13.0", "--json")
    data = output("new-profile", given.assert_ok().out)
    assert data["driver"] == DRIVER_130 and data["driver_assumed"] is False
    assert data["solution"]["driver_cuda"] == "13.0"
    text = (folder / "q.toml").read_text()
    assert ABOVE + "[torch]\n" in text and UNCHECKED not in text
    # a GPU nvidia-smi reports counts as a driver given
    card = Gpu(0, "GPU", Capability(9, 0), DriverVersion.parse("580.65.06"), None)
    monkeypatch.setattr(detect, "smi", lambda: detect.Smi(present=True, gpus=(card,), cuda="13.0"))
    found = draft(folder, world)
    assert "warning:" not in found.assert_ok().out
    assert "driver: CUDA 13.0 or newer" in " ".join(found.out.split())
