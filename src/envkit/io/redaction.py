"""Keeping credentials out of everything envkit prints or writes.

Redaction acts on **values**, before they are encoded for where they go (a JSON document,
a TOML string, a shell word, a terminal line's escapes), never on the encoded text: masking
a document's text can break it (``"api_key": ***``). Three value-level entry points:

- :func:`redact` for one text value (a line, a URL, a message);
- :func:`redact_data` for a structure about to become JSON: every string, keys included,
  through :func:`redact`, and the whole value of a secret-named key (``api_key``,
  ``token``, ``HF_TOKEN``, ...) masked;
- :func:`redact_words` for a command line's words (``--api-key K1 K2``, ``--api-key=K``,
  ``--hf-token T``, wherever they stand, after ``--`` too).

What is hidden:

- the userinfo of any URL, in every form a URL can carry it (``user:pass@``, ``:token@``,
  ``token@``, and passwords holding an ``@``): ``https://***@host/...``; and credentials in
  its query (``?api_key=``, ``key=``, ``token=``, ``access_token=``, ``sig=``, ...);
- secret values envkit knows about (the API key it sends, tokens from the environment),
  wherever they appear, including in a server's answer that echoes them back;
- secrets by their shape in text envkit reads (a boot log): Hugging Face tokens (``hf_...``),
  ``sk-...`` keys, every value after ``--api-key``, ``Authorization:`` values (Bearer,
  Basic, any scheme), every quoted value of ``api_key``/``token`` fields in vLLM's argument
  dumps (lists too), ``*_TOKEN=``/``*_API_KEY=`` assignments (:func:`mask_secret_shapes`).

``None``, ``null`` and empty values are no secrets and stay as they are (``api_key=None``).
Every pattern here is linear: no nested quantifiers over overlapping classes, quoted values
bounded in length, so a crafted 1 MB line costs one pass.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import threading
from collections.abc import Iterable, Sequence

MASK = "***"

# scheme://<userinfo>@host: the userinfo runs to the last '@' before the path, query,
# fragment or end of the URL (a password may hold '@'). The run ends at a space, a tab or
# a newline only: every other control or format character (ESC, CR, U+2028, a bidi
# override) is taken into the run, so one inside the userinfo cannot end it early and leave
# the rest shown (the terminal then shows such characters as escapes).
_USERINFO = re.compile(r"(?<=://)[^/?#\"'<> \t\n]*@")
# for a value shown on one line, where newlines and tabs become escapes too
_USERINFO_ONE_LINE = re.compile(r"(?<=://)[^/?#\"'<> ]*@")
# a URL query's credential: ?api_key=, &key=, &token=, &access_token=, &sig=, &X-Amz-Signature=
_QUERY_SECRET = re.compile(
    r"(?i)([?&;](?:[a-z0-9_.-]*[_.-])?(?:api[_-]?key|key|token|sig|signature|password|passwd"
    r"|pwd|secret|credential|auth)=)([^&#\s\"'<>]*)"
)
# Variables whose values are secrets by name or by shape, wherever envkit reads them.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
SECRET_VALUE = re.compile(r"^(hf_|sk-|ghp_|gho_|github_pat_|xox[bp]-)[A-Za-z0-9_-]{8,}")
_MIN_SECRET = 8  # shorter values would mask ordinary words

_known: set[str] = set()
_longest_first: tuple[str, ...] = ()  # _known, as redact() replaces them
_lock = threading.Lock()


def remember_secret(value: str) -> None:
    """Mask ``value`` in every later :func:`redact` (the API key sent, a token read)."""
    global _longest_first
    value = value.strip()
    if len(value) >= _MIN_SECRET:
        with _lock:
            _known.add(value)
            _longest_first = tuple(sorted(_known, key=len, reverse=True))
            _redact_short.cache_clear()


# Names whose values are credentials (HF_TOKEN, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY, ...),
# not settings that merely mention one (UV_KEYRING_PROVIDER, SSH_AUTH_SOCK, *_FILE).
_CREDENTIAL_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|API_?KEY|ACCESS_KEY|PRIVATE_KEY)$", re.I
)
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
# keys of a structure (vLLM's argument dump, a header) whose values are credentials
_SECRET_KEYS = frozenset(
    {
        "api_key",
        "api_keys",
        "apikey",
        "token",
        "hf_token",
        "access_token",
        "auth_token",
        "api_token",
        "refresh_token",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "secret_key",
        "private_key",
        "authorization",
        "proxy_authorization",
    }
)
_NO_SECRET = frozenset({"", "none", "null", "''", '""', "[]"})


def remember_environment_secrets(env: dict[str, str] | None = None) -> None:
    """Every credential in the environment: its value is masked from now on."""
    for name, value in (os.environ if env is None else env).items():
        if _CREDENTIAL_NAME.search(name) or SECRET_VALUE.match(value):
            remember_secret(value)


def is_secret_variable(name: str, value: str) -> bool:
    return bool(SECRET_NAME.search(name) or SECRET_VALUE.match(value) or has_credentials(value))


@functools.lru_cache(maxsize=4096)
def is_secret_key(name: str) -> bool:
    """Whether a key (of a JSON object, an argument dump, a header, an option without its
    dashes) names a credential: ``api_key``, ``--api-key``, ``HF_TOKEN``, ``Authorization``;
    not ``max_tokens`` or ``pixels_per_token``."""
    plain = name.strip().lstrip("-")
    if plain.lower().replace("-", "_") in _SECRET_KEYS:
        return True
    return bool(_ENV_NAME.fullmatch(plain) and _CREDENTIAL_NAME.search(plain))


def is_no_secret(value: str) -> bool:
    """``None``, ``null`` and empty values (quoted or not): nothing to hide, shown as
    they are."""
    plain = value.strip()
    if len(plain) >= 2 and plain[0] == plain[-1] and plain[0] in "'\"":
        plain = plain[1:-1].strip()
    return plain.lower() in _NO_SECRET


def has_credentials(text: str) -> bool:
    return bool(_USERINFO.search(text))


# Secrets by shape. Names of environment variables are upper case (max_tokens=16 is no
# secret); field values are masked only when quoted, as vLLM's dumps print them. Quoted
# values are bounded (512 characters) so that an unclosed quote costs one bounded look.
_TOKEN_SHAPE = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{10,}|sk-[A-Za-z0-9_-]{16,}|(?:ghp|gho)_[A-Za-z0-9]{16,}"
    r"|github_pat_[A-Za-z0-9_]{16,}|xox[bp]-[A-Za-z0-9-]{10,})"
)
_QUOTED = r"""(?:'[^'\n]{0,512}'|"[^"\n]{0,512}")"""
_WORD = r"""[^\s'",)}\]]+"""
_VALUE = rf"(?:{_QUOTED}|{_WORD})"
# --api-key K1 K2 (every word up to the next option), --api-key=K, --api-key 'K'
# After a space, a word starting with '-' (quoted or not: the shell unquotes it) is the next
# option, never the value: argparse's rule.
_AFTER_OPTION = re.compile(
    rf"((?i:--(?:api[-_]key|hf[-_]token))(?:=|[ \t]+(?!['\"]?-)))"
    rf"({_VALUE}(?:[ \t]+(?!['\"]?-){_VALUE})*)"
)
# Authorization: Bearer X / Basic X / Token X, and a lone "Bearer X"
_AUTHORIZATION = re.compile(
    rf"((?i:\bauthorization)['\"]?[ \t]*[:=][ \t]*['\"]?(?:[A-Za-z]+[ \t]+)?|(?i:\bbearer)[ \t]+)"
    rf"({_WORD})"
)
# a lone "Basic X", masked when X decodes to user:password
_BASIC = re.compile(r"(\bBasic[ \t]+)([A-Za-z0-9+/]{4,}={0,2})")
# HF_TOKEN=X, OPENAI_API_KEY=X: any upper-case name and '=', its name then checked
# (one run per name: a name pattern around the keyword would backtrack over long names)
_ASSIGNED = re.compile(rf"(\b([A-Z0-9_]+)=)({_VALUE})")
_ASSIGNED_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY")
# api_key='X', "api_key": "X", token: 'X', api_key=['K1', 'K2'] (quoted values only)
_FIELD = re.compile(
    rf"""(['"]?\b(?i:api_keys?|hf_token|token|password|secret)['"]?[ \t]*[:=][ \t]*)"""
    rf"(\[[ \t]*(?:{_QUOTED}[ \t]*,[ \t]*)*{_QUOTED}?|{_QUOTED})"
)
_QUOTED_ITEM = re.compile(_QUOTED)
# a text with none of these holds no secret of a known shape (one pass, then none of the rest)
_SHAPE_HINT = re.compile(
    r"hf_|sk-|key|bearer|basic|authorization|token|secret|passw|gh[po]_|github_pat_|xox", re.I
)
PATTERNS = {  # every pattern run on text from outside, for the linearity test
    "userinfo": _USERINFO,
    "userinfo_one_line": _USERINFO_ONE_LINE,
    "query": _QUERY_SECRET,
    "token": _TOKEN_SHAPE,
    "option": _AFTER_OPTION,
    "authorization": _AUTHORIZATION,
    "basic": _BASIC,
    "assigned": _ASSIGNED,
    "field": _FIELD,
}


