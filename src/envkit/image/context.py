"""The build context of a cell's image: a Containerfile and the files it copies.

The Containerfile has four steps, in this order:

1. the base's Python and platform are the cell's (``check_base.py``, run by the base's
   ``python3``): a base with another Python fails here, before anything installs, with one
   line starting ``envkit-base-check:`` that the build reads back;
2. uv (the host's binary, bound in for that step only, so the image does not carry it)
   creates ``/opt/venv`` and installs exactly the lock with its hashes (``uv pip sync
   --require-hashes``: no resolution at build time);
3. the install trusts the host's certificate store through a build secret mounted at
   ``/run/secrets/envkit-ca`` for that step only (never copied into a layer), so a build
   behind a TLS-intercepting proxy reaches the index;
4. envkit's verification probe (``env/inside_venv.py``) and what it must look at are copied
   in; it runs inside the built image before anything is tagged (``image.make``).

Every value written into the file is checked or encoded for it: the base reference by its
grammar, label values by :meth:`ImageSpec.labels`, each command as a JSON array (exec form),
so no value is ever read by a shell.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from envkit.errors import BadInput
from envkit.image.spec import MAX_LOCK, ImageSpec
from envkit.io.atomicfile import write_atomic
from envkit.io.files import read_small

VENV = "/opt/venv"
HOME = "/opt/envkit"  # what the context copies in
MOUNTED = "/run/envkit"  # the host's uv, bound for the install step only
SECRET_ID = "envkit-ca"
SECRET_PATH = f"/run/secrets/{SECRET_ID}"
BASE_CHECK_MARK = "envkit-base-check:"
MARK = ".envkit-context"  # a folder holding it is a context envkit wrote
# an image reference: [host[:port]/]path[:tag][@sha256:digest], as the distribution spec
_REFERENCE = re.compile(
    r"(?:[a-z0-9.-]+(?::[0-9]{1,5})?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?"
)

# run by the base's python3 (any version): it prints the base's facts on one marked line
_CHECK_BASE = """\
\"\"\"envkit: is this base's Python the lock cell's? Runs before anything installs.\"\"\"
import platform
import sys

want = sys.argv[1:3]
machine = platform.machine().lower()
machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
have = ["%d.%d" % sys.version_info[:2], "%s-%s" % (sys.platform, machine)]
print("MARK %s %s %s" % ("ok" if have == want else "differs", have[0], have[1]))
sys.exit(0 if have == want else 3)
""".replace("MARK", BASE_CHECK_MARK)


def check_reference(text: str, what: str = "--base", *, digest: bool = True) -> str:
    """An image reference (``debian:bookworm``, ``host:5000/team/img@sha256:...``); BadInput
    for anything else, naming ``what``; with ``digest`` False (a name to tag an image by),
    one that names a digest too, which buildah, podman and docker refuse to tag by."""
    value = text.strip()
    if len(value) > 512 or not _REFERENCE.fullmatch(value):
        raise BadInput(
            f"{what} {text[:80]!r} is not an image reference such as python:3.11-slim-bookworm.",
            "Name an image as the builder does: [registry/]name[:tag][@sha256:digest].",
        )
    if not digest and "@" in value:
        name = value.split("@", 1)[0]
        raise BadInput(
            f"{what} {text[:80]!r} names a digest: an image is tagged by name and tag, and its "
            "digest is what the build makes (envkit prints it).",
            f"Give {what} {name}, without the @sha256:... part.",
        )
    return value


@dataclass(frozen=True)
class Context:
    """A written build context: its folder, the Containerfile in it and that file's text."""

    folder: Path
    containerfile: Path
    text: str
    labels: dict[str, str]  # the image's, as the Containerfile sets them


def containerfile(spec: ImageSpec, base: str, labels: dict[str, str]) -> str:
    """The Containerfile's text (see the module's docstring for its steps), with ``labels``
    (:meth:`ImageSpec.labels`, checked there)."""
    uv = f"{MOUNTED}/uv"
    sync = [
        uv,
        "pip",
        "sync",
        "--python",
        f"{VENV}/bin/python",
        "--require-hashes",
        "--no-cache",
        *(("--default-index", spec.index_url) if spec.index_url else ()),
        *spec.torch.uv_args,
        f"{HOME}/requirements.txt",
    ]
    # A fixed script: every value reaches uv as an argument ("$0" "$@"), none is read by the
    # shell. The CA secret is optional: without a bundle on the host uv trusts its own roots.
    script = (
        f"{uv} venv --no-cache --no-python-downloads --python python3 {VENV} || exit 1; "
        f'[ -f {SECRET_PATH} ] && export SSL_CERT_FILE={SECRET_PATH}; exec "$0" "$@"'
    )
    mounts = (
        f"--mount=type=bind,source=envkit/uv,target={uv} "
        f"--mount=type=secret,id={SECRET_ID},required=false"
    )
    lines = [
        f"# envkit image: profile {spec.profile}, cell {spec.cell}",
        f"# lock sha256:{spec.lock_sha256} (copied to {HOME}/requirements.txt)",
        f"FROM {base}",
        f"COPY envkit/check_base.py {HOME}/check_base.py",
        "RUN " + _exec(["python3", f"{HOME}/check_base.py", spec.python, spec.platform]),
        f"COPY envkit/requirements.txt {HOME}/requirements.txt",
        f"RUN {mounts} " + _exec(["/bin/sh", "-c", script, *sync]),
        f"COPY envkit/probe.py envkit/probe.json {HOME}/",
        f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
        "/usr/bin:/sbin:/bin",
        *(f"LABEL {json.dumps(k)}={json.dumps(v)}" for k, v in labels.items()),
    ]
    return "\n".join(lines) + "\n"


def write(
    spec: ImageSpec, base: str, folder: Path, uv: str, probe_request: dict[str, object]
) -> Context:
    """Write the context into ``folder`` (created; an existing one must be empty or envkit's
    own earlier context, so nothing of the user's is overwritten)."""
    _claim(folder)
    inner = folder / "envkit"
    inner.mkdir(exist_ok=True)
    write_atomic(inner / "requirements.txt", read_small(spec.lock, MAX_LOCK, what="lock file"))
    write_atomic(inner / "check_base.py", _CHECK_BASE)
    probe = resources.files("envkit.env").joinpath("inside_venv.py").read_text(encoding="utf-8")
    write_atomic(inner / "probe.py", probe)
    write_atomic(inner / "probe.json", json.dumps(probe_request, sort_keys=True))
    shutil.copy2(uv, inner / "uv")  # the program that installs inside, as on the host
    labels = spec.labels(base)
    path, text = folder / "Containerfile", containerfile(spec, base, labels)
    write_atomic(path, text)
    write_atomic(folder / MARK, f"{spec.profile} {spec.cell}\n")
    return Context(folder, path, text, labels)


def _claim(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"--context {str(folder)!r} is a file, not a folder.", "Name a folder.")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARK).is_file():
        raise BadInput(
            f"--context {str(folder)!r} is not empty and is not a context envkit wrote.",
            "Name a new or empty folder: envkit writes only where it can prove it may.",
        )
    folder.mkdir(parents=True, exist_ok=True)


def _exec(argv: list[str]) -> str:
    """A command in the Containerfile's exec form: a JSON array, never read by a shell."""
    return json.dumps(argv)
