"""The ``vllm serve`` arguments and environment a deployment file gives, for ``envkit lint``.

Four formats, each read within bounds: a compose file (the vLLM service's ``command:`` and
``environment:``), a Helm values file (``vllmConfig`` keys as flags, ``extraArgs``, ``env``), a
Kubernetes Deployment (the vLLM container's ``args``/``command`` and ``env``), a shell script
(its ``vllm serve`` line, continuations joined). YAML is read with PyYAML's safe loader (a
dependency huggingface_hub already brings), with aliases refused (no "billion laughs") and the
document's nodes counted; the file itself through ``io.files`` under a size cap.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.errors import BadInput
from envkit.io.files import KiB, read_small_text

MAX_FILE = 512 * KiB
MAX_NODES = 50_000
_SERVE = re.compile(r"\bvllm\s+serve\b")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)  # NAME=value before a command


@dataclass(frozen=True)
class Deployment:
    """What a file starts vLLM with."""

    args: tuple[str, ...]  # the words after ``vllm serve``
    env: dict[str, str]
    where: str  # the file and the part read, said in findings


def read_deployment(path: Path) -> Deployment:
    """The args and env of ``path``; BadInput for a file that is none of the four formats."""
    text = read_small_text(path, MAX_FILE, what="deployment file")
    try:
        return _read(path, text)
    except (AttributeError, TypeError, KeyError, IndexError):  # a key of another shape
        raise BadInput(
            f"{path}: its vLLM service, container or vllmConfig is not laid out as envkit "
            "reads it (a mapping where a list is expected, or the other way round)."
        ) from None


def _read(path: Path, text: str) -> Deployment:
    if path.suffix in (".sh", ".bash") or text.startswith("#!"):
        return _shell(text, str(path))
    document = _yaml(text, str(path))
    if isinstance(document, dict) and isinstance(document.get("services"), dict):
        return _compose(document["services"], str(path))
    if isinstance(document, dict) and document.get("kind") in ("Deployment", "StatefulSet", "Pod"):
        return _kubernetes(document, str(path))
    if isinstance(document, dict):
        found = _find_key(document, "vllmConfig", 0)
        if found is not None:
            return _helm(document, found, str(path))
    raise BadInput(
        f"{path} is not a compose file, Helm values, Kubernetes Deployment or shell script "
        "envkit reads.",
        "Give a compose.yaml (services:), values.yaml (vllmConfig:), a Deployment (kind: "
        "Deployment) or a script with a vllm serve line.",
    )


def _yaml(text: str, where: str) -> Any:
    import yaml  # types-PyYAML is in the dev extra

    try:
        for nodes, event in enumerate(yaml.parse(text, Loader=yaml.SafeLoader), start=1):
            if isinstance(event, yaml.AliasEvent):
                raise BadInput(f"{where} uses a YAML alias (*name); envkit does not expand them.")
            if nodes > MAX_NODES:
                raise BadInput(f"{where} has more than {MAX_NODES:,} YAML nodes.")
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise BadInput(f"{where} is not YAML envkit can read: {str(exc)[:300]}") from None
    return documents[0] if documents else None


def _words(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise BadInput(f"{where}: {exc}") from None
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return [str(v) for v in value]
    if value is None:
        return []
    raise BadInput(f"{where}: the command is neither a string nor a list of words.")


def _after_serve(words: list[str]) -> list[str]:
    """The words after ``vllm serve`` (or an api_server module: ``--model X`` moved to the
    front, as vllm serve takes it)."""
    for i in range(len(words) - 1):
        if words[i].endswith("vllm") and words[i + 1] == "serve":
            return words[i + 2 :]
    for i, word in enumerate(words):
        if word.endswith("api_server"):
            return _model_first(words[i + 1 :])
    return words[1:] if words[:1] == ["serve"] else words


def _model_first(words: list[str]) -> list[str]:
    """api_server's ``--model X`` moved to the front, as vllm serve takes the model."""
    if "--model" in words[:-1]:
        at = words.index("--model")
        return [words[at + 1], *words[:at], *words[at + 2 :]]
    return words


