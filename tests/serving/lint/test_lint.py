"""envkit lint against tiny served vLLM wheels (lint_world): the findings, their fixes, the
deployment files, exit codes and the --json shape; bad input by property."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import BadInput
from envkit.index.session import IndexSession
from envkit.profiles.profile import Profile, load_profile
from envkit.serving.lint.check import lint_args
from envkit.serving.lint.files import read_deployment
from envkit.serving.lint.use import args_from_log

import indexserver
import lint_world
from helpers import envkit, output, results_in


@pytest.fixture
def project(tmp_path: Path, scan_cache: Path) -> Path:
    envs = tmp_path / "envs"
    envs.mkdir()
    for version in ("0.1.1", "0.2.1", "0.3.0"):
        (envs / f"v{version}.toml").write_text(lint_world.profile(version))
    return tmp_path


@pytest.fixture
def server(lint_world_index: indexserver.Server) -> indexserver.Server:
    return lint_world_index  # conftest's session index of lint_world's wheels


def _lint(project: Path, server: indexserver.Server, version: str, args: list[str], env=None):  # type: ignore[no-untyped-def]
    profile = load_profile(project / "envs" / f"v{version}.toml")
    return lint_args(profile, args, env or {}, session=IndexSession(indexserver.url(server)))


def test_flags_of_an_older_release_are_dated_and_replaced(project: Path, server) -> None:  # type: ignore[no-untyped-def]
    report = _lint(
        project, server, "0.2.1",
        ["m", "--enable-reasoning", "--max_model_len", "8", "--disable-log-requests",
         "--cudagraph-sizes", "1", "2", "-tp", "2", "--lora-modules", "a=b"],
        {"VLLM_OLD_KNOB": "1", "VLLM_NEW_KNOB": "1", "HOME": "/root"},
    )  # fmt: skip
    by = {f.subject: f for f in report.findings}
    assert set(by) == {"--enable-reasoning", "--lora-modules", "VLLM_OLD_KNOB"}
    renamed = by["--enable-reasoning"]
    assert (renamed.code, renamed.severity) == ("renamed-flag", "error")
    assert "0.1.1 was the last release" in renamed.message
    assert "--reasoning-parser" in renamed.fix and "v0.2.1" in renamed.fix
    # a switch replaced by a flag that takes a value: the fix says a value is to be given
    assert renamed.fix.startswith(
        "Use --reasoning-parser VALUE instead of --enable-reasoning: --reasoning-parser takes "
        "a value, --enable-reasoning took none"
    )
    assert by["--lora-modules"].code == "removed-flag" and "0.1.1" in by["--lora-modules"].message
    variable = by["VLLM_OLD_KNOB"]
    assert (variable.code, variable.severity) == ("removed-variable", "warning")
    assert "ignores" in variable.message and "0.1.1" in variable.message
    assert not report.ok and report.vllm == "0.2.1"


def test_the_model_flag_and_positional(project: Path, server) -> None:  # type: ignore[no-untyped-def]
    old = _lint(project, server, "0.1.1", ["--model", "m", "--max-model-len", "8"])
    (finding,) = old.findings
    assert (finding.code, finding.severity) == ("model-flag", "error")
    new = _lint(project, server, "0.2.1", ["--model", "m"])
    assert [(f.code, f.severity) for f in new.findings] == [("model-flag", "warning")]
    assert new.ok
    extra = _lint(project, server, "0.2.1", ["m", "n"])
    assert [f.code for f in extra.findings] == ["unknown-flag"]


def test_typos_abbreviations_and_unknown_flags(project: Path, server) -> None:  # type: ignore[no-untyped-def]
    report = _lint(
        project, server, "0.2.1", ["m", "--max-model-lenn", "8", "--enforce", "--nowhere", "x"]
    )
    by = {f.subject: f for f in report.findings}
    assert "Did you mean --max-model-len?" in by["--max-model-lenn"].fix
    assert by["--enforce"].severity == "warning" and "--enforce-eager" in by["--enforce"].fix
    assert by["--nowhere"].code == "unknown-flag" and by["--nowhere"].severity == "error"


def test_an_unreadable_release_is_never_ok(project: Path, server) -> None:  # type: ignore[no-untyped-def]
    report = _lint(project, server, "0.3.0", ["m", "--max-model-len", "8"])
    assert not report.ok
    assert [f.code for f in report.findings] == ["unreadable-release"]


def test_the_command_exit_codes_and_json(project: Path, server) -> None:  # type: ignore[no-untyped-def]
    index = ("--index-url", indexserver.url(server))
    ok = envkit("lint", "v0.2.1", *index, "--json", "--", "m", "--max-model-len", "8", cwd=project)
    assert ok.code == 0, ok.err
    data = output("lint", ok.out)
    assert data["ok"] and data["vllm"] == "0.2.1" and data["findings"] == []
    bad = envkit("lint", "v0.2.1", *index, "--", "m", "--enable-reasoning", cwd=project)
    assert bad.code == 1 and "renamed-flag" in bad.out and "--reasoning-parser" in bad.out
    assert envkit("lint", "v0.2.1", *index, cwd=project).code == 2  # nothing to check


def test_ok_says_what_was_checked_and_a_pasted_line_reads_as_the_shell_does(
    project: Path, server: indexserver.Server
) -> None:
    """An ok is about the flags and how many values each takes, never what a value says (a
    word where vLLM wants a number passes); NAME=value words before the command are its
    environment, as in a script, and are checked as variables."""
    index = ("--index-url", indexserver.url(server))
    ok = envkit("lint", "v0.2.1", *index, "--", "m", "--max-model-len", "many", cwd=project)
    assert ok.code == 0, ok.err
    said = " ".join(ok.out.split())  # folded to the terminal's width
    assert "has every flag given, each with as many values as it takes." in said
    assert said.endswith("What a value says is not checked.")
    assert said.startswith("v0.2.1 (vLLM 0.2.1): checked the model, --max-model-len ")
    line = ("VLLM_OLD_KNOB=1", "VLLM_NEW_KNOB=1", "vllm", "serve", "m", "--max-model-len", "8")
    pasted = envkit("lint", "v0.2.1", *index, "--json", "--", *line, cwd=project)
    assert pasted.code == 0, pasted.err
    data = output("lint", pasted.out)
    assert [(f["code"], f["subject"]) for f in data["findings"]] == [
        ("removed-variable", "VLLM_OLD_KNOB")
    ]
    assert "--max-model-len" in data["checked"] and "VLLM_OLD_KNOB=1" not in data["checked"]


def test_deployment_files(project: Path, server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  db:\n    image: postgres\n  vllm:\n    image: vllm/vllm-openai:v0.2.1\n"
        "    command: ['m', '--enable-reasoning']\n    environment:\n      - VLLM_OLD_KNOB=1\n"
    )
    values = tmp_path / "values.yaml"
    values.write_text(
        "servingEngineSpec:\n  modelSpec:\n  - name: a\n    modelURL: m\n    vllmConfig:\n"
        "      maxModelLen: 8\n      enforceEager: true\n      extraArgs: ['--enable-reasoning']\n"
        "    env:\n    - name: VLLM_NEW_KNOB\n      value: '1'\n"
    )
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text(
        "kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: vllm\n        image: vllm/vllm-openai\n        command: [vllm, serve]\n"
        "        args: [m, --max-model-len, '8']\n"
        "        env: [{name: VLLM_OLD_KNOB, value: '1'}]\n"
    )
    script = tmp_path / "run.sh"
    script.write_text(
        "#!/bin/sh\nexport VLLM_OLD_KNOB=1\nVLLM_NEW_KNOB=1 vllm serve m \\\n  --enable-reasoning\n"
    )
    assert read_deployment(compose).args == ("m", "--enable-reasoning")
    assert read_deployment(compose).env == {"VLLM_OLD_KNOB": "1"}
    helm = read_deployment(values)
    assert helm.args == ("m", "--max-model-len", "8", "--enforce-eager", "--enable-reasoning")
    assert helm.env == {"VLLM_NEW_KNOB": "1"}
    kube = read_deployment(deployment)
    assert kube.args == ("m", "--max-model-len", "8") and kube.env == {"VLLM_OLD_KNOB": "1"}
    shell = read_deployment(script)
    assert shell.args == ("m", "--enable-reasoning")
    assert shell.env == {"VLLM_OLD_KNOB": "1", "VLLM_NEW_KNOB": "1"}
    index = ("--index-url", indexserver.url(server))
    res = envkit("lint", "v0.2.1", *index, "--file", str(compose), "--json", cwd=project)
    assert res.code == 1
    data = output("lint", res.out)
    assert {f["subject"] for f in data["findings"]} == {"--enable-reasoning", "VLLM_OLD_KNOB"}
    assert {r["subject"] for r in results_in(data)} == {"--enable-reasoning", "VLLM_OLD_KNOB"}
    assert "services.vllm" in data["source"]


def test_a_vllm_image_takes_the_command_as_its_entrypoints_arguments(
    project: Path, server: indexserver.Server, tmp_path: Path
) -> None:
    """Field report 2's compose service: vllm/vllm-openai with `command: --model M ...` and
    no entrypoint. The image runs `python3 -m vllm.entrypoints.openai.api_server` (later
    `vllm serve`), which takes the model as --model: no model-flag error, even for a release
    whose vllm serve refuses --model. Its entrypoint named again (vllm serve M) is refused,
    as vLLM refuses it; an entrypoint of the service's own keeps its words."""
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:latest\n"
        "    command: --model Qwen/Qwen2.5-3B-Instruct --max-model-len 4096\n"
    )
    found = read_deployment(compose)
    assert found.args == ("Qwen/Qwen2.5-3B-Instruct", "--max-model-len", "4096")
    assert found.where.endswith("the arguments of its vLLM image's entrypoint")
    index = ("--index-url", indexserver.url(server))
    res = envkit("lint", "v0.1.1", *index, "--file", str(compose), "--json", cwd=project)
    assert res.code == 0, res.out  # 0.1.1's vllm serve refuses --model: not what runs here
    assert output("lint", res.out)["findings"] == []
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text(
        "kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: vllm\n        image: registry.test:5000/vllm/vllm-openai:v0.2.1\n"
        "        args: [m, --max-model-len, '8']\n"
    )
    assert read_deployment(deployment).args == ("m", "--max-model-len", "8")
    compose.write_text(  # the program named: its own words, as before
        "services:\n  vllm:\n    image: vllm/vllm-openai\n    entrypoint: [vllm, serve]\n"
        "    command: [--model, m]\n"
    )
    named = read_deployment(compose)
    assert named.args == ("--model", "m") and named.where.endswith("services.vllm")
    compose.write_text(  # vllm serve again after the image's own: vLLM refuses the words
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.2.1\n"
        "    command: vllm serve m --max-model-len 8\n"
    )
    assert read_deployment(compose).args == ("vllm", "serve", "m", "--max-model-len", "8")
    res = envkit("lint", "v0.2.1", *index, "--file", str(compose), "--json", cwd=project)
    assert res.code == 1
    (repeated,) = output("lint", res.out)["findings"]  # the rest checked as it runs
    assert (repeated["code"], repeated["subject"]) == ("unknown-flag", "vllm serve")
    assert repeated["fix"].startswith("Drop 'vllm serve' from the command")


