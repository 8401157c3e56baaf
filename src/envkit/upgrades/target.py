"""The release a profile moves to: without ``--to``, the newest vLLM (with the transformers
and torch picked for it) that still lists every architecture of the profile's ``[models]``,
knows every model type, has kernels for every GPU the profile runs on (or those given) and a
torch build the driver runs; with ``--to vllm==X``, that release, whatever it loses.

The transformers is picked as ``new-profile``'s solver picks it: the newest in the release's
declared range published before it, knowing the profile's model types, passing ``envkit
compat`` (nothing vLLM-wide broken, no architecture the old pair loaded broken). Every
release passed over keeps its reason, one line each, as the solver's answer does. A network
failure is never a verdict: it ends the command (exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envkit.compat.check.checker import Checker
from envkit.compat.report import CompatReport
from envkit.errors import BadInput, WheelError
from envkit.gpu.arch import KNOWN, Capability
from envkit.gpu.published.kerneltable import KernelTable
from envkit.gpu.published.kernelverdict import Verdict
from envkit.profiles.bounds import Bound
from envkit.profiles.profile import Profile
from envkit.releases.registry import Scan
from envkit.releases.testregistry import transformers_bounds
from envkit.releases.torchbuilds import torch_cuda
from envkit.wording import counted, listed

MAX_SCANNED = 24  # newer releases scanned, newest first, before the search stops
MAX_TRIED = 6  # releases whose picked transformers compat checks (the costly test)
MAX_COMPAT = 3  # transformers releases checked with compat for one vLLM release


@dataclass(frozen=True)
class Wanted:
    """What the move must keep: the GPUs (compute capabilities), the driver's CUDA, the
    platforms the profile locks."""

    gpus: tuple[Capability, ...]
    gpus_from: str  # "--gpu h100-80gb", "what vLLM 0.17.1's builds run on (kernel table)"
    driver_cuda: str = ""  # the newest CUDA the driver runs ('' when no driver was given)
    driver_from: str = ""
    platforms: tuple[str, ...] = ("linux-x86_64",)

    @property
    def platform(self) -> str:
        """The platform GPUs are judged on: x86_64 when the profile locks it."""
        linux = [p for p in self.platforms if p.startswith("linux-")]
        return "linux-x86_64" if "linux-x86_64" in linux or not linux else linux[0]


@dataclass(frozen=True)
class Side:
    """One side of the move: the pinned releases and what was read of them."""

    vllm: Scan
    transformers: Scan
    torch: str  # the torch release pinned ('' when none)
    cuda: str  # the CUDA of that torch's default build ('' when unknown or none)
    compat: CompatReport | None  # None when it could not be read (said in compat_note)
    bounds: Mapping[str, Bound] = field(default_factory=dict)  # vLLM's test registry
    compat_note: str = ""


@dataclass(frozen=True)
class Move:
    profile: Profile  # with a [models] table true to its pins
    old: Side
    new: Side
    wanted: Wanted
    asked: str  # how the target was chosen, said to the user
    rejected: tuple[str, ...] = ()  # newer releases passed over, one line each
    notes: tuple[str, ...] = ()
    # when the search stopped at its bounds (MAX_SCANNED, MAX_TRIED): the newer releases it
    # passed over, and those it stopped before
    searched: int = 0
    untried: int = 0
    to: str = ""  # the vLLM release --to named; '' when the newest that keeps it all was looked for

    @property
    def moves(self) -> bool:
        return self.old.vllm.version != self.new.vllm.version or (
            self.old.transformers.version != self.new.transformers.version
        )


def pins(profile: Profile) -> tuple[Version, Version, str]:
    """The exact vLLM and transformers a profile pins and its torch pin ('' for none)."""
    found = profile.expected_versions()
    missing = [n for n in ("vllm", "transformers") if n not in found]
    if missing:
        raise BadInput(
            f"Profile {profile.name} pins no exact {' or '.join(missing)} version, so there is "
            "nothing to upgrade from.",
            f"Pin vllm==X in requirements and transformers==Y in constraints of {profile.path}.",
        )
    try:
        return Version(found["vllm"]), Version(found["transformers"]), found.get("torch", "")
    except InvalidVersion:
        raise BadInput(f"Profile {profile.name} pins a version that is not PEP 440.") from None


def parse_to(text: str) -> Version:
    """``--to vllm==X``: the vLLM release asked. BadInput for anything else."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    hint = "Give --to vllm==X, such as --to vllm==0.9.2."
    if len(text) > 200 or not text.isascii():
        raise BadInput(f"--to {text[:40]!r}... is not an exact vLLM release.", hint)
    try:
        req = Requirement(text.strip())
        (spec,) = list(req.specifier)
        if spec.operator != "==" or "*" in spec.version or req.marker or req.extras or req.url:
            raise ValueError
        version = Version(spec.version)
    except (InvalidRequirement, InvalidVersion, ValueError):
        raise BadInput(
            f"--to {text!r} is not an exact release such as vllm==0.9.2.", hint
        ) from None
    if canonicalize_name(req.name) != "vllm":
        raise BadInput(
            f"--to {text!r} names {req.name}; upgrade moves the vLLM release (the "
            "transformers and torch are picked for it).",
            hint,
        )
    return version


