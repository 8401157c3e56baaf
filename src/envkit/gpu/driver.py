"""The NVIDIA driver: which driver each CUDA toolkit needs, and the GPUs nvidia-smi reports.

A CUDA runtime of version X.Y runs with every feature on a driver at or above the one its
toolkit shipped with (NVIDIA's "CUDA Toolkit and Corresponding Driver Versions", Linux
x86_64). Within a major, CUDA 11 and later also run on an older driver of the same major's
branch ("minor version compatibility", from the floor below), without the features that
need the newer driver: PTX compiled by a newer toolkit does not load there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from envkit.errors import BadInput
from envkit.gpu.arch import Capability

MIB = 1024**2


@dataclass(frozen=True, order=True)
class DriverVersion:
    """A Linux driver version such as 570.26 or 580.65.06 (compared part by part)."""

    parts: tuple[int, ...]

    def __str__(self) -> str:
        head, *rest = self.parts
        return ".".join([str(head), *(f"{p:02d}" for p in rest)])

    @classmethod
    def parse(cls, text: str, what: str = "driver version") -> DriverVersion:
        """``580.65.06`` -> DriverVersion((580, 65, 6)); BadInput naming ``what`` otherwise."""
        if not re.fullmatch(r"[0-9]{2,4}(\.[0-9]{1,3}){1,2}", text.strip()):
            raise BadInput(
                f"{what} {text!r} is not an NVIDIA driver version such as 570.26 or 580.65.06.",
                "nvidia-smi --query-gpu=driver_version --format=csv,noheader prints it.",
            )
        return cls(tuple(int(p) for p in text.strip().split(".")))


@dataclass(frozen=True)
class ToolkitDriver:
    cuda: tuple[int, int]  # (major, minor)
    update: int  # 0 for the GA release, 1 for Update 1 ...
    driver: DriverVersion


def _rows(*rows: tuple[str, int, str]) -> tuple[ToolkitDriver, ...]:
    return tuple(
        ToolkitDriver((int(v.split(".")[0]), int(v.split(".")[1])), update, DriverVersion.parse(d))
        for v, update, d in rows
    )


# NVIDIA's table (CUDA toolkit release notes, "CUDA Toolkit and Corresponding Driver
# Versions", Linux x86_64 column); there was no CUDA 12.7.
TOOLKIT_DRIVERS = _rows(
    ("11.8", 0, "520.61.05"),
    ("12.0", 0, "525.60.13"),
    ("12.0", 1, "525.85.12"),
    ("12.1", 0, "530.30.02"),
    ("12.1", 1, "530.30.02"),
    ("12.2", 0, "535.54.03"),
    ("12.2", 1, "535.86.09"),
    ("12.2", 2, "535.104.05"),
    ("12.3", 0, "545.23.06"),
    ("12.3", 1, "545.23.08"),
    ("12.4", 0, "550.54.14"),
    ("12.4", 1, "550.54.15"),
    ("12.5", 0, "555.42.02"),
    ("12.5", 1, "555.42.06"),
    ("12.6", 0, "560.28.03"),
    ("12.6", 1, "560.35.03"),
    ("12.6", 2, "560.35.03"),
    ("12.6", 3, "560.35.05"),
    ("12.8", 0, "570.26"),
    ("12.8", 1, "570.124.06"),
    ("12.9", 0, "575.51.03"),
    ("12.9", 1, "575.57.08"),
    ("13.0", 0, "580.65.06"),
    ("13.0", 1, "580.82.07"),
    ("13.0", 2, "580.95.05"),
)
# the oldest driver each CUDA major runs on through minor version compatibility (NVIDIA's
# CUDA Compatibility guide: 11.x >= 450.80.02, 12.x >= 525.60.13, 13.x >= 580)
MINOR_COMPAT_FLOOR = {
    11: DriverVersion((450, 80, 2)),
    12: DriverVersion((525, 60, 13)),
    13: DriverVersion((580, 65, 6)),
}


def cuda_version(text: str) -> tuple[int, int, int]:
    """``12.4`` -> (12, 4, 0); ``12.4.1`` -> (12, 4, 1) (an update); BadInput otherwise."""
    match = re.fullmatch(r"\s*([0-9]{1,2})\.([0-9]{1,2})(?:\.([0-9]{1,3}))?\s*", text)
    if not match:
        raise BadInput(
            f"CUDA version {text!r} is not a version such as 12.4 or 13.0.",
            "torch.version.cuda prints the one a torch build uses.",
        )
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def toolkit_driver(cuda: str) -> DriverVersion | None:
    """The driver that gives CUDA ``cuda`` every feature (``12.4`` -> 550.54.14, ``12.8.1``
    -> 570.124.06); None for a release NVIDIA's table does not list. BadInput for text that
    is no CUDA version."""
    major, minor, update = cuda_version(cuda)
    rows = [r for r in TOOLKIT_DRIVERS if r.cuda == (major, minor) and r.update <= update]
    return max(rows, key=lambda r: r.update).driver if rows else None


def newest_cuda(driver: DriverVersion) -> tuple[int, int] | None:
    """The newest CUDA (major, minor) whose toolkit driver ``driver`` meets; None when it is
    older than CUDA 11.8's."""
    met = [r.cuda for r in TOOLKIT_DRIVERS if r.update == 0 and r.driver <= driver]
    return max(met) if met else None


