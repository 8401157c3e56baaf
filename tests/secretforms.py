"""Secrets in every form a log, a command line or a URL carries them: the trust tests'
generated secrets and the templates they are put in."""

from __future__ import annotations

import base64
import functools
import os
from pathlib import Path

from hypothesis import strategies as st

import envkit
from envkit.io import redaction

# what a key, a token or a password may look like: letters, digits, - _ . ~
SECRET_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~"

# every word envkit could print of its own: its sources and shipped data. hypothesis draws
# text from the literals of the code under test, and a drawn secret found among them
# ("transfor", of the key "transformers_version") is "shown" by any output naming that key,
# whatever the redaction did: such a draw is no secret a test can follow. A secret is made of
# SECRET_CHARS alone, so it can occur in the text only inside a run of them: the distinct runs
# of eight or more are what a draw is looked for in, read on the first draw.
_TO_SPACE = bytes(c if chr(c) in SECRET_CHARS else 32 for c in range(256))


@functools.cache
def _own_runs() -> str:
    runs: set[bytes] = set()
    for folder, _dirs, names in os.walk(Path(envkit.__file__).parent, followlinks=True):
        for name in names:
            if name.endswith((".py", ".json", ".toml", ".txt", ".css", ".js")):
                text = (Path(folder) / name).read_bytes()
                words = text.translate(_TO_SPACE).split()
                runs.update(w for w in words if len(w) >= 8)
    return b"\n".join(sorted(runs)).decode("ascii")


def _followable(s: str) -> bool:
    return s[0] not in "-." and not redaction.is_no_secret(s) and s not in _own_runs()


secrets = st.text(SECRET_CHARS, min_size=8, max_size=40).filter(_followable)

# each form: a template with {0} and {1} (two secrets), as logs, command lines and URLs carry them
FORMS = [
    "Authorization: Basic {b64}",
    "authorization: bearer {0}",
    "-H 'Authorization: Bearer {0}'",
    "curl -H Authorization:Token {0}",
    "sent Basic {b64} to the proxy",
    "vllm serve m --api-key {0} {1} --port 8000",
    "vllm serve m --api-key {0} {1}",
    "vllm serve m --api-key={0} --host 0.0.0.0",
    "vllm serve m --port 8000 -- --api-key {0}",
    "envkit serve p m -- --api-key={0} --hf-token {1}",
    "INFO args: Namespace(host=None, api_key=['{0}', '{1}'], model='x')",
    "INFO args: Namespace(host=None, api_key='{0}', hf_token=\"{1}\")",
    '{{"api_key": ["{0}", "{1}"], "token": "{1}"}}',
    "GET https://h.example/v1/models?api_key={0}&limit=2",
    "https://h.example/simple/?x=1&key={0}#top",
    "https://h.example/f.bin?token={0};access_token={1}",
    "https://s.example/o?X-Amz-Signature={0}&sig={1}",
    "https://user:{0}@h.example/simple",
    "https://{0}@h.example/simple",
    "https://:{0}@h.example/simple and https://u:{1}@h.example",
    "export HF_TOKEN={0} OPENAI_API_KEY={1}",
]


def filled(form: str, one: str, two: str) -> str:
    b64 = base64.b64encode(f"{one}:{two}".encode()).decode()
    return form.format(one, two, b64=b64)