class Chooser:
    """The tests, over one checker (an index session that also scans) and the kernel table."""

    def __init__(self, checker: Checker, table: KernelTable, profile: Profile) -> None:
        self.checker, self.table, self.profile = checker, table, profile
        self.defaults: dict[str, str | None] = {}
        self.compat_checks = 0  # pairs checked while picking a transformers

    def side(self, vllm: Version, transformers: Version, torch: str = "") -> Side:
        v = self.checker.scan("vllm", vllm)
        t = self.checker.scan("transformers", transformers)
        pin = torch or _pin(v)
        report, note = self.compat(vllm, transformers)
        bounds = transformers_bounds(self.checker, vllm)
        return Side(v, t, pin, self.cuda(pin) or "", report, bounds, note)

    def compat(self, vllm: Version, transformers: Version) -> tuple[CompatReport | None, str]:
        try:
            return self.checker.check(vllm, transformers), ""
        except WheelError as exc:
            return None, f"compat of vLLM {vllm} + transformers {transformers}: {exc.message}"

    def cuda(self, torch: str) -> str | None:
        """The CUDA of torch ``torch``'s default build (None when it cannot be read)."""
        if not torch:
            return ""
        if torch not in self.defaults:
            try:
                self.defaults[torch] = torch_cuda(self.checker, Version(torch))
            except (WheelError, InvalidVersion):
                self.defaults[torch] = None
        return self.defaults[torch]

    def cheap(self, version: Version, old: Side, wanted: Wanted) -> tuple[Scan | None, str]:
        """vLLM ``version``'s scan and '' when it keeps the architectures, the platforms,
        the GPUs and the driver; else why not."""
        try:
            scan = self.checker.scan("vllm", version)
        except WheelError:
            return None, "its wheel's registry cannot be read"
        gone = sorted(set(old.vllm.architectures) - set(scan.architectures))
        if gone:
            return scan, f"no longer lists {_some(gone)}"
        for platform in wanted.platforms:
            if self.table.publishes_no_wheel(str(version), platform):
                return scan, f"publishes no {platform} wheel"
        for gpu in wanted.gpus:
            verdict = self.table.release_verdict(str(version), gpu, wanted.platform)
            if verdict.verdict is Verdict.NO_KERNEL_IMAGE:
                return scan, f"drops compute capability {gpu}: {verdict.describe()}"
        pin = _pin(scan)
        if wanted.driver_cuda and pin:
            cuda = self.cuda(pin)
            if cuda and Version(cuda) > Version(wanted.driver_cuda):
                return scan, (
                    f"pins torch {pin}, whose default build needs CUDA {cuda}; the driver "
                    f"({wanted.driver_from}) runs CUDA {wanted.driver_cuda} at most"
                )
        return scan, ""

    def transformers_for(self, scan: Scan, old: Side) -> tuple[Version | None, str]:
        """The transformers for vLLM ``scan`` and '' when it keeps everything; else the
        one that loses least (the newest knowing every model type, else the newest in range;
        None when none fits the range) and what the first candidate lost."""
        vllm = Version(scan.version)
        try:
            spec = SpecifierSet(scan.requires.get("transformers", ""))
        except InvalidSpecifier:
            spec = SpecifierSet()
        published = self.checker.upload_time("vllm", vllm)
        checked, best, why = 0, None, ""
        typed: Version | None = None  # the newest that knows every model type
        for version in reversed(self.checker.releases("transformers")):
            if not spec.contains(version, prereleases=False):
                continue
            when = self.checker.upload_time("transformers", version)
            if published and when and when > published:
                continue
            best = best or version
            types = set(self.checker.scan("transformers", version).model_types)
            lost = sorted(set(old_types(old)) - types - set(scan.model_types))
            if lost:
                why = why or f"transformers {version} does not know model type {_some(lost)}"
                continue
            typed = typed or version
            if checked >= MAX_COMPAT:
                break
            checked += 1
            self.compat_checks += 1
            report, _note = self.compat(vllm, version)
            broken = _newly_broken(report, old)
            if broken:
                why = why or f"transformers {version} fails compat: {broken}"
                continue
            return version, ""
        if best is None:
            return None, f"no transformers in its range transformers{spec} published before it"
        return typed or best, why  # what loses least: the model types first


