"""Every profile key, declared once: its path, type, default, help and the form its value
must have (the model is tox's ``add_config``: key, type, default, description).

Three things come from :data:`KEYS` and nothing else: the reader's check of a document
(:func:`check`: unknown keys with the closest known one, values of the wrong type, required
keys, each value's form; every problem reported, none raised), the JSON Schema
``schemas/profile.schema.json`` and the key reference of ``docs/profiles.md``.
``python -m envkit.profiles.keys --write`` regenerates both files from the declaration;
``--check`` exits 1 when either differs from it (``tests/profiles/test_keys.py`` does the same).
A ``*`` in a path stands for any name (``verify.versions.*``: a distribution's name).
What ties keys together (a ``cuda`` against its backend, ``matrix.python`` against
``python``) is checked in ``profile``, after this.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from envkit.profiles.forms import (
    ATTRIBUTE,
    BACKEND,
    CUDA,
    HF_ONLY,
    MINOR,
    MODULE,
    PLATFORM,
    PLATFORMS,
    PYTHON,
    TIMESTAMP,
    VERSION,
    Form,
)

Report = Callable[[str, str], None]  # (key path, message): one problem found


class Kind(Enum):
    """What a key holds, in TOML and in JSON Schema."""

    TEXT = "string"
    TEXTS = "array"
    TABLE = "table"

    def holds(self, value: object) -> bool:
        return isinstance(value, {"string": str, "array": list, "table": dict}[self.value])

    @property
    def said(self) -> str:
        return {"string": "a string", "array": "an array", "table": "a table"}[self.value]


@dataclass(frozen=True, slots=True)
class Key:
    """One key: ``shown`` is the type as the reference says it (else the kind's name),
    ``default`` what envkit takes when the key is absent ('' for nothing)."""

    path: str
    kind: Kind
    help: str
    default: str = ""
    form: Form | None = None
    required: bool = False
    min_items: int = 0
    shown: str = ""

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]

    @property
    def parent(self) -> str:
        return self.path.rpartition(".")[0]


T, TS, TB = Kind.TEXT, Kind.TEXTS, Kind.TABLE
_BOUNDS = "models.transformers_bounds"
KEYS: tuple[Key, ...] = (
    Key(
        "description",
        T,
        "Shown by `envkit profiles` (first line) and `envkit show`. Say why each pin.",
    ),
    Key(
        "python",
        T,
        (
            "`3.12` means any 3.12.x; `3.12.1` exactly that; anything else is a PEP 440 "
            "specifier (`>=3.10,<3.13`). envkit finds an installed interpreter that fits."
        ),
        form=PYTHON,
        required=True,
    ),
    Key(
        "requirements",
        TS,
        "What to install, in one resolution. At least one.",
        required=True,
        min_items=1,
        shown="array of PEP 508 strings",
    ),
    Key(
        "constraints",
        TS,
        "Constraints: they pin versions without adding packages.",
        shown="array of PEP 508 strings",
    ),
    Key(
        "exclude_newer",
        T,
        "Passed to uv as `--exclude-newer`: a repeatable resolution.",
        form=TIMESTAMP,
        shown="string (RFC 3339 date)",
    ),
    Key("torch", TB, "The torch build the profile demands."),
    Key(
        "torch.backend",
        T,
        "Passed to uv as `--torch-backend` (unless `--torch-index` says otherwise).",
        form=BACKEND,
    ),
    Key(
        "torch.cuda",
        T,
        (
            "Required `torch.version.cuda`. Derived from a `cuXYZ` backend when absent; must "
            "agree with it when present. It also decides the NVIDIA driver the profile needs "
            "(NVIDIA's toolkit table: 550.54.14 or newer for 12.4), which `envkit show`, the "
            "lock headers and the site state."
        ),
        default="the backend's",
        form=CUDA,
        shown="string `MAJOR.MINOR`",
    ),
    Key("verify", TB, "What verification must find inside the environment."),
    Key(
        "verify.versions",
        TB,
        ("Exact versions to verify, besides every `==` pin in requirements and constraints."),
        shown="table name = version",
    ),
    Key("verify.versions.*", T, "A distribution's exact version.", form=VERSION),
    Key(
        "verify.imports",
        TS,
        "Must import, from inside the venv.",
        form=MODULE,
        shown="array of module names",
    ),
    Key(
        "verify.probes",
        TS,
        "Must exist after import (e.g. an API the pinned vLLM calls).",
        form=ATTRIBUTE,
        shown="array of `module.attr[.attr]`",
    ),
    Key("models", TB, "Written by `envkit scan --update` from the pinned releases' wheels."),
    Key("models.vllm", T, "The vLLM release the lists were scanned from.", form=VERSION),
    Key(
        "models.transformers",
        T,
        "The transformers release the lists were scanned from.",
        form=VERSION,
    ),
    Key(
        "models.model_types",
        TS,
        (
            "`model_type` values that load: those the pinned transformers knows, plus "
            "`vllm_model_types`."
        ),
    ),
    Key("models.vllm_model_types", TS, "Model types vLLM reads with its own config class."),
    Key("models.architectures", TS, "The pinned vLLM's model registry keys."),
    Key(
        "models.previously_supported",
        TB,
        "Architectures vLLM dropped, with the last release that had them.",
        shown="table name = release",
    ),
    Key("models.previously_supported.*", T, "The last vLLM release that had the architecture."),
    Key(
        "models.out_of_tree",
        TB,
        "Architectures moved to plugins, with the plugin.",
        shown="table name = plugin",
    ),
    Key("models.out_of_tree.*", T, "The plugin that provides the architecture now."),
    Key(
        _BOUNDS,
        TB,
        (
            "Architectures vLLM's own test registry skips with the pinned transformers "
            "(written by envkit scan --update)."
        ),
    ),
    Key(f"{_BOUNDS}.*", TB, "One architecture's bound."),
    Key(
        f"{_BOUNDS}.*.min",
        T,
        "The oldest transformers the architecture's tests run with.",
        form=VERSION,
    ),
    Key(
        f"{_BOUNDS}.*.max",
        T,
        "The newest transformers the architecture's tests run with.",
        form=VERSION,
    ),
    Key(f"{_BOUNDS}.*.reason", T, "Why, in vLLM's words."),
    Key(f"{_BOUNDS}.*.example", T, "A model repository of the architecture."),
    Key(
        f"{_BOUNDS}.*.hf_only",
        T,
        (
            "The bound directions only the tests comparing with the Hugging Face reference "
            "runner apply (vLLM's own initialization test runs the architecture anyway): a "
            "warning, not a refusal."
        ),
        form=HF_ONLY,
    ),
    Key("models.source", T, "The wheels the lists came from."),
    Key("matrix", TB, "The lock cells: every python x platform x backend (`envkit lock`)."),
    Key(
        "matrix.python",
        TS,
        "Python versions to lock; each must fit `python`.",
        default="`python` when it is `X.Y`",
        form=MINOR,
        shown="array of `X.Y`",
    ),
    Key(
        "matrix.platforms",
        TS,
        "Platforms to lock, each with the target uv is given: "
        + ", ".join((f"`{p}` (`{t}`)" for p, t in PLATFORMS.items()))
        + ".",
        default="`linux-x86_64`",
        form=PLATFORM,
        shown="array of strings",
    ),
    Key(
        "matrix.backends",
        TS,
        "torch backends to lock.",
        default="the profile's `torch.backend`",
        form=BACKEND,
    ),
    Key(
        "serve",
        TB,
        (
            "How the profile is served, so that `envkit upgrade` checks it against the release "
            "it moves to (as `envkit lint` does)."
        ),
    ),
    Key(
        "serve.args",
        TS,
        "The words after `vllm serve` (the model first); at most 512, each at most 4,096 "
        "characters. `envkit upgrade` lists the flags the release it moves to no longer accepts.",
        shown="array of strings",
    ),
    Key(
        "serve.env",
        TB,
        "Variables set for `vllm serve` (at most 256); `envkit upgrade` lists the `VLLM_*` "
        "ones the new release ignores.",
        shown="table name = value",
    ),
    Key("serve.env.*", T, "A variable's value."),
)
BY_PATH: dict[str, Key] = {k.path: k for k in KEYS}
# table path ('' the top) -> its keys by name ('*' for any)
CHILDREN: dict[str, dict[str, Key]] = {k.path: {} for k in KEYS if k.kind is TB}
CHILDREN[""] = {}
for _key in KEYS:
    CHILDREN[_key.parent][_key.name] = _key


def check(table: Mapping[str, Any], problem: Report, prefix: str = "", where: str = "") -> None:
    """Every key of ``table`` (the table declared at ``prefix``, found at ``where``) against
    the declaration, recursively: unknown keys, types, required keys, forms, empty arrays."""
    declared = CHILDREN[prefix]
    known = [n for n in declared if n != "*"]
    for name, value in table.items():
        path = f"{where}.{name}" if where else str(name)
        key = declared.get(name) or declared.get("*")
        if key is None:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(known)}"
            problem(path, f"unknown key '{name}'; {hint}")
        elif not key.kind.holds(value):
            problem(path, f"must be {key.kind.said}, not {toml_kind(value)}")
        elif key.kind is TB:
            check(value, problem, key.path, path)
        elif key.kind is T:
            if key.form is not None and value.strip() and not key.form.fits(value.strip()):
                problem(path, key.form.refusal(value.strip()))
        else:
            _check_items(key, value, path, problem)
    for key in declared.values():
        if key.required and key.name not in table:
            problem(key.path, f"required key '{key.name}' is missing")


def toml_kind(value: object) -> str:
    """What a TOML value is, as TOML names it (a boolean, an array), never Python's name."""
    for kind, said in ((bool, "a boolean"), (int, "an integer"), (float, "a float"),
                       (str, "a string"), (list, "an array"), (dict, "a table")):  # fmt: skip
        if isinstance(value, kind):
            return said
    return "a date or time"  # all TOML holds besides


def _check_items(key: Key, values: list[Any], path: str, problem: Report) -> None:
    for item in values:
        if not isinstance(item, str) or not item.strip():
            found = toml_kind(item) if not isinstance(item, str) else "an empty string"
            problem(path, f"entries must be non-empty strings, found {found}")
        elif key.form is not None and not key.form.fits(item):
            problem(path, key.form.refusal(item))
    if len(values) < key.min_items:
        least = "one entry" if key.min_items == 1 else f"{key.min_items} entries"
        problem(path, f"must list at least {least}")


def schema() -> dict[str, Any]:
    """The profile's JSON Schema, from the declaration."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "envkit profile",
        "description": "One envkit profile (envs/NAME.toml): see docs/profiles.md. "
        "Generated from envkit.profiles.keys (python -m envkit.profiles.keys --write).",
        **_table_schema(""),
    }


def _table_schema(prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object"}
    declared = CHILDREN[prefix]
    if "*" in declared:
        out["additionalProperties"] = _key_schema(declared["*"])
        return out
    out["additionalProperties"] = False
    required = [k.name for k in declared.values() if k.required]
    if required:
        out["required"] = required
    out["properties"] = {k.name: _key_schema(k) for k in declared.values()}
    return out


def _key_schema(key: Key) -> dict[str, Any]:
    if key.kind is TB:
        return {"description": key.help, **_table_schema(key.path)}
    value: dict[str, Any] = {"type": "string"}
    if key.form is not None and key.form.pattern:
        value["pattern"] = key.form.pattern
    if key.form is not None and key.form.choices:
        value["enum"] = list(key.form.choices)
    if key.kind is T:
        return {"description": key.help, **value}
    out: dict[str, Any] = {"description": key.help, "type": "array", "items": value}
    if key.min_items:
        out["minItems"] = key.min_items
    return out


BEGIN = "<!-- keys: generated by python -m envkit.profiles.keys --write; edit keys.py -->"
END = "<!-- keys: end -->"


def reference() -> str:
    """The key reference of docs/profiles.md (between BEGIN and END)."""
    rows = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key in _documented():
        shown = key.shown or {T: "string", TS: "array of strings", TB: "table"}[key.kind]
        if key.form is not None and key.form.choices and not key.shown:
            shown += " of " + ", ".join(f"`{c}`" for c in key.form.choices)
        required = "required" if key.required else ""
        entry = CHILDREN.get(key.path, {}).get("*")
        if entry is not None and entry.kind is TB:  # a table of tables: name their keys
            inner = ", ".join(f"`{n}`" for n in CHILDREN[entry.path])
            key = Key(key.path, key.kind, f"{key.help} Each a table of {inner} (strings).")
        rows.append(f"| `{key.path}` | {shown} | {key.default or required} | {key.help} |")
    return "\n".join([BEGIN, "", *rows, "", END])


def _documented() -> Iterator[Key]:
    """Every key a reader writes: a table with declared keys is named by its keys."""
    for key in KEYS:
        if key.kind is TB and "*" not in CHILDREN[key.path]:
            continue
        if key.parent in BY_PATH and "*" in CHILDREN[key.parent] and key.name == "*":
            continue
        if "*." in key.path:
            continue
        yield key


ROOT = Path(__file__).resolve().parent.parent  # src/envkit
SCHEMA_FILE = ROOT / "schemas" / "profile.schema.json"
DOC_FILE = ROOT.parent.parent / "docs" / "profiles.md"


def generated(schema_text: str, doc_text: str) -> tuple[str, str]:
    """The schema's text and the doc's text as the declaration makes them (the doc's
    text outside the reference kept as it is)."""
    new_schema = json.dumps(schema(), indent=2) + "\n"
    before, _, rest = doc_text.partition(BEGIN)
    _, found, after = rest.partition(END)
    if not found:
        raise ValueError(f"{DOC_FILE} holds no {BEGIN} ... {END} section")
    return new_schema, before + reference() + after


def main(argv: list[str] | None = None) -> int:
    """``--write`` the schema and the doc section; ``--check``: exit 1 when they differ."""
    from envkit.io.atomicfile import write_atomic
    from envkit.io.files import MiB, read_small_text

    args = sys.argv[1:] if argv is None else argv
    if args not in (["--write"], ["--check"]):
        return 2
    old_schema = read_small_text(SCHEMA_FILE, MiB, what="schema")
    old_doc = read_small_text(DOC_FILE, MiB, what="doc")
    new_schema, new_doc = generated(old_schema, old_doc)
    if args == ["--check"]:
        return 0 if (old_schema, old_doc) == (new_schema, new_doc) else 1
    for path, old, new in ((SCHEMA_FILE, old_schema, new_schema), (DOC_FILE, old_doc, new_doc)):
        if old != new:
            write_atomic(path, new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
