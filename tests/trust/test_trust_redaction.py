"""Secrets in every form are masked as values, before anything is encoded (issue 27): Basic and
Bearer authorization, every key of a list, ``--api-key=K``, keys after ``--``, credentials in a
URL's query and userinfo; ``None`` and empty values stay as they are; every pattern is linear."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import textwrap

import pytest
import tomlkit
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from properties import examples
from secretforms import FORMS, filled, secrets

from envkit.io import redaction
from envkit.io.redaction import (
    is_secret_key,
    redact,
    redact_data,
    redact_words,
    remember_secret,
    secret_words,
)
from envkit.lock import pylocks
from envkit.render import term


@settings(max_examples=examples(200), deadline=None)
@given(form=st.sampled_from(FORMS), one=secrets, two=secrets, noise=st.text(max_size=30))
def test_a_secret_in_any_form_never_shows(form: str, one: str, two: str, noise: str) -> None:
    empty = filled(form, "", "")
    assume(one not in empty + noise and two not in empty + noise)
    text = noise + " " + filled(form, one, two) + " " + noise
    b64 = base64.b64encode(f"{one}:{two}".encode()).decode()
    for shown in (redact(text), redact(text, one_line=True), term.shown(text)):
        assert one not in shown and two not in shown and b64 not in shown
    # as a value of a JSON document: masked before it is encoded, and the document parses
    document = json.dumps(redact_data({"line": text, text: [text], "args": {"api_key": one}}))
    assert one not in document and two not in document
    json.loads(document)


@settings(max_examples=examples(100), deadline=None)
@given(before=st.lists(st.sampled_from(["serve", "m", "--port", "8000", "--"]), max_size=4),
       keys=st.lists(secrets, min_size=1, max_size=3), after=st.sampled_from([[], ["--port", "1"]]),
       equals=st.booleans())  # fmt: skip
def test_every_key_given_on_a_command_line_is_masked(
    before: list[str], keys: list[str], after: list[str], equals: bool
) -> None:
    words = [*before, *([f"--api-key={keys[0]}"] if equals else ["--api-key", *keys]), *after]
    shown = redact_words(words)
    assert len(shown) == len(words) and not set(shown) & set(keys)
    assert set(secret_words(words)) == ({keys[0]} if equals else set(keys))
    assert shown[: len(before)] == before and shown[len(shown) - len(after) :] == after


@pytest.mark.parametrize(
    "text",
    [
        "args: Namespace(host=None, port=8000, api_key=None, model='x')",
        "args: Namespace(api_key='', hf_token=None)",
        "vllm serve m --api-key None",
        "HF_TOKEN= OPENAI_API_KEY=None",
        '{"api_key": null, "token": "None"}',
        "https://h.example/x?api_key=&token=None",
        "max_tokens=16 pixels_per_token=4 key_cache='auto'",
    ],
)
def test_none_and_empty_values_are_no_secrets_and_stay(text: str) -> None:
    assert redact(text) == text


def test_data_keys_name_secrets_and_values_stay_typed() -> None:
    args = {"api_key": "None", "api_keys": ["k1-value", ""], "pixels_per_token": "x"}
    data = {"api_key": "k3y-v", "HF_TOKEN": "v4lue", "max_tokens": 16, "token": None, "args": args}
    assert redact_data(data) == {
        "api_key": "***", "HF_TOKEN": "***", "max_tokens": 16, "token": None,
        "args": {"api_key": "None", "api_keys": ["***", ""], "pixels_per_token": "x"},
    }  # fmt: skip
    assert is_secret_key("--api-key") and is_secret_key("Authorization")
    assert not is_secret_key("max_tokens") and not is_secret_key("UV_KEYRING_PROVIDER")


def test_a_remembered_key_is_masked_in_words_text_and_json() -> None:
    remember_secret("remembered-key-0123")
    try:
        assert redact_words(["vllm", "x=remembered-key-0123"]) == ["vllm", "x=***"]
        assert "remembered" not in json.dumps(redact_data({"a": "remembered-key-0123"}))
    finally:
        redaction.forget_secrets()


def test_a_control_inside_userinfo_does_not_end_it_early() -> None:
    """Masked before escaping, the userinfo runs across ESC, CR and U+2028; on one line,
    across a newline too."""
    for char in ("\x1b", "\r", "\u2028", "\u202e", "\x00"):
        shown = term.shown(f"see https://user{char}pass-w0rd@h.example/x")
        assert "pass-w0rd" not in shown and "https://***@h.example/x" in shown
    assert "pass-w0rd" not in term.one_line("https://user\npass-w0rd@h.example")


# --- every pattern linear: a crafted 64 KiB line of each shape, in a child that gives each
# line its own CPU budget (ITIMER_PROF, whose signal ends the child) and the whole run a limit
# behind it (RLIMIT_CPU). Every pattern and both redactions over one line take a tenth of a
# second of CPU at the most (all the lines: about half a second); a pattern that backtracks
# takes far longer on its line (a quadratic search of 64 KiB is 2**31 steps: `a*b` on it, the
# plainest, about 3 s here), so a budget of half a second tells the two apart whatever else
# the machine runs. The 1 MB a line may be is the same shapes, sixteen times longer: their
# speed is a benchmark's, not this test's.
N = 1 << 16
LINE_SECONDS = 0.5
CPU_SECONDS = 10
CRAFTED = {
    "userinfo": "://" + "a" * N,
    "userinfo_one_line": "://a" + "\x1b" * N,
    "query": "?" + "a-" * (N // 2 + 1) + "x",
    "query_many": "&key" * (N // 4 + 1),
    "token": "hf_" + "a" * N + "-",
    "option": "--api-key " + "x " * (N // 2 + 1) + "'",
    "option_quotes": "--api-key '" * (N // 10 + 1),
    "authorization": "Authorization: " * (N // 14 + 1),
    "basic": "Basic " + "A" * N + "!",
    "assigned": "TOKEN" * (N // 5 + 1),
    "assigned_words": "A_TOKEN_B " * (N // 10 + 1),
    "field": "api_key=['a', " * (N // 12 + 1),
    "field_open": "api_key='" + "a" * N,
    "mixed": "https://u@h?token=x&api_key=['y' Bearer Basic --api-key " * (N // 50 + 1),
}
_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    resource.setrlimit(resource.RLIMIT_CPU, (int(sys.argv[1]), int(sys.argv[1]) + 5))
    signal.signal(signal.SIGPROF, signal.SIG_DFL)  # a line's budget spent: the child ends
    from envkit.io import redaction
    lines = json.loads(sys.stdin.read())
    for name, line in lines.items():
        print("trying", name, flush=True)
        signal.setitimer(signal.ITIMER_PROF, float(sys.argv[2]))
        for pattern in redaction.PATTERNS.values():
            pattern.sub("", line)
        redaction.redact(line)
        redaction.redact(line, one_line=True)
        signal.setitimer(signal.ITIMER_PROF, 0)
    print("done", len(lines))
    """
)


