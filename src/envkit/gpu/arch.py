"""Compute capabilities and the kernel targets compiled for them: the words the GPU layer
shares (``8.6``, ``sm_90a``, ``compute_80``), the rule of which target runs on which GPU, and
which capabilities each CUDA toolkit can compile for.

The rule (NVIDIA's binary and PTX compatibility, per the CUDA programming guide):

- SASS (a cubin) for ``sm_XY`` runs on a GPU of the same major X and a minor at or above Y
  (``sm_80`` on 8.0, 8.6, 8.9; not on 9.0). The family variant ``sm_100f`` follows the same
  rule; the arch-specific variant ``sm_90a`` runs on exactly 9.0.
- PTX for ``compute_XY`` is compiled by the driver for any GPU at or above X.Y; family PTX
  (``compute_100f``) only within its major, arch-specific PTX (``compute_90a``) only on X.Y.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from envkit.errors import BadInput


@dataclass(frozen=True, order=True)
class Capability:
    """A GPU's compute capability, ``major.minor`` (8.6 for an RTX 3090).

    >>> Capability.parse("8.6"), Capability.parse("sm_120"), Capability.parse("90")
    (Capability(major=8, minor=6), Capability(major=12, minor=0), Capability(major=9, minor=0))
    >>> Capability.parse("8.6").sm
    86
    >>> Capability(7, 5) < Capability(8, 0)
    True
    >>> Capability.parse("ampere")
    Traceback (most recent call last):
    envkit.errors.BadInput: compute capability 'ampere' is not a compute capability such as 8.6
    """

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def sm(self) -> int:
        """The number nvcc and fatbins use: 86 for 8.6, 120 for 12.0."""
        return self.major * 10 + self.minor

    @classmethod
    def from_sm(cls, sm: int) -> Capability:
        """86 -> 8.6, 121 -> 12.1 (a fatbin entry's arch field)."""
        return cls(*divmod(sm, 10))

    @classmethod
    def parse(cls, text: str, what: str = "compute capability") -> Capability:
        """``8.6`` or ``12.0`` (also ``sm_86``, ``86``); BadInput naming ``what`` otherwise."""
        value = text.strip().lower().removeprefix("sm_")
        if match := re.fullmatch(r"([0-9]{1,2})\.([0-9])", value):
            return cls(int(match.group(1)), int(match.group(2)))
        if re.fullmatch(r"[1-9][0-9]{1,2}", value):
            return cls.from_sm(int(value))
        raise BadInput(
            f"{what} {text!r} is not a compute capability such as 8.6 or 12.0.",
            "nvidia-smi --query-gpu=compute_cap --format=csv,noheader prints it.",
        )


class Kind(str, Enum):
    SASS = "sass"  # machine code (a cubin) for one GPU generation
    PTX = "ptx"  # virtual ISA the driver compiles on first load


class Variant(str, Enum):
    PLAIN = ""  # sm_80: the same major, any minor at or above
    FAMILY = "f"  # sm_100f: the family's features, the same rule
    ARCH = "a"  # sm_90a: exactly that capability


@dataclass(frozen=True, order=True)
class Target:
    """One compiled target: ``sm_90a`` (SASS) or ``compute_80`` (PTX).

    SASS runs on its major at or above its minor; PTX on anything at or above it (the driver
    compiles it); an ``a`` target on exactly its capability.

    >>> sass = target("sm_80")
    >>> sass.runs_on(Capability(8, 6)), sass.runs_on(Capability(9, 0))
    (True, False)
    >>> target("compute_80").runs_on(Capability(9, 0))
    True
    >>> target("sm_90a").runs_on(Capability(9, 0)), str(target("sm_90a"))
    (True, 'sm_90a')
    """

    kind: Kind
    capability: Capability
    variant: Variant = Variant.PLAIN

    def __str__(self) -> str:
        prefix = "sm" if self.kind is Kind.SASS else "compute"
        return f"{prefix}_{self.capability.sm}{self.variant.value}"

    def runs_on(self, gpu: Capability) -> bool:
        """Whether a GPU of capability ``gpu`` can run this target (the rule above)."""
        mine = self.capability
        if self.variant is Variant.ARCH:
            return gpu == mine
        if self.kind is Kind.SASS or self.variant is Variant.FAMILY:
            return gpu.major == mine.major and gpu.minor >= mine.minor
        return gpu >= mine


def target(text: str) -> Target:
    """``sm_90a``, ``compute_80`` -> a Target; BadInput for anything else."""
    match = re.fullmatch(r"(sm|compute)_([1-9][0-9]{1,2})([af]?)", text.strip().lower())
    if not match:
        raise BadInput(
            f"{text!r} is not a CUDA target such as sm_80, sm_90a or compute_80.",
            "SASS targets are sm_XY[a|f], PTX targets compute_XY[a|f].",
        )
    kind = Kind.SASS if match.group(1) == "sm" else Kind.PTX
    return Target(kind, Capability.from_sm(int(match.group(2))), Variant(match.group(3)))


# Every compute capability of a GPU NVIDIA has shipped from Maxwell on (NVIDIA's CUDA GPUs
# list): the candidates when an environment is asked which GPUs it can run on.
KNOWN = tuple(
    Capability(*pair)
    for pair in (
        (5, 0), (5, 2), (5, 3), (6, 0), (6, 1), (6, 2), (7, 0), (7, 2), (7, 5), (8, 0),
        (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1),
    )
)  # fmt: skip

# The SASS targets each CUDA toolkit compiles for (nvcc --list-gpu-code of that release; a
# release not listed has the targets of the one before it). CUDA 12.0 dropped Kepler (3.x),
# 12.8 added Blackwell (10.0, 10.1, 12.0), 12.9 added 10.3 and 12.1, and 13.0 dropped
# Maxwell, Pascal and Volta (everything below 7.5) and renamed 10.1 (Thor) to 11.0.
_TOOLKITS: dict[tuple[int, int], tuple[int, ...]] = {
    (11, 8): (35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90),
    (12, 0): (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90),
    (12, 8): (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 120),
    (12, 9): (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121),
    (13, 0): (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121),
}


def toolkit_targets(cuda: tuple[int, int]) -> tuple[Capability, ...]:
    """The capabilities CUDA ``cuda`` (major, minor) compiles SASS for; () before 11.8 or
    for a major envkit has no table for."""
    known = [release for release in _TOOLKITS if release[0] == cuda[0] and release <= cuda]
    if not known:
        return ()
    return tuple(Capability.from_sm(sm) for sm in _TOOLKITS[max(known)])


def lowest_supported(cuda_major: int) -> Capability | None:
    """The oldest GPU a CUDA major compiles for (11: 3.5, 12: 5.0, 13: 7.5)."""
    targets = toolkit_targets((cuda_major, 99))
    return min(targets) if targets else None


def toolkits_for(gpu: Capability) -> str:
    """Which CUDA toolkits compile SASS for ``gpu``, in words: 'CUDA 12.8 or newer',
    'CUDA 11.8 to 12.9'; '' when none in the table does."""
    able = [release for release in sorted(_TOOLKITS) if gpu.sm in _TOOLKITS[release]]
    if not able:
        return ""
    first, last = ("{}.{}".format(*release) for release in (able[0], able[-1]))
    if able[-1] == max(_TOOLKITS):
        return f"CUDA {first} or newer"
    return f"CUDA {first}" if first == last else f"CUDA {first} to {last}"
