"""Nothing envkit prints or writes can be hijacked by what it reads (issue 18, items 1, 2 and
probe's part of 7).

- Text output: every character that is not printable (ESC and the control sequences it
  starts, C1 controls, DEL, bidi and zero-width characters, line separators, surrogates) is
  shown as an escape, whatever it came from: model files, profiles, wheels, servers, error
  paragraphs, notes. envkit's own colour still works; JSON keeps the exact values.
- Generated files: URLs with whitespace or controls are refused where they enter; lock
  headers cannot start a line; the pylock is validated as written; compose YAML, shell
  commands, TOML, JSON and constraints lines parse back to exactly what envkit meant.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import layouts
import loopback
import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement
from properties import examples

from envkit.errors import BadInput, EnvkitError
from envkit.io.escaping import shell_command, unsafe_character, visible
from envkit.io.redaction import redact_data
from envkit.io.urls import check_index, check_torch_index, parse_url
from envkit.lock.cells import Cell, CellState, CellStatus, TorchOrigin
from envkit.lock.locker import Locker, LockOptions
from envkit.lock.pylocks import load as toml_data
from envkit.lock.torchsource import TorchIndex
from envkit.models.drafts import models_table
from envkit.profiles.profile import Profile, load_profile, parse_profile
from envkit.releases.registry import Scan
from envkit.render import term
from envkit.serving.command import Recommendation, serve_args, serve_command
from envkit.serving.run import compose

import indexserver
from conftest import Indexes
from helpers import PY, ROOT, profile_text, run_cli
from wheelhouse import Wheel

FAST = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# what an attacker puts into a value: each must come out visible, none may act
ATTACKS = {
    "window title (OSC 0)": "\x1b]0;pwned\x07",
    "clipboard write (OSC 52)": "\x1b]52;c;ZXZpbA==\x07",
    "clear screen (CSI)": "\x1b[2J\x1b[H",
    "C1 CSI": "\x9b31m",
    "right-to-left override": "\u202egnp.exe",
    "bidi isolates": "\u2066x\u2069",
    "zero width": "a\u200bb",
    "line separator": "a\u2028b",
    "carriage return": "ok\rFAIL",
    "DEL": "a\x7fb",
    "lone surrogate": "\ud800",
    "private use": "\ue000",
}
HOSTILE = "".join(ATTACKS.values())
# text that mixes the attacks with ordinary characters and layout
texts = st.text(
    alphabet=st.one_of(
        st.characters(),
        st.sampled_from(["\x1b", "\x07", "\x9b", "\x9d", "\u202e", "\u2028", "\r", "\n", "\t"]),
    ),
    max_size=40,
)
sequences = st.lists(
    st.one_of(st.sampled_from(list(ATTACKS.values())), st.text(max_size=6)), max_size=6
).map("".join)


def raw_free(text: str, layout: str = "\n") -> bool:
    """Nothing in ``text`` can act on a terminal: every character printable or layout."""
    return all(c.isprintable() or c in layout for c in text)


@pytest.fixture(autouse=True)
def no_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)


def captured(func: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        func(*args, **kwargs)
    return out.getvalue(), err.getvalue()


# --- the escaping itself -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
        ("\x9b", "\\x9b"),
        ("a\x7fb", "a\\x7fb"),
        ("\u202eabc", "\\u202eabc"),
        ("\u2066\u2069\u200b\ufeff", "\\u2066\\u2069\\u200b\\ufeff"),
        ("\u2028\u2029\x85", "\\u2028\\u2029\\x85"),
        ("\ud800", "\\ud800"),
        ("\ue000\U0010fffd", "\\ue000\\U0010fffd"),
        ("a\u00a0b", "a\\xa0b"),  # a space that is not one
        ("tab\there\nnewline", "tab\\there\\nnewline"),
        ("Qwen2-VL 日本語 é ✓", "Qwen2-VL 日本語 é ✓"),  # printable text is left as it is
        ("back\\slash", "back\\slash"),
    ],
)
def test_visible_shows_every_character_that_is_not_printable(raw: str, shown: str) -> None:
    assert visible(raw) == shown


@FAST
@given(text=texts)
def test_visible_leaves_only_printable_characters_and_layout(text: str) -> None:
    shown = visible(text, keep=term.LAYOUT)
    assert raw_free(shown, term.LAYOUT)
    assert visible(shown, keep=term.LAYOUT) == shown  # twice changes nothing
    assert shown.count("\n") == text.count("\n")  # layout kept, nothing added
    assert "\n" not in visible(text) and raw_free(visible(text), "")
    if text.isprintable():
        assert visible(text) == text


@FAST
@given(text=sequences)
def test_echo_escapes_the_text_and_keeps_envkits_own_colour(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    out, _err = captured(term.echo, text, fg="red", bold=True)
    start, end = "\x1b[31m\x1b[1m", "\x1b[0m\n"
    assert out.startswith(start) and out.endswith(end)  # envkit's colour, as before
    inner = out[len(start) : -len(end)]
    assert "\x1b" not in inner and raw_free(inner, term.LAYOUT)
    assert inner == visible(text, keep=term.LAYOUT)


def test_colour_codes_are_stripped_when_piped_and_the_text_stays_escaped() -> None:
    out, _err = captured(term.echo, HOSTILE, fg="green")
    assert out == visible(HOSTILE, keep=term.LAYOUT) + "\n" and raw_free(out)


def test_notes_progress_errors_tables_and_paragraphs_are_one_line_each() -> None:
    fake = "done\nenvkit: Built into .venv \x1b]0;x\x07"
    _out, err = captured(term.note, fake)
    assert err.count("\n") == 1 and raw_free(err) and "\\x1b]0;x\\x07" in err
    _out, err = captured(term.error, BadInput(f"bad {fake}", "hint\n$ rm -rf ~"), False)
    assert err.count("\n") == 1 and raw_free(err) and "hint\\n$ rm" in err
    _out, err = captured(term.interrupted, False, fake)
    assert err.count("\n") == 1 and raw_free(err)
    _out, err = captured(term.usage_error, fake, as_json=False)
    assert err.count("\n") == 1 and raw_free(err)
    rows = [("NAME", "NOTE"), (f"a{HOSTILE}", f"b\n{HOSTILE}")]
    laid = term.table(rows)
    assert laid.count("\n") >= 1 and raw_free(laid)  # the header, then the row (folded or not)
    assert all(line.startswith(("NAME", "a\\x1b", " ")) for line in laid.splitlines())
    assert raw_free(term.columns([HOSTILE, "x\ny"]))
    assert raw_free(term.wrap(f"{HOSTILE} word\nnext", "  ", "    "))
    assert raw_free(term.cut(HOSTILE, 20), "") and raw_free(term.cut_left(HOSTILE, 20), "")


@FAST
@given(
    data=st.dictionaries(
        texts, st.one_of(texts, st.lists(texts, max_size=3), st.integers()), max_size=4
    )
)
def test_json_output_keeps_exact_values_and_carries_no_raw_control(data: dict[str, Any]) -> None:
    out, _err = captured(term.emit_json, {"ok": True, "data": data})
    # exact, but for what has a secret's shape (SECRET=x), masked as a value, never as text
    assert json.loads(out)["data"] == redact_data(data)
    assert out.isascii() and raw_free(out)  # JSON escapes them: \u001b, \u202e, \u2028


# --- the attacks through the commands ------------------------------------------------------


@pytest.fixture
def here(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(project)
    return project


def assert_shown_not_raw(text: str, *values: str) -> None:
    assert raw_free(text), repr(text)
    for value in values:
        assert visible(value) in text


def test_check_model_shows_a_hostile_config_json_escaped(here: Path) -> None:
    folder = here / "model"
    folder.mkdir()
    model_type = f"qwen2{HOSTILE}"
    architectures = [f"Qwen2{attack}ForCausalLM" for attack in ATTACKS.values()]
    config = {"model_type": model_type, "architectures": architectures}
    (folder / "config.json").write_text(json.dumps(config))
    res = run_cli("check-model", "good", "model")
    assert res.code in (1, 2) and "Traceback" not in res.err
    assert_shown_not_raw(res.out + res.err, model_type, *architectures)
    lines = [ln for ln in res.out.splitlines() if ln.startswith("  model_type")]
    assert len(lines) == 1  # a value cannot start a line of its own
    data = run_cli("check-model", "good", "model", "--json")
    assert raw_free(data.out) and data.out.isascii()
    parsed = data.json()
    assert parsed["model_type"] == model_type
    assert parsed["architectures"] == architectures


def test_a_profile_description_is_shown_escaped(here: Path) -> None:
    description = f"fine {HOSTILE.replace(chr(0xD800), '')} text"  # TOML holds no surrogate
    text = profile_text().replace('"test profile"', json.dumps(description))
    (here / "envs" / "evil.toml").write_text(text)
    show = run_cli("show", "evil")
    show.assert_ok()
    assert_shown_not_raw(show.out, "\x1b]0;pwned\x07", "\u202egnp.exe")
    listing = run_cli("profiles")
    assert_shown_not_raw(listing.out, "\x1b]52;c;ZXZpbA==\x07")
    assert run_cli("show", "evil", "--json").json()["profile"]["description"] == description


def test_wheel_registry_keys_are_shown_escaped(
    tmp_path: Path, scan_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evil = {
        f"Evil{i}{attack}ForCausalLM": ("llama", "LlamaForCausalLM")
        for i, attack in enumerate(ATTACKS.values())
    }
    source = "_MODELS = {\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in evil.items()) + "}\n"
    source += "ModelRegistry = Registry(_MODELS)\n"
    folder = tmp_path / "index"
    folder.mkdir()
    Wheel("vllm", "0.2.7", {layouts.VLLM_OLD_REGISTRY: source}, requires=["torch==2.1.2"]).write(
        folder
    )
    monkeypatch.chdir(tmp_path)
    with indexserver.serve(folder) as server:
        res = run_cli("scan", "vllm==0.2.7", "--index-url", indexserver.url(server))
        data = run_cli("scan", "vllm==0.2.7", "--index-url", indexserver.url(server), "--json")
    res.assert_ok()
    assert_shown_not_raw(res.out, *evil)
    assert set(data.json()["architectures"]) == set(evil) and raw_free(data.out)


@pytest.fixture
def hostile_server() -> Iterator[loopback.Scripted]:
    def models(handler: loopback.Handler) -> None:
        ids = [{"id": f"qwen{attack}"} for attack in ATTACKS.values()]
        handler.send(200, json.dumps({"data": ids}).encode())

    def chat(handler: loopback.Handler) -> None:
        error = {"error": {"message": f"CUDA out of memory\n{HOSTILE}"}}
        handler.send(500, json.dumps(error).encode())

    with loopback.serve({"/v1/models": models, "/v1/chat/completions": chat}) as server:
        yield server


def test_a_servers_answers_are_shown_escaped(hostile_server: loopback.Scripted) -> None:
    base = loopback.origin(hostile_server) + "/v1"
    res = run_cli("probe", base, "--timeout", "5")
    assert res.code == 1, res.err
    assert_shown_not_raw(res.out, *(f"qwen{a}" for a in ATTACKS.values()))
    assert sum(ln.startswith("models: ") for ln in res.out.splitlines()) == 1
    data = run_cli("probe", base, "--timeout", "5", "--json")
    assert data.json()["models"] == [f"qwen{a}" for a in ATTACKS.values()]
    assert raw_free(data.out)


def test_an_error_paragraph_is_one_escaped_line(here: Path) -> None:
    res = run_cli("show", f"x{HOSTILE}\nerror: all good")
    assert res.code == 2 and res.err.count("\n") == 1 and raw_free(res.err)


@functools.cache
def shipped_profile() -> Profile:
    return load_profile(ROOT / "envs" / "vllm-0.8.5+qwen2-vl.toml")


@FAST
@given(model_type=texts, architectures=st.lists(texts, min_size=1, max_size=3))
def test_a_model_report_keeps_to_its_lines_whatever_the_config_holds(
    model_type: str, architectures: list[str]
) -> None:
    """check-model's report of an arbitrary config.json: every line is one envkit lays out,
    nothing in it can act, and the JSON carries the exact values."""
    from envkit import render
    from envkit.models.check_model import ModelReport, judge, parse_config

    profile = shipped_profile()
    text = json.dumps({"model_type": f"m{model_type}", "architectures": architectures})
    try:
        config = parse_config(text, f"evil{model_type}/config.json")
    except EnvkitError as exc:
        _out, err = captured(term.error, exc, False)
        assert err.count("\n") == 1 and raw_free(err)
        return
    verdict = judge(profile, config)
    report = ModelReport(config=config, verdict=verdict, verdicts=(verdict,))
    out, _err = captured(render.model_report, report, False)
    assert raw_free(out)
    starts = ("model ", "…", "  model_type ", f"{profile.name}: ", "  ", "supported by: ")
    assert all(line.startswith(starts) for line in out.splitlines())
    assert sum(line.startswith("  model_type ") for line in out.splitlines()) == 1
    out, _err = captured(render.model_report, report, True)
    data = json.loads(out)
    assert data["model_type"] == config.model_type == f"m{model_type}"
    assert data["architectures"] == list(config.architectures) and raw_free(out)


# --- URLs are refused where they enter -----------------------------------------------------

INJECTED = "?\nevil==6.6 #"


def test_an_index_url_with_a_newline_is_refused_and_nothing_is_written(
    here: Path, indexes: Indexes
) -> None:
    res = run_cli("lock", "good", "--index-url", indexes.default + INJECTED)
    assert res.code == 2 and "--index-url" in res.err and "simple?\\nevil==6.6" in res.err
    assert not (here / "constraints").exists()
    assert raw_free(res.err)


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (
            ["lock", "good", "--torch-index", "http://h/whl/{backend}\x1b]0;x\x07"],
            {},
            "--torch-index",
        ),
        (["lock", "good"], {"ENVKIT_TORCH_INDEX": "http://h/\u2028x"}, "ENVKIT_TORCH_INDEX"),
        (["scan", "vllm==0.8.5"], {"UV_DEFAULT_INDEX": "http://h/simple\nx"}, "UV_DEFAULT_INDEX"),
        (["scan", "vllm==0.8.5"], {"UV_INDEX_URL": "http://h/ simple"}, "UV_INDEX_URL"),
        (["scan", "vllm==0.8.5", "--index-url", "https://h/\u202esimple"], {}, "--index-url"),
        (["probe", "http://127.0.0.1:9/v1\r\nX-Evil: 1"], {}, "BASE_URL"),
        (["check-model", "good", "org/name"], {"HF_ENDPOINT": "http://h/\x1b"}, "HF_ENDPOINT"),
    ],
)
def test_urls_with_whitespace_or_controls_are_refused_naming_where(
    here: Path, args: list[str], env: dict[str, str], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UV_DEFAULT_INDEX")  # the suite's, which would hide UV_INDEX_URL
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    res = run_cli(*args)
    assert res.code == 2, res.out + res.err
    assert named in res.err and "may hold" in res.err and raw_free(res.err)


@FAST
@given(text=texts)
def test_an_accepted_url_holds_nothing_that_could_start_a_line(text: str) -> None:
    checks: list[Callable[[str], str]] = [
        lambda t: check_index(t, "--index-url"),
        lambda t: check_torch_index(t) or "",
        lambda t: parse_url(t).url,
    ]
    for check in checks:
        try:
            value = check(f"http://h/{text}")
        except BadInput as exc:
            assert raw_free(exc.message, "")
            continue
        assert unsafe_character(value) is None


# --- lock headers and pylocks --------------------------------------------------------------

BODY_TXT = "transformers==4.51.3 \\\n    --hash=sha256:" + "a" * 64 + "\nvllm==0.8.5\n"
BODY_PYLOCK = 'lock-version = "1.0"\ncreated-by = "uv"\n[[packages]]\nname = "vllm"\n'


def header(index: str, mirror: str) -> str:
    locker = Locker(
        uv=None,  # type: ignore[arg-type]  # never run: the version is given below
        options=LockOptions(
            index_url=index, torch_index=TorchIndex(TorchOrigin.MIRROR, mirror), root="c"
        ),
    )
    locker._uv_version = "0.9.0\n# injected"
    cell = Cell(profile="good", python=PY, platform="linux-x86_64", backend="cu124")
    state = CellState(cell=cell, status=CellStatus.SOURCE_ONLY, source_only=("a\nb==1",))
    profile = parse_profile(profile_text(), path=Path("good.toml"), name="good")
    return locker.header(profile, cell, state, "sha256:0")


@FAST
@given(index=texts, mirror=texts)
def test_a_lock_header_is_comments_only_whatever_its_values(index: str, mirror: str) -> None:
    """Even values that escaped the entry checks cannot add a line to a published file."""
    head = header(f"file:///x/simple{index}", f"https://m/whl/{{backend}}{mirror}")
    lines = head.split("\n")
    assert lines[-1] == "" and len(lines) == 8  # the seven comment lines envkit writes
    assert all(line.startswith("# ") and raw_free(line, "") for line in lines[:-1])
    # constraints: every line that is not a comment is one of uv's
    kept = [ln for ln in (head + BODY_TXT).splitlines() if not ln.startswith(("#", "    "))]
    assert [str(Requirement(ln.rstrip(" \\"))) for ln in kept] == [
        "transformers==4.51.3",
        "vllm==0.8.5",
    ]
    # the pylock: TOML with exactly the body's keys
    assert toml_data(head + BODY_PYLOCK) == toml_data(BODY_PYLOCK)
    reproduce = next(ln for ln in lines if ln.startswith("# reproduce: "))
    words = shlex.split(reproduce.removeprefix("# reproduce: "))
    assert words[:5] == ["envkit", "lock", "good", "--cell", f"py{PY}-linux-x86_64-cu124"]
    assert len(words) == 7 and words[5] == "--torch-index"


def test_the_pylock_is_validated_as_the_bytes_written(
    here: Path, indexes: Indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header that would break the TOML is caught before anything is written."""
    monkeypatch.setattr(Locker, "header", lambda *_a: "# fine\n\x7f not a comment\n")
    res = run_cli("lock", "good", "--index-url", indexes.default, "--torch-index", "default")
    assert res.code == 2 and "is not TOML" in res.err
    assert not list((here / "constraints").rglob("*.toml"))


