"""The GPU a command checks for: a compute capability, a name, a driver, the host's platform.
An input to the GPU layer (from ``--gpu``, a card, ``--compute-capability`` or nvidia-smi), not
part of any report."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from envkit.gpu.arch import Capability
from envkit.gpu.driver import DriverVersion, Gpu


@dataclass(frozen=True)
class GpuTarget:
    """The GPU an environment is checked for (from ``--gpu``, a card, or nvidia-smi)."""

    capability: Capability
    name: str = ""
    driver: DriverVersion | None = None
    platform: str = "linux-x86_64"  # the host's: which wheels install there

    @classmethod
    def of(cls, gpu: Gpu) -> GpuTarget:
        """The target for a GPU nvidia-smi reported (:func:`envkit.gpu.driver.parse_smi`),
        on this machine's platform."""
        return cls(gpu.capability, gpu.name, gpu.driver, host_platform())

    def __str__(self) -> str:
        return f"{self.capability} ({self.name})" if self.name else str(self.capability)


def host_platform() -> str:
    """This machine as a lock-matrix platform: linux-aarch64 or linux-x86_64."""
    machine = platform.machine().lower()
    return "linux-aarch64" if machine in ("aarch64", "arm64") else "linux-x86_64"
