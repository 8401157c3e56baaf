"""Distributions that must be at one release together: one declared table, :data:`GROUPS`,
checked by the locker on each cell's resolution and by verify on a venv.

FlashInfer ships as three distributions: ``flashinfer-python`` (the package vLLM pins),
``flashinfer-cubin`` (its precompiled kernels) and ``flashinfer-jit-cache`` (its prebuilt
modules, one build per CUDA: ``0.6.16+cu130``). None of their metadata names another (the
cubin and jit-cache wheels require nothing), so a resolver is free to pick each at its own
release, yet ``import flashinfer`` refuses a ``flashinfer-cubin`` that is not its own version
and a ``flashinfer-jit-cache`` whose version does not start with it. vLLM 0.20.0 pins both
``flashinfer-python`` and ``flashinfer-cubin`` at 0.6.8.post1, 0.26.0 only
``flashinfer-python==0.6.14``; the default index stops at ``flashinfer-cubin`` 0.6.13, and
``flashinfer-jit-cache`` is only on FlashInfer's own index. Versions are compared by their
public part: a jit-cache's ``+cu130`` is its CUDA build, not another release.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit.profiles.profile import Profile


@dataclass(frozen=True)
class Group:
    """Distributions that must be at one release; the first is the one the others follow."""

    name: str
    packages: tuple[str, ...]  # canonical names
    why: str  # what goes wrong otherwise
    where: str = ""  # where the followers are published, when not beside the first


GROUPS: tuple[Group, ...] = (
    Group(
        name="FlashInfer",
        packages=("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache"),
        why="import flashinfer refuses a flashinfer-cubin or flashinfer-jit-cache of "
        "another release than its own",
        where="flashinfer-cubin after 0.6.13 and every flashinfer-jit-cache are published "
        "on FlashInfer's own index, not on the default one",
    ),
)


def public(version: str) -> str:
    """A version without its local part ('0.6.16+cu130' -> '0.6.16')."""
    try:
        return Version(version).public
    except InvalidVersion:
        return version.split("+", 1)[0]


@dataclass(frozen=True)
class Mismatch:
    """A group whose distributions are not at one release."""

    group: Group
    versions: tuple[tuple[str, str], ...]  # (package, version found), in the group's order

    @property
    def target(self) -> str:
        """The release the others must move to: the first present one's."""
        return public(self.versions[0][1])

    @property
    def off(self) -> tuple[str, ...]:
        """The packages not at :attr:`target`."""
        return tuple(p for p, v in self.versions if public(v) != self.target)

    @property
    def pins(self) -> tuple[str, ...]:
        """The pins that put every package at :attr:`target` (``==`` also matches a local
        build such as ``+cu130``)."""
        return tuple(f"{p}=={self.target}" for p in self.off)

    @property
    def said(self) -> str:
        """'flashinfer-python 0.6.14, flashinfer-cubin 0.6.13'."""
        return ", ".join(f"{p} {v}" for p, v in self.versions)


def mismatches(found: Mapping[str, str]) -> tuple[Mismatch, ...]:
    """Each group of :data:`GROUPS` whose packages in ``found`` (canonical name -> version;
    a package absent is no mismatch) are not at one public version."""
    out = []
    for group in GROUPS:
        present = tuple((p, found[p]) for p in group.packages if found.get(p))
        if len({public(v) for _p, v in present}) > 1:
            out.append(Mismatch(group, present))
    return tuple(out)


def profile_pins(profile: Profile, package: str) -> tuple[str, ...]:
    """The profile's own requirements and constraints that name ``package`` with a version
    or a URL (a bare name is no pin: a constraint beside it is enough)."""
    named = []
    for text in (*profile.requirements, *profile.constraints):
        try:
            req = Requirement(text)
            if canonicalize_name(req.name) == package and (req.specifier or req.url):
                named.append(text)
        except InvalidRequirement:
            continue
    return tuple(named)


def changes(profile: Profile, m: Mismatch) -> str:
    """The edits of ``profile`` that put the group at one release: each pin added to its
    constraints, or put in place of the profile's own requirement of that package."""
    steps = []
    for package, pin in zip(m.off, m.pins, strict=True):
        own = profile_pins(profile, package)
        steps.append(
            f"replace `{own[0]}` with `{pin}`" if own else f"add `{pin}` to its constraints"
        )
    return f"in profile {profile.name} ({profile.path.absolute()}), {' and '.join(steps)}"


def lock_reason(profile: Profile, found: Mapping[str, str]) -> str:
    """Why a cell whose resolution is ``found`` must not be locked ('' when every group
    holds together), with the exact pins to put in the profile."""
    return "; ".join(
        f"{m.group.name} must be one release, and this cell resolved {m.said} "
        f"({m.group.why}): {changes(profile, m)}, then lock again"
        + (f" ({m.group.where})" if m.group.where else "")
        for m in mismatches(found)
    )
