"""Ray: a ``runtime_env`` that gives every Ray worker exactly the lock cell, or the image.

Without an image, Ray's ``uv`` field installs the cell's lock into each job's virtualenv:
``packages`` are the lock's requirements with their hashes, one a line as uv reads a
requirements file, and ``uv_pip_install_options`` asks ``--require-hashes`` and
``--no-deps`` (the lock is the whole set) and the index and torch source the lock was made
from. With an image, ``image_uri`` runs the workers in it (Ray runs them with podman).
``env_vars`` give every worker on every node the variables vLLM needs (the offline switches
for local weights) and envkit's facts (``ENVKIT_PROFILE``, ``ENVKIT_CELL``,
``ENVKIT_LOCK_SHA256``). The file is YAML (what ``ray job submit --runtime-env`` reads),
its facts also in comments.
"""

from __future__ import annotations

import re
from typing import Any

from envkit.deploy.facts import Facts
from envkit.image.spec import MAX_LOCK, ImageSpec
from envkit.io.files import read_small_text

_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")
_PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9,._-]*\])?==[A-Za-z0-9.+!_-]+")


def locked_requirements(spec: ImageSpec) -> list[str]:
    """The lock's requirements as single lines: ``name==version --hash=sha256:...``."""
    text = read_small_text(spec.lock, MAX_LOCK, what="lock file")
    joined = text.replace("\\\n", " ")
    out: list[str] = []
    for raw in joined.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if not _PIN.fullmatch(words[0]):
            continue
        hashes = [w for w in words[1:] if _HASH.fullmatch(w)]
        out.append(" ".join([words[0], *hashes]))
    return out


def install_options(spec: ImageSpec) -> list[str]:
    options = ["--require-hashes", "--no-deps"]
    if spec.index_url:
        options += ["--default-index", spec.index_url]
    return [*options, *spec.torch.uv_args]


def env_vars(facts: Facts) -> dict[str, str]:
    return {
        **dict(facts.env),
        "ENVKIT_PROFILE": facts.spec.profile,
        "ENVKIT_CELL": facts.spec.cell,
        "ENVKIT_LOCK_SHA256": facts.spec.lock_sha256,
    }


def runtime_env(facts: Facts) -> dict[str, Any]:
    env: dict[str, Any] = {}
    if facts.image is not None:
        env["image_uri"] = facts.image.reference
    else:
        env["uv"] = {
            "packages": locked_requirements(facts.spec),
            "uv_pip_install_options": install_options(facts.spec),
        }
    env["env_vars"] = env_vars(facts)
    return env
