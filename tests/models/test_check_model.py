"""check-model, which, scan --update and new-profile against the served registry world."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import layouts
import pytest

from envkit.profiles.profile import load_profile

import indexserver
from helpers import envkit, run_cli
from indexserver import url
from registry_world import MODELS

QWEN2VL = MODELS / "Qwen2-VL-2B-Instruct"
QWEN35 = MODELS / "Qwen3.5-9B"


def pinned(vllm: str, transformers: str) -> str:
    return f"""# hand-written comment that must survive scan --update
python = "3.12"
requirements = ["vllm=={vllm}"]
constraints = ["transformers=={transformers}"]

[torch]
backend = "cu124"
"""


@pytest.fixture(scope="module")
def envs(world: indexserver.Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two profiles whose [models] tables come from `envkit scan --update`."""
    root = tmp_path_factory.mktemp("mc")
    folder = root / "envs"
    folder.mkdir()
    (folder / "old.toml").write_text(pinned("0.8.5", "4.51.3"))
    (folder / "new.toml").write_text(pinned("0.33.0", "5.20.2"))
    for name in ("old", "new"):
        res = envkit("scan", "--update", name, "--index-url", url(world), cwd=root)
        res.assert_ok()
    return folder


def run(envs: Path, *args: str):  # type: ignore[no-untyped-def]
    return envkit("--envs", str(envs), *args, cwd=envs.parent)


def test_scan_update_writes_sorted_lists_and_keeps_comments(envs: Path) -> None:
    text = (envs / "old.toml").read_text()
    assert text.startswith("# hand-written comment that must survive scan --update")
    profile = load_profile(envs / "old.toml")
    models = profile.models
    assert (models.vllm, models.transformers) == ("0.8.5", "4.51.3")
    assert set(models.architectures) == layouts.vllm_085().architectures
    assert list(models.architectures) == sorted(models.architectures)
    assert "qwen2_vl" in models.model_types and "mllama" in models.vllm_model_types
    assert "vllm-0.8.5" in models.source


def test_report_1_models_against_the_old_profile(envs: Path) -> None:
    ok = run(envs, "check-model", "old", str(QWEN2VL), "--json")
    ok.assert_ok()
    data = ok.json()
    assert data["ok"] is True and data["model_type"] == "qwen2_vl"
    assert data["architectures"] == ["Qwen2VLForConditionalGeneration"]
    assert data["problems"] == [] and "old" in data["supported_by"]
    bad = run(envs, "check-model", "old", str(QWEN35 / "config.json"), "--json")
    assert bad.code == 1
    data = bad.json()
    assert data["ok"] is False and data["model_type"] == "qwen3_5"
    codes = {p["code"] for p in data["problems"]}
    assert codes == {"unknown-model-type", "unsupported-architecture"}
    assert all(p["message"] for p in data["problems"])
    assert data["supported_by"] == ["new"]
    text = run(envs, "check-model", "old", str(QWEN35))
    assert "CANNOT load" in text.out and "supported by: new" in text.out
    # the fixes name the profile that can load it, and the command
    assert {p["fix"] for p in data["problems"]} == {
        "use a profile whose transformers knows it: new, envkit build new",
        "use a profile whose vLLM lists it: new, envkit build new",
    }
    assert "supported_by)" not in text.out


def test_which_puts_loadable_profiles_first(envs: Path) -> None:
    res = run(envs, "which", str(QWEN2VL), "--json")
    assert res.code == 0
    verdicts = res.json()["profiles"]
    assert [v["profile"] for v in verdicts] == ["new", "old"]  # newer vLLM first
    assert all(v["ok"] for v in verdicts)
    res = run(envs, "which", str(QWEN35), "--json")
    assert [(v["profile"], v["ok"]) for v in res.json()["profiles"]] == [
        ("new", True),
        ("old", False),
    ]


