"""envkit upgrade against a local published world (upgrade_world): the newest release that keeps
every model, GPU and the driver is chosen; --to shows what a move loses, row by row, with its
evidence (a Volta card dropped at the CUDA 13 release, a model dropped, a removed flag and
variable of the profile's [serve] table); nothing is written without --write; --write rewrites
the profile (comments kept), relocks it with the real uv and publishes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import upgrade_world

import indexserver
from helpers import envkit, output
from indexserver import url

PROFILE = upgrade_world.PROFILE


def project(root: Path, text: str = PROFILE) -> Path:
    (root / "envs").mkdir(parents=True)
    (root / "envs" / "q.toml").write_text(text)
    return root


def upgrade(folder: Path, world: indexserver.Server, *args: str, **env: str) -> Any:
    return envkit("upgrade", "q", "--index-url", url(world), *args, cwd=folder, env=env)


def rows(data: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {r["subject"]: r for r in data["upgrades"][0]["rows"] if r["kind"] == kind}


@pytest.fixture(scope="module")
def to_033(
    upgrade_world: indexserver.Server, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """One --to vllm==0.33.0 run, read by several tests: its exit code and JSON."""
    folder = project(tmp_path_factory.mktemp("to-033"))
    res = upgrade(folder, upgrade_world, "--to", "vllm==0.33.0", "--json")
    assert res.code == 1, res.err
    return output("upgrade", res.out)


def test_the_newest_release_keeping_everything_is_chosen_and_nothing_is_written(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    folder = project(tmp_path)
    before = (folder / "envs" / "q.toml").read_text()
    res = upgrade(folder, upgrade_world, "--json")
    data = output("upgrade", res.assert_ok().out)
    move = data["upgrades"][0]
    assert (move["from"]["vllm"], move["to"]["vllm"]) == ("0.17.1", "0.18.0")
    assert move["to"]["transformers"] == "4.57.6" and move["to"]["torch"] == "2.10.0"
    assert move["ok"] and move["lost"] == 0 and not move["written"]
    assert "7.0" in move["gpus"] and "kernel table" in move["gpus_from"]
    (rejected,) = move["rejected"]
    assert rejected.startswith("vllm 0.33.0: no longer lists AquilaForCausalLM")
    assert rows(data, "flags")["accepted"]["change"] == "kept"
    assert (folder / "envs" / "q.toml").read_text() == before
    assert not (folder / "constraints").exists()


def test_a_volta_card_is_dropped_at_the_cuda_13_release(to_033: dict[str, Any]) -> None:
    gpus = rows(to_033, "gpus")
    volta = gpus["7.0 (Tesla V100 16GB, Tesla V100 32GB)"]
    assert (volta["old"], volta["new"], volta["change"]) == ("runs", "dropped", "lost")
    assert (
        "vLLM 0.33.0's _C_stable_libtorch.abi3.so has no kernel image for 7.0"
        in (volta["evidence"])
    )
    assert "torch 2.14.0 (CUDA 13.0)'s libtorch_cuda.so has no kernel image" in volta["evidence"]
    assert "9.0" in gpus["kept"]["new"].split(", ")
    cuda = rows(to_033, "cuda")["CUDA major of vLLM's kernels"]
    assert (cuda["old"], cuda["new"], cuda["change"]) == ("CUDA 12", "CUDA 13", "changed")
    driver = rows(to_033, "driver")["driver floor"]
    assert driver["new"] == "CUDA 13.0 or newer (NVIDIA driver 580.65.06 or newer)"


def test_a_model_the_release_drops_is_lost_with_its_evidence(to_033: dict[str, Any]) -> None:
    models = rows(to_033, "models")
    phi = models["Phi3SmallForCausalLM"]
    assert (phi["new"], phi["change"]) == ("dropped (vLLM 0.9.2 was the last with it)", "lost")
    assert phi["evidence"] == "vllm-0.33.0-py3-none-any.whl (model registry)"
    assert models["MllamaForConditionalGeneration"]["change"] == "lost"
    assert "Qwen3_5ForConditionalGeneration" in models["new architectures"]["new"]
    assert models["new architectures"]["change"] == "gained"
    assert to_033["upgrades"][0]["lost"] == sum(
        r["change"] == "lost" for r in to_033["upgrades"][0]["rows"]
    )


def test_a_removed_flag_and_variable_of_the_serve_table_are_lost(to_033: dict[str, Any]) -> None:
    flag = rows(to_033, "flags")["--enable-reasoning"]
    assert flag["change"] == "lost" and flag["old"] == "accepted by vLLM 0.17.1"
    assert flag["new"].startswith("renamed-flag: vLLM 0.33.0 has no --enable-reasoning")
    assert flag["fix"].startswith("Use --reasoning-parser VALUE instead of --enable-reasoning")
    knob = rows(to_033, "variables")["VLLM_OLD_KNOB"]
    assert knob["change"] == "lost" and "vLLM 0.18.0 was the last release" in knob["new"]
    kept = rows(to_033, "variables")["accepted"]
    assert kept["new"] == "VLLM_LOGGING_LEVEL" and kept["change"] == "kept"
    assert rows(to_033, "flags")["accepted"]["new"] == "--max-model-len"


def test_the_pins_say_what_the_solver_picked(to_033: dict[str, Any]) -> None:
    move = to_033["upgrades"][0]
    assert move["to"] == {"vllm": "0.33.0", "transformers": "5.20.2", "torch": "2.14.0",
                          "cuda": "13.0"}  # fmt: skip
    pins = rows(to_033, "pins")
    assert "in vLLM 0.33.0's range transformers<5.21.0,>=5.16.1" in pins["transformers"]["evidence"]
    assert rows(to_033, "python")["Requires-Python"]["new"] == "<3.15,>=3.11"
    assert rows(to_033, "compat")["vLLM-wide"]["old"] == "compatible"


def test_a_companion_pin_the_new_release_refuses_is_dropped(to_033: dict[str, Any]) -> None:
    pin = rows(to_033, "companions")["tokenizers==0.21.0"]
    assert (pin["old"], pin["new"]) == ("vLLM 0.17.1 asks nothing", "vLLM 0.33.0 asks >=0.22")
    assert pin["change"] == "changed"
    assert (
        pin["fix"] == "--write drops the pin tokenizers==0.21.0 (uv takes one in tokenizers>=0.22)"
    )


def test_a_python_the_matrix_locks_and_the_release_refuses_is_lost(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    text = PROFILE.replace('python = ">=3.11,<3.13"', 'python = ">=3.10,<3.13"').replace(
        'python = ["3.12"]', 'python = ["3.12", "3.10"]'
    )
    folder = project(tmp_path, text)
    res = upgrade(folder, upgrade_world, "--to", "vllm==0.33.0", "--json")
    python = rows(output("upgrade", res.out), "python")
    assert python["Python 3.10"]["change"] == "lost"
    assert python["Python 3.10"]["fix"].startswith("Drop 3.10 from [matrix] python of")
    assert "Python 3.12" not in python


def test_a_gpu_given_is_the_only_one_that_must_be_kept(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    folder = project(tmp_path)
    res = upgrade(folder, upgrade_world, "--to", "vllm==0.33.0", "--gpu", "h100-80gb", "--json")
    data = output("upgrade", res.out)
    assert data["upgrades"][0]["gpus"] == ["9.0"]
    gpus = rows(data, "gpus")
    assert gpus["7.0 (Tesla V100 16GB, Tesla V100 32GB)"]["change"] == "changed"
    assert not [r for r in gpus.values() if r["change"] == "lost"]
    assert res.code == 1  # the models and the flag are still lost


def test_a_driver_given_that_cannot_run_the_new_build_is_lost(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    folder = project(tmp_path)
    res = upgrade(folder, upgrade_world, "--to", "vllm==0.33.0", "--driver", "570.26", "--json")
    driver = rows(output("upgrade", res.out), "driver")["driver floor"]
    assert driver["change"] == "lost" and "CUDA 13.0 or newer" in driver["fix"]


def test_the_text_fits_80_columns_and_lists_what_is_lost(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    folder = project(tmp_path)
    res = upgrade(folder, upgrade_world, "--to", "vllm==0.33.0", COLUMNS="80")
    res.assert_fails(1)
    assert max(len(line) for line in res.out.splitlines()) <= 80
    assert "MllamaForConditionalGeneration"[:20] in res.out
    said = " ".join(res.out.split())
    assert "lost: models 24 (AquilaForCausalLM" in said
    assert "gpus 2 (7.0 (Tesla V100 16GB, Tesla V100 32GB), 7.2)" in said
    assert "flags 1 (--enable-reasoning); variables 1 (VLLM_OLD_KNOB)" in said
    assert "Nothing written; envkit upgrade q --to vllm==0.33.0 --write" in said


@pytest.mark.parametrize(
    ("args", "mentioning"),
    [
        (
            ("--to", "vllm==9.9.9"),
            "lists no vLLM 9.9.9 (the newest release with a wheel is 0.33.0)",
        ),
        (("--to", "torch==2.6.0"), "upgrade moves the vLLM release"),
        (("--to", "vllm>=0.18"), "is not an exact release such as vllm==0.9.2"),
        (("--gpu", "h100-80gb", "--compute-capability", "7.0"), "not 7.0"),
        (("--all",), "Name the profiles, or pass --all (not both)"),
    ],
)
def test_bad_input_is_exit_2_and_writes_nothing(
    upgrade_world: indexserver.Server, tmp_path: Path, args: tuple[str, ...], mentioning: str
) -> None:
    folder = project(tmp_path)
    before = (folder / "envs" / "q.toml").read_text()
    upgrade(folder, upgrade_world, *args, "--write").assert_fails(2, mentioning=mentioning)
    assert (folder / "envs" / "q.toml").read_text() == before
    assert not (folder / "constraints").exists()


def test_a_release_with_only_a_source_distribution_is_said_as_such(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    """vLLM 0.0.1 is on the real index as an sdist alone: it is published, only without a
    wheel to read (said so, not "no such release")."""
    import shutil

    served = tmp_path / "index"
    shutil.copytree(upgrade_world.root, served)
    (served / "vllm-0.0.1.tar.gz").write_bytes(b"")
    folder = project(tmp_path / "project")
    with indexserver.serve(served) as server:
        res = upgrade(folder, server, "--to", "vllm==0.0.1")
    said = " ".join(res.err.split())
    assert res.code == 2, res.err
    assert "lists a source distribution of vLLM 0.0.1 but no wheel" in said
    assert "(the newest release with a wheel is 0.33.0)" in said


def test_write_rewrites_the_profile_keeping_comments_relocks_and_publishes(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    folder = project(tmp_path)
    res = upgrade(folder, upgrade_world, "--write", "--torch-index", "default", "--json")
    move = output("upgrade", res.assert_ok().out)["upgrades"][0]
    assert move["written"] and [c["state"] for c in move["locked"]] == ["locked"]
    text = (folder / "envs" / "q.toml").read_text()
    assert 'requirements = ["vllm==0.18.0"]' in text
    assert '    "transformers==4.57.6",  # the newest before vLLM 0.17.1\n' in text
    assert "# The team's Qwen line: reviewed by hand.\n" in text
    assert text.startswith("#:schema ../src/envkit/schemas/profile.schema.json\n# Moved from vLLM")
    assert 'backend = "cu128" # the default build of torch 2.10.0' in text
    assert 'vllm = "0.18.0"' in text  # [models] scanned from the new pins
    assert (folder / "constraints" / "q" / "py3.12-linux-x86_64-cu128.txt").is_file()
    assert "q/py3.12-linux-x86_64-cu128.txt" in (folder / "constraints/index.json").read_text()
    envkit("lock", "q", "--check", cwd=folder).assert_ok()  # the locks are current
    again = upgrade(folder, upgrade_world, "--write", "--torch-index", "default")
    assert "stays where it is" in again.assert_ok().out
    assert (folder / "envs" / "q.toml").read_text() == text  # nothing to move: untouched


def test_write_to_a_release_that_loses_something_writes_and_exits_1(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    text = PROFILE.replace(
        "[matrix]",
        '[verify]\nversions = { vllm = "0.17.1", "Transformers" = "4.57.6" }\n\n[matrix]',
    )
    folder = project(tmp_path, text)
    res = upgrade(folder, upgrade_world, "--to", "vllm==0.33.0", "--write",
                  "--torch-index", "default", "--json")  # fmt: skip
    assert res.code == 1, res.err
    text = (folder / "envs" / "q.toml").read_text()
    assert 'requirements = ["vllm==0.33.0"]' in text and '"torch==2.14.0",' in text
    assert 'backend = "cu130"' in text and 'cuda = "13.0"' in text
    assert 'backends = ["cu130"]' in text
    assert "tokenizers==" not in text and '"transformers==5.20.2",  # the newest' in text
    assert 'versions = { vllm = "0.33.0", "Transformers" = "5.20.2" }' in text
    assert (
        "tokenizers==0.22.0" in (folder / "constraints/q/py3.12-linux-x86_64-cu130.txt").read_text()
    )


def test_all_moves_every_profile_of_the_folder(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    folder = project(tmp_path)
    plain = PROFILE.split("[serve]")[0].replace("0.17.1", "0.18.0")
    (folder / "envs" / "newest.toml").write_text(plain)
    res = envkit("upgrade", "--all", "--index-url", url(upgrade_world), "--json", cwd=folder)
    moves = {m["profile"]: m for m in output("upgrade", res.assert_ok().out)["upgrades"]}
    assert moves["q"]["to"]["vllm"] == "0.18.0" and moves["q"]["moves"]
    assert not moves["newest"]["moves"] and moves["newest"]["rows"]
    assert not [r for r in moves["newest"]["rows"] if r["kind"] in ("flags", "variables")]


def test_a_snapshot_made_with_upgrade_answers_upgrade_with_the_index_gone(
    upgrade_world: indexserver.Server, tmp_path: Path
) -> None:
    """knowledge export --upgrade records what upgrade's search reads; with the snapshot, an
    empty cache and the index a closed port, upgrade chooses and shows what it did online."""
    folder = project(tmp_path)
    env = {"ENVKIT_CACHE_DIR": str(tmp_path / "cache")}
    upgrade_world.hashes = True  # as the real index: a torch wheel's CUDA is kept by its sha256
    try:
        online = output("upgrade", upgrade(folder, upgrade_world, "--json", **env).assert_ok().out)
        snap = tmp_path / "k.zip"
        made = envkit(
            "knowledge", "export", str(snap), "--for", "q", "--upgrade", "--json",
            "--index-url", url(upgrade_world), cwd=folder, env=env,
        )  # fmt: skip
    finally:
        upgrade_world.hashes = False
    assert output("knowledge-export", made.assert_ok().out)["complete"] is True
    assert "knowledge: q's upgrade search" in made.err
    offline = {"ENVKIT_CACHE_DIR": str(tmp_path / "cache-offline"), "ENVKIT_KNOWLEDGE": str(snap)}
    closed = "http://127.0.0.1:9/simple"  # nothing listens: any request would fail
    res = envkit("upgrade", "q", "--index-url", closed, "--json", cwd=folder, env=offline)
    data = output("upgrade", res.assert_ok().out)
    assert data["upgrades"][0]["to"] == online["upgrades"][0]["to"]
    assert data["upgrades"][0]["rows"] == online["upgrades"][0]["rows"]
    assert "uses no network" in res.err


def test_a_search_stopped_at_its_bounds_says_what_it_did_not_try(
    upgrade_world: indexserver.Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With room for one scan, only vLLM 0.33.0 (which drops a model) is looked at: the
    profile stays, and neither the choice nor the verdict says nothing newer keeps it all."""
    from envkit.compat.check.checker import Checker
    from envkit.gpu.published import kerneltable
    from envkit.profiles.profile import load_profile
    from envkit.render import upgrade as shown
    from envkit.upgrades import target
    from envkit.upgrades.upgrade import Asked, plan

    monkeypatch.setattr(target, "MAX_SCANNED", 1)
    profile = load_profile(project(tmp_path) / "envs" / "q.toml")
    done = plan(profile, Checker(url(upgrade_world)), kerneltable.shipped(), Asked())
    move = done.move
    assert not move.moves and (move.searched, move.untried) == (1, 1)
    assert move.asked == (
        "the newest release does not keep every model, GPU and the driver; "
        "1 older release not tried"
    )
    assert move.rejected[-1] == "1 older release not tried (0.18.0): --to vllm==X checks one"
    monkeypatch.setenv("COLUMNS", "100")
    shown.upgrades([done], writing=False, as_json=False)
    said = capsys.readouterr().out
    assert "stays where it is: the newest does not keep it all, and 1 older not tried" in said