class DriverFit(str, Enum):
    FULL = "full"  # at or above the toolkit's driver
    MINOR_COMPAT = "minor-compat"  # runs, without features that need a newer driver
    TOO_OLD = "too-old"  # the runtime does not initialise
    UNKNOWN = "unknown"  # a CUDA release the table does not list


def fit(driver: DriverVersion, cuda: str) -> DriverFit:
    """How a driver serves a CUDA runtime of version ``cuda``."""
    major = cuda_version(cuda)[0]
    needed = toolkit_driver(cuda)
    if needed is None or major not in MINOR_COMPAT_FLOOR:
        return DriverFit.UNKNOWN
    if driver >= needed:
        return DriverFit.FULL
    floor = MINOR_COMPAT_FLOOR[major]
    branch_ok = driver >= floor
    return DriverFit.MINOR_COMPAT if branch_ok else DriverFit.TOO_OLD


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi reports it."""

    index: int
    name: str
    capability: Capability
    driver: DriverVersion
    memory: int | None  # bytes; None where nvidia-smi says [N/A] (unified memory: GB10)
    free: int | None = None  # bytes free now; None where nvidia-smi does not say


SMI_QUERY = (
    "--query-gpu=name,driver_version,memory.total,memory.free,compute_cap",
    "--format=csv,noheader,nounits",
)
FIELDS = "name, driver_version, memory.total, memory.free, compute_cap"
MAX_GPUS = 64
_MEMORY = re.compile(r"([0-9]{1,9})(?:\s*MiB)?")
_HEADER_CUDA = re.compile(r"CUDA Version:\s*([0-9]{1,2}\.[0-9]{1,2})\b")


def parse_smi(text: str) -> tuple[Gpu, ...]:
    """The GPUs in the output of ``nvidia-smi`` with :data:`SMI_QUERY` (``MiB`` units or
    ``nounits``). Each line is checked where it enters: BadInput naming the line when one is
    not the five fields of :data:`FIELDS`."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_GPUS:
        raise BadInput(f"nvidia-smi listed {len(lines)} GPUs; envkit reads at most {MAX_GPUS}.")
    return tuple(_gpu(index, line) for index, line in enumerate(lines))


def header_cuda(text: str) -> str:
    """The highest CUDA the driver runs, from plain ``nvidia-smi``'s header ('' without it)."""
    match = _HEADER_CUDA.search(text[: 64 * 1024])
    return match.group(1) if match else ""


def _gpu(index: int, line: str) -> Gpu:
    hint = (
        f"Expected `{FIELDS}` from nvidia-smi "
        + " ".join(SMI_QUERY)
        + " (drivers before 510 cannot report compute_cap)."
    )
    cells = [cell.strip() for cell in line[:1024].split(",")]
    if len(cells) < 5 or not cells[0]:
        raise BadInput(f"nvidia-smi line {index + 1} {line[:200]!r} has no five fields.", hint)
    name = ",".join(cells[:-4]).strip()
    driver_text, total_text, free_text, capability_text = cells[-4:]
    try:
        capability = Capability.parse(capability_text, f"nvidia-smi line {index + 1}'s compute_cap")
        driver = DriverVersion.parse(driver_text, f"nvidia-smi line {index + 1}'s driver_version")
    except BadInput as exc:
        raise BadInput(exc.message, hint) from None
    memory = _memory(total_text, index, "memory.total", hint)
    free = _memory(free_text, index, "memory.free", hint)
    if memory is not None and free is not None and free > memory:
        raise BadInput(f"nvidia-smi line {index + 1}: memory.free exceeds memory.total.", hint)
    return Gpu(index, name[:200], capability, driver, memory, free)


def _memory(text: str, index: int, field: str, hint: str) -> int | None:
    if text.startswith("["):  # [N/A], [Not Supported]
        return None
    if match := _MEMORY.fullmatch(text):
        return int(match.group(1)) * MIB
    raise BadInput(f"nvidia-smi line {index + 1}'s {field} {text[:40]!r}.", hint)
