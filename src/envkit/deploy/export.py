"""``envkit export``: the plan and the lock cell as files an engine runs.

:func:`facts_for` gathers what every file carries (:mod:`envkit.deploy.facts`) from the
plan ``envkit plan`` makes and the cell ``envkit image`` builds; :func:`export` has the
engine's module arrange them, runs ``envkit lint`` on the flags and variables of each file
(refusing, exit 1, before anything is written), encodes each for its format (YAML through
PyYAML's safe emitter, every string redacted first; shell through ``shlex.quote``) and
writes the files atomically, never over a file envkit did not write.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from envkit.deploy import helm, kserve, kubernetes, ray, slurm
from envkit.deploy.facts import Facts, Image, checked, comment, dns_name, served_path
from envkit.deploy.kubernetes import KUBERNETES_VERSION, Secrets
from envkit.errors import BadInput
from envkit.image.spec import ImageSpec
from envkit.io.atomicfile import write_atomic
from envkit.io.escaping import shell_command
from envkit.io.files import read_small_text
from envkit.io.redaction import redact
from envkit.profiles.profile import Profile

MARK = "written by envkit export"
MAX_REPLICAS = 1000
MAX_NODES = 256
MAX_GPUS_PER_NODE = 16


class Engine(str, Enum):
    KUBERNETES = "kubernetes"
    PRODUCTION_STACK = "production-stack"
    KSERVE = "kserve"
    RAY = "ray"
    SLURM = "slurm"


@dataclass(frozen=True)
class ExportOptions:
    engine: Engine
    out: Path
    image: Image | None = None
    replicas: int = 1
    nodes: int = 1
    gpus_per_node: int = 1
    venv: Path | None = None  # Slurm without an image: the venv built from the cell
    secrets: Secrets = field(default_factory=Secrets)


@dataclass(frozen=True)
class Written:
    path: Path
    kinds: tuple[str, ...]  # Deployment, Service, values, runtime_env, sbatch...


@dataclass(frozen=True)
class ExportResult:
    engine: Engine
    facts: Facts
    files: tuple[Written, ...]
    kubernetes_version: str  # the schemas the objects are tested against ('' for none)


def facts_for(
    spec: ImageSpec,
    model: str,
    args: list[str],
    options: ExportOptions,
    *,
    weights_bytes: int = 0,
    gpu_memory: int = 0,
    verdicts: tuple[tuple[str, str], ...] = (),
) -> Facts:
    """The facts of one export; BadInput for counts out of range."""
    for value, name, top in (
        (options.replicas, "--replicas", MAX_REPLICAS),
        (options.nodes, "--nodes", MAX_NODES),
        (options.gpus_per_node, "--gpus-per-node", MAX_GPUS_PER_NODE),
    ):
        if not 1 <= value <= top:
            raise BadInput(f"{name} {value} is out of range (1 to {top}).")
    served, local = served_path(model)
    env: list[tuple[str, str]] = []
    if local:
        env += [("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1")]
    return Facts(
        name=dns_name(spec.profile),
        spec=spec,
        model=model,
        served=served,
        local_weights=local,
        weights_bytes=weights_bytes,
        args=tuple(args),
        env=tuple(env),
        image=options.image,
        replicas=options.replicas,
        nodes=options.nodes,
        gpus_per_node=options.gpus_per_node,
        gpu_memory=gpu_memory,
        verdicts=verdicts,
    )


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def yaml_text(facts: Facts, documents: list[dict[str, Any]], more: tuple[str, ...] = ()) -> str:
    """The documents as YAML (PyYAML's safe emitter: every scalar quoted as it must be,
    non-ASCII escaped), after a comment block of the facts."""
    body = yaml.safe_dump_all(
        [_redacted(d) for d in documents],
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=False,
        width=10_000,
    )
    return comment([*facts.comment_lines(), *more]) + body


def _files(
    profile: Profile, facts: Facts, options: ExportOptions
) -> list[tuple[str, str, tuple[str, ...]]]:
    """(file name, text, kinds) for the engine, each file's flags linted first."""
    engine, name = options.engine, facts.name
    if engine is not Engine.RAY and engine is not Engine.SLURM and facts.image is None:
        raise BadInput(
            f"--to {engine.value} runs an image: give it with --image REF@sha256:DIGEST.",
            f"`envkit image {profile.name} --base BASE --tag TAG` builds one of the cell and "
            "prints its digest.",
        )
    secrets = options.secrets
    if engine is Engine.KUBERNETES:
        objects = kubernetes.objects(facts, secrets)
        checked(profile, facts, f"{name}.yaml")
        return [(f"{name}.yaml", yaml_text(facts, objects), tuple(o["kind"] for o in objects))]
    if engine is Engine.PRODUCTION_STACK:
        values = helm.values(facts, secrets)
        checked(profile, facts, "values.yaml", helm.chart_args(facts))
        return [("values.yaml", yaml_text(facts, [values]), ("values",))]
    if engine is Engine.KSERVE:
        objects = kserve.objects(facts, secrets)
        checked(profile, facts, f"{name}-kserve.yaml", kserve.runtime_args(facts)[1:])
        return [
            (f"{name}-kserve.yaml", yaml_text(facts, objects), tuple(o["kind"] for o in objects))
        ]
    if engine is Engine.RAY:
        checked(profile, facts, "runtime_env.yaml")
        serve = shell_command(["vllm", "serve", facts.served, *facts.serve_args()])
        text = yaml_text(facts, [ray.runtime_env(facts)], (f"serve with: {serve}",))
        return [("runtime_env.yaml", text, ("runtime_env",))]
    if facts.image is None and options.venv is None:
        raise BadInput("--to slurm runs the image (--image) or a venv (--venv PATH): give one.")
    checked(profile, facts, f"{name}.sbatch")
    return [(f"{name}.sbatch", slurm.script(facts, options.venv), ("sbatch",))]


def export(profile: Profile, facts: Facts, options: ExportOptions) -> ExportResult:
    """Write the engine's files into ``options.out``; nothing is written when one is
    refused (every file is rendered and linted before the first is written)."""
    rendered = _files(profile, facts, options)
    out = options.out
    for file_name, _text, _kinds in rendered:
        _check_ours(out / file_name)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, text, kinds in rendered:
        write_atomic(out / file_name, text)
        written.append(Written(out / file_name, kinds))
    version = KUBERNETES_VERSION if options.engine not in (Engine.RAY, Engine.SLURM) else ""
    return ExportResult(options.engine, facts, tuple(written), version)


def _check_ours(path: Path) -> None:
    if not path.exists():
        return
    try:
        head = read_small_text(path, 64 * 1024 * 1024, what="exported file")[:4096]
    except BadInput:
        head = ""
    if MARK not in head:
        raise BadInput(
            f"{path} exists and was not written by envkit export; it is left alone.",
            "Give another --out folder, or move the file away.",
        )


def with_image(facts: Facts, image: Image | None) -> Facts:
    return replace(facts, image=image)