def test_yaml_aliases_and_other_files_are_refused(tmp_path: Path) -> None:
    bomb = tmp_path / "compose.yaml"
    bomb.write_text("a: &a [x, x]\nb: &b [*a, *a]\nservices: {vllm: {image: vllm, command: *b}}\n")
    with pytest.raises(BadInput, match="alias"):
        read_deployment(bomb)
    other = tmp_path / "other.yaml"
    other.write_text("name: x\n")
    with pytest.raises(BadInput, match="not a compose file"):
        read_deployment(other)


def test_recorded_log_arguments_become_words() -> None:
    words = args_from_log({"model": "m", "max_model_len": "8", "enforce_eager": "True"})
    assert words == ["m", "--max-model-len", "8", "--enforce-eager"]


@settings(max_examples=examples(60), deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_a_deployment_or_bad_input(tmp_path_factory, text: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("f") / "x.yaml"
    path.write_text(text, encoding="utf-8", errors="replace")
    try:
        found = read_deployment(path)
    except BadInput:
        return
    assert all(isinstance(w, str) for w in found.args)


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(
        st.sampled_from(["--a", "-b", "--c=1", "x", "--", "-O3", "-1", "--e.f", ""]), max_size=30
    )
)
def test_any_words_are_walked(words: list[str]) -> None:
    from envkit.releases.serveflags import read_release
    from envkit.serving.lint.check import _Check

    release = read_release("0.2.0", lint_world.texts(lint_world.new()))

    class Never:
        def last_with(self, *_a: object) -> str:
            return ""

        def first_after(self, *_a: object) -> str:
            return ""

    profile = load_profile_text()
    from packaging.version import Version

    check = _Check(profile, Version("0.2.0"), release, Never())  # type: ignore[arg-type]
    check.walk(words)
    assert all(f.severity in ("error", "warning", "info") for f in check.findings)


@functools.cache
def load_profile_text() -> Profile:
    """lint_world's profile, read from a file once per process (a frozen value: the examples
    share it) and the file removed again."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.toml"
        path.write_text(lint_world.profile("0.2.0"))
        return load_profile(path)


@pytest.mark.parametrize(
    "text",
    [
        "kind: Deployment\nspec: [1]\n",
        "services: {vllm: {image: vllm, environment: [1]}}\n",
        "x: {vllmConfig: {a: 1}, env: 3}\n",
    ],
)
def test_files_of_another_shape_are_bad_input(tmp_path: Path, text: str) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    with pytest.raises(BadInput):
        read_deployment(path)