def write_config(tmp_path: Path, data: object, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_dropped_out_of_tree_and_remote_code(
    envs: Path, tmp_path: Path, world: indexserver.Server
) -> None:
    phi = write_config(
        tmp_path,
        {
            "model_type": "phi3small",
            "architectures": ["Phi3SmallForCausalLM"],
            "auto_map": {"AutoConfig": "configuration_phi3_small.Cfg"},
        },
    )
    res = run(
        envs, "check-model", "new", str(phi), "--json", "--index-url", "http://127.0.0.1:9/simple"
    )
    data = res.json()
    assert res.code == 1
    assert [p["code"] for p in data["problems"]] == ["architecture-removed"]
    # the index cannot be read: vLLM's record is said as a record, not as the registries' word
    message = data["problems"][0]["message"]
    assert "vLLM records it as supported until 0.9.2 (not checked against" in message
    assert data["remote_code"] is True and any("trust-remote-code" in n for n in data["notes"])
    assert data["supported_by"] == ["old"]
    bart = write_config(tmp_path, {"model_type": "bart", "architectures": ["BartModel"]}, "b.json")
    data = run(envs, "check-model", "new", str(bart), "--json", "--index-url", url(world)).json()
    assert data["problems"][0]["code"] == "architecture-out-of-tree"
    # no release lists it in vLLM itself; the newest one says where it lives now
    assert data["releases"]["plugin"] == "the Bart plugin" and data["releases"]["newest"] == ""


def test_no_profile_can_load_it_names_the_releases(
    envs: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    cfg = write_config(tmp_path, {"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    # hide it from both profiles: a profile folder holding only a profile without llama
    only = tmp_path / "envs"
    only.mkdir()
    (only / "x.toml").write_text((envs / "old.toml").read_text().replace('"LlamaForCausalLM",', ""))
    res = envkit(
        "--envs", str(only), "which", str(cfg), "--json", "--index-url", url(world), cwd=tmp_path
    )
    assert res.code == 1
    releases = res.json()["releases"]
    assert (releases["first"], releases["newest"]) == ("0.2.7", "0.33.0")
    # no fix points at the empty supported_by: each names the releases and the command
    (fix,) = {p["fix"] for v in res.json()["profiles"] for p in v["problems"]}
    assert fix == (
        "use a profile whose vLLM lists it; none here can, but vLLM 0.2.7 through 0.33.0 list "
        f"LlamaForCausalLM: draft one, envkit new-profile NAME --for-model {cfg}"
    )
    text = envkit("--envs", str(only), "which", str(cfg), "--index-url", url(world), cwd=tmp_path)
    assert "supported by: no profile envkit knows of" in text.out
    offline = envkit(
        "--envs",
        str(only),
        "which",
        str(cfg),
        "--json",
        "--index-url",
        "http://127.0.0.1:9/simple",
        cwd=tmp_path,
        env={"ENVKIT_CACHE_DIR": str(tmp_path / "empty-cache")},
    )
    assert offline.code == 1
    assert "could not look up vLLM releases" in offline.json()["releases_lookup"]
    (fix,) = {p["fix"] for v in offline.json()["profiles"] for p in v["problems"]}
    assert fix.endswith(
        f"none here can: draft one, envkit new-profile NAME --for-model {cfg} "
        "(it finds the vLLM releases listing it)"
    )


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"model_type": "llama",', "not valid JSON (line 1"),
        ("[1, 2]", "a list of 2 items, not a JSON object"),
        ('{"architectures": ["LlamaForCausalLM"]}', "has no model_type"),
        ('{"model_type": "llama", "architectures": "LlamaForCausalLM"}', "must be a list"),
        ('{"model_type": "llama", "architectures": [1]}', "must be a list"),
    ],
)
def test_broken_configs_exit_2(envs: Path, tmp_path: Path, content: str, fragment: str) -> None:
    res = run(envs, "check-model", "old", str(write_config(tmp_path, content)))
    assert res.code == 2, res
    assert fragment in res.err and "Traceback" not in res.err


def test_bad_model_arguments(envs: Path, tmp_path: Path) -> None:
    for model in (str(tmp_path), "../../etc", "no/such/path/at/all", "not a model"):
        res = run(envs, "check-model", "old", model)
        assert res.code == 2, (model, res)
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    assert run(envs, "check-model", "old", str(tmp_path / "bin")).code == 2
    assert run(envs, "check-model", "../x", str(QWEN2VL)).code == 2
    empty = run(envs, "check-model", "old", " ")  # not the current folder, as Path("") is
    assert empty.code == 2 and "The model is empty." in empty.err


def test_new_profile_drafts_a_loadable_profile(
    envs: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    folder = tmp_path / "envs"
    res = envkit(
        "--envs",
        str(folder),
        "new-profile",
        "qwen35",
        "--for-model",
        str(QWEN35),
        "--index-url",
        url(world),
        "--json",
        cwd=tmp_path,
    )
    res.assert_ok()
    profile = load_profile(folder / "qwen35.toml")
    assert profile.requirements == ("vllm==0.33.0",)
    # vLLM 0.33.0 allows >=5.16.1,<5.21.0; 5.24.0 is outside, 5.20.2 inside and knows qwen3_5
    assert "transformers==5.20.2" in profile.constraints and "torch==2.14.0" in profile.constraints
    assert profile.torch.backend == "cu130" and profile.python == "3.12"
    assert "qwen3_5" in profile.models.model_types
    check = envkit("--envs", str(folder), "check-model", "qwen35", str(QWEN35), cwd=tmp_path)
    assert check.code == 0
    again = envkit(
        "--envs",
        str(folder),
        "new-profile",
        "qwen35",
        "--for-model",
        str(QWEN35),
        "--index-url",
        url(world),
        cwd=tmp_path,
    )
    assert again.code == 2 and "--force" in again.err
    older = envkit(
        "--envs",
        str(folder),
        "new-profile",
        "q085",
        "--for-model",
        str(QWEN2VL),
        "--vllm",
        "0.8.5",
        "--index-url",
        url(world),
        cwd=tmp_path,
    )
    older.assert_ok()
    assert "transformers==4.51.3" in load_profile(folder / "q085.toml").constraints
    wrong = envkit(
        "--envs",
        str(folder),
        "new-profile",
        "q",
        "--for-model",
        str(QWEN35),
        "--vllm",
        "0.8.5",
        "--index-url",
        url(world),
        cwd=tmp_path,
    )
    assert wrong.code == 2 and "does not list" in wrong.err


def test_scan_update_keeps_the_models_table_where_it_is_with_its_comments(
    world: indexserver.Server, tmp_path: Path
) -> None:
    folder = tmp_path / "envs"
    folder.mkdir()
    text = pinned("0.8.5", "4.51.3") + (
        '\n[models]\n# why this table matters to us\nvllm = "0.0.1"\n'
        '# a note about the architectures\narchitectures = ["Old"]\n'
        '\n[matrix]\npython = ["3.12"]\n'
    )
    (folder / "p.toml").write_text(text)
    res = envkit(
        "--envs", str(folder), "scan", "--update", "p", "--index-url", url(world), cwd=tmp_path
    )
    res.assert_ok()
    after = (folder / "p.toml").read_text()
    assert "# why this table matters to us" in after and "# a note about the architectures" in after
    assert after.index("[models]") < after.index("[matrix]")  # where it was
    models = load_profile(folder / "p.toml").models
    assert models.vllm == "0.8.5" and "Old" not in models.architectures


def test_a_stale_models_table_is_said_and_the_pins_answer(
    envs: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    """Pins edited after the last scan --update: the answer comes from the pinned releases."""
    folder = tmp_path / "envs"
    folder.mkdir()
    text = (envs / "old.toml").read_text()  # [models] for vLLM 0.8.5 + transformers 4.51.3
    edited = text.replace("vllm==0.8.5", "vllm==0.33.0").replace(
        "transformers==4.51.3", "transformers==5.20.2"
    )
    (folder / "edited.toml").write_text(edited)
    res = envkit(
        "--envs", str(folder), "check-model", "edited", str(QWEN35), "--json",
        "--index-url", url(world), cwd=tmp_path,
    )  # fmt: skip
    res.assert_ok()
    data = res.json()
    assert data["ok"] is True
    assert any("[models] table of edited is stale" in n for n in data["notes"])
    assert any("vLLM 0.33.0 + transformers 5.20.2" in n for n in data["notes"])


def test_history_of_an_architecture_across_releases(
    envs: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    def history(*args: str) -> dict[str, Any]:
        res = envkit(
            "--envs", str(envs), "history", *args, "--index-url", url(world), "--json",
            cwd=tmp_path,
        )  # fmt: skip
        assert res.code in (0, 1), res.err
        data: dict[str, Any] = res.json()
        return data

    phi = history("Phi3SmallForCausalLM")["architectures"][0]
    assert (phi["first"], phi["newest"]) == ("0.8.5", "0.8.5")
    by_version = {r["version"]: r for r in phi["releases"]}
    assert by_version["0.9.0"]["presence"] == "unreadable"  # that wheel has no registry
    assert by_version["0.33.0"] == {
        "version": "0.33.0",
        "presence": "dropped",
        "transformers": "<5.21.0,>=5.16.1",
        # vLLM's record names 0.9.2, which no registry here lists: the record is not trusted
        "note": "recorded as until 0.9.2, but its registries list it through 0.8.5",
        "bound": None,
    }
    assert phi["dropped_in"] == "0.33.0" and phi["profiles"] == ["old"]
    llama = history("LlamaForCausalLM")["architectures"][0]
    assert (llama["first"], llama["newest"]) == ("0.2.7", "0.33.0")
    assert llama["gaps"] == ["0.9.0"] and set(llama["profiles"]) == {"old", "new"}
    mllama = history("MllamaForConditionalGeneration")["architectures"][0]
    # 0.33.0 no longer lists it and records nothing of it: dropped there all the same
    assert (mllama["newest"], mllama["dropped_in"]) == ("0.8.5", "0.33.0")
    bounded = {r["version"]: r["bound"] for r in mllama["releases"] if r["bound"]}
    assert bounded == {
        "0.8.5": {
            "min": "",
            "max": "4.48",
            "reason": "",
            "example": "example-org/mllama-tiny",
            "hf_only": "",
        }
    }  # from vLLM 0.8.5's test registry; the other releases publish none
    bart = history("BartModel")
    assert bart["ok"] is False and bart["architectures"][0]["plugin"] == "the Bart plugin"
    model = history(str(QWEN2VL))
    assert model["model"].endswith("config.json")
    assert model["architectures"][0]["architecture"] == "Qwen2VLForConditionalGeneration"
    text = envkit(
        "--envs", str(envs), "history", "LlamaForCausalLM", "--index-url", url(world), cwd=tmp_path
    )
    assert "LlamaForCausalLM: vLLM 0.2.7 through 0.33.0" in text.out and "gaps: 0.9.0" in text.out


def qwen3_config(folder: Path) -> Path:
    """A small config.json of a Qwen3 text model (the shape, our own numbers)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen2", "hidden_size": 64}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_history_of_a_model_type_shows_each_architecture_serving_it(
    envs: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    """A model type (what the site's search takes) maps to the architectures transformers'
    auto tables give it and those of vLLM's registry named after it; each is shown as for a
    model folder, those no release lists named apart."""

    def history(model_type: str) -> tuple[int, dict[str, Any]]:
        res = envkit(
            "--envs", str(envs), "history", model_type, "--index-url", url(world), "--json",
            cwd=tmp_path,
        )  # fmt: skip
        data: dict[str, Any] = res.json()
        return res.code, data

    code, qwen = history("qwen3_5")
    assert code == 0 and qwen["model_type"] == "qwen3_5" and qwen["transformers"] == "5.24.0"
    assert qwen["serving"] == ["Qwen3_5ForConditionalGeneration", "Qwen3_5Model"]
    (shown,) = qwen["architectures"]  # Qwen3_5Model: transformers' base class, no release's
    assert (shown["architecture"], shown["first"], shown["newest"]) == (
        "Qwen3_5ForConditionalGeneration", "0.33.0", "0.33.0"
    )  # fmt: skip
    # from transformers' tables alone (the class is not named after its model type)
    code, mid = history("midtype")
    assert code == 0 and [h["architecture"] for h in mid["architectures"]] == ["Mid003ForCausalLM"]
    # from vLLM's names alone: the world's 4.x transformers has no tables, 5.24.0 no aquila
    code, aquila = history("aquila")
    assert code == 0 and aquila["serving"] == ["AquilaForCausalLM", "AquilaModel"]
    assert all(h["first"] for h in aquila["architectures"])  # only those some release lists
    code, none = history("nosuchtype")
    assert code == 1 and none["serving"] == [] and none["architectures"] == []
    said = envkit(
        "--envs", str(envs), "history", "qwen3_6", "--index-url", url(world), "--wide",
        cwd=tmp_path,
    )  # fmt: skip
    assert said.code == 1 and said.out.startswith(
        "model type qwen3_6: no architecture serves it (none in transformers 5.24.0's auto "
        "tables and vLLM's registry names)\n  fix: did you mean qwen3_5"
    )
    text = envkit(
        "--envs", str(envs), "history", "qwen3_5", "--index-url", url(world), "--wide",
        cwd=tmp_path,
    ).out  # fmt: skip
    assert text.startswith(
        "model type qwen3_5: served by Qwen3_5ForConditionalGeneration, Qwen3_5Model (from "
        "transformers 5.24.0's auto tables and vLLM's registry names)\n"
        "  listed by no published vLLM release: Qwen3_5Model\n"
        "Qwen3_5ForConditionalGeneration: vLLM 0.33.0 through 0.33.0"
    )


def test_vllms_own_transformers_bounds_are_read_written_and_obeyed(
    envs: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    models = load_profile(envs / "old.toml").models
    # vLLM 0.8.5's test registry (from its sdist): bounds that exclude transformers 4.51.3
    assert set(models.transformers_bounds) == {"Qwen3ForCausalLM", "MllamaForConditionalGeneration"}
    qwen3 = models.transformers_bounds["Qwen3ForCausalLM"]
    assert (qwen3.minimum, qwen3.example) == ("4.52.dev0", "example-org/qwen3-tiny")
    assert qwen3.reason == "needs the newer attention code"
    text = (envs / "old.toml").read_text()
    assert "[models.transformers_bounds]" in text
    res = run(envs, "check-model", "old", str(qwen3_config(tmp_path / "q3")), "--json")
    assert res.code == 1, res.err
    data = res.json()
    (problem,) = data["problems"]
    assert problem["code"] == "transformers-too-old"
    assert "4.52.dev0" in problem["message"] and "example-org/qwen3-tiny" in problem["message"]
    assert "newer attention code" in problem["message"]
    assert "old" not in data["supported_by"]
    scan = envkit("scan", "vllm==0.8.5", "--json", "--index-url", url(world), cwd=tmp_path)
    bounds = scan.json()["transformers_bounds"]
    assert bounds["MllamaForConditionalGeneration"]["max"] == "4.48"
    assert "Mid000ForCausalLM" not in bounds  # "soon" is no version vLLM could compare
    assert "LlamaForCausalLM" not in bounds  # no bound at all


def test_a_malformed_bounds_table_is_a_profile_error(envs: Path, tmp_path: Path) -> None:
    folder = tmp_path / "envs"
    folder.mkdir()
    text = (envs / "old.toml").read_text()
    (folder / "b.toml").write_text(
        text.replace(
            "[models.transformers_bounds]",
            "[models.transformers_bounds]\nX = 3\nY = { min = 'soon' }",
        )
    )
    res = envkit("--envs", str(folder), "show", "b", cwd=tmp_path)
    assert res.code == 2
    assert "models.transformers_bounds.X" in res.err and "'soon' is not a version" in res.err


def test_new_profile_solves_and_says_why_newer_candidates_lost(
    envs: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    folder = tmp_path / "envs"

    def new(name: str, model: Path, *args: str) -> Any:
        return envkit(
            "--envs", str(folder), "new-profile", name, "--for-model", str(model), *args,
            "--index-url", url(world), "--json", cwd=tmp_path,
        )  # fmt: skip

    res = new("qwen35", QWEN35)
    res.assert_ok()
    solution = res.json()["solution"]
    assert (solution["vllm"], solution["transformers"]) == ("0.33.0", "5.20.2")
    assert solution["cuda_source"].startswith("the default index's wheel")
    assert any(
        line.startswith("transformers 5.24.0: outside vLLM 0.33.0's range")
        for line in solution["rejected"]
    ), solution["rejected"]
    assert "Newer, rejected: transformers 5.24.0" in (folder / "qwen35.toml").read_text()
    # vLLM 0.33.0 needs Python >= 3.11 and no other release lists Qwen3.5: nothing fits
    old_python = new("p310", QWEN35, "--python", "3.10")
    assert old_python.code == 1  # a resolution that failed
    assert "requires Python <3.15,>=3.11, not 3.10" in old_python.json()["message"]
    # torch 2.14.0's default build (its wheel says so) is CUDA 13.0: a 12.4 driver cannot run it
    old_driver = new("c124", QWEN35, "--cuda", "12.4")
    assert old_driver.code == 1
    assert "whose default build (CUDA 13.0, the one" in old_driver.json()["message"]
    assert "it runs CUDA 12.4 at most" in old_driver.json()["message"]
    # and the least CUDA (and driver) at which a solution exists
    assert old_driver.json()["message"].endswith(
        "Qwen3_5ForConditionalGeneration first appears in vLLM 0.33.0, whose torch 2.14.0 "
        "needs CUDA 13.0 (NVIDIA driver 580.65.06 or newer)."
    )
    # vLLM 0.8.5's test registry needs transformers >= 4.52.dev0 for Qwen3: 4.51.3 cannot do
    bounded = new("q3", qwen3_config(tmp_path / "q3"), "--vllm", "0.8.5")
    assert bounded.code == 1
    assert "test registry needs transformers >= 4.52.dev0" in bounded.json()["message"]
    bad = new("x", QWEN35, "--cuda", "twelve")
    assert bad.code == 2 and "--cuda" in bad.json()["message"]


def test_new_profile_takes_the_torch_build_vllm_is_compiled_against(
    envs: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    """vLLM 0.8.5 pins torch 2.6.0, published for CUDA 11.8, 12.4 and 12.6; its wheel is
    built and tested with the default one (12.4). A 12.6 driver gets 12.4, not the newest build
    it could run; a 12.2 driver gets nothing, told that the 11.8 build would not match."""
    folder = tmp_path / "envs"

    def new(name: str, *args: str) -> Any:
        return envkit(
            "--envs", str(folder), "new-profile", name, "--for-model", str(QWEN2VL),
            "--vllm", "0.8.5", "--index-url", url(world), "--json", *args, cwd=tmp_path,
        )  # fmt: skip

    newer = new("c126", "--cuda", "12.6")
    newer.assert_ok()
    solution = newer.json()["solution"]
    assert (solution["torch"], solution["cuda"]) == ("2.6.0", "12.4")
    assert "the one vLLM's wheel is built and tested with" in solution["cuda_source"]
    assert 'backend = "cu124"' in (folder / "c126.toml").read_text()
    older = new("c122", "--cuda", "12.2")
    assert older.code == 1
    message = older.json()["message"]
    assert "pins torch 2.6.0, whose default build (CUDA 12.4, the one vLLM" in message
    assert "its CUDA 11.8 build is not taken (per " in message
    assert not (folder / "c122.toml").exists()


def test_a_drafted_profile_locks(envs: Path, world: indexserver.Server, tmp_path: Path) -> None:
    folder = tmp_path / "envs"
    drafted = envkit(
        "--envs", str(folder), "new-profile", "qwen35", "--for-model", str(QWEN35),
        "--index-url", url(world), cwd=tmp_path,
    )  # fmt: skip
    drafted.assert_ok()
    locked = envkit(
        "--envs", str(folder), "lock", "qwen35", "--index-url", url(world),
        "--torch-index", "default", "--json", cwd=tmp_path,
    )  # fmt: skip
    locked.assert_ok()
    assert {c["state"] for c in locked.json()["cells"]} == {"locked"}


def test_a_removal_is_said_from_the_registries_not_from_vllms_record(
    envs: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    # vLLM 0.33.0 records AquilaForCausalLM as supported until 0.2.7; 0.8.5 still lists it
    aquila = write_config(tmp_path, {"model_type": "llama", "architectures": ["AquilaForCausalLM"]})
    res = run(envs, "check-model", "new", str(aquila), "--json", "--index-url", url(world))
    assert res.code == 1
    (problem,) = res.json()["problems"]
    assert problem["code"] == "architecture-removed"
    assert "vLLM 0.8.5 lists it" in problem["message"]
    assert "own record says until 0.2.7, which its registries contradict" in problem["message"]
    assert problem["fix"] == "use vLLM 0.8.5 or older"


@pytest.mark.parametrize(
    ("model", "code", "exit_code"),
    [(QWEN2VL, "model-loads", 0), (QWEN35, "model-does-not-load", 1)],
)
def test_the_verdict_is_one_result_and_the_text_says_its_message(
    envs: Path, model: Path, code: str, exit_code: int
) -> None:
    """check-model's verdict is one Result in --json (the schema requires it) and the text's
    verdict line is that result's message: the two cannot disagree. It fails exactly when the
    command exits 1; a refusal names the failing codes, and its fix is their fixes (which
    name the profile that can load the model); ``which`` gives every profile's the same way."""
    from envkit.results import Result

    from helpers import output

    as_json = run(envs, "check-model", "old", str(model), "--json")
    data = output("check-model", as_json.out)
    result = Result.from_dict(data["result"])
    assert (result.code, result.failed, as_json.code) == (code, exit_code == 1, exit_code)
    assert result.subject == "old" and data["ok"] is not result.failed
    if code == "model-loads":
        architecture = "Qwen2VLForConditionalGeneration"
        assert result.fact("architecture") == data["architecture"] == architecture
        assert result.message == f"old: can load it with {architecture}"
        assert result.fix == ""
    else:
        codes = ("unknown-model-type", "unsupported-architecture")
        assert result.facts("problems") == codes
        assert result.message == f"old: CANNOT load it ({', '.join(codes)})"
        assert result.steps == tuple(p["fix"] for p in data["problems"])
        assert all(step.endswith(": new, envkit build new") for step in result.steps)
    text = run(envs, "check-model", "old", str(model))
    assert text.code == exit_code
    assert [line for line in text.out.splitlines() if line.startswith("old: ")] == [result.message]
    # which: each profile's verdict line is its result's message, in the order of --json
    profiles = output("which", run(envs, "which", str(model), "--json").out)["profiles"]
    said = [Result.from_dict(p["result"]) for p in profiles]
    assert [(r.subject, r.failed) for r in said] == [(p["profile"], not p["ok"]) for p in profiles]
    shown = [line for line in run(envs, "which", str(model)).out.splitlines()
             if line.startswith(("old: ", "new: "))]  # fmt: skip
    assert shown == [r.message for r in said]


def test_a_bad_index_url_is_refused_even_when_every_table_is_current() -> None:
    """The shipped profiles' tables are current, so check-model scans nothing; its
    --index-url is checked where it enters all the same (models.current.lazy_scanner)."""
    res = run_cli("check-model", "vllm-0.8.5+qwen2-vl", str(QWEN2VL), "--index-url", "ftp://x y")
    assert res.code == 2 and "--index-url" in res.err, res.err
    assert run_cli("check-model", "vllm-0.8.5+qwen2-vl", str(QWEN2VL)).code == 0
