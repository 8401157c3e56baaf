"""The side-by-side of a move: one row per fact, old value and new, whether the move keeps,
loses, gains or changes it, and where the fact came from (a wheel and its member, the kernel
table's entry, vLLM's parser read by ``envkit lint``).

A row is ``lost`` when something that worked before no longer does: an architecture or model
type, a GPU, a driver the move no longer runs on, a Python the matrix locks, a flag or
variable of the profile's ``[serve]`` table, an architecture compat or vLLM's tests now
refuse. ``unchecked`` says a fact could not be read (never a verdict)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envkit.gpu.arch import Capability
from envkit.gpu.needs import for_cuda
from envkit.gpu.published.kerneltable import KernelTable
from envkit.gpu.published.kernelverdict import Verdict
from envkit.profiles.profile import minor_fits
from envkit.serving.lint.check import LintReport
from envkit.upgrades.target import Move, Side, gpus_of, old_types
from envkit.wording import counted, listed

SHOWN = 6  # names listed in one row before "and N more"


class Kind(str, Enum):
    PINS = "pins"
    MODELS = "models"
    GPUS = "gpus"
    DRIVER = "driver"
    CUDA = "cuda"
    PYTHON = "python"
    COMPAT = "compat"
    BOUNDS = "transformers-bounds"
    FLAGS = "flags"
    VARIABLES = "variables"
    COMPANIONS = "companions"


class Change(str, Enum):
    KEPT = "kept"
    LOST = "lost"
    GAINED = "gained"
    CHANGED = "changed"
    UNCHECKED = "unchecked"


@dataclass(frozen=True)
class Row:
    kind: Kind
    subject: str
    old: str
    new: str
    change: Change
    evidence: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "subject": self.subject,
            "old": self.old,
            "new": self.new,
            "change": self.change.value,
            "evidence": self.evidence,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Lints:
    """``envkit lint`` of the profile's ``[serve]`` table against each side (None: the index
    did not answer; the note says so)."""

    old: LintReport | None = None
    new: LintReport | None = None
    note: str = ""
    checked: bool = False  # the profile has a [serve] table


def rows(move: Move, table: KernelTable, lints: Lints) -> tuple[Row, ...]:
    return (
        *_pins(move),
        *_models(move.old, move.new),
        *_gpus(move, table),
        *_driver(move, table),
        *_python(move),
        *_compat(move.old, move.new),
        *_bounds(move.old, move.new),
        *_lint(move, lints),
        *_companions(move),
    )


def _change(old: str, new: str) -> Change:
    return Change.KEPT if old == new else Change.CHANGED


def _pins(move: Move) -> Iterator[Row]:
    old, new = move.old, move.new
    for name, a, b, where in (
        ("vllm", old.vllm.version, new.vllm.version, move.asked),
        ("transformers", old.transformers.version, new.transformers.version,
         f"in vLLM {new.vllm.version}'s range transformers"
         f"{new.vllm.requires.get('transformers', '') or ' (any)'}, published before it "
         f"({new.vllm.wheel or 'its wheel'} METADATA)"),
        ("torch", old.torch or "not pinned", new.torch or "not pinned",
         f"vLLM {new.vllm.version}'s pin ({new.vllm.wheel or 'its wheel'} METADATA)"),
    ):  # fmt: skip
        yield Row(Kind.PINS, name, a, b, _change(a, b), where)


def _some(names: list[str]) -> str:
    return listed(names, SHOWN)


def _models(old: Side, new: Side) -> Iterator[Row]:
    was, now = set(old.vllm.architectures), set(new.vllm.architectures)
    registry = f"{new.vllm.wheel or f'vLLM {new.vllm.version}'} (model registry)"
    yield Row(
        Kind.MODELS, "architectures", f"{len(was)} listed", f"{len(now)} listed",
        Change.KEPT if was <= now else Change.CHANGED,
        f"{old.vllm.wheel or old.vllm.version}; {registry}",
    )  # fmt: skip
    for arch in sorted(was - now):
        plugin = new.vllm.out_of_tree.get(arch, "")
        last = new.vllm.previously_supported.get(arch, "")
        said = (
            f"moved to a plugin: {plugin}"
            if plugin
            else f"dropped (vLLM {last} was the last with it)"
            if last
            else "not listed"
        )
        yield Row(Kind.MODELS, arch, "listed", said, Change.LOST, registry)
    gained = sorted(now - was)
    if gained:
        yield Row(Kind.MODELS, "new architectures", "", ", ".join(gained), Change.GAINED, registry)
    types_was = old_types(old)
    types_now = set(new.transformers.model_types) | set(new.vllm.model_types)
    where = f"{new.transformers.wheel or new.transformers.version} (CONFIG_MAPPING_NAMES)"
    gone = sorted(types_was - types_now)
    if gone:  # one row: a transformers major drops dozens at once
        yield Row(
            Kind.MODELS, counted(len(gone), "model type"), ", ".join(gone), "unknown",
            Change.LOST, where,
        )  # fmt: skip
    more = sorted(types_now - types_was)
    if more:
        yield Row(Kind.MODELS, "new model types", "", ", ".join(more), Change.GAINED, where)


def _card(gpu: Capability) -> str:
    from envkit.gpu.installed.detect import examples

    named = examples(gpu, 2)
    return f"{gpu} ({named})" if named else str(gpu)


def _gpus(move: Move, table: KernelTable) -> Iterator[Row]:
    platform = move.wanted.platform
    old, new = move.old.vllm.version, move.new.vllm.version
    asked = set(move.wanted.gpus)
    every = sorted(asked | set(gpus_of(table, old, platform)) | set(gpus_of(table, new, platform)))
    entry = f"envkit's kernel table (gpu-kernels.json: vLLM {old}, vLLM {new}, their torch)"
    kept: list[str] = []
    for gpu in every:
        a = table.release_verdict(old, gpu, platform)
        b = table.release_verdict(new, gpu, platform)
        if a.verdict is Verdict.RUNS and b.verdict is Verdict.RUNS:
            kept.append(str(gpu))
        elif b.verdict is Verdict.NO_KERNEL_IMAGE and a.verdict is not Verdict.NO_KERNEL_IMAGE:
            yield Row(
                Kind.GPUS, _card(gpu), a.verdict.value, "dropped",
                Change.LOST if gpu in asked else Change.CHANGED, b.describe(),
                f"Keep vLLM {old} for this GPU (upgrade --gpu NAME judges the move for the "
                "card you serve on)" if gpu in asked else "",
            )  # fmt: skip
        elif a.verdict is not Verdict.RUNS and b.verdict is Verdict.RUNS:
            yield Row(Kind.GPUS, _card(gpu), a.verdict.value, "runs", Change.GAINED, b.describe())
        elif b.verdict is Verdict.UNKNOWN and gpu in asked:
            yield Row(Kind.GPUS, _card(gpu), a.verdict.value, "unknown", Change.UNCHECKED,
                      b.describe())  # fmt: skip
    if kept:
        yield Row(Kind.GPUS, "kept", ", ".join(kept), ", ".join(kept), Change.KEPT, entry)


def _driver(move: Move, table: KernelTable) -> Iterator[Row]:
    old, new = move.old, move.new
    a = for_cuda(old.cuda).summary() if old.cuda else "not known"
    b = for_cuda(new.cuda).summary() if new.cuda else "not known"
    where = f"torch {new.torch}'s default build (torch/version.py of its wheel)"
    change = _change(a, b)
    fix = ""
    if move.wanted.driver_cuda and new.cuda and _newer(new.cuda, move.wanted.driver_cuda):
        change = Change.LOST
        fix = f"Install a driver for CUDA {new.cuda} or newer, or keep vLLM {old.vllm.version}"
    elif not new.cuda and new.torch:
        change = Change.UNCHECKED
    yield Row(Kind.DRIVER, "driver floor", a, b, change, where, fix)
    majors = []
    for side in (old, new):
        build = table.vllm_build(side.vllm.version, move.wanted.platform)
        major = build.cuda_major if build is not None else None
        majors.append(f"CUDA {major}" if major else "not known")
    yield Row(
        Kind.CUDA, "CUDA major of vLLM's kernels", majors[0], majors[1],
        Change.UNCHECKED if "not known" in majors else _change(*majors),
        f"gpu-kernels.json: vLLM {new.vllm.version}'s core modules (libcudart.so.N)",
    )  # fmt: skip


def _newer(cuda: str, than: str) -> bool:
    from packaging.version import Version

    return Version(cuda) > Version(than)


def _python(move: Move) -> Iterator[Row]:
    old, new = move.old.vllm, move.new.vllm
    where = f"{new.wheel or new.version} METADATA Requires-Python"
    yield Row(
        Kind.PYTHON, "Requires-Python", old.requires_python or "any",
        new.requires_python or "any", _change(old.requires_python, new.requires_python), where,
    )  # fmt: skip
    try:
        spec = SpecifierSet(new.requires_python)
    except InvalidSpecifier:
        return
    for minor in move.profile.matrix.python:
        if not minor_fits(spec, minor):
            yield Row(
                Kind.PYTHON, f"Python {minor}", "locked", "refused", Change.LOST, where,
                f"Drop {minor} from [matrix] python of {move.profile.path}",
            )  # fmt: skip


def _compat(old: Side, new: Side) -> Iterator[Row]:
    pair = f"vLLM {new.vllm.version} + transformers {new.transformers.version}"
    where = f"envkit compat {pair} (the wheels' sources)"
    if new.compat is None:
        yield Row(Kind.COMPAT, "compat", _compat_said(old), "not read", Change.UNCHECKED,
                  new.compat_note or where)  # fmt: skip
        return
    a, b = _compat_said(old), _compat_said(new)
    blocking = new.compat.blocking
    yield Row(
        Kind.COMPAT, "vLLM-wide", a, b,
        Change.LOST if blocking and (old.compat is None or not old.compat.blocking)
        else _change(a, b), where,
    )  # fmt: skip
    before = set(old.compat.broken_architectures) if old.compat is not None else set()
    for arch in new.compat.broken_architectures:
        if arch in before:
            continue
        kind, _, name = arch.partition("model type ")
        loaded = name in old_types(old) if not kind and name else arch in old.vllm.architectures
        found = next((f for f in new.compat.findings if arch in f.architectures), None)
        said = (
            f"{found.code.value} {found.name} at {found.file}:{found.line}" if found else "breaks"
        )
        yield Row(Kind.COMPAT, arch, "loads" if loaded else "", said,
                  Change.LOST if loaded else Change.CHANGED, where)  # fmt: skip


def _compat_said(side: Side) -> str:
    if side.compat is None:
        return "not read"
    if side.compat.blocking:
        return f"incompatible: {side.compat.summary(1)}"
    scoped = len(side.compat.broken_architectures)
    return "compatible" + (f" ({counted(scoped, 'scoped finding')})" if scoped else "")


def _bounds(old: Side, new: Side) -> Iterator[Row]:
    """vLLM's test registry: architectures whose bound excludes the pinned transformers."""
    where = f"vLLM {new.vllm.version}'s test registry (tests/models/registry.py of its sdist)"
    was = {a for a, b in old.bounds.items() if b.refuses(old.transformers.version)}
    now = {a: b for a, b in new.bounds.items() if b.refuses(new.transformers.version)}
    for arch in sorted(set(now) - was):
        if arch in old.vllm.architectures:  # one new in this release was never loaded
            tier = now[arch].describe_tier()
            yield Row(Kind.BOUNDS, arch, "in bounds", f"needs {tier}", Change.LOST, where)
    for arch in sorted(was - set(now)):
        yield Row(Kind.BOUNDS, arch, "out of bounds", "in bounds", Change.GAINED, where)


