"""``envkit plan --compose``: a docker-compose service running the recommended command.

The YAML is assembled from fixed keys and two kinds of value, so that nothing a profile or
a model path holds can add a key (a ``privileged: true``, a bind mount): the image is
``vllm/vllm-openai:v<version>``, the version checked to be a PEP 440 version whose tag
fits Docker's tag grammar, and every command word is a double-quoted scalar written by
``json.dumps`` (JSON strings are YAML; non-ASCII and control characters become escapes).
"""

from __future__ import annotations

import json
import re

from packaging.version import InvalidVersion, Version

from envkit.errors import BadInput
from envkit.io.redaction import redact_words
from envkit.serving.command import Recommendation, serve_args

IMAGE = "vllm/vllm-openai"
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")  # Docker's tag grammar


def image(vllm_version: str) -> str:
    """vLLM's OpenAI image for ``vllm_version`` (``latest`` without one); BadInput when the
    version cannot name a tag."""
    if not vllm_version:
        return f"{IMAGE}:latest"
    try:
        tag = f"v{Version(vllm_version).public}" if vllm_version.isascii() else ""
    except InvalidVersion:
        tag = ""
    if not TAG_RE.fullmatch(tag):
        raise BadInput(
            f"vLLM {vllm_version!r} does not name an image tag of {IMAGE}.",
            "Set the profile's [models].vllm to a release version such as 0.8.5.",
        )
    return f"{IMAGE}:{tag}"


def quoted(value: str) -> str:
    """``value`` as a YAML double-quoted scalar (a JSON string, ASCII only)."""
    return json.dumps(value, ensure_ascii=True)


def compose(model: str, rec: Recommendation, vllm_version: str, kv: str = "auto") -> str:
    """The service, as YAML text."""
    args = ["--model", model, *serve_args(rec, kv)]
    lines = [
        "services:",
        "  vllm:",
        f"    image: {image(vllm_version)}",
        "    ports:",
        '      - "8000:8000"',
        "    ipc: host",
        "    environment:",
        "      - HF_TOKEN  # passed through, never written",
        "    command:",
        *(f"      - {quoted(a)}" for a in redact_words(args)),  # masked, then quoted
        "    deploy:",
        "      resources:",
        "        reservations:",
        "          devices:",
        "            - driver: nvidia",
        "              count: 1",
        "              capabilities: [gpu]",
    ]
    return "\n".join(lines) + "\n"