# --- compose, shell commands, profile fields ----------------------------------------------

REC = Recommendation(gpu_memory_utilization=0.86, max_model_len=4096, dtype="float16")
TEMPLATE = compose.compose("m", REC, "0.8.5").splitlines()


def compose_word(scalar: str) -> str:
    """A YAML double-quoted scalar as compose writes them, read back as Compose reads it:
    JSON's escapes and YAML's ``\\UXXXXXXXX``, then ``$$`` as one ``$``."""

    def one(found: re.Match[str]) -> str:
        escape = found.group(1)
        return chr(int(escape[1:], 16)) if escape[0] == "U" else found.group(0)

    text: str = json.loads(re.sub(r"\\(U[0-9a-f]{8}|.)", one, scalar))
    return text.replace("$$", "$")


@FAST
@given(model=texts, version=st.sampled_from(["0.8.5", "0.17.1", "0.10.1.post1", "1.0rc1", ""]))
def test_compose_is_exactly_the_service_envkit_means(model: str, version: str) -> None:
    text = compose.compose(model, REC, version)
    assert text.isascii() and raw_free(text)
    lines = text.splitlines()
    args = ["--model", model, *serve_args(REC)]
    start = lines.index("    command:") + 1
    items = lines[start : start + len(args)]
    assert [compose_word(item.removeprefix("      - ")) for item in items] == args
    # every other line is the template's: no key, no list entry, no mount was added
    assert lines[:start] == [
        ln if not ln.startswith("    image: ") else lines[2] for ln in TEMPLATE[:start]
    ]
    assert lines[start + len(args) :] == TEMPLATE[start + len(args) :]
    assert lines[2] == f"    image: vllm/vllm-openai:{'v' + version if version else 'latest'}"


