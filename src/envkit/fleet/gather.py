"""This node's fingerprint: what ``envkit fingerprint`` prints and each Ray task returns.

The environment's Python and distributions come from the facts probe run in its own
interpreter (``env.facts``: the venv at ``--venv``, else the interpreter running envkit,
which is the Ray workers' on a Ray node); the GPUs and driver from nvidia-smi
(``gpu.installed.detect``); the rest from this machine: ``/dev/shm``'s size, the InfiniBand devices
NCCL could use (``/sys/class/infiniband``, ``/dev/infiniband``), and the ``VLLM_*`` and
``NCCL_*`` variables, secret-looking values masked before anything encodes them.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path

from envkit.env.facts import collect_facts, venv_python
from envkit.errors import BadInput
from envkit.fleet import records
from envkit.fleet.fingerprint import (
    MAX_DEVICES,
    MAX_TEXT,
    MAX_VARIABLES,
    Fingerprint,
    GpuFact,
    mask_variables,
)
from envkit.gpu.installed import detect
from envkit.lock.cells import machine_platform

PROBE_TIMEOUT = 300  # seconds: listing distributions takes well under one
PREFIXES = ("VLLM_", "NCCL_")
DEVICE_FOLDERS = (Path("/sys/class/infiniband"), Path("/dev/infiniband"))
SHM = Path("/dev/shm")


def interpreter(venv: Path | None) -> Path:
    """The Python whose environment is fingerprinted: the venv's, else envkit's own."""
    if venv is None:
        return Path(sys.executable)
    python = venv_python(venv)
    if not python.is_file():
        raise BadInput(
            f"There is no virtual environment at {venv} on {socket.gethostname()} "
            f"({venv if not os.path.lexists(venv) else python} is missing).",
            "Give --venv the folder of the venv on this node (the same path on every node), "
            "or build it there: envkit build PROFILE --venv PATH.",
        )
    return python


def fingerprint(venv: Path | None = None, *, hashes: bool = True) -> Fingerprint:
    """This node's fingerprint (see the module's text). BadInput when ``venv`` is none;
    EnvironmentBroken when its interpreter does not answer the probe."""
    python = interpreter(venv)
    facts = collect_facts(
        python, {"all_distributions": True}, venv or Path(sys.prefix), timeout=PROBE_TIMEOUT
    )
    versions = {name: copies[0].version for name, copies in facts.distributions.items() if copies}
    smi = detect.smi()
    first = smi.gpus[0] if smi.gpus else None
    problem = smi.problem or ("" if smi.present else "nvidia-smi is not on PATH")
    return Fingerprint(
        host=socket.gethostname(),
        platform=machine_platform(),
        machine=platform.machine(),
        python=facts.version,
        environment=facts.prefix,
        gpus=tuple(GpuFact(g.index, g.name, str(g.capability), g.memory) for g in smi.gpus),
        driver=str(first.driver) if first is not None else "",
        driver_cuda=smi.cuda,
        gpu_problem=problem,
        distributions=tuple(records.installed(facts.site_packages, versions, hashes)),
        ray=versions.get("ray", ""),
        shm=shm_size(),
        infiniband=devices(),
        variables=variables(),
    )


def shm_size(path: Path = SHM) -> int | None:
    """The size of the shared-memory filesystem NCCL and vLLM's workers use (bytes)."""
    try:
        found = os.statvfs(path)
    except OSError:
        return None
    return found.f_blocks * found.f_frsize


def devices(folders: tuple[Path, ...] = DEVICE_FOLDERS) -> tuple[str, ...]:
    """The InfiniBand / RDMA devices visible here (``mlx5_0``, ``uverbs0``), as paths."""
    found: list[str] = []
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        found.extend(str(folder / name)[:MAX_TEXT] for name in names)
    return tuple(found[:MAX_DEVICES])


def variables(env: dict[str, str] | None = None) -> dict[str, str]:
    """The ``VLLM_*`` and ``NCCL_*`` variables set, masked (:func:`mask_variables`)."""
    source = os.environ if env is None else env
    chosen = sorted((k, v) for k, v in source.items() if k.startswith(PREFIXES))
    masked = mask_variables(dict(chosen[:MAX_VARIABLES]))  # on the whole value, then cut
    return {k[:MAX_TEXT]: v[:MAX_TEXT] for k, v in masked.items()}
