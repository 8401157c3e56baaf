"""``new-profile --for-model``: the newest vLLM + transformers (+ torch CUDA build) that can
load a model, solved with resolvelib.

Candidates are vLLM releases and transformers releases, newest first. A vLLM release must
list the model's architecture, accept the asked Python and pin a torch whose *default* build
(the one on the default index, which vLLM's own wheel is built and tested with) the driver
runs, and pin exactly no other release the index lacks (uv could not install it from there).
Other CUDA builds of the same torch (the PyTorch index's, or envkit's table of them)
are named in the reason but never taken: vLLM's installation notes say its compiled kernels
are binary-incompatible with other CUDA versions and even other build configurations of the
same torch (vLLM 0.8.5's kernels use torch 2.6.0's old-C++-ABI symbols, which its CUDA 12.6
build, made with the new ABI, does not export). That is conservative: within one CUDA major
and one C++ ABI another build may well work, but envkit does not claim it.

Its transformers must be within vLLM's declared range and published before it (what the
release was tested with), within vLLM's own bound for the architecture (its test registry),
know the model type (unless vLLM reads it with its own config class), and pass ``envkit
compat`` for this architecture. Each test is tried cheapest first; every rejection is kept,
so the answer explains, one line per reason, why newer candidates lost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, Resolver

from envkit.compat.check.checker import Checker
from envkit.errors import BadInput, NoSolution, WheelError
from envkit.gpu.arch import Capability
from envkit.gpu.driver import toolkit_driver
from envkit.gpu.published.kerneltable import KernelTable
from envkit.gpu.published.kernelverdict import BuildVerdict, Verdict
from envkit.gpu.published.profilefit import release_runs_on
from envkit.profiles.profile import minor_fits
from envkit.releases import pins
from envkit.releases.registry import ReleaseSpan, Scan, Scanner
from envkit.releases.testregistry import transformers_bounds
from envkit.releases.torchbuilds import CudaBuilds, torch_cuda
from envkit.wording import agree, listed

Test = Callable[[Version], str]  # '' when the version passes, else why it does not
MAX_LEAST_TRIES = 4  # releases tried, oldest first, for the least CUDA a solution needs


@dataclass(frozen=True)
class Candidate:
    project: str
    version: Version


@dataclass(frozen=True)
class Need:
    project: str
    test: Test = field(compare=False)
    asker: str = ""


@dataclass(frozen=True, kw_only=True)
class Solution:
    architecture: str
    vllm: Scan
    transformers: Scan
    python: str
    torch: str  # the version vLLM pins ('' when it pins none)
    cuda: str  # the CUDA build to take ('' when no driver was given)
    cuda_source: str
    rejected: tuple[str, ...]  # one line per project and reason
    why_transformers: str
    gpu: str = ""  # the compute capability solved for ('' when none was given or found)
    gpu_note: str = ""  # what the kernel table said of the chosen builds on it
    platform: str = "linux-x86_64"  # the host platform solved for (its wheels must exist)


@dataclass
class Rejections:
    """Why candidates lost: (project, reason) -> versions, in the order they were tried."""

    seen: dict[tuple[str, str], list[Version]] = field(default_factory=lambda: defaultdict(list))

    def add(self, project: str, version: Version, reason: str) -> None:
        if version not in self.seen[(project, reason)]:
            self.seen[(project, reason)].append(version)

    def lines(self, chosen: Mapping[str, Version]) -> tuple[str, ...]:
        """Only what was newer than the answer: older candidates were never in the way."""
        out = []
        for (project, reason), versions in self.seen.items():
            newer = [v for v in versions if project not in chosen or v > chosen[project]]
            if newer:
                shown = listed([str(v) for v in newer], 4)
                out.append(f"{project} {shown}: {reason}")
        return tuple(out)


if TYPE_CHECKING:  # generic in resolvelib's stubs; a plain class at run time before 1.1
    _ProviderBase = AbstractProvider[Need, Candidate, str]
else:
    _ProviderBase = AbstractProvider


class _Provider(_ProviderBase):
    """resolvelib's hooks over envkit's tests: candidates newest first, vLLM decided first."""

    def __init__(
        self,
        releases: Mapping[str, Sequence[Version]],
        why: Rejections,
        depends: Callable[[Candidate], Iterable[Need]],
    ) -> None:
        self.releases = releases  # newest first
        self.why = why
        self.depends = depends  # what a candidate asks of the others

    def identify(self, requirement_or_candidate: Need | Candidate) -> str:
        return requirement_or_candidate.project

    def get_preference(self, identifier: str, *_args: object, **_kw: object) -> int:
        return 0 if identifier == "vllm" else 1

    def find_matches(
        self,
        identifier: str,
        requirements: Mapping[str, Iterator[Need]],
        incompatibilities: Mapping[str, Iterator[Candidate]],
    ) -> Callable[[], Iterator[Candidate]]:
        needs = list(requirements[identifier])
        bad = {c.version for c in incompatibilities[identifier]}

        def matches() -> Iterator[Candidate]:
            for version in self.releases[identifier]:
                if version in bad:
                    continue
                reason = next((r for n in needs if (r := n.test(version))), "")
                if reason:
                    self.why.add(identifier, version, reason)
                    continue
                yield Candidate(identifier, version)

        return matches

    def is_satisfied_by(self, requirement: Need, candidate: Candidate) -> bool:
        return not requirement.test(candidate.version)

    def get_dependencies(self, candidate: Candidate) -> list[Need]:
        return list(self.depends(candidate))


class Solver:
    """The tests, over one scanner (the index), one compat checker and one CUDA source."""

    def __init__(
        self,
        scanner: Scanner,
        checker: Checker,
        builds: CudaBuilds,
        *,
        architecture: str,
        model_type: str,
        python: str | None,
        cuda: str | None,
        config: Mapping[str, Any] | None = None,
        gpu: Capability | None = None,
        table: KernelTable | None = None,
        platform: str = "linux-x86_64",
    ) -> None:
        self.scanner, self.checker, self.cuda_builds = scanner, checker, builds
        self.config = config  # the model's config.json, for findings that depend on it
        self.arch, self.model_type = architecture, model_type
        self.python, self.cuda = python, cuda
        self.gpu, self.table = gpu, table  # the GPU whose kernels the builds must carry
        self.platform = platform  # the host's: the release must publish a wheel for it
        self.unknown: set[Version] = set()  # releases the kernel table cannot decide
        self.defaults: dict[str, str | None] = {}  # torch version -> its default build's CUDA

    def vllm_test(self, version: Version) -> str:
        try:
            scan = self.scanner.scan("vllm", version)
        except WheelError:
            return "its wheel's registry cannot be read"
        if self.arch not in scan.architectures:
            return f"does not list {self.arch}"
        if self.python and not _fits(scan.requires_python, self.python):
            return f"requires Python {scan.requires_python}, not {self.python}"
        if self.table is not None and self.table.publishes_no_wheel(str(version), self.platform):
            return f"publishes no {self.platform} wheel"
        if self.gpu is not None and self.table is not None:
            verdict = self.table.release_verdict(str(version), self.gpu, self.platform)
            if verdict.verdict is Verdict.NO_KERNEL_IMAGE:
                return _no_image(verdict.vllm, verdict.torch)
            if verdict.verdict is Verdict.UNKNOWN:
                self.unknown.add(version)
        pin = scan.requires.get("torch", "")
        if self.cuda and pin.startswith("=="):
            why = self._cuda_test(pin[2:], self.cuda)
            if why:
                return why
        try:
            python = self.python or _python_for(scan.requires_python)
        except BadInput:  # no Python envkit drafts for fits: solve() says so if it is chosen
            return ""
        return pins.refusal(self.scanner, version, python, self.platform)

    def default_build(self, torch: str) -> str | None:
        """torch's CUDA on the default index: '' for CPU only, None if unread (no verdict then)."""
        if torch not in self.defaults:
            try:
                self.defaults[torch] = torch_cuda(self.scanner, Version(torch))
            except (WheelError, InvalidVersion):
                self.defaults[torch] = None
        return self.defaults[torch]

    def _cuda_test(self, torch: str, driver: str) -> str:
        default = self.default_build(torch)
        if not default or Version(default) <= Version(driver):
            return ""
        others = self.cuda_builds.builds(torch)
        fitting = [c for c in others.fitting(driver) if c != default]
        said = (
            f"pins torch {torch}, whose default build (CUDA {default}, the one vLLM's wheel "
            f"is built and tested with) the driver cannot run: it runs CUDA {driver} at most"
        )
        if not fitting:
            return said
        builds = agree(len(fitting), "build is", "builds are")
        return (
            f"{said}; its CUDA {', '.join(fitting)} {builds} not taken (per {others.source}): "
            "another build of the same torch can break vLLM's compiled kernels"
        )

    def types(self, transformers: Version) -> tuple[str, ...]:
        return self.scanner.scan("transformers", transformers).model_types

    def transformers_need(self, vllm: Version) -> Need:
        scan = self.scanner.scan("vllm", vllm)
        declared = scan.requires.get("transformers", "")
        try:
            spec = SpecifierSet(declared)
        except InvalidSpecifier:
            spec = SpecifierSet()
        published = self.scanner.upload_time("vllm", vllm)
        bound = transformers_bounds(self.scanner, vllm).get(self.arch)

        def test(version: Version) -> str:
            if not spec.contains(version, prereleases=False):
                return f"outside vLLM {vllm}'s range transformers{spec}"
            when = self.scanner.upload_time("transformers", version)
            if published and when and when > published:
                return f"published after vLLM {vllm} (not what it was released with)"
            if bound is not None and bound.refuses(str(version)):
                return f"vLLM {vllm}'s test registry needs {bound.describe()} for {self.arch}"
            known = scan.model_types  # vLLM's own config classes
            if self.model_type not in known and self.model_type not in self.types(version):
                return f"does not know model type {self.model_type}"
            report = self.checker.check(vllm, version)
            broken = report.breaks(self.arch, self.model_type, self.config)
            if broken:
                first = broken[0]
                return f"fails compat with vLLM {vllm}: {first.code.value} {first.name}"
            return ""

        return Need("transformers", test, f"vLLM {vllm}")