def test_every_pattern_takes_one_pass_over_a_crafted_line() -> None:
    assert all(len(line) >= N for line in CRAFTED.values())
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(CPU_SECONDS), str(LINE_SECONDS)],
        input=json.dumps(CRAFTED),
        capture_output=True,
        text=True,
        timeout=120,  # on the wall clock, for a machine busy with other work
    )
    tried = done.stdout.split("\n")
    ended = (-signal.SIGPROF, -signal.SIGXCPU, -signal.SIGKILL)  # a line's budget, or all
    assert done.returncode not in ended, f"backtracks: {tried[-2]}"
    assert done.returncode == 0, done.stderr
    assert tried[-2:] == [f"done {len(CRAFTED)}", ""]


def test_a_pylock_is_redacted_value_by_value_and_stays_toml() -> None:
    """Masked as TOML string values, then written by tomlkit: the lock still parses and
    validates, and a lock with nothing to mask is kept byte for byte."""
    wheel = "https://user:s3cret-pass@idx.example/f/torch-2.6.0-cp311-none-any.whl?token=t0ken-v4l"
    text = (
        'lock-version = "1.0"\ncreated-by = "uv"\n\n[[packages]]\nname = "torch"\n'
        'version = "2.6.0"\n'
        f'wheels = [{{ url = "{wheel}", hashes = {{ sha256 = "{"0" * 64}" }} }}]\n'
    )
    shown = pylocks.redacted(text)
    assert "s3cret-pass" not in shown and "t0ken-v4l" not in shown
    [package] = tomlkit.parse(shown).unwrap()["packages"]
    assert package["wheels"][0]["url"] == (
        "https://***@idx.example/f/torch-2.6.0-cp311-none-any.whl?token=***"
    )
    pylocks.validate(shown, "the test pylock")
    clean = text.replace("user:s3cret-pass@", "").replace("?token=t0ken-v4l", "")
    assert pylocks.redacted(clean) is clean
