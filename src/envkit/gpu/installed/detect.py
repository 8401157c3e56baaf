"""The GPU a command checks for: named by the user (``--gpu``, ``--compute-capability``,
``--driver``) or, when none is named, read from ``nvidia-smi``.

nvidia-smi is asked twice, once for the GPUs (:data:`envkit.gpu.driver.SMI_QUERY`) and once
for its header (the highest CUDA the driver runs), at most once per process and program. Its
output is checked where it enters (:func:`envkit.gpu.driver.parse_smi`); an nvidia-smi that fails,
hangs or prints something else is said (``problem``), never a GPU. With several GPUs the
target is the first one CUDA makes visible (``CUDA_VISIBLE_DEVICES``), as vLLM's rank 0.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envkit.errors import BadInput
from envkit.gpu.arch import Capability
from envkit.gpu.driver import (
    SMI_QUERY,
    DriverVersion,
    Gpu,
    header_cuda,
    newest_cuda,
    parse_smi,
)
from envkit.gpu.target import GpuTarget, host_platform

if TYPE_CHECKING:  # the card table is read only to name cards in a message
    from envkit.gpu import cards
from envkit.io import process

SMI_TIMEOUT = 20  # seconds; a driver in a bad state makes nvidia-smi hang


@dataclass(frozen=True)
class Smi:
    """What nvidia-smi said on this machine."""

    present: bool  # nvidia-smi is on PATH
    gpus: tuple[Gpu, ...] = ()
    cuda: str = ""  # the highest CUDA the driver runs (its header), '' when unknown
    problem: str = ""  # why nvidia-smi's answer could not be used ('' when it could)

    def visible(self) -> Gpu | None:
        """The GPU CUDA numbers 0 (``CUDA_VISIBLE_DEVICES``' first entry, by index)."""
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        index = int(first) if first.isdigit() and len(first) < 4 else 0
        return next((g for g in self.gpus if g.index == index), None)


def smi() -> Smi:
    """nvidia-smi's GPUs and header CUDA, asked once per process (per nvidia-smi found)."""
    program = shutil.which("nvidia-smi")
    return _asked(program) if program else Smi(present=False)


@functools.lru_cache(maxsize=4)
def _asked(program: str) -> Smi:
    try:
        listing = process.run([program, *SMI_QUERY], timeout=SMI_TIMEOUT)
        header = process.run([program], timeout=SMI_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Smi(present=True, problem=f"nvidia-smi did not answer: {str(exc)[:200]}")
    if listing.returncode != 0:
        said = (listing.stdout or listing.stderr).strip().splitlines()[:1]
        return Smi(
            present=True,
            problem=f"nvidia-smi exited with {listing.returncode}: {said[0][:200] if said else ''}",
        )
    try:
        gpus = parse_smi(listing.stdout)
    except BadInput as exc:
        return Smi(present=True, problem=exc.message)
    return Smi(present=True, gpus=gpus, cuda=header_cuda(header.stdout))


@dataclass(frozen=True)
class Choice:
    """The target a command checks for, and where it came from (said to the user)."""

    target: GpuTarget | None
    source: str  # "--gpu rtx-5090", "nvidia-smi: NVIDIA A100 80GB (GPU 0 of 2)", ""
    smi: Smi | None = None  # when nvidia-smi was asked
    driver: DriverVersion | None = None  # --driver without a GPU (new-profile takes it alone)

    @property
    def driver_cuda(self) -> str:
        """The highest CUDA the target's driver runs ('' when unknown)."""
        if self.smi is not None and self.smi.cuda:
            return self.smi.cuda
        return ""


def choose(
    named: cards.Card | None,
    level: Capability | None,
    version: DriverVersion | None,
    *,
    ask: bool = True,
    driver_alone: bool = False,
) -> Choice:
    """The target from the options (parsed where they enter, ``cli.options``), else (with
    ``ask``) from nvidia-smi, else none. ``--driver`` without a GPU is refused unless
    ``driver_alone`` (a driver says which CUDA runs, not which kernels)."""
    driver = str(version) if version is not None else None
    if named is not None and level is not None and named.capability != level:
        raise BadInput(
            f"--gpu {named.key} has compute capability {named.capability}, not {level}.",
            "Give one of --gpu and --compute-capability.",
        )
    if named is not None or level is not None:
        chosen = level or (named.capability if named else None)
        assert chosen is not None
        shown = f"--gpu {named.key}" if named else f"--compute-capability {chosen}"
        name = named.name if named else ""
        where = named.platform if named else host_platform()
        return Choice(GpuTarget(chosen, name, version, where), shown + _driver_said(driver))
    found = smi() if ask else None
    seen = found.visible() if found is not None else None
    if seen is None:
        if version is not None and driver_alone:
            return Choice(None, f"--driver {driver}", found, version)
        if version is not None:
            raise BadInput(
                "--driver needs a GPU to check: --gpu NAME or --compute-capability X.Y "
                "(no GPU was found by nvidia-smi).",
            )
        return Choice(None, "", found)
    assert found is not None
    of = f" (GPU {seen.index} of {len(found.gpus)})" if len(found.gpus) > 1 else ""
    target = GpuTarget(seen.capability, seen.name, version or seen.driver, host_platform())
    return Choice(target, f"nvidia-smi: {seen.name}{of}" + _driver_said(driver), found)


def _driver_said(driver: str | None) -> str:
    return f", --driver {driver}" if driver else ""


def examples(capability: Capability, limit: int = 3) -> str:
    """Cards envkit knows of one compute capability, for people: 'A100, A30'."""
    from envkit.gpu import cards

    names = [c.name.removeprefix("NVIDIA ") for c in cards.CARDS if c.capability == capability]
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def driver_cuda(cuda: str | None, choice: Choice) -> str | None:
    """The highest CUDA the target machine's driver runs: the lowest of ``--cuda``, what
    ``--driver``'s version gives (NVIDIA's table) and nvidia-smi's header; None when none
    says."""
    said = [cuda] if cuda else []
    target = choice.target
    driver = target.driver if target is not None else choice.driver
    if driver is not None:
        newest = newest_cuda(driver)
        if newest is None:
            raise BadInput(
                f"driver {driver} is older than any CUDA envkit knows (11.8 needs 520.61.05).",
                "Install a newer NVIDIA driver.",
            )
        said.append(f"{newest[0]}.{newest[1]}")
    if choice.smi is not None and choice.smi.cuda:  # this machine's, when no GPU was named
        said.append(choice.smi.cuda)
    if not said:
        return None
    return min(said, key=lambda v: tuple(int(p) for p in v.split(".")))