def solve(
    span: ReleaseSpan,
    model_type: str,
    scanner: Scanner,
    checker: Checker,
    *,
    python: str | None = None,
    cuda: str | None = None,
    vllm: Version | None = None,
    config: Mapping[str, Any] | None = None,
    gpu: Capability | None = None,
    table: KernelTable | None = None,
    platform: str = "linux-x86_64",
) -> Solution:
    """The newest working vLLM + transformers for ``span.architecture`` whose builds run on
    ``gpu`` (from ``table``) and the driver's ``cuda``. NoSolution (exit 1), with every reason
    and, when the driver is what stops it, the least CUDA at which a solution exists."""
    solver = Solver(
        scanner, checker, CudaBuilds(scanner),
        architecture=span.architecture, model_type=model_type, python=python, cuda=cuda,
        config=config, gpu=gpu, table=table, platform=platform,
    )  # fmt: skip
    try:
        result, why = _resolve(solver, span, vllm)
    except _Unsolvable as impossible:
        lines = impossible.lines
        least = _least_cuda(
            span, model_type, scanner, checker, python, vllm, config, gpu, table, platform
        )
        target = f", kernels for compute capability {gpu}" if gpu is not None else ""
        raise NoSolution(
            f"No vLLM + transformers release can load {span.architecture} "
            f"(model type {model_type}) with what was asked{target}: "
            + "; ".join(lines[:12])
            + "."
            + (f" {least}" if least and cuda else ""),
            "A newer NVIDIA driver runs newer CUDA builds: install one, then draft again with "
            "its CUDA (--cuda, or nvidia-smi)"
            if least and cuda
            else "Relax --python, --cuda or --vllm, pick another model revision, or another GPU.",
        ) from None
    chosen = {name: c.version for name, c in result.mapping.items()}
    v = scanner.scan("vllm", chosen["vllm"])
    t = scanner.scan("transformers", chosen["transformers"])
    pin = v.requires.get("torch", "")
    take, source = _cuda(solver, pin, cuda)
    note = ""
    if gpu is not None and table is not None:
        note = table.release_verdict(str(chosen["vllm"]), gpu, platform).describe()
    elif table is not None:
        note = release_runs_on(table, str(chosen["vllm"]), platform)
    return Solution(
        architecture=span.architecture,
        vllm=v,
        transformers=t,
        python=python or _python_for(v.requires_python),
        torch=pin[2:] if pin.startswith("==") else "",
        cuda=take,
        cuda_source=source,
        rejected=why.lines(chosen),
        why_transformers=(
            f"newest transformers in vLLM {v.version}'s range (transformers"
            f"{v.requires.get('transformers', '') or ' any'}) published before it, within "
            f"vLLM's bound for {span.architecture}, knowing model type {model_type}, compat clean"
        ),
        gpu=str(gpu) if gpu is not None else "",
        gpu_note=note,
        platform=platform,
    )