@pytest.mark.parametrize("version", ["1!2.0", "0.8.5\n    privileged: true", "latest"])
def test_compose_refuses_a_version_that_names_no_image_tag(version: str) -> None:
    with pytest.raises(BadInput, match="image tag"):
        compose.compose("m", REC, version)


@FAST
@given(model=texts)
def test_the_serve_command_is_the_words_envkit_means(model: str) -> None:
    command = serve_command(model, REC)
    assert shlex.split(command) == ["vllm", "serve", model, *serve_args(REC)]


@FAST
@given(words=st.lists(texts, min_size=1, max_size=4))
def test_shell_commands_split_back_into_their_words(words: list[str]) -> None:
    assert shlex.split(shell_command(words)) == words


def test_a_fix_names_a_venv_path_as_one_shell_word(tmp_path: Path) -> None:
    from envkit.env.verify import gather

    venv = tmp_path / "my venv $(touch pwned)"
    venv.mkdir()
    profile = parse_profile(profile_text(), path=Path("good.toml"), name="good")
    with pytest.raises(BadInput) as caught:
        gather(venv, profile)
    command = caught.value.hint.split("`")[1]
    assert shlex.split(command) == ["envkit", "build", "good", "--venv", str(venv)]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("vllm", "latest"),
        ("vllm", "0.8.5\n    privileged: true"),
        ("transformers", "\u0664.\u0665\u0661"),  # other scripts' digits
        ("transformers", "4.51.3 \x1b]0;x\x07"),
    ],
)
def test_models_pins_must_be_versions(here: Path, key: str, value: str) -> None:
    text = profile_text() + f"\n[models]\n{key} = {json.dumps(value)}\n"
    (here / "envs" / "bad.toml").write_text(text)
    res = run_cli("show", "bad")
    assert res.code == 2 and f"[models.{key}]" in res.err and "is not a version" in res.err
    line = text.splitlines().index(f"{key} = {json.dumps(value)}") + 1
    assert f"bad.toml:{line} " in res.err and raw_free(res.err)