def _lint(move: Move, lints: Lints) -> Iterator[Row]:
    """The flags' rows, then the variables' (each kind's findings before what it keeps)."""
    found = list(_linted(move, lints))
    yield from (r for r in found if r.kind is Kind.FLAGS)
    yield from (r for r in found if r.kind is Kind.VARIABLES)


def _linted(move: Move, lints: Lints) -> Iterator[Row]:
    if not lints.checked:
        return
    where = f"vLLM {move.new.vllm.version}'s serve parser and envs.py, read from its wheel"
    if lints.new is None:
        yield Row(Kind.FLAGS, "[serve]", "", "not checked", Change.UNCHECKED, lints.note or where)
        return
    before = {(f.code, f.severity, f.subject) for f in lints.old.findings} if lints.old else set()
    bad: set[str] = set()
    for f in lints.new.findings:
        if (f.code, f.severity, f.subject) in before:
            continue
        kind = Kind.VARIABLES if f.code == "removed-variable" else Kind.FLAGS
        lost = f.severity == "error" or f.code == "removed-variable"
        bad.add(f.subject)
        yield Row(
            kind, f.subject, f"accepted by vLLM {move.old.vllm.version}",
            f"{f.code}: {f.message}", Change.LOST if lost else Change.CHANGED, where, f.fix,
        )  # fmt: skip
    fine = [c for c in dict.fromkeys(lints.new.checked) if c not in bad and c != "MODEL"]
    flags = [c for c in fine if c.startswith("-")]
    names = [c for c in fine if not c.startswith("-")]
    for kind, kept in ((Kind.FLAGS, flags), (Kind.VARIABLES, names)):
        if kept:
            yield Row(kind, "accepted", ", ".join(kept), ", ".join(kept), Change.KEPT, where)


