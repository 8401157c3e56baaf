"""envkit doctor on venvs the tests build: mixed installs, drift, drivers, WSL2, hf-xet, secrets."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import indexserver
import wheelhouse
from conftest import Indexes
from helpers import FIXTURES, ROOT, envkit, install_into, shadow_transformers

# Output recorded from nvidia-smi on an 8 GiB RTX 2070 (field report 2's card): the plain
# header, and --query-gpu=name,driver_version,memory.total,memory.free,compute_cap as CSV.
SMI = FIXTURES / "nvidia-smi"


@pytest.fixture
def project(built_copy: Path) -> Path:
    return built_copy


def no_gpu_path(tmp_path: Path) -> str:
    """PATH without any nvidia-smi (this machine has none; make sure of it)."""
    dirs = [
        d
        for d in os.environ["PATH"].split(os.pathsep)
        if d and not (Path(d) / "nvidia-smi").exists()
    ]
    return os.pathsep.join(dirs)


def fake_smi(tmp_path: Path) -> str:
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "nvidia-smi"
    listing, header = SMI / "rtx2070-query.csv", SMI / "rtx2070-header.txt"
    script.write_text(f'#!/bin/sh\nif [ -n "$1" ]; then cat {listing}; else cat {header}; fi\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def doctor(project: Path, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    res = envkit("doctor", "--venv", ".venv", *args, "--json", cwd=project, env=env)
    return res, {f["code"]: f for f in res.json()["findings"]}


def test_clean_venv_without_a_gpu(project: Path, tmp_path: Path) -> None:
    res, found = doctor(project, "--profile", "good", env={"PATH": no_gpu_path(tmp_path)})
    res.assert_ok()
    assert found["no-nvidia-driver"]["message"].startswith("no NVIDIA driver found")
    assert found["no-nvidia-driver"]["severity"] == "info"
    assert res.json()["venv"] is True and "drift-version" not in found
    text = envkit("doctor", "--venv", ".venv", cwd=project, env={"PATH": no_gpu_path(tmp_path)})
    assert text.code == 0 and "No errors found." in text.out


def test_mixed_install_names_both_installers(project: Path, tmp_path: Path) -> None:
    shadow = tmp_path / "user-site"
    shadow_transformers(shadow)
    res, found = doctor(project, env={"PYTHONPATH": str(shadow)})
    assert res.code == 1
    dup = found["duplicate-distribution"]
    assert dup["severity"] == "error"
    assert "by different installers" in dup["message"]
    assert "(installer: pip)" in dup["message"] and "(installer: uv)" in dup["message"]


def test_drift_and_the_known_bad_pair(project: Path, indexes: Indexes) -> None:
    install_into(project / ".venv", indexes.default, "transformers==5.0.0")
    res, found = doctor(project, "--profile", "good")
    assert res.code == 1
    assert "transformers: 5.0.0 (profile: 4.51.3)" in found["drift-version"]["message"]
    bad = found["known-bad-pair"]
    assert "requires transformers>=4.51" in bad["message"] and "5.0.0" in bad["message"]
    # the fix names the pin and the profile that pins it
    assert "pin transformers==4.51.3, as profile good does" in bad["fix"]


def test_the_known_bad_pair_from_compat_findings(
    project: Path, indexes: Indexes, compat_world: indexserver.Server, scan_cache: Path
) -> None:
    """With the wheels readable, the finding names what breaks, not a rule of thumb."""
    env = {"UV_DEFAULT_INDEX": indexserver.url(compat_world)}
    res, found = doctor(project, env=env)
    assert "known-bad-pair" not in found, res.out  # 0.8.5 + 4.51.3: compatible
    install_into(project / ".venv", indexes.default, "transformers==5.0.0")
    res, found = doctor(project, env=env)
    assert res.code == 1
    bad = found["known-bad-pair"]
    assert "vllm 0.8.5 + transformers 5.0.0 is not compatible" in bad["message"]
    assert "all_special_tokens_extended at vllm/transformers_utils/tokenizer.py" in bad["message"]
    assert "envkit compat vllm==0.8.5 transformers==5.0.0" in bad["fix"]
    # the fix names the value: the transformers the project's profile pins for vLLM 0.8.5
    assert bad["fix"].startswith("pin transformers==4.51.3, as profile good does: ")


def test_fake_nvidia_smi_driver_and_bfloat16(project: Path, tmp_path: Path) -> None:
    """An RTX 2070 on driver 535.104.05 (CUDA 12.2) under torch's CUDA 12.4 runtime: it runs
    through minor version compatibility (a warning); a driver of CUDA 11.8 does not."""
    path = fake_smi(tmp_path)
    res, found = doctor(project, env={"PATH": path})
    res.assert_ok()
    data = res.json()
    assert data["gpus"][0] == {
        "index": 0, "name": "NVIDIA GeForce RTX 2070", "driver": "535.104.05",
        "compute_capability": "7.5", "memory_total_mib": 8192, "memory_free_mib": 7148,
    }  # fmt: skip
    assert data["gpu"]["source"] == "nvidia-smi: NVIDIA GeForce RTX 2070"
    older = found["driver-older-than-toolkit"]
    assert older["severity"] == "warning" and "driver 535.104.05" in older["message"]
    assert "CUDA 12.4's 550.54.14" in older["message"]
    assert "compute capability 7.5" in found["no-bfloat16"]["message"]
    assert "--dtype float16" in found["no-bfloat16"]["fix"]
    assert "no-nvidia-driver" not in found and "driver-too-old" not in found
    res, found = doctor(project, "--driver", "520.61.05", env={"PATH": path})
    assert res.code == 1
    assert "driver 520.61.05 cannot run torch's CUDA 12.4" in found["driver-too-old"]["message"]
    assert found["driver-too-old"]["fix"].startswith("install NVIDIA driver 550.54.14 or newer")
    assert res.json()["gpu"]["source"] == "nvidia-smi: NVIDIA GeForce RTX 2070, --driver 520.61.05"


def test_wsl2_hf_xet_and_secrets(project: Path, indexes: Indexes, tmp_path: Path) -> None:
    index = wheelhouse.write_index(
        tmp_path / "xet", [wheelhouse.Wheel("hf-xet", "1.1.0", {"hf_xet/__init__.py": ""})]
    )
    install_into(project / ".venv", index, "hf-xet==1.1.0")
    secrets = {
        "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz",
        "OPENAI_API_KEY": "sk-0123456789abcd",
        "VLLM_API_KEY": "plain-but-named-key",
    }
    env = {"WSL_DISTRO_NAME": "Ubuntu-22.04", "VLLM_WSL2_ENABLE_PIN_MEMORY": "1", **secrets}
    res, found = doctor(project, env=env)
    assert "VLLM_WSL2_ENABLE_PIN_MEMORY is '1'" in found["wsl2-pinned-memory"]["message"]
    assert "hf-xet 1.1.0 is older than 1.1.7" in found["old-hf-xet"]["message"]
    environment = res.json()["environment"]
    assert all(environment[name] == "***" for name in secrets)
    assert environment["VLLM_WSL2_ENABLE_PIN_MEMORY"] == "1"
    text = envkit("doctor", "--venv", ".venv", cwd=project, env=env)
    for value in secrets.values():
        assert value not in res.out + text.out + text.err
    _res, found = doctor(project, env={"HF_HUB_DISABLE_XET": "1"})
    assert "old-hf-xet" not in found and found["xet-disabled"]["severity"] == "info"


def test_a_system_interpreter_is_told_the_build_of_the_profile_in_use(tmp_path: Path) -> None:
    """No venv here and none active: doctor looks at python3 on PATH, a system interpreter,
    and its fix names the profile given, or says where the profiles are listed."""
    env = {"VIRTUAL_ENV": "", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    fixes = []
    for args in ((), ("--envs", str(ROOT / "envs"), "--profile", "vllm-0.9.2")):
        res = envkit("doctor", *args, "--json", cwd=tmp_path, env=env)
        found = {f["code"]: f for f in res.json()["findings"]}
        fixes.append(found["not-a-venv"]["fix"])
    assert fixes == [
        "work in a venv: envkit build PROFILE (envkit profiles lists them)",
        "work in a venv: envkit build vllm-0.9.2",
    ]


def test_doctor_bad_input(tmp_path: Path) -> None:
    res = envkit("doctor", "--venv", "nowhere", cwd=tmp_path)
    assert res.code == 2 and "'nowhere' does not exist." in res.err
    (tmp_path / "plain").mkdir()
    res = envkit("doctor", "--venv", "plain", cwd=tmp_path)
    assert res.code == 2 and "'plain' is not a virtual environment (no plain/bin/python)" in res.err
    (tmp_path / "envs").mkdir()
    res = envkit("doctor", "--profile", "../x", cwd=tmp_path)
    assert res.code == 2


def test_doctor_defaults_to_the_project_venv(tmp_path: Path) -> None:
    """./.venv (the one envkit builds) before an activated $VIRTUAL_ENV."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True
    )
    other = tmp_path / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    res = envkit("doctor", "--json", cwd=tmp_path, env={"VIRTUAL_ENV": str(other)})
    data = json.loads(res.out)
    assert data["venv"] is True
    assert Path(data["prefix"]).resolve() == (tmp_path / ".venv").resolve()