def leading_assignments(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """The ``NAME=value`` words before a command, as the shell reads them (the command's
    environment), and the words from the command on."""
    env: dict[str, str] = {}
    at = 0
    while at < len(words) and _ASSIGNMENT.fullmatch(words[at]):
        key, _eq, value = words[at].partition("=")
        env[key] = value
        at += 1
    return env, words[at:]


def _env_list(value: Any, where: str) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    out: dict[str, str] = {}
    for item in value or []:
        if isinstance(item, str):
            key, _eq, val = item.partition("=")
            out[key] = val
        elif isinstance(item, dict) and "name" in item:
            out[str(item["name"])] = str(item.get("value", ""))
        else:
            raise BadInput(f"{where}: an environment entry envkit cannot read.")
    return out


def _takes_arguments(image: Any, entrypoint: list[str]) -> bool:
    """Whether the command is the arguments of vLLM's OpenAI image's own entrypoint: the
    image is ``vllm/vllm-openai:TAG`` and no entrypoint replaces its own, which was
    ``python3 -m vllm.entrypoints.openai.api_server`` (``--model M``, as vLLM's docs run the
    image) and later ``vllm serve`` (the model first). Any command is then its arguments,
    ``vllm serve M`` too (``vllm serve vllm serve M``: vLLM refuses the extra words)."""
    name = str(image or "").rpartition("/")[2].partition("@")[0].partition(":")[0]
    return not entrypoint and name.startswith("vllm-openai")


def _entrypoint_and(
    image: Any, entrypoint: list[str], command: list[str]
) -> tuple[tuple[str, ...], str]:
    """The words after vllm serve of ``entrypoint`` then ``command``, or of the image's own
    entrypoint given ``command`` (read as either of its entrypoints, by how it gives the
    model), and what the source says of them."""
    if _takes_arguments(image, entrypoint):
        return tuple(_model_first(command)), ", the arguments of its vLLM image's entrypoint"
    return tuple(_after_serve([*entrypoint, *command])), ""


def _compose(services: dict[str, Any], where: str) -> Deployment:
    name, service = _pick(services, where)
    command = _words(service.get("command"), where)
    entry = _words(service.get("entrypoint"), where)
    args, said = _entrypoint_and(service.get("image"), entry, command)
    return Deployment(
        args, _env_list(service.get("environment"), where), f"{where}: services.{name}{said}"
    )


def _pick(services: dict[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    def looks(service: Any) -> bool:
        return isinstance(service, dict) and "vllm" in str(
            [service.get("image"), service.get("command"), service.get("entrypoint")]
        )

    chosen = [(n, s) for n, s in services.items() if looks(s)]
    if len(chosen) != 1:
        raise BadInput(
            f"{where} has {len(chosen)} services that run vLLM; envkit lint reads one.",
            "Give a file with one vLLM service, or the arguments after --.",
        )
    return str(chosen[0][0]), chosen[0][1]


def _kubernetes(document: dict[str, Any], where: str) -> Deployment:
    spec = document.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or spec
    containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    vllm = [
        c for c in containers if "vllm" in str([c.get("image"), c.get("command"), c.get("args")])
    ]
    if len(vllm) != 1:
        raise BadInput(f"{where} has {len(vllm)} containers that run vLLM; envkit lint reads one.")
    container = vllm[0]
    given = _words(container.get("args"), where)
    entry = _words(container.get("command"), where)  # Kubernetes' command is the entrypoint
    args, said = _entrypoint_and(container.get("image"), entry, given)
    return Deployment(
        args, _env_list(container.get("env"), where),
        f"{where}: container {container.get('name', '?')}{said}",
    )  # fmt: skip


def _find_key(node: Any, key: str, depth: int) -> Any:
    if depth > 20:
        return None
    if isinstance(node, dict):
        if isinstance(node.get(key), dict):
            return node
        children: list[Any] = list(node.values())
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = _find_key(child, key, depth + 1)
        if found is not None:
            return found
    return None


def _helm(document: dict[str, Any], spec: dict[str, Any], where: str) -> Deployment:
    """vllmConfig's camelCase keys as flags (true: the flag alone; false: left out),
    ``extraArgs`` after them; the model from ``modelURL``; ``env`` as a container's."""
    config = spec["vllmConfig"]
    args: list[str] = [str(spec["modelURL"])] if spec.get("modelURL") else []
    for key, value in config.items():
        if key == "extraArgs":
            continue
        flag = "--" + re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", str(key)).lower()
        if value is True:
            args.append(flag)
        elif value is not False and value is not None:
            args += [flag, str(value)]
    args += _words(config.get("extraArgs"), where)
    return Deployment(tuple(args), _env_list(spec.get("env"), where), f"{where}: vllmConfig")


def _shell(text: str, where: str) -> Deployment:
    joined = re.sub(r"\\\r?\n", " ", text)
    exported: dict[str, str] = {}
    for line in joined.splitlines():
        if line.startswith("export ") and "=" in line:
            with contextlib.suppress(ValueError):
                for word in shlex.split(line[7:]):
                    key, eq, value = word.partition("=")
                    if eq:
                        exported[key] = value
        if _SERVE.search(line) and not line.lstrip().startswith("#"):
            try:
                words = shlex.split(line, comments=True)
            except ValueError as exc:
                raise BadInput(f"{where}: {exc}") from None
            given, words = leading_assignments(words)
            env = {**exported, **given}
            return Deployment(tuple(_after_serve(words)), env, f"{where}: its vllm serve line")
    raise BadInput(f"{where} has no vllm serve line.")