def _masked_value(value: str) -> str:
    """``value`` as shown: ``***`` (in its quotes when it had them), or as it is when it is
    no secret (None, empty)."""
    if is_no_secret(value) or value.strip("'\"") == MASK:  # masking a mask changes nothing
        return value
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[0] + MASK + value[0]
    return MASK


def _mask_words(found: re.Match[str]) -> str:
    # each value whole (a quoted one with its spaces), the separators kept as they were
    words = _WORDS.findall(found.group(2))
    return found.group(1) + "".join(w if w.isspace() else _masked_value(w) for w in words)


_WORDS = re.compile(rf"""{_QUOTED}|[ \t]+|[^ \t'"]+|['"]""")


def _mask_field(found: re.Match[str]) -> str:
    value = found.group(2)
    if value.startswith("["):
        value = _QUOTED_ITEM.sub(lambda item: _masked_value(item.group()), value)
    else:
        value = _masked_value(value)
    return found.group(1) + value


def _mask_basic(found: re.Match[str]) -> str:
    try:
        decoded = base64.b64decode(found.group(2), validate=True)
    except (binascii.Error, ValueError):
        return found.group()
    return found.group(1) + MASK if b":" in decoded else found.group()


def _mask_assigned(found: re.Match[str]) -> str:
    if not _ASSIGNED_NAME.search(found.group(2)):
        return found.group()
    return found.group(1) + _masked_value(found.group(3))


