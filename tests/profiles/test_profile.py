"""Profiles: the format, every kind of bad input, finding profiles by name and path."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.errors import BadInput, ProfileError, ProfileNotFound
from envkit.profiles.catalog import Catalog
from envkit.profiles.profile import load_profile

from helpers import FIXTURES, ROOT, envkit, profile_text

SHIPPED = ROOT / "envs"


def problems(tmp_path: Path, text: str | bytes) -> list[tuple[str, int | None, str]]:
    path = tmp_path / "p.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    return [(p.key, p.line, p.message) for p in info.value.problems]


def test_shipped_profile_loads_with_its_pins() -> None:
    profile = load_profile(SHIPPED / "vllm-0.8.5+qwen2-vl.toml")
    assert profile.name == "vllm-0.8.5+qwen2-vl"
    assert "vllm==0.8.5" in profile.requirements
    assert "transformers==4.51.3" in profile.constraints
    assert profile.torch.backend == "cu124" and profile.torch.cuda == "12.4"
    assert profile.expected_versions()["transformers"] == "4.51.3"
    assert "transformers.PreTrainedTokenizerBase.all_special_tokens_extended" in (
        profile.checks.probes
    )
    assert "qwen2_vl" in profile.models.model_types


def test_every_shipped_profile_is_valid() -> None:
    names = {load_profile(path).name for path in SHIPPED.glob("*.toml")}
    assert {"vllm-0.8.5+qwen2-vl", "vllm-0.17.1+qwen3.5"} <= names


def test_a_file_read_again_is_parsed_again_only_when_it_changed(tmp_path: Path) -> None:
    """Profiles are kept per process by their text: an edit is seen, a broken file is
    refused every time, and the same file under another name is its own profile."""
    path = tmp_path / "p.toml"
    path.write_text(profile_text())
    first = load_profile(path)
    assert load_profile(path) is first  # the same text: not parsed again
    path.write_text(profile_text(constraints=("transformers==5.0.0",)))
    assert load_profile(path).constraints == ("transformers==5.0.0",)
    path.write_text(profile_text())
    assert load_profile(path) == first
    assert load_profile(path, name="other").name == "other"
    path.write_text('python = "3.12"\nrequirements = ["vllm==0.8.5"\n')
    for _ in range(2):
        with pytest.raises(ProfileError, match="malformed TOML"):
            load_profile(path)


def test_malformed_toml_reports_the_line(tmp_path: Path) -> None:
    found = problems(tmp_path, 'python = "3.12"\nrequirements = ["vllm==0.8.5"\n')
    assert len(found) == 1
    _key, line, message = found[0]
    assert line == 2 and "malformed TOML" in message and "\\x00" not in message


def test_unknown_keys_suggest_the_intended_one_and_all_problems_come_at_once(
    tmp_path: Path,
) -> None:
    text = (
        'pyton = "3.12"\nrequirements = ["vllm==0.8.5"]\n'
        '[torch]\nbackedn = "cu124"\n[verify]\nimport = ["vllm"]\n'
    )
    found = {key: (line, message) for key, line, message in problems(tmp_path, text)}
    assert found["pyton"] == (1, "unknown key 'pyton'; did you mean 'python'?")
    assert found["torch.backedn"] == (4, "unknown key 'backedn'; did you mean 'backend'?")
    assert found["verify.import"] == (6, "unknown key 'import'; did you mean 'imports'?")
    assert found["python"][1] == "required key 'python' is missing"


def test_bad_specifiers_are_rejected_with_their_line(tmp_path: Path) -> None:
    text = (
        'python = "3.12"\nrequirements = [\n  "vllm==0.8.5",\n]\n'
        'constraints = ["transformers=4.51.3"]\n'
    )
    ((key, line, message),) = problems(tmp_path, text)
    assert key == "constraints" and line == 5
    assert "'transformers=4.51.3' is not a valid requirement" in message


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ('python = "~~3"\nrequirements = ["a"]\n', "python", "not a Python version"),
        ('python = "3.12"\nrequirements = []\n', "requirements", "at least one"),
        ('python = "3.12"\nrequirements = "vllm"\n', "requirements", "must be an array"),
        ('python = 3.12\nrequirements = ["a"]\n', "python", "must be a string"),
        ('python = "3.12"\nrequirements = [1]\n', "requirements", "non-empty strings"),
        (
            'python = "3.12"\nrequirements = ["a"]\n[torch]\nbackend = "cuda"\n',
            "torch.backend",
            "not a torch backend",
        ),
        (
            'python = "3.12"\nrequirements = ["a"]\n[torch]\nbackend = "cu124"\ncuda = "12.6"\n',
            "torch.cuda",
            "disagrees",
        ),
        (
            'python = "3.12"\nrequirements = ["a"]\n[verify]\nprobes = ["nodot"]\n',
            "verify.probes",
            "module.attribute",
        ),
        (
            'python = "3.12"\nrequirements = ["a"]\n[verify]\nimports = ["a b"]\n',
            "verify.imports",
            "not a module name",
        ),
        (
            'python = "3.12"\nrequirements = ["a"]\n[verify.versions]\ntorch = "two"\n',
            "verify.versions.torch",
            "'two' is not a version such as '0.8.5'",
        ),
        ('python = "3.12"\nrequirements = ["a"]\ntorch = "cu124"\n', "torch", "must be a table"),
    ],
)
def test_bad_values(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    found = problems(tmp_path, text)
    assert any(k == key and fragment in m for k, _line, m in found), found


def test_empty_file_lists_the_required_keys(tmp_path: Path) -> None:
    keys = [k for k, _l, _m in problems(tmp_path, "")]
    assert keys == ["python", "requirements"]


def test_binary_file(tmp_path: Path) -> None:
    ((_key, _line, message),) = problems(tmp_path, b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    assert "not UTF-8 text" in message


def test_backend_implies_cuda(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(profile_text(backend="cu128"))
    assert load_profile(path).torch.cuda == "12.8"


def test_hostile_and_unknown_names(tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text(profile_text())
    for hostile in ("../good", "../../etc/passwd", "a/b", "..", "~root", ""):
        with pytest.raises(BadInput):
            Catalog((tmp_path,), explicit=True).resolve(hostile)
    with pytest.raises(ProfileNotFound) as info:
        Catalog((tmp_path,), explicit=True).resolve("goood")
    assert "Did you mean 'good'?" in str(info.value)
    # a name cut short is the name it starts; the start of several names suggests none
    for name in ("vllm-0.8.5+qwen2-vl", "vllm-0.8.6", "vllm-0.9.2"):
        (tmp_path / f"{name}.toml").write_text(profile_text())
    with pytest.raises(ProfileNotFound) as info:
        Catalog((tmp_path,), explicit=True).resolve("vllm-0.8.5")
    assert "Did you mean 'vllm-0.8.5+qwen2-vl'?" in str(info.value)
    with pytest.raises(ProfileNotFound) as info:
        Catalog((tmp_path,), explicit=True).resolve("vllm-0.8")
    assert "Did you mean" not in str(info.value)
    assert (
        Catalog((Path("/nonexistent"),), explicit=True).resolve(str(tmp_path / "good.toml")).name
        == "good"
    )
    with pytest.raises(ProfileNotFound):
        Catalog((tmp_path,), explicit=True).resolve(str(tmp_path / "missing.toml"))


def test_cli_bad_inputs_exit_2_with_one_message_and_no_traceback(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "broken.toml").write_text("python = [\n")
    (envs / "empty.toml").write_text("")
    (envs / "binary.toml").write_bytes(bytes(range(256)))
    for argument in ("broken", "empty", "binary", "../x", "nope", "missing.toml"):
        res = envkit("show", argument, cwd=tmp_path)
        assert res.code == 2, (argument, res)
        assert res.err.startswith("error: ") and res.err.count("\n") == 1, res.err
        assert "Traceback" not in res.err
    res = envkit("profiles", cwd=tmp_path)
    assert res.code == 2 and res.err.count("invalid: ") == 3
    res = envkit("show", "x", cwd=tmp_path / "envs")
    assert res.code == 2 and "does not exist" not in res.err and "No profile named" in res.err
    # a folder without envs/: the profiles shipped with envkit are still there to read,
    # but nothing writes beside them (lock, publish work on a project's own folder)
    res = envkit("profiles", cwd=tmp_path / "envs")
    assert res.code == 0 and "vllm-0.8.5+qwen2-vl" in res.out
    res = envkit("lock", "--all", "--check", cwd=tmp_path / "envs")
    assert res.code == 2 and "No profiles folder: " in res.err
    assert "envkit new-profile NAME --for-model MODEL writes into ./envs" in res.err


def test_shipped_profiles_and_locks_work_from_any_folder(tmp_path: Path) -> None:
    model = FIXTURES / "models" / "Qwen2-VL-2B-Instruct"
    res = envkit("which", str(model), "--json", cwd=tmp_path)
    res.assert_ok()
    assert "vllm-0.8.5+qwen2-vl" in res.json()["supported_by"]
    shown = envkit("show", "vllm-0.8.5+qwen2-vl", "--json", cwd=tmp_path)
    assert shown.code == 0
    matrix = envkit(
        "--envs",
        str(Path(shown.json()["profile"]["path"]).parent),
        "matrix",
        "--json",
        cwd=tmp_path,
    )
    states = {c["state"] for c in matrix.json()["cells"]}
    assert states <= {"locked", "source-only"}  # its published locks came with it


def test_profiles_and_show_json(tmp_path: Path) -> None:
    res = envkit("--envs", str(SHIPPED), "profiles", "--json", cwd=tmp_path)
    assert res.code == 0
    names = [p["name"] for p in res.json()["profiles"]]
    assert "vllm-0.8.5+qwen2-vl" in names
    res = envkit(
        "show", "vllm-0.8.5+qwen2-vl", "--json", cwd=tmp_path, env={"ENVKIT_ENVS": str(SHIPPED)}
    )
    assert res.code == 0
    data = res.json()["profile"]
    assert "vllm==0.8.5" in data["requirements"]
    assert "transformers==4.51.3" in data["constraints"]
    assert data["torch"]["backend"] == "cu124" and data["torch"]["cuda"] == "12.4"
    text = envkit("show", "vllm-0.8.5+qwen2-vl", cwd=ROOT)
    assert text.code == 0 and "transformers==4.51.3" in text.out
    assert all(len(line) <= 100 for line in text.out.splitlines())


def test_json_errors_are_json(tmp_path: Path) -> None:
    res = envkit("show", "../x", "--json", cwd=tmp_path)
    assert res.code == 2
    data = res.json()
    assert data["ok"] is False and data["error"] == "BadInput" and data["exit_code"] == 2
