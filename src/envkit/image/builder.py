"""The container builder envkit drives: buildah, podman or docker, found on PATH (the user's
own; envkit installs none), and the command line of each step it runs with it.

Where the builder cannot create namespaces (inside a container, as on a CI runner), buildah
and podman are asked for ``--isolation chroot``, the isolation they offer for that, and the
result says so. The host's CA bundle reaches the install step as a build secret
(``--secret id=envkit-ca,src=BUNDLE``), which no builder writes into a layer.
"""

from __future__ import annotations

import os
import shutil
import ssl
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from envkit.errors import ToolNotFound
from envkit.image.context import SECRET_ID

PREFERENCE = ("buildah", "podman", "docker")
_CONTAINER_MARKS = (Path("/.dockerenv"), Path("/run/.containerenv"))


class Engine(str, Enum):
    BUILDAH = "buildah"
    PODMAN = "podman"
    DOCKER = "docker"


@dataclass(frozen=True)
class Builder:
    """One builder program and how envkit runs it."""

    engine: Engine
    program: str  # its path
    isolation: str  # 'chroot', or '' for the builder's default
    why_isolation: str  # why chroot was chosen ('' when it was not)

    def _isolation(self) -> list[str]:
        if self.engine is Engine.DOCKER or not self.isolation:
            return []
        return ["--isolation", self.isolation]

    def build(
        self, context: Path, containerfile: Path, iidfile: Path | None, bundle: str
    ) -> list[str]:
        """The build's command line (``iidfile`` None: as a person would run it)."""
        verb = ["bud"] if self.engine is Engine.BUILDAH else ["build"]
        secret = ["--secret", f"id={SECRET_ID},src={bundle}"] if bundle else []
        return [
            self.program,
            *verb,
            *self._isolation(),
            *(("--iidfile", str(iidfile)) if iidfile is not None else ()),
            *secret,
            "-f",
            str(containerfile),
            str(context),
        ]

    def run(self, image: str, mounts: dict[str, str], argv: list[str]) -> list[list[str]]:
        """The commands that run ``argv`` in a container of ``image`` and remove it."""
        volumes = [a for host, inside in mounts.items() for a in ("-v", f"{host}:{inside}")]
        if self.engine is Engine.BUILDAH:
            # buildah runs in a working container it names; the name is fixed per image so
            # the removal after it names exactly what this run made
            name = f"envkit-verify-{image.removeprefix('sha256:')[:12]}"
            return [
                [self.program, "from", "--pull-never", "--name", name, image],
                [self.program, "run", *self._isolation(), *volumes, name, "--", *argv],
                [self.program, "rm", name],
            ]
        return [[self.program, "run", "--rm", "--network", "none", *volumes, image, *argv]]

    def tag(self, image: str, tag: str) -> list[str]:
        return [self.program, "tag", image, tag]

    def remove(self, image: str) -> list[str]:
        return [self.program, "rmi", image]

    def digest(self, image: str) -> list[str] | None:
        if self.engine is Engine.BUILDAH:
            return [self.program, "inspect", "--type", "image", "--format",
                    "{{.FromImageDigest}}", image]  # fmt: skip
        if self.engine is Engine.PODMAN:
            return [self.program, "image", "inspect", "--format", "{{.Digest}}", image]
        return None  # docker knows a digest only once the image is pushed

    def save(self, image: str, archive: Path, tag: str) -> list[str]:
        if self.engine is Engine.BUILDAH:
            return [
                self.program,
                "push",
                image,
                f"oci-archive:{archive}" + (f":{tag}" if tag else ""),
            ]
        if self.engine is Engine.PODMAN:
            return [
                self.program,
                "save",
                "--format",
                "oci-archive",
                "-o",
                str(archive),
                tag or image,
            ]
        return [self.program, "save", "-o", str(archive), tag or image]


def find(choice: str | None, isolation: str | None = None) -> Builder:
    """The builder named by ``choice`` (buildah, podman, docker), else the first of those on
    PATH. ToolNotFound when it is not there. ``isolation``: None chooses (chroot inside a
    container), '' the builder's default, 'chroot' chroot."""
    names = (choice,) if choice else PREFERENCE
    for name in names:
        program = shutil.which(name)
        if program:
            engine = Engine(name)
            chosen, why = _isolation(engine, isolation)
            return Builder(engine, program, chosen, why)
    wanted = choice or " or ".join(PREFERENCE)
    raise ToolNotFound(
        f"No container builder: {wanted} is not on PATH.",
        "Install one (buildah is in Debian and Ubuntu: apt-get install buildah), or write the "
        "context alone with --context DIR and build it elsewhere.",
    )


def _isolation(engine: Engine, asked: str | None) -> tuple[str, str]:
    if engine is Engine.DOCKER:
        return "", ""
    if asked is not None:
        return asked, ""
    if any(mark.exists() for mark in _CONTAINER_MARKS):
        return "chroot", (
            "this machine runs inside a container, where the builder cannot create namespaces: "
            f"{engine.value} builds and runs with --isolation chroot"
        )
    return "", ""


def host_bundle() -> str:
    """The host's CA bundle, the file the install step trusts: ``$SSL_CERT_FILE``, else
    OpenSSL's default file; '' when there is none."""
    for candidate in (os.environ.get("SSL_CERT_FILE"), ssl.get_default_verify_paths().cafile):
        if candidate and Path(candidate).is_file():
            return str(Path(candidate).resolve())
    return ""
