"""Which GPUs a module's kernels run on: the kernel-image rule, per fatbin container.

The CUDA runtime loads a module's kernels container by container (one per translation unit),
and a kernel launches only when its own container has an image for the GPU: SASS of the
GPU's major with a minor at or below its own (``sm_90a`` only on exactly 9.0), or PTX at or
below it (not arch-specific). So coverage is counted per container, never over the union of
entries: one container's stray ``compute_52`` PTX does not cover the others' kernels.

Not every container is meant for every GPU. vLLM and torch compile most translation units
for their whole arch list and some on purpose for fewer GPUs (vLLM 0.8.5's ``_C`` has 27 of
56 containers for sm_70..sm_90, 18 for sm_90a alone, 2 for sm_80..sm_89 alone), choosing at
run time which kernels to launch. Demanding that every container cover the GPU would declare
vLLM 0.8.5 unable to run on an H100. The module's **main** containers are the ones with the
most SASS targets other than arch-specific ones (for a module of PTX alone, all of them):
the build's arch list. The verdict:

- ``runs``: every container has an image for the GPU;
- ``runs-partly``: every main container has one, some others (kernels for other GPUs) do not;
- ``no-kernel-image``: a main container has none: the module's kernels fail on that GPU.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from envkit.errors import BadInput
from envkit.gpu.arch import KNOWN, Capability, Kind, Target, Variant, target
from envkit.gpu.binaries import fatbin
from envkit.gpu.binaries.fatbin import Fatbin
from envkit.io.cache import BadEntry, Fields

MAX_GROUPS = 10_000  # distinct target sets of one module (libtorch_cuda.so: about 10)
MAX_TARGETS = 64  # targets of one container (nvcc's whole list is 20)

MEMO = 64  # verdicts kept per Images: KNOWN has 19 capabilities; --compute-capability any


class Verdict(str, Enum):
    RUNS = "runs"
    RUNS_PARTLY = "runs-partly"
    NO_KERNEL_IMAGE = "no-kernel-image"

    @property
    def runs(self) -> bool:
        return self is not Verdict.NO_KERNEL_IMAGE


def covers(targets: frozenset[Target] | set[Target], gpu: Capability) -> bool:
    """Whether one container with these targets has an image for a GPU of ``gpu``."""
    return any(t.runs_on(gpu) for t in targets)


def _gpus(t: Target) -> frozenset[Capability]:
    return frozenset(c for c in KNOWN if t.runs_on(c))


def _plainer(u: Target, t: Target) -> bool:
    """Whether plain SASS ``u`` runs on every GPU the SASS variant ``t`` does (``sm_90``
    for ``sm_90a``, ``sm_100`` for ``sm_100f``): then ``t`` adds no GPU to a list."""
    return (
        u.kind is t.kind is Kind.SASS
        and u.variant is Variant.PLAIN
        and t.variant is not Variant.PLAIN
        and _gpus(t) <= _gpus(u)
    )


def _breadth(targets: frozenset[Target]) -> int:
    return sum(1 for t in targets if t.kind is Kind.SASS and t.variant is not Variant.ARCH)


@dataclass(frozen=True)
class Coverage:
    """A module's kernels on one GPU."""

    capability: Capability
    verdict: Verdict
    covering: int  # containers with an image for the GPU
    containers: int  # containers with any entry
    main_missing: int  # main containers without one

    def describe(self) -> str:
        """'18 of 56 kernel containers have no image for 8.6' and the like."""
        lacking = self.containers - self.covering
        if self.verdict is Verdict.RUNS:
            return f"every kernel container has an image for {self.capability}"
        return (
            f"{lacking} of {self.containers} kernel containers have no image for {self.capability}"
        )


