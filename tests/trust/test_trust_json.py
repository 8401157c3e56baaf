"""Every ``--json`` output parses, on every input, and holds no secret (issue 27): redaction acts
on the structure's values before ``json.dumps``, never on the encoded document (a vLLM log's
``api_key=None`` once became ``"api_key": ***``). By property, through the real entry points:
explain on arbitrary log text, show and profiles on a generated profile, probe against a
loopback server answering anything."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import loopback
import pytest
import tomlkit
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from properties import examples
from secretforms import FORMS, filled, secrets

from helpers import Result, envkit, output, profile_text

SETTINGS = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HEAD = "INFO 05-01 10:00:00 [api_server.py:1040] vLLM API server version 0.8.5"
ARGS = (
    "INFO 05-01 10:00:00 [api_server.py:1041] args: Namespace(host=None, port=8000, "
    "api_key={key}, model='{model}', served_model_name={served})"
)
texts = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=60)


@st.composite
def log_lines(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A log: vLLM's head and argument dump, arbitrary lines, and secrets in every form;
    the secrets it holds (found nowhere else in it)."""
    one, two = draw(secrets), draw(secrets)
    key = draw(st.sampled_from(["None", f"'{one}'", f"['{one}', '{two}']"]))
    model, served = draw(texts), draw(texts)
    lines = [HEAD, ARGS.format(key=key, model=model, served=served)]
    plain = [HEAD, ARGS, model, served]  # the text around the secrets
    for _ in range(draw(st.integers(0, 6))):
        choice = draw(st.integers(0, 2))
        if choice == 0:
            lines.append(draw(texts))
            plain.append(lines[-1])
        elif choice == 1:
            form = draw(st.sampled_from(FORMS))
            lines.append(filled(form, one, two))
            plain.append(filled(form, "", ""))
        else:
            nothing = draw(st.sampled_from(["None", "''"]))
            lines.append(f"ERROR {draw(texts)} api_key={nothing}")
            plain.append(lines[-1])
    assume(not any(secret in part for secret in (one, two) for part in plain))
    return "\n".join(lines) + "\n", [one, two]


@pytest.fixture
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="json-") as tmp:
        root = Path(tmp)
        (root / "envs").mkdir()
        (root / "envs" / "good.toml").write_text(profile_text())
        yield root


def parsed(res: Result, command: str) -> dict[str, Any]:
    """The document, validated: an error's shape for a failure envkit reports as an error,
    the command's own else."""
    assert res.code in (0, 1, 2), res
    data = json.loads(res.out)
    return output("error" if "exit_code" in data and "error" in data else command, res.out)


@SETTINGS
@given(log=log_lines())
def test_explain_json_parses_and_hides_every_secret_on_any_log(
    log: tuple[str, list[str]], folder: Path
) -> None:
    text, hidden = log
    path = folder / "boot.log"
    path.write_text(text, encoding="utf-8")
    res = envkit("explain", str(path), "--json", cwd=folder)
    data = parsed(res, "explain")
    for secret in hidden:
        assert secret not in res.out + res.err
    if res.code != 2 and "api_key=None" in text.splitlines()[1]:
        assert data["facts"]["args"]["api_key"] == "None"  # no secret: shown as it is


@SETTINGS
@given(
    description=texts,
    one=secrets,
    two=secrets,
    form=st.sampled_from(FORMS),
    extra=st.dictionaries(st.sampled_from(["exclude_newer", "typo_key"]), texts, max_size=2),
)
@example(  # once a false alarm: the second is a word of the output
    description="", one="00000000", two="out_of_t", form="Authorization: Basic {b64}", extra={}
)
def test_show_and_profiles_json_parse_whatever_a_profile_holds(
    description: str, one: str, two: str, form: str, extra: dict[str, str], folder: Path
) -> None:
    plain = [description, filled(form, "", ""), profile_text(), *extra.values()]
    assume(not any(secret in part for secret in (one, two) for part in plain))
    env = {"ENVKIT_ENVS": str(folder / "envs")}
    commands = ((["show", "good"], "show"), (["profiles"], "profiles"))

    def said(secret_one: str, secret_two: str) -> str:
        doc = tomlkit.parse(profile_text())
        doc["description"] = description + " " + filled(form, secret_one, secret_two)
        for key, value in extra.items():
            doc[key] = value
        (folder / "envs" / "good.toml").write_text(tomlkit.dumps(doc), encoding="utf-8")
        runs = [envkit(*argv, "--json", cwd=folder, env=env) for argv, _ in commands]
        for res, (_, command) in zip(runs, commands, strict=True):
            parsed(res, command)
        return "".join(res.out + res.err for res in runs)

    # a "secret" that is a word of the output anyway ('out_of_t' of "out_of_tree") shows
    # without being one: only a text the secret-free profile's output lacks can leak
    without = said("", "")
    assume(one not in without and two not in without)
    shown = said(one, two)
    assert one not in shown and two not in shown


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


@SETTINGS
@given(ids=st.lists(texts, max_size=3), reply=json_values, one=secrets, two=secrets,
       form=st.sampled_from(FORMS), status=st.sampled_from([200, 200, 401, 500]))  # fmt: skip
def test_probe_json_parses_whatever_the_server_answers(
    ids: list[str], reply: Any, one: str, two: str, form: str, status: int, folder: Path
) -> None:
    secret_line = filled(form, one, two)
    plain = [*ids, json.dumps(reply), filled(form, "", "")]
    assume(not any(secret in part for secret in (one, two) for part in plain))
    models = {"data": [{"id": i} for i in [*ids, secret_line]], "note": secret_line}
    chat = {"choices": [{"message": {"content": secret_line}}], "extra": reply}

    def answer(body: Any) -> loopback.Route:
        return lambda handler: handler.send(status, json.dumps(body).encode())

    routes = {"/v1/models": answer(models), "/v1/chat/completions": answer(chat)}
    with loopback.serve(routes) as server:
        res = envkit("probe", loopback.origin(server) + "/v1", "--timeout", "5", "--json",
                     cwd=folder)  # fmt: skip
    parsed(res, "probe")
    assert one not in res.out + res.err and two not in res.out + res.err
