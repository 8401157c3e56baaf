"""The base image the container tests build on: Debian bookworm with Python 3.11, made on this
machine from the system's package mirror (mmdebstrap) and imported into buildah once; later
runs on the same machine find it in buildah's storage. Tests that need it are skipped, saying
why, where buildah or mmdebstrap is missing (`.ci/run` installs both)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

BASE_IMAGE = "localhost/envkit-test-base:bookworm-py3.11"
PACKAGES = "python3,python3-venv,ca-certificates"
LOCK = Path("/var/tmp/envkit-test-base.lock")


def buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=600)
    if check and done.returncode != 0:
        raise AssertionError(f"buildah {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done


def ensure_base(scratch: Path) -> str:
    """The base image's name, made when buildah's storage lacks it."""
    if shutil.which("buildah") is None:
        pytest.skip("buildah is not on PATH (apt-get install buildah); .ci/run installs it")
    with FileLock(str(LOCK)):
        if buildah("inspect", "--type", "image", BASE_IMAGE, check=False).returncode == 0:
            return BASE_IMAGE
        if shutil.which("mmdebstrap") is None:
            pytest.skip("mmdebstrap is not on PATH (apt-get install mmdebstrap): no base image")
        rootfs = scratch / "rootfs.tar"
        made = subprocess.run(
            ["mmdebstrap", "--variant=apt", f"--include={PACKAGES}", "bookworm", str(rootfs)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if made.returncode != 0:
            pytest.skip(f"mmdebstrap could not make a base here: {made.stderr[-500:]}")
        name = buildah("from", "scratch").stdout.strip()
        try:
            buildah("add", name, str(rootfs), "/")
            buildah("commit", "-q", name, BASE_IMAGE)
        finally:
            buildah("rm", name, check=False)
            rootfs.unlink(missing_ok=True)
    return BASE_IMAGE
