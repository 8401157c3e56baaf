"""A profile's ``[serve]`` table: the ``vllm serve`` arguments and ``VLLM_*`` variables the
profile is served with, so that a move to another vLLM release (``envkit upgrade``) can check
them against that release's parser, as ``envkit lint`` does.

``args`` are the words after ``vllm serve`` (the model first, when given); ``env`` maps each
variable to its value. Both are bounded where they enter: at most ``MAX_ARGS`` words of at
most ``MAX_WORD`` characters, at most ``MAX_VARIABLES`` variables, each name a variable name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envkit.profiles.keys import Report, toml_kind
from envkit.profiles.tomlfields import sub_table

MAX_ARGS = 512
MAX_WORD = 4_096
MAX_VARIABLES = 256
VARIABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Serve:
    """How the profile is served: ``vllm serve`` words and the variables set for it."""

    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"args": list(self.args), "env": dict(self.env)}


def serve_table(doc: Mapping[str, Any], problem: Report) -> Serve:
    """The ``[serve]`` table of a parsed profile, each problem reported with its key."""
    table = sub_table(doc, "serve")
    args = table.get("args", [])
    words: list[str] = []
    if isinstance(args, list):
        if len(args) > MAX_ARGS:
            problem("serve.args", f"{len(args):,} words; a profile holds at most {MAX_ARGS}")
        for word in args[:MAX_ARGS]:
            if not isinstance(word, str):
                problem("serve.args", f"entries must be strings, found {toml_kind(word)}")
            elif len(word) > MAX_WORD:
                problem("serve.args", f"a word is longer than {MAX_WORD:,} characters")
            else:
                words.append(word)
    env: dict[str, str] = {}
    variables = sub_table(table, "env")
    if len(variables) > MAX_VARIABLES:
        problem("serve.env", f"{len(variables):,} variables; at most {MAX_VARIABLES}")
    for name, value in list(variables.items())[:MAX_VARIABLES]:
        if not VARIABLE_RE.fullmatch(str(name)):
            problem("serve.env", f"{str(name)[:40]!r} is not a variable name")
        elif not isinstance(value, str) or len(value) > MAX_WORD:
            problem(f"serve.env.{name}", f"must be a string of at most {MAX_WORD:,} characters")
        else:
            env[str(name)] = value
    return Serve(args=tuple(words), env=env)
