"""--to is parsed where it enters: an exact vLLM release or one BadInput paragraph (exit 2),
whatever the text; the target's own helpers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version
from properties import examples

from envkit.errors import BadInput
from envkit.upgrades.target import Wanted, parse_to

from helpers import envkit, profile_text

TO = st.one_of(
    st.text(max_size=60),
    st.builds(lambda op, v: f"vllm{op}{v}", st.sampled_from(["==", ">=", "~=", "===", "!="]),
              st.text("0123456789.*+abrc", max_size=12)),
    st.builds(lambda name: f"{name}==1.0", st.text(max_size=12)),
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(TO)
def test_any_to_is_a_vllm_release_or_bad_input(text: str) -> None:
    try:
        version = parse_to(text)
    except BadInput as exc:
        assert exc.exit_code == 2 and exc.message
        return
    assert isinstance(version, Version) and "==" in text


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("vllm==0.9.2", "0.9.2"),
        (" vllm == 0.33.0 ", "0.33.0"),
        ("VLLM==0.8.5.post1", "0.8.5.post1"),
    ],
)
def test_exact_releases_are_taken(text: str, version: str) -> None:
    assert parse_to(text) == Version(version)


@pytest.mark.parametrize(
    "text",
    ["vllm", "vllm>=0.9", "vllm==0.9.*", "torch==2.6.0", "vllm[audio]==0.9.2", "x" * 300,
     "vllm==0.9.2; python_version<'3'", "vllm==\u0660.9"],
)  # fmt: skip
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(BadInput):
        parse_to(text)


@settings(max_examples=examples(25), deadline=None)
@given(st.text(min_size=1, max_size=40).filter(lambda t: "vllm" not in t.lower()))
def test_the_command_refuses_a_bad_to_with_exit_2(tmp_path_factory: pytest.TempPathFactory,
                                                   text: str) -> None:  # fmt: skip
    folder = tmp_path_factory.mktemp("to")
    (folder / "envs").mkdir()
    (folder / "envs" / "p.toml").write_text(profile_text())
    res = envkit("upgrade", "p", "--to", text, "--json", cwd=folder)
    assert res.code == 2 and res.json()["exit_code"] == 2
    assert not (folder / "constraints").exists()


def test_the_gpus_are_judged_on_x86_64_when_the_profile_locks_it() -> None:
    both = Wanted((), "", platforms=("linux-aarch64", "linux-x86_64"))
    assert both.platform == "linux-x86_64"
    assert Wanted((), "", platforms=("linux-aarch64",)).platform == "linux-aarch64"
    assert Wanted((), "", platforms=("macos-arm64",)).platform == "linux-x86_64"


def test_a_profile_without_exact_pins_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "p.toml").write_text(profile_text(constraints=()))
    res = envkit("upgrade", "p", "--index-url", "http://127.0.0.1:9/simple", cwd=tmp_path)
    res.assert_fails(2, mentioning="pins no exact transformers version")


def test_an_index_out_of_reach_is_exit_2_and_no_verdict(tmp_path: Path) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "p.toml").write_text(profile_text())
    res = envkit("upgrade", "p", "--write", "--index-url", "http://127.0.0.1:9/simple",
                 "--json", cwd=tmp_path)  # fmt: skip
    assert res.code == 2 and res.json()["error"] == "NetworkError"
    assert (tmp_path / "envs" / "p.toml").read_text() == profile_text()
    assert not (tmp_path / "constraints").exists()
