"""envkit verify on venvs made wrong on purpose: drift, mixed installs, missing venvs."""

from __future__ import annotations

from pathlib import Path

import pytest

import indexserver
from conftest import Indexes
from helpers import envkit, install_into, profile_text, shadow_transformers


@pytest.fixture
def project(built_copy: Path) -> Path:
    return built_copy


def checks(res) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return {(c["kind"], c["name"]): c for c in res.json()["checks"]}


def test_clean_venv_passes_and_reports_every_kind(project: Path) -> None:
    res = envkit("verify", "good", "--json", cwd=project)
    assert res.code == 0
    kinds = {kind for kind, _name in checks(res)}
    assert kinds == {"interpreter", "version", "import", "probe", "torch", "compat"}
    # the offline suite's index answers nothing: compat is said unchecked, not failed
    compat = checks(res)[("compat", "vllm 0.8.5 + transformers 4.51.3")]
    assert (compat["status"], compat["found"]) == ("warn", "not checked")


def test_verify_uses_the_compat_findings_of_the_installed_pair(
    project: Path, indexes: Indexes, compat_world: indexserver.Server, scan_cache: Path
) -> None:
    env = {"UV_DEFAULT_INDEX": indexserver.url(compat_world)}
    res = envkit("verify", "good", "--json", cwd=project, env=env)
    res.assert_ok()
    assert checks(res)[("compat", "vllm 0.8.5 + transformers 4.51.3")]["status"] == "pass"
    install_into(project / ".venv", indexes.default, "transformers==5.0.0")
    res = envkit("verify", "good", "--json", cwd=project, env=env)
    assert res.code == 1
    compat = checks(res)[("compat", "vllm 0.8.5 + transformers 5.0.0")]
    assert compat["ok"] is False and compat["found"] == "not compatible"
    assert "all_special_tokens_extended at vllm/transformers_utils/tokenizer.py" in compat["detail"]
    assert "envkit compat vllm==0.8.5 transformers==5.0.0" in compat["fix"]
    assert compat["fix"].startswith("pin transformers==4.51.3, as profile good does: ")


def test_pythonpath_copy_is_a_mixed_install(project: Path, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow_transformers(shadow)
    res = envkit("verify", "good", "--json", cwd=project, env={"PYTHONPATH": str(shadow)})
    assert res.code == 1
    found = checks(res)
    imp = found[("import", "transformers")]
    assert imp["ok"] is False
    assert str(shadow) in imp["detail"] and "PYTHONPATH" in imp["detail"]
    assert "unset PYTHONPATH" in imp["fix"]
    ver = found[("version", "transformers")]
    assert ver["ok"] is False
    assert "installed by pip" in ver["detail"] and "installed by uv" in ver["detail"]
    assert found[("import", "vllm")]["ok"] is True


def test_drifted_version_is_named_with_a_fix(project: Path, indexes: Indexes) -> None:
    install_into(project / ".venv", indexes.default, "transformers==5.0.0")
    res = envkit("verify", "good", "--json", cwd=project)
    assert res.code == 1
    found = checks(res)
    ver = found[("version", "transformers")]
    assert (ver["expected"], ver["found"], ver["ok"]) == ("4.51.3", "5.0.0", False)
    assert ver["fix"] == "rebuild: envkit build good"
    probe = found[("probe", "transformers.PreTrainedTokenizerBase.all_special_tokens_extended")]
    assert probe["ok"] is False and "transformers==4.51.3" in probe["fix"]
    text = envkit("verify", "good", cwd=project, env={"COLUMNS": "80"})
    # the version, the probe, and the pair (its metadata: this vLLM predates transformers 5)
    assert text.code == 1 and "3 of " in text.out
    # piped: folded at word boundaries, never cut
    assert "…" not in text.out and "all_special_tokens_extended  missing" in text.out
    assert "site-packages/transformers/__init__.py" in text.out


def test_broken_import_is_reported(project: Path) -> None:
    init = next((project / ".venv").glob("lib/python*/site-packages/vllm/__init__.py"))
    init.write_text("raise RuntimeError('CUDA driver too old')\n")
    res = envkit("verify", "good", "--json", cwd=project)
    assert res.code == 1
    imp = checks(res)[("import", "vllm")]
    assert "RuntimeError: CUDA driver too old" in imp["detail"]


def test_a_damaged_metadata_is_said_not_blamed_on_the_interpreter(project: Path) -> None:
    """A dist-info folder whose METADATA is gone (an interrupted install) is a version check
    that fails with what is wrong, not "the probe answered nonsense" about the interpreter."""
    [info] = (project / ".venv").glob("lib/python*/site-packages/transformers-*.dist-info")
    (info / "METADATA").unlink()
    res = envkit("verify", "good", "--json", cwd=project)
    assert res.code == 1, res.out + res.err
    ver = checks(res)[("version", "transformers")]
    assert (ver["found"], ver["ok"], ver["fix"]) == (
        "no version",
        False,
        "rebuild: envkit build good",
    )
    assert "METADATA is missing or gives no version" in ver["detail"]
    res = envkit("doctor", "--venv", ".venv", "--json", cwd=project)
    said = [f["message"] for f in res.json()["findings"] if f["code"] == "pair-not-checked"]
    assert said == ["compat not checked: the installed transformers has no version in its metadata"]


def test_verify_existing_refuses_a_venv_that_is_not_there(tmp_path: Path) -> None:
    """The flow ``envkit verify`` runs: the venv's lock is taken only on a venv that exists."""
    from envkit.env.verify import verify_existing
    from envkit.errors import BadInput
    from envkit.profiles.profile import parse_profile

    profile = parse_profile(profile_text(), path=tmp_path / "good.toml", name="good")
    said: list[str] = []
    with pytest.raises(BadInput) as info:
        verify_existing(profile, tmp_path / "nowhere", note=said.append)
    assert "nowhere' does not exist, so there is no environment to check" in info.value.message
    assert f"envkit build good --venv {tmp_path / 'nowhere'};" in info.value.hint  # in use
    assert said == [] and not (tmp_path / ".envkit").exists()