def test_a_compose_attack_through_the_profile_is_refused(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    shipped = (ROOT / "envs" / "vllm-0.8.5+qwen2-vl.toml").read_text()
    evil = shipped.replace('vllm = "0.8.5"', 'vllm = "0.8.5\\n    privileged: true"', 1)
    assert evil != shipped
    (envs / "p.toml").write_text(evil)
    model = ROOT / "tests" / "fixtures" / "models" / "Qwen2-VL-2B-Instruct"
    res = run_cli(
        "--envs", str(envs), "plan", "p", str(model), "--gpu-memory", "24GiB", "--compose"
    )
    assert res.code == 2 and "[models.vllm]" in res.err and "privileged" not in res.out


def test_a_requirement_url_holding_a_control_is_refused(here: Path) -> None:
    extra = 'constraints = ["foo @ https://h/foo.whl\\u001b]0;x\\u0007"]\n'
    text = profile_text(constraints=()).replace("constraints = []\n", extra)
    (here / "envs" / "bad.toml").write_text(text)
    res = run_cli("show", "bad")
    assert res.code == 2 and "[constraints]" in res.err and "not printable" in res.err


@FAST
@given(description=texts, arch=texts, model_type=texts, until=texts)
def test_generated_profiles_parse_back_to_exactly_what_was_meant(
    description: str, arch: str, model_type: str, until: str
) -> None:
    """A profile with arbitrary text either loads or is refused with one message; the
    [models] table scan --update writes from a hostile wheel's keys is TOML with exactly
    those keys and values."""
    doc = tomlkit.parse(profile_text())
    doc["description"] = description
    try:
        loaded = parse_profile(tomlkit.dumps(doc), path=Path("p.toml"), name="p")
    except EnvkitError as exc:
        assert raw_free(visible(str(exc)), "")
    else:
        assert loaded.description == description.strip()
    vllm = Scan(
        project="vllm",
        version="0.8.5",
        architectures=(f"A{arch}", "B"),
        model_types=(f"m{model_type}",),
        previously_supported={f"Old{arch}": f"0.{until}"},
        out_of_tree={f"Plug{arch}": f"pkg{until}"},
        wheel=f"vllm-0.8.5-py3-none-any.whl{until}",
    )
    transformers = Scan(project="transformers", version="4.51.3", model_types=(model_type,))
    table = tomlkit.document()
    table.add("models", models_table(vllm, transformers))
    back = toml_data(tomlkit.dumps(table))["models"]
    assert set(back) == {
        "vllm", "transformers", "source", "architectures", "model_types", "vllm_model_types",
        "previously_supported", "out_of_tree", "transformers_bounds",
    }  # fmt: skip
    assert back["architectures"] == sorted(vllm.architectures)
    assert back["previously_supported"] == dict(vllm.previously_supported)
    assert back["out_of_tree"] == dict(vllm.out_of_tree)
    assert back["model_types"] == sorted({model_type, f"m{model_type}"})


# --- probe: a chat answer must carry a usable message --------------------------------------


@pytest.fixture(scope="module")
def chat_server() -> Iterator[loopback.Scripted]:
    """One server for the chat answers below; each test sets what it replies."""

    def models(handler: loopback.Handler) -> None:
        handler.send(200, b'{"data": [{"id": "m"}]}')

    with loopback.serve({"/v1/models": models}) as server:
        yield server


def chat_answer(server: loopback.Scripted, reply: dict[str, Any]) -> Any:
    def chat(handler: loopback.Handler) -> None:
        handler.send(200, json.dumps(reply).encode())

    server.routes["/v1/chat/completions"] = chat
    return run_cli("probe", loopback.origin(server) + "/v1", "--timeout", "5", "--json")


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ({"choices": [None]}, "no message object"),
        ({"choices": "x"}, "without choices"),
        ({"choices": []}, "without choices"),
        ({"choices": [{}]}, "no message object"),
        ({"choices": [{"message": "OK"}]}, "no message object"),
        ({"choices": [{"message": {"role": "assistant"}}]}, "message has no content"),
        ({"choices": [{"message": {"content": 5}}]}, "message.content is 5, not a string"),
        ({"choices": [{"message": {"content": ["OK"]}}]}, "content is a list of 1 item, not"),
    ],
)
def test_probe_needs_a_usable_chat_message(
    chat_server: loopback.Scripted, reply: dict[str, Any], why: str
) -> None:
    res = chat_answer(chat_server, reply)
    assert res.code == 1, res.out
    data = res.json()
    assert data["ok"] is False and why in data["chat"]["problem"] and data["reply"] == ""


@pytest.mark.parametrize("content", ["OK", None])
def test_probe_accepts_a_chat_message(chat_server: loopback.Scripted, content: str | None) -> None:
    res = chat_answer(chat_server, {"choices": [{"message": {"content": content}}]})
    res.assert_ok()
    assert res.json()["reply"] == (content or "")