def old_types(old: Side) -> set[str]:
    return set(old.transformers.model_types) | set(old.vllm.model_types)


def _newly_broken(report: CompatReport | None, old: Side) -> str:
    """What compat says the new pair breaks that the old pair loaded ('' for nothing)."""
    if report is None:
        return ""
    if report.blocking:
        return f"vLLM-wide: {report.summary(1)}"
    before = set(old.compat.broken_architectures) if old.compat is not None else set()
    now = [a for a in report.broken_architectures if a in old.vllm.architectures]
    fresh = sorted(set(now) - before)
    return f"breaks {_some(fresh)}" if fresh else ""


def gpus_of(table: KernelTable, vllm: str, platform: str) -> tuple[Capability, ...]:
    """The compute capabilities vLLM ``vllm``'s default builds (and its torch's) run on."""
    return tuple(
        c for c in KNOWN if table.release_verdict(vllm, c, platform).verdict is Verdict.RUNS
    )


def choose(
    chooser: Chooser, old: Side, wanted: Wanted, to: Version | None, profile: Profile
) -> Move:
    """The move: to ``to`` when given (BadInput when the index does not publish it), else
    the newest release newer than ``old`` that keeps everything (``old`` itself when none)."""
    checker = chooser.checker
    releases = checker.releases("vllm")
    if to is not None:
        if to not in releases:  # the releases with a wheel: a source distribution builds none
            newest = f" (the newest release with a wheel is {releases[-1]})" if releases else ""
            listed = (
                f"a source distribution of vLLM {to} but no wheel"
                if to in checker.sdists("vllm")
                else f"no vLLM {to}"
            )
            raise BadInput(
                f"--to vllm=={to}: the index {checker.index} lists {listed}{newest}.",
                "Give a release it publishes a wheel of, e.g. --to vllm=="
                + str(releases[-1] if releases else "X"),
            )
        scan, why = chooser.cheap(to, old, wanted)
        if scan is None:
            raise BadInput(f"--to vllm=={to}: {why}.", "Pick another release.")
        pick, _why = chooser.transformers_for(scan, old)
        if pick is None:
            raise BadInput(f"--to vllm=={to}: {_why}.", "Pick another release.")
        new = chooser.side(to, pick)
        return Move(profile, old, new, wanted, f"--to vllm=={to}", to=str(to))
    rejected: list[str] = []
    newer = [v for v in reversed(releases) if v > Version(old.vllm.version)]
    tried = 0
    untried = 0
    for count, version in enumerate(newer):
        if count >= MAX_SCANNED or tried >= MAX_TRIED:
            untried = len(newer) - count
            span = f"{newer[-1]} to {version}" if untried > 1 else str(version)
            rejected.append(
                f"{counted(untried, 'older release')} not tried ({span}): --to vllm==X checks one"
            )
            break
        scan, why = chooser.cheap(version, old, wanted)
        if scan is not None and not why:
            checks = chooser.compat_checks
            pick, why = chooser.transformers_for(scan, old)
            tried += chooser.compat_checks > checks
            if pick is not None and not why:
                new = chooser.side(version, pick)
                asked = "the newest release that keeps every model, GPU and the driver"
                return Move(profile, old, new, wanted, asked, tuple(rejected))
        rejected.append(f"vllm {version}: {why}")
    if untried:
        looked = len(newer) - untried
        said = (
            f"none of the {looked} newest releases keeps"
            if looked > 1
            else "the newest release does not keep"
        )
        asked = (
            f"{said} every model, GPU and the driver; {counted(untried, 'older release')} not tried"
        )
    else:
        asked = "no newer release keeps every model, GPU and the driver"
    return Move(
        profile,
        old,
        old,
        wanted,
        asked,
        tuple(rejected),
        searched=len(newer) - untried,
        untried=untried,
    )


def _pin(scan: Scan) -> str:
    pin = scan.requires.get("torch", "")
    return pin[2:] if pin.startswith("==") and "," not in pin else ""


def _some(names: list[str]) -> str:
    return listed(names, 3)
