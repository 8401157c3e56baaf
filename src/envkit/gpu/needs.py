"""The NVIDIA driver a build needs: from a profile's torch build, or a lock cell's backend.

A torch build for CUDA X.Y runs with every feature on a driver whose nvidia-smi header says
``CUDA Version: X.Y`` or higher: the driver NVIDIA's table gives for toolkit X.Y's first
release (:func:`envkit.gpu.driver.toolkit_driver`), or a newer one. Within the major,
minor-version compatibility also runs it on an older driver down to the major's floor,
without the features that need the newer driver (PTX compiled by the newer toolkit does not
load there). A CPU build needs no GPU driver; a ROCm or XPU build needs no NVIDIA driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envkit.errors import BadInput
from envkit.gpu.driver import MINOR_COMPAT_FLOOR, cuda_version, toolkit_driver
from envkit.profiles.profile import Profile, cuda_for_backend

_CUDA = re.compile(r"[0-9]{1,2}\.[0-9]{1,2}")


@dataclass(frozen=True)
class DriverNeed:
    """The driver a CUDA build of torch needs.

    ``cuda``: the CUDA version (X.Y) nvidia-smi's header must report at least, the torch
    build's own; ``linux_driver``: the NVIDIA Linux driver that gives it every feature (''
    for a CUDA release NVIDIA's table, as envkit has it, does not list); ``minor_compat_floor``:
    the oldest driver of that major that still runs it, without the newer features ('' when
    envkit knows none).

    >>> need = for_cuda("12.4")
    >>> need.summary()
    'CUDA 12.4 or newer (NVIDIA driver 550.54.14 or newer)'
    >>> for_backend("cu128").cuda, for_backend("cpu")
    ('12.8', None)
    """

    cuda: str
    linux_driver: str
    minor_compat_floor: str = ""

    def summary(self) -> str:
        """``CUDA 12.4 or newer (NVIDIA driver 550.54.14 or newer)``: one line, for show, the
        lock headers, drafts and the site."""
        if not self.linux_driver:
            return (
                f"CUDA {self.cuda} or newer (a release NVIDIA's driver table, as envkit has it, "
                "does not list)"
            )
        return f"CUDA {self.cuda} or newer (NVIDIA driver {self.linux_driver} or newer)"

    def compat_note(self) -> str:
        """What minor-version compatibility adds, '' when nothing (the floor is the driver)."""
        if not self.minor_compat_floor or self.minor_compat_floor == self.linux_driver:
            return ""
        return (
            f"driver {self.minor_compat_floor} or newer also starts it (CUDA minor-version "
            "compatibility), without the features that need the newer driver"
        )

    def to_dict(self) -> dict[str, str | None]:
        return {
            "cuda": self.cuda,
            "linux_driver": self.linux_driver or None,
            "minor_compat_floor": self.minor_compat_floor or None,
        }


def for_cuda(cuda: str) -> DriverNeed:
    """The need of a torch build for CUDA ``cuda`` (X.Y). BadInput for text that is no CUDA
    version such as 12.4."""
    text = cuda.strip()
    if not _CUDA.fullmatch(text):
        raise BadInput(
            f"CUDA version {cuda[:40]!r} is not a version such as 12.4 or 13.0.",
            "torch.version.cuda prints the one a torch build uses.",
        )
    major = cuda_version(text)[0]
    driver = toolkit_driver(text)
    floor = MINOR_COMPAT_FLOOR.get(major)
    return DriverNeed(text, str(driver) if driver else "", str(floor) if floor else "")


def for_backend(backend: str) -> DriverNeed | None:
    """A lock cell's need from its backend: ``cu124`` -> CUDA 12.4's; None for ``cpu``,
    ROCm, XPU and a cell without a backend (``any``)."""
    cuda = cuda_for_backend(backend)
    return for_cuda(cuda) if cuda else None


def for_profile(profile: Profile) -> DriverNeed | None:
    """A profile's need: from ``[torch] cuda``, else its ``cuXYZ`` backend; None for a CPU,
    ROCm or XPU build and for a profile that names no torch build at all."""
    backend, cuda = profile.torch.backend, profile.torch.cuda
    if backend and not cuda_for_backend(backend):
        return None  # cpu, rocm, xpu: whatever cuda says, the build is not CUDA's
    if not cuda or not _CUDA.fullmatch(cuda):
        return None  # no CUDA named (a profile's CUDA form also lets 123.4 through)
    return for_cuda(cuda)


def backend_summary(backend: str) -> str:
    """What a lock header says a cell needs: the CUDA summary for ``cuXYZ``, a line for
    CPU, ROCm and XPU builds, '' for a cell without a backend (the index decides)."""
    need = for_backend(backend)
    if need is not None:
        return need.summary()
    if backend == "cpu":
        return "no GPU driver (a CPU build)"
    if backend and backend != "any":
        return f"no NVIDIA driver (a {backend} build)"
    return ""


def profile_summary(profile: Profile) -> str:
    """The driver line `envkit show` and the site print for a profile."""
    need = for_profile(profile)
    if need is not None:
        return need.summary()
    backend = profile.torch.backend
    if backend:
        return backend_summary(backend)
    return "not stated: the profile names no CUDA build ([torch] backend or cuda)"
