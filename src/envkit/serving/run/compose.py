"""``envkit plan --compose``: a docker-compose service running the recommended command.

The YAML is assembled from fixed keys and two kinds of value, so that nothing a profile or
a model path holds can add a key (a ``privileged: true``, a bind mount): the image is
``vllm/vllm-openai:v<version>``, the version checked to be a PEP 440 version whose tag
fits Docker's tag grammar, and every command word is a YAML double-quoted scalar (:func:`quoted`:
printable ASCII, every other character an escape), each ``$`` doubled so that Compose takes
it as it is, not as a variable.
"""

from __future__ import annotations

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
    """``value`` as a YAML double-quoted scalar, ASCII only: ``"`` and ``\\`` escaped, every
    character outside printable ASCII as ``\\uXXXX`` or, beyond the 16-bit range, as YAML's
    ``\\UXXXXXXXX`` (YAML parsers read a JSON surrogate pair as two lone surrogates), and each
    ``$`` doubled: Compose reads ``$NAME`` and ``${NAME}`` in any value as a variable of the
    host's environment, and ``$$`` as one ``$``."""
    out = ['"']
    for char in value.replace("$", "$$"):
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        else:
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out) + '"'


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
