"""Small files from the Hugging Face Hub, through ``huggingface_hub`` itself.

The Hub's own client gives envkit what people expect of it: ``HF_ENDPOINT``, the token from
``HF_TOKEN`` or ``hf auth login``, the shared cache (``HF_HOME``, ``HF_HUB_CACHE``),
``HF_HUB_OFFLINE=1`` answering from that cache, and ``--revision``. It keeps the token with
the Hub's origins (a CDN it redirects to gets none), as envkit's own client does.

envkit adds its limits: only small JSON files are fetched (a declared size above the cap is
refused before the download), the whole exchange has envkit's deadline, the token is masked
in everything envkit prints, and every failure is one NetworkError or BadInput, never a
verdict.
"""

from __future__ import annotations

import os
from pathlib import Path

from envkit.errors import BadInput, EnvkitError, NetworkError
from envkit.io.files import read_small
from envkit.io.http import seconds_from_env
from envkit.io.interrupts import within_deadline
from envkit.io.redaction import redact, remember_secret
from envkit.io.urls import parse_url

MAX_BYTES = 8 * 1024 * 1024  # a config.json is a few KB
_offline = False  # a knowledge snapshot is in use (index.snapshot): the Hub's cache alone


def stay_offline(on: bool) -> None:
    """Answer from the Hub's local cache alone, as ``HF_HUB_OFFLINE=1`` does (while a
    knowledge snapshot is in use, envkit sends nothing anywhere)."""
    global _offline
    _offline = on


def fetch(repo: str, filename: str, revision: str | None = None) -> str:
    """The text of ``filename`` in model repo ``repo`` at ``revision`` (default: main)."""
    endpoint = os.environ.get("HF_ENDPOINT", "").strip()
    if endpoint:
        try:
            parse_url(endpoint)
        except BadInput as exc:
            raise BadInput(f"HF_ENDPOINT: {exc.message}", "Unset HF_ENDPOINT or fix it.") from None
    deadline = seconds_from_env("ENVKIT_HTTP_DEADLINE", 60.0)
    late = NetworkError(
        f"The Hugging Face Hub did not deliver {filename} of {repo!r} within {deadline:.0f} s.",
        "Try again later, or download the file elsewhere and pass its path.",
        kind="timeout",
    )
    try:
        found = within_deadline(lambda: _download(repo, filename, revision), deadline, lambda: late)
    except BaseException as exc:
        raise _explain(exc, repo, filename, revision) from None
    # the cached copy: a regular file within the cap, checked before it is read
    return read_small(Path(found), MAX_BYTES, what=f"cached {filename} of {repo}").decode(
        "utf-8", "replace"
    )


def _download(repo: str, filename: str, revision: str | None) -> str:
    from huggingface_hub import (
        constants,
        errors,
        get_hf_file_metadata,
        get_token,
        hf_hub_download,
        hf_hub_url,
    )

    token = get_token()
    if token:
        remember_secret(token)  # masked wherever it would appear
    cached_only = bool(constants.HF_HUB_OFFLINE) or _offline
    if not cached_only:
        try:
            meta = get_hf_file_metadata(hf_hub_url(repo, filename, revision=revision))
        except errors.HfHubHTTPError:
            raise  # the Hub answered: gated, missing, ... (said by _explain)
        except Exception:  # no answer at all: only the cache can answer now
            meta, cached_only = None, True
        if meta is not None and meta.size is not None and meta.size > MAX_BYTES:
            raise BadInput(
                f"{filename} of {repo!r} is {meta.size:,} bytes; envkit reads at most "
                f"{MAX_BYTES:,}.",
                "Pass the model's own config.json.",
            )
    # no second round of retries against a Hub that did not answer: the cache, or a clear no
    return str(hf_hub_download(repo, filename, revision=revision, local_files_only=cached_only))


def _explain(exc: BaseException, repo: str, filename: str, revision: str | None) -> BaseException:
    """One envkit error for whatever the Hub's client raised."""
    if isinstance(exc, EnvkitError | KeyboardInterrupt):
        return exc
    from huggingface_hub import errors

    at = f" at revision {revision!r}" if revision else ""
    status = getattr(getattr(exc, "response", None), "status_code", 0) or 0
    offline = "Offline (HF_HUB_OFFLINE)? Download it elsewhere and pass its path."
    if isinstance(exc, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled):
        return NetworkError(
            f"{filename} of {repo!r}{at} is not in the Hugging Face cache, and the Hub cannot "
            "be reached (or HF_HUB_OFFLINE is set).",
            offline,
        )
    if isinstance(exc, errors.GatedRepoError):
        return NetworkError(
            f"{repo!r} is gated or private: the Hub refused {filename}{at} (HTTP {status}).",
            "Accept its terms on the Hub, then set HF_TOKEN or run `hf auth login`.",
            status=status,
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return NetworkError(
            f"The Hub has no model repo {repo!r} (or it is private: a token is needed).",
            "Check the repo id, or set HF_TOKEN.",
            status=status or 404,
        )
    if isinstance(exc, errors.RevisionNotFoundError):
        return BadInput(f"{repo!r} has no revision {revision!r}.", "Check --revision.")
    if isinstance(exc, errors.EntryNotFoundError):
        return BadInput(f"{repo!r} has no {filename}{at}.", "Is it a transformers model repo?")
    if isinstance(exc, errors.HfHubHTTPError):
        return NetworkError(
            f"The Hub answered HTTP {status} for {filename} of {repo!r}{at}.",
            offline,
            status=status,
        )
    # transport errors (httpx's), answers that are not the Hub's, and anything else the client
    # raises: one message naming what happened, never a traceback
    return NetworkError(
        f"Cannot fetch {filename} of {repo!r}{at} from the Hub: "
        f"{type(exc).__name__}: {redact(str(exc))[:300]}",
        offline,
    )