def test_an_editable_install_and_its_source_metadata_are_one_copy(tmp_path: Path) -> None:
    """`pip install -e .` leaves src/NAME.egg-info in the project: not a second copy."""
    from dataclasses import replace

    from envkit.env.doctor import duplicates
    from envkit.env.facts import Installed

    project = tmp_path / "proj"
    editable = Installed(version="0.1.0", location=str(tmp_path / "site"), installer="pip")
    source = Installed(version="0.1.0", location=str(project / "src"), installer="")
    linked = replace(editable, editable=str(project))
    assert duplicates({"envkit": [linked, source]}) == []
    # without the editable link, or with another version, they are two copies
    assert [f.code for f in duplicates({"envkit": [editable, source]})] == [
        "duplicate-distribution"
    ]
    assert duplicates({"envkit": [linked, replace(source, version="0.2.0")]})


def test_one_install_reached_through_lib64_and_lib_is_one_copy(tmp_path: Path) -> None:
    """uv's lib64 -> lib link, with both paths on sys.path (a platlibdir of lib64 puts both
    there; a .pth does here): one install, so no duplicate-distribution."""
    from envkit.io.uv import find_uv

    house = tmp_path / "house"
    house.mkdir()
    index = wheelhouse.write_index(
        house, [wheelhouse.Wheel("tinydist", "1.0", {"tinydist/__init__.py": "x = 1\n"})]
    )
    venv = tmp_path / ".venv"
    subprocess.run(
        [find_uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True
    )
    install_into(venv, index, "tinydist==1.0")
    if not (venv / "lib64").exists():
        (venv / "lib64").symlink_to("lib")
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "zz-lib64.pth").write_text(str(venv / "lib64" / site.parent.name / "site-packages"))
    res = envkit(
        "doctor", "--venv", str(venv), "--json", cwd=tmp_path, env={"PATH": no_gpu_path(tmp_path)}
    )
    codes = [f["code"] for f in json.loads(res.out)["findings"]]
    assert "duplicate-distribution" not in codes, res.out
