"""Keeping credentials out of everything envkit prints or writes.

Two kinds of secret are hidden:

- the userinfo of any URL, in every form a URL can carry it (``user:pass@``, ``:token@``,
  ``token@``, and passwords holding an ``@``): ``https://***@host/...``;
- secret values envkit knows about (the API key it sends, tokens from the environment),
  wherever they appear, including in a server's answer that echoes them back;
- secrets by their shape in text envkit reads (a boot log): Hugging Face tokens (``hf_...``),
  ``sk-...`` keys, ``--api-key VALUE``, ``Authorization: Bearer VALUE``, the values of
  ``api_key``/``token`` fields in vLLM's argument dumps and of ``*_TOKEN=``/``*_API_KEY=``
  environment assignments (:func:`mask_secret_shapes`).

:func:`redact` is applied to every line render.term prints and to every file envkit writes that
could name a URL (build markers, lock headers, pylock and constraints bodies, lock.json).
"""

from __future__ import annotations

import os
import re
import threading

# scheme://<userinfo>@host: the userinfo runs to the last '@' before the path, query,
# fragment or end of the URL (a password may hold '@'; a URL never holds whitespace).
_USERINFO = re.compile(r"(?<=://)[^/?#\s\"'<>]*@")
# Variables whose values are secrets by name or by shape, wherever envkit reads them.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
SECRET_VALUE = re.compile(r"^(hf_|sk-|ghp_|gho_|github_pat_|xox[bp]-)[A-Za-z0-9_-]{8,}")
_MIN_SECRET = 8  # shorter values would mask ordinary words

_known: set[str] = set()
_lock = threading.Lock()


def remember_secret(value: str) -> None:
    """Mask ``value`` in every later :func:`redact` (the API key sent, a token read)."""
    value = value.strip()
    if len(value) >= _MIN_SECRET:
        with _lock:
            _known.add(value)


# Names whose values are credentials (HF_TOKEN, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY, ...),
# not settings that merely mention one (UV_KEYRING_PROVIDER, SSH_AUTH_SOCK, *_FILE).
_CREDENTIAL_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|API_?KEY|ACCESS_KEY|PRIVATE_KEY)$", re.I
)


def remember_environment_secrets(env: dict[str, str] | None = None) -> None:
    """Every credential in the environment: its value is masked from now on."""
    for name, value in (os.environ if env is None else env).items():
        if _CREDENTIAL_NAME.search(name) or SECRET_VALUE.match(value):
            remember_secret(value)


def is_secret_variable(name: str, value: str) -> bool:
    return bool(SECRET_NAME.search(name) or SECRET_VALUE.match(value) or has_credentials(value))


def has_credentials(text: str) -> bool:
    return bool(_USERINFO.search(text))


# Secrets by shape. Names of environment variables are upper case (max_tokens=16 is no
# secret); field values are masked only when quoted, as vLLM's dumps print them.
_TOKEN_SHAPE = re.compile(r"\b(?:hf_[A-Za-z0-9]{10,}|sk-[A-Za-z0-9_-]{16,})")
_SECRET_AFTER = re.compile(
    r"""((?i:--api[-_]key)(?:=|\s+)|(?i:\bbearer)\s+|\b[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD"""
    r"""|PASSWD|API_KEY|ACCESS_KEY)[A-Z0-9_]*=|['"]?\b(?:api_key|hf_token|token|password|secret)"""
    r"""['"]?\s*[:=]\s*\[?(?=['"]))(['"][^'"]*['"]|[^\s'",)}\]]+)"""
)
_SHAPE_HINTS = ("hf_", "sk-", "key", "bearer", "token", "secret", "passw")


def mask_secret_shapes(text: str) -> str:
    """``text`` with secrets recognised by their shape replaced by ``***`` (and URL
    credentials by ``***@``): for text envkit did not make, such as a boot log."""
    text = _USERINFO.sub("***@", text) if "@" in text else text
    low = text.lower()
    if not any(hint in low for hint in _SHAPE_HINTS):
        return text
    text = _SECRET_AFTER.sub(lambda m: m.group(1) + "***", text)
    return _TOKEN_SHAPE.sub("***", text)


def redact(text: str) -> str:
    """``text`` with URL credentials replaced by ``***``, known secret values and secrets
    of a known shape (:func:`mask_secret_shapes`) masked."""
    text = mask_secret_shapes(text)
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, "***")
    return text


def forget_secrets() -> None:
    """For tests and for each in-process CLI run: start with no known values."""
    with _lock:
        _known.clear()
