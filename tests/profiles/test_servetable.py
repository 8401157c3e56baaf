"""A profile's [serve] table: the words after vllm serve and the variables for it, bounded and
checked where they enter (every problem with its key), and absent from show's JSON when the
profile has none."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import ProfileError
from envkit.profiles.profile import parse_profile

HEAD = 'python = "3.12"\nrequirements = ["vllm==0.8.5"]\n'


def parsed(serve: str):  # type: ignore[no-untyped-def]
    return parse_profile(HEAD + serve, path=Path("p.toml"), name="p")


def test_the_table_is_read_as_given() -> None:
    profile = parsed('[serve]\nargs = ["m", "--max-model-len", "8192"]\nenv = { VLLM_X = "1" }\n')
    assert profile.serve.args == ("m", "--max-model-len", "8192")
    assert dict(profile.serve.env) == {"VLLM_X": "1"}
    assert profile.to_dict()["serve"] == {"args": ["m", "--max-model-len", "8192"],
                                          "env": {"VLLM_X": "1"}}  # fmt: skip
    assert "serve" not in parsed("").to_dict()


@pytest.mark.parametrize(
    ("serve", "key", "fragment"),
    [
        ("[serve]\nargs = [1]\n", "serve.args", "entries must be strings"),
        ('[serve]\nargs = "--x"\n', "serve.args", "must be an array"),
        ("[serve]\nargs = [" + ", ".join(['"a"'] * 600) + "]\n", "serve.args", "at most 512"),
        (f'[serve]\nargs = ["{"x" * 5000}"]\n', "serve.args", "longer than 4,096"),
        ('[serve]\nenv = { "BAD NAME" = "1" }\n', "serve.env", "is not a variable name"),
        ("[serve]\nenv = { VLLM_X = 1 }\n", "serve.env.VLLM_X", "must be a string"),
        ('[serve]\nflags = ["--x"]\n', "serve.flags", "unknown key 'flags'"),
    ],
)
def test_bad_tables_name_the_key(serve: str, key: str, fragment: str) -> None:
    with pytest.raises(ProfileError) as caught:
        parsed(serve)
    problems = caught.value.problems
    assert any(p.key == key and fragment in p.message for p in problems), problems


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.one_of(st.text(max_size=20), st.integers(), st.booleans()), max_size=8),
    st.dictionaries(st.text(max_size=12), st.one_of(st.text(max_size=8), st.integers()),
                    max_size=4),
)  # fmt: skip
def test_any_table_is_a_profile_or_a_profile_error(
    args: list[object], env: dict[str, object]
) -> None:
    import tomlkit

    doc = tomlkit.document()
    doc["python"], doc["requirements"] = "3.12", ["vllm==0.8.5"]
    doc["serve"] = {"args": args, "env": env}
    try:
        profile = parse_profile(tomlkit.dumps(doc), path=Path("p.toml"), name="p")
    except ProfileError:
        return
    assert list(profile.serve.args) == args and dict(profile.serve.env) == env