def _resolve(solver: Solver, span: ReleaseSpan, vllm: Version | None) -> tuple[Any, Rejections]:
    """resolvelib over the releases; ResolutionImpossible carries the rejection lines."""
    scanner = solver.scanner
    first, newest = Version(span.first), Version(span.newest)
    vllms = [v for v in reversed(scanner.releases("vllm")) if first <= v <= newest]
    if vllm is not None:
        vllms = [v for v in vllms if v == vllm]
    releases = {"vllm": vllms, "transformers": list(reversed(scanner.releases("transformers")))}
    why = Rejections()
    provider = _Provider(
        releases,
        why,
        lambda c: [solver.transformers_need(c.version)] if c.project == "vllm" else [],
    )
    try:
        result = Resolver(provider, BaseReporter()).resolve(
            [Need("vllm", solver.vllm_test, "the model")], max_rounds=500
        )
    except ResolutionImpossible:
        raise _Unsolvable(why.lines({})) from None
    return result, why


class _Unsolvable(Exception):
    """No resolution: the lines say why newer candidates lost."""

    def __init__(self, lines: tuple[str, ...]) -> None:
        super().__init__(lines)
        self.lines = lines


def _least_cuda(
    span: ReleaseSpan,
    model_type: str,
    scanner: Scanner,
    checker: Checker,
    python: str | None,
    vllm: Version | None,
    config: Mapping[str, Any] | None,
    gpu: Capability | None,
    table: KernelTable | None,
    platform: str = "linux-x86_64",
) -> str:
    """Without the driver's limit, the oldest release that loads the model (and runs on the
    GPU), and the CUDA (and driver) its torch needs: '' when there is none either."""
    solver = Solver(
        scanner, checker, CudaBuilds(scanner),
        architecture=span.architecture, model_type=model_type, python=python, cuda=None,
        config=config, gpu=gpu, table=table, platform=platform,
    )  # fmt: skip
    first, newest = Version(span.first), Version(span.newest)
    oldest = [v for v in scanner.releases("vllm") if first <= v <= newest]
    tried = 0
    for version in oldest if vllm is None else [vllm]:
        if solver.vllm_test(version) or tried >= MAX_LEAST_TRIES:
            continue
        tried += 1
        pin = scanner.scan("vllm", version).requires.get("torch", "")
        needs = solver.default_build(pin[2:]) if pin.startswith("==") else None
        if not needs:
            continue
        try:
            _resolve(solver, span, version)
        except _Unsolvable:
            continue
        driver = toolkit_driver(needs)
        where = "first appears in" if version == first else "first loads with"
        return (
            f"{span.architecture} {where} vLLM {version}"
            + (f" (of the releases with kernels for {gpu})" if gpu is not None else "")
            + f", whose torch {pin[2:]} needs CUDA {needs}"
            + (f" (NVIDIA driver {driver} or newer)" if driver else "")
            + "."
        )
    return ""