@dataclass(frozen=True)
class Images:
    """What a module's fatbins hold: its targets and, per distinct set of targets, how many
    containers carry it (vLLM 0.8.5's ``_C``: 56 containers in 6 sets)."""

    sass: tuple[Target, ...]  # every distinct SASS target, sorted
    ptx: tuple[Target, ...]  # every distinct PTX target, sorted
    groups: tuple[tuple[frozenset[Target], int], ...]  # (targets, containers), widest first
    entries: int

    @property
    def containers(self) -> int:
        return sum(count for _, count in self.groups)

    @functools.cached_property  # asked for each GPU a verdict is given on
    def main(self) -> tuple[frozenset[Target], ...]:
        """The target sets of the main containers (the docstring above says which)."""
        if not self.groups:
            return ()
        widest = max(_breadth(targets) for targets, _ in self.groups)
        return tuple(targets for targets, _ in self.groups if _breadth(targets) == widest)

    def main_targets(self) -> tuple[Target, ...]:
        """What the verdict rests on, for messages: each target the main containers hold (their
        union: vLLM's ``_C_stable_libtorch`` has ``sm_100`` in some and ``sm_100f`` in
        another) whose GPUs every main container has an image for, by the rule :meth:`on`
        uses. A PTX target is listed when every main container has PTX for its GPU, since
        PTX is what runs on the newer GPUs it names. A SASS variant whose GPUs a plain target
        listed runs on too is left out (``sm_90a`` beside ``sm_90``, ``sm_100f`` beside
        ``sm_100``)."""
        main = self.main

        def everywhere(t: Target) -> bool:
            if t.kind is Kind.PTX:
                return all(
                    any(p.kind is Kind.PTX and p.runs_on(t.capability) for p in g) for g in main
                )
            return all(covers(g, t.capability) for g in main)

        listed = sorted(t for t in {t for g in main for t in g} if everywhere(t))
        return tuple(t for t in listed if not any(_plainer(u, t) for u in listed))

    @functools.cached_property
    def _verdicts(self) -> dict[Capability, Coverage]:
        return {}

    def on(self, gpu: Capability) -> Coverage:
        """The verdict for a GPU of capability ``gpu``: a pure function of frozen values, so
        kept per capability (up to :data:`MEMO`; check-model asks it for every GPU envkit
        knows, for every profile, on every call)."""
        memo = self._verdicts
        found = memo.get(gpu)
        if found is None:
            found = self._on(gpu)
            if len(memo) < MEMO:
                memo[gpu] = found
        return found

    def _on(self, gpu: Capability) -> Coverage:
        covering = sum(count for targets, count in self.groups if covers(targets, gpu))
        main = self.main  # once, not once per group
        main_missing = sum(
            count for targets, count in self.groups if targets in main and not covers(targets, gpu)
        )
        if main_missing or not self.groups:
            verdict = Verdict.NO_KERNEL_IMAGE
        elif covering == self.containers:
            verdict = Verdict.RUNS
        else:
            verdict = Verdict.RUNS_PARTLY
        return Coverage(gpu, verdict, covering, self.containers, main_missing)

    def runs_on(self, candidates: tuple[Capability, ...] = KNOWN) -> tuple[Capability, ...]:
        """The capabilities among ``candidates`` whose verdict is not no-kernel-image."""
        return tuple(c for c in candidates if self.on(c).verdict.runs)

    def describe(self) -> str:
        """'SASS sm_70 sm_75 ...; PTX compute_80' for messages."""
        parts = []
        if self.sass:
            parts.append("SASS " + " ".join(map(str, self.sass)))
        if self.ptx:
            parts.append("PTX " + " ".join(map(str, self.ptx)))
        return "; ".join(parts) or "no SASS or PTX"


def of_file(path: Path) -> Images | fatbin.Damaged | None:
    """The kernels of the compiled file at ``path``, grouped as :func:`images` groups them;
    None when it has no GPU code (no ``.nv_fatbin``, or containers without entries),
    Damaged when it cannot be read. Never raises."""
    read = fatbin.read(path)
    if read is None or isinstance(read, fatbin.Damaged):
        return read
    return images(read) if read.containers else None


def group_entry(targets: frozenset[Target], containers: int) -> dict[str, Any]:
    """One (targets, containers) group as a cache entry holds it."""
    return {"targets": [str(t) for t in sorted(targets)], "containers": containers}


def groups_from_entry(f: Fields, key: str = "groups") -> tuple[tuple[frozenset[Target], int], ...]:
    """The list of :func:`group_entry` groups under ``key``, each read back, at most
    MAX_GROUPS of them; BadEntry for anything else."""
    groups = f.tables(key)
    if len(groups) > MAX_GROUPS:
        raise BadEntry(f"{f.where}.{key} has more than {MAX_GROUPS} sets of targets")
    return tuple(_group_from_entry(g) for g in groups)


def _group_from_entry(f: Fields) -> tuple[frozenset[Target], int]:
    """:func:`group_entry` read back; BadEntry for anything it does not write."""
    names = f.texts("targets")
    if not 0 < len(names) <= MAX_TARGETS:
        raise BadEntry(f"{f.where}.targets holds {len(names)} targets")
    try:
        found = frozenset(target(n) for n in names)
    except BadInput:
        raise BadEntry(f"{f.where}.targets holds a name that is not a CUDA target") from None
    count = f.whole("containers", high=fatbin.MAX_CONTAINERS)
    if count == 0:
        raise BadEntry(f"{f.where}.containers is 0")
    return found, count


def images(found: Fatbin) -> Images:
    """The targets of a parsed fatbin section, grouped by container."""
    counts: Counter[frozenset[Target]] = Counter(c.targets for c in found.containers if c.targets)
    return from_groups(counts.items(), sum(len(c.entries) for c in found.containers))


def from_groups(groups: Iterable[tuple[frozenset[Target], int]], entries: int) -> Images:
    """The Images of containers grouped by their targets ((targets, containers) pairs, as
    :attr:`Images.groups` holds them; a table of kernels keeps them so)."""
    counts: Counter[frozenset[Target]] = Counter()
    for targets, count in groups:
        if targets and count > 0:
            counts[targets] += count
    every = {t for targets in counts for t in targets}
    ordered = sorted(
        counts.items(), key=lambda item: (-_breadth(item[0]), -item[1], sorted(item[0]))
    )
    return Images(
        sass=tuple(sorted(t for t in every if t.kind is Kind.SASS)),
        ptx=tuple(sorted(t for t in every if t.kind is Kind.PTX)),
        groups=tuple(ordered),
        entries=entries,
    )