def _companions(move: Move) -> Iterator[Row]:
    """The profile's other pins against what the new vLLM requires of the same packages."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    new = move.new.vllm
    where = f"{new.wheel or new.version} METADATA Requires-Dist"
    skip = {"vllm", "transformers", "torch"}
    named: set[str] = set()
    for text in (*move.profile.requirements, *move.profile.constraints):
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        named.add(name)
        if name in skip:
            continue
        needs = new.requires.get(name, "")
        old_needs = move.old.vllm.requires.get(name, "")
        pinned = [s.version for s in req.specifier if s.operator == "=="]
        try:
            fits = not pinned or not needs or SpecifierSet(needs).contains(pinned[0], True)
        except InvalidSpecifier:
            fits = True
        yield Row(
            Kind.COMPANIONS, text, f"vLLM {move.old.vllm.version} asks {old_needs or 'nothing'}",
            f"vLLM {new.version} asks {needs or 'nothing'}",
            _change(old_needs, needs) if fits else Change.CHANGED, where,
            "" if fits else f"--write drops the pin {text} (uv takes one in {name}{needs})",
        )  # fmt: skip
    for other in ("torchvision", "torchaudio", "tokenizers"):
        a, b = move.old.vllm.requires.get(other, ""), new.requires.get(other, "")
        if (a or b) and a != b and other not in named:
            yield Row(Kind.COMPANIONS, other, a or "not asked", b or "not asked",
                      Change.CHANGED, where)  # fmt: skip


def lost(found: tuple[Row, ...]) -> tuple[Row, ...]:
    return tuple(r for r in found if r.change is Change.LOST)
