"""A model's ``config.json``: read from a folder, a file or a Hugging Face repo id, checked
where it enters (size, JSON, ``model_type``, ``architectures``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import BadInput
from envkit.io.escaping import described
from envkit.io.files import present, read_small_text
from envkit.io.redaction import redact

MAX_CONFIG_BYTES = 8 * 1024 * 1024  # real config.json files are a few KB
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    source: str
    model_type: str
    architectures: tuple[str, ...]
    remote_code: bool  # auto_map names an AutoConfig class shipped with the checkpoint
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def load_model_config(model: str, *, revision: str | None = None) -> ModelConfig:
    """Read config.json from a folder, a file, or a Hugging Face repo id (at ``revision``).

    Raises BadInput (missing or broken config, no ``model_type``, bad ``architectures``)
    and NetworkError (the Hub cannot be reached, and the file is not in its cache).
    """
    if not model.strip():  # Path("") is the current folder
        raise BadInput(
            "The model is empty.",
            "Pass the model's folder, its config.json, or a repo id (org/name).",
        )
    path = Path(model).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not present(path):
            raise BadInput(
                f"{model!r} is a folder without a config.json.",
                "Pass the model's folder, its config.json, or a repo id (org/name).",
            )
    if present(path):  # a FIFO or a device is refused, not read
        return parse_config(read_model_text(path), str(path))
    if REPO_ID.fullmatch(model) and ".." not in model and not model.startswith("."):
        from envkit.io.hub import fetch

        source = f"hub:{model}" + (f"@{revision}" if revision else "")
        return parse_config(fetch(model, "config.json", revision), source)
    raise BadInput(
        f"{model!r} is not a model folder, a config.json file, or a repo id such as "
        "Qwen/Qwen2-VL-2B-Instruct.",
        "Check the path.",
    )


def read_model_text(path: Path) -> str:
    """A model file's text (config.json and its siblings): a regular UTF-8 file of at most
    MAX_CONFIG_BYTES, checked before reading. BadInput (UnreadableFile) otherwise."""
    return read_small_text(path, MAX_CONFIG_BYTES, what="model file")


def load_json(text: str | bytes, source: str) -> Any:
    """JSON from a model file; BadInput (exit 2) for anything that is not plain JSON: bad
    syntax, NaN or Infinity (not JSON, though Python's parser takes them), nesting too deep."""

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=no_constants)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).",
            "Fix or re-download the file.",
        ) from None
    except ValueError as exc:
        raise BadInput(f"{source} is not valid JSON: {exc}.", "Fix the file.") from None
    except RecursionError:
        raise BadInput(
            f"{source} is nested too deeply to be a model file.", "Use the model's own file."
        ) from None


def parse_config(text: str, source: str) -> ModelConfig:
    data = load_json(text, source)
    if not isinstance(data, dict):
        raise BadInput(
            f"{source} holds {described(data)}, not a JSON object.",
            "A model's config.json is a JSON object.",
        )
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or not model_type.strip():
        raise BadInput(
            f"{source} has no model_type, so neither transformers nor vLLM can tell which "
            "config class reads it.",
            "Use the checkpoint's own config.json (it names its model_type).",
        )
    archs = data.get("architectures", [])
    if archs is None:
        archs = []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise BadInput(
            f"{source}: architectures must be a list of class names, "
            f"found {json.dumps(archs)[:80]}.",
            "Fix config.json.",
        )
    auto_map = data.get("auto_map")
    remote = isinstance(auto_map, dict) and "AutoConfig" in auto_map
    return ModelConfig(
        source=redact(source),
        model_type=model_type,
        architectures=tuple(archs),
        remote_code=remote,
        raw=data,
    )