def _mask_one(found: re.Match[str]) -> str:
    return found.group(1) + _masked_value(found.group(2))


def mask_secret_shapes(text: str, *, one_line: bool = False) -> str:
    """``text`` with secrets recognised by their shape replaced by ``***`` (URL credentials
    by ``***@``): for text envkit did not make, such as a boot log. With ``one_line`` the
    text is shown on one line (its newlines and tabs as escapes): a URL's userinfo then
    runs across them too."""
    if "@" in text:
        text = (_USERINFO_ONE_LINE if one_line else _USERINFO).sub("***@", text)
    if "=" in text and ("?" in text or "&" in text or ";" in text):
        text = _QUERY_SECRET.sub(_mask_one, text)
    if not _SHAPE_HINT.search(text):
        return text
    text = _AFTER_OPTION.sub(_mask_words, text)
    text = _AUTHORIZATION.sub(_mask_one, text)
    text = _BASIC.sub(_mask_basic, text)
    text = _ASSIGNED.sub(_mask_assigned, text)
    text = _FIELD.sub(_mask_field, text)
    return _TOKEN_SHAPE.sub(MASK, text)


def redact(text: str, *, one_line: bool = False) -> str:
    """One text value with URL credentials replaced by ``***``, known secret values and
    secrets of a known shape (:func:`mask_secret_shapes`) masked. For a value, before it
    is encoded (escaped for the terminal, quoted for TOML, JSON or a shell)."""
    if len(text) <= 200:  # a document repeats its keys and many short values
        return _redact_short(text, one_line)
    return _redact(text, one_line)


@functools.lru_cache(maxsize=8192)  # at most 8192 strings of 200 characters kept
def _redact_short(text: str, one_line: bool) -> str:
    return _redact(text, one_line)


def _redact(text: str, one_line: bool) -> str:
    text = mask_secret_shapes(text, one_line=one_line)
    for value in _longest_first:  # a tuple, replaced whole when one is added
        if value in text:
            text = text.replace(value, MASK)
    return text


def redact_data(value: object) -> object:
    """A structure about to be encoded (JSON): every string through :func:`redact`, keys
    included, and the value of every secret-named key (:func:`is_secret_key`) masked
    whole (each string of a list), unless it is no secret (None, empty). Other values
    (numbers, booleans, None) stay; tuples become lists, as JSON has them."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out: dict[object, object] = {}
        for key, item in value.items():
            if isinstance(key, str):
                shown = redact(key)
                out[shown] = _secret(item) if is_secret_key(key) else redact_data(item)
            else:
                out[key] = redact_data(item)
        return out
    if isinstance(value, list | tuple):
        return [redact_data(item) for item in value]
    return value


def _secret(value: object) -> object:
    """The value of a secret-named key, as shown."""
    if isinstance(value, str):
        return _masked_value(value) if is_no_secret(value) else MASK
    if isinstance(value, list | tuple):
        return [_secret(item) for item in value]
    return redact_data(value)


def _secret_option(word: str) -> bool:
    return word.startswith("--") and is_secret_key(word)


def secret_words(words: Sequence[str]) -> list[str]:
    """The values a command line gives to secret options: every word after ``--api-key``
    or ``--hf-token`` up to the next option, and ``--api-key=K`` (None and empty left
    out). For :func:`remember_secret`, so that they are masked wherever they appear."""
    found: list[str] = []
    taking = False
    for word in words:
        name, eq, value = word.partition("=")
        if taking and not word.startswith("-"):
            found.append(word)
            continue
        taking = False
        if _secret_option(name):
            if eq:
                found.append(value)
            else:
                taking = True
    return [value for value in found if not is_no_secret(value)]


def redact_words(words: Iterable[str]) -> list[str]:
    """A command line's words with secrets masked, before they are quoted for a shell: every
    value of ``--api-key``/``--hf-token`` (``--api-key K1 K2``, ``--api-key=K``), wherever
    they stand, after ``--`` too; each other word through :func:`redact`."""
    out: list[str] = []
    taking = False
    for word in words:
        name, eq, value = word.partition("=")
        if taking and not word.startswith("-"):
            out.append(_masked_value(word))
            continue
        taking = False
        if _secret_option(name):
            out.append(f"{name}={_masked_value(value)}" if eq else word)
            taking = not eq
        else:
            out.append(redact(word, one_line=True))
    return out


def forget_secrets() -> None:
    """For tests and for each in-process CLI run: start with no known values."""
    global _longest_first
    with _lock:
        _known.clear()
        _longest_first = ()
        _redact_short.cache_clear()