def _cuda(solver: Solver, pin: str, driver: str | None) -> tuple[str, str]:
    """The CUDA build to pin and where that was learnt: always the default index's build
    (the one vLLM's wheel is built and tested with, and what `--torch-index default` takes)."""
    if not pin.startswith("=="):
        return "", ""
    found = solver.default_build(pin[2:])
    if found is None:
        return "", "nowhere: the default index's torch wheel could not be read"
    given = "" if driver else " (no driver CUDA given or found)"
    return found, f"the default index's wheel, the one vLLM's wheel is built and tested with{given}"


def _no_image(vllm: BuildVerdict, torch: BuildVerdict) -> str:
    """Why a release's builds cannot run on the GPU, in the solver's words."""
    if vllm.verdict is Verdict.NO_KERNEL_IMAGE:
        return "its " + vllm.reason.split("'s ", 1)[-1]
    return f"pins {torch.build}, whose " + torch.reason.split("'s ", 1)[-1]


def _fits(requires_python: str, python: str) -> bool:
    try:
        return minor_fits(SpecifierSet(requires_python), python)
    except (InvalidSpecifier, InvalidVersion):
        return True


def _python_for(requires_python: str) -> str:
    for minor in ("3.12", "3.11", "3.13", "3.10"):
        if _fits(requires_python or ">=3.10", minor):
            return minor
    raise BadInput(f"No Python between 3.10 and 3.13 fits Requires-Python {requires_python!r}.")
