"""``envkit compat``: the transformers API a vLLM release uses and a transformers release lacks.

Read from the two published wheels before anything is installed (range reads of the source
files, parsed with ``ast``; apisurface.py), the answer has three kinds of finding:

- ``missing-module``: vLLM imports a transformers module the release does not have;
- ``missing-name``: vLLM imports a name the module does not provide;
- ``removed-attribute``: vLLM reads ``obj.name`` where ``name`` is defined by the classes of
  the transformers release vLLM was released against (the *reference*: the newest release
  within vLLM's declared range published before the vLLM wheel) and by no class of the
  checked release.

A finding in a model's source file only breaks the architectures the registry maps to that
file; it is reported with them, and the pair stays compatible for everything else. What
cannot be decided from source (a module that makes names up at run time, a lazy table too
wide to read) is left out and counted, never guessed. Reports are cached per pair and index.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from envkit.compat import apisurface
from envkit.compat.apisurface import Use
from envkit.compat.scope import MODELS_DIR, architectures_by_file
from envkit.compat.transformers_source import TransformersRelease
from envkit.index.wheels import RemoteZip, WheelFile, pick_wheel
from envkit.io.cache import COMPAT, Fields
from envkit.releases.registry import Scanner, index_key, requirements

_BUILTIN_NAMES = frozenset(
    n for kind in (dict, list, str, bytes, set, tuple, int, float, object) for n in dir(kind)
)


class Code(str, Enum):
    MISSING_MODULE = "missing-module"
    MISSING_NAME = "missing-name"
    REMOVED_ATTRIBUTE = "removed-attribute"  # the checked release is newer than the reference
    MISSING_ATTRIBUTE = "missing-attribute"  # older: vLLM reads what came later


@dataclass(frozen=True, kw_only=True)
class Incompatibility:
    code: Code
    name: str  # the module, the imported name or the attribute
    module: str  # the transformers module it comes from ('' for attributes of unknown origin)
    file: str  # where vLLM uses it, inside the wheel
    line: int
    places: int = 1  # how many places in vLLM use it
    removed_in: str = ""  # the transformers release that removed it, when known
    architectures: tuple[str, ...] = ()  # only these break ('' = vLLM itself breaks)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["code"] = self.code.value
        data["architectures"] = list(self.architectures)
        data["removed_in"] = self.removed_in or None
        return data

    @classmethod
    def from_entry(cls, f: Fields) -> Incompatibility:
        """A finding as the cache holds it, every field checked (BadEntry otherwise)."""
        return cls(
            code=Code(f.text("code")),  # ValueError for a code envkit does not know
            name=f.text("name"),
            module=f.text("module"),
            file=f.text("file"),
            line=f.whole("line"),
            places=f.whole("places"),
            removed_in=f.text("removed_in", ""),
            architectures=f.texts("architectures"),
        )


@dataclass(frozen=True, kw_only=True)
class CompatReport:
    vllm: str
    transformers: str
    reference: str  # the transformers release vLLM was released against ('' when unknown)
    findings: tuple[Incompatibility, ...]
    imports_checked: int = 0
    undecided: tuple[str, ...] = ()  # modules whose names cannot be read from source
    wheels: tuple[str, ...] = ()
    wheel_bytes: int = 0
    bytes_read: int = 0
    requests: int = 0
    seconds: float = 0.0
    cached: bool = False
    dated: bool = False  # removed_in was looked for (compat --removed-in)

    @property
    def blocking(self) -> tuple[Incompatibility, ...]:
        """The findings that break vLLM as a whole (model-scoped ones name their architectures)."""
        return tuple(f for f in self.findings if not f.architectures)

    @property
    def compatible(self) -> bool:
        return not self.blocking

    @property
    def broken_architectures(self) -> tuple[str, ...]:
        """Every architecture a model-scoped finding breaks, sorted."""
        return tuple(sorted({a for f in self.findings for a in f.architectures}))

    def summary(self, shown: int = 3) -> str:
        """The blocking findings in one line: the first ``shown``, then how many more."""
        core = self.blocking
        named = "; ".join(f"{f.code.value} {f.name} at {f.file}:{f.line}" for f in core[:shown])
        return named + (f" (and {len(core) - shown} more)" if len(core) > shown else "")

    def breaks(self, architecture: str) -> tuple[Incompatibility, ...]:
        """The findings that break loading ``architecture`` with this pair."""
        return tuple(
            f for f in self.findings if not f.architectures or architecture in f.architectures
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.compatible,
            "vllm": self.vllm,
            "transformers": self.transformers,
            "reference": self.reference or None,
            "findings": [f.to_dict() for f in self.findings],
            "imports_checked": self.imports_checked,
            "dated": self.dated,
            "undecided": list(self.undecided),
            "wheels": list(self.wheels),
            "cost": {
                "wheel_bytes": self.wheel_bytes,
                "bytes_read": self.bytes_read,
                "requests": self.requests,
                "seconds": self.seconds,
                "cached": self.cached,
            },
        }

    @classmethod
    def from_entry(cls, f: Fields) -> CompatReport:
        """A report as the cache holds it, every field checked (BadEntry otherwise)."""
        cost = f.table("cost")
        return cls(
            vllm=str(Version(f.text("vllm"))),
            transformers=str(Version(f.text("transformers"))),
            reference=f.text("reference", ""),
            findings=tuple(Incompatibility.from_entry(i) for i in f.tables("findings")),
            imports_checked=f.whole("imports_checked"),
            dated=f.flag("dated", False),
            undecided=f.texts("undecided"),
            wheels=f.texts("wheels"),
            wheel_bytes=cost.whole("wheel_bytes"),
            bytes_read=cost.whole("bytes_read"),
            requests=cost.whole("requests"),
            seconds=cost.number("seconds"),
            cached=True,
        )


def _key(vllm: Version | str, transformers: Version | str, index: str) -> str:
    return f"vllm-{vllm}+transformers-{transformers}.{index_key(index)}"


def load_cached(vllm: Version, transformers: Version, index: str) -> CompatReport | None:
    """The cached report of a pair from ``index``; None when there is none or it is bad."""
    report = COMPAT.load(_key(vllm, transformers, index), CompatReport.from_entry)
    same = report is not None and (report.vllm, report.transformers) == (
        str(vllm),
        str(transformers),
    )
    return report if same else None


def store(report: CompatReport, index: str) -> None:
    COMPAT.store(_key(report.vllm, report.transformers, index), report.to_dict())


def reference_release(
    releases: Iterable[WheelFile], declared: str, published: str | None
) -> Version | None:
    """The transformers release a vLLM wheel was made against: the newest one within the
    range vLLM declares that was published before the vLLM wheel (the newest within the
    range when the index gives no upload times)."""
    try:
        spec = SpecifierSet(declared)
    except InvalidSpecifier:
        spec = SpecifierSet()
    candidates = [
        f for f in releases if not f.version.is_prerelease and spec.contains(f.version, True)
    ]
    if published:
        before = [f for f in candidates if f.upload_time and f.upload_time <= published]
        candidates = before or candidates
    return max((f.version for f in candidates), default=None)


def import_findings(
    uses: Iterable[Use], release: TransformersRelease
) -> tuple[list[tuple[Code, str, str, Use]], set[str]]:
    """``(code, name, module, use)`` for each failing import; the modules left undecided."""
    out = []
    undecided: set[str] = set()
    for use in uses:
        exists = release.module_exists(use.module)
        if exists is False:
            out.append((Code.MISSING_MODULE, use.module, use.module, use))
            continue
        if not use.name:
            continue
        found = release.provides(use.module, use.name) if exists else None
        if found is False:
            out.append((Code.MISSING_NAME, use.name, use.module, use))
        elif found is None:
            undecided.add(use.module)
    return out, undecided


def group(
    hits: Iterable[tuple[Code, str, str, Use]], scopes: Mapping[str, tuple[str, ...]]
) -> tuple[Incompatibility, ...]:
    """One finding per (code, name): its first place, how many places, the architectures."""
    places: dict[tuple[Code, str, str], list[Use]] = defaultdict(list)
    for code, name, module, use in hits:
        places[(code, name, module)].append(use)
    findings = []
    for (code, name, module), uses in places.items():
        uses.sort(key=lambda u: (u.file.startswith(MODELS_DIR), u.file, u.line))
        files = {u.file for u in uses}
        scoped = all(f in scopes for f in files)
        archs = sorted({a for f in files for a in scopes.get(f, ())}) if scoped else []
        findings.append(
            Incompatibility(
                code=code,
                name=name,
                module=module,
                file=uses[0].file,
                line=uses[0].line,
                places=len(uses),
                architectures=tuple(archs),
            )
        )
    findings.sort(key=lambda f: (bool(f.architectures), f.code.value, f.name))
    return tuple(findings)


class Checker(Scanner):
    """Checks vLLM x transformers pairs from one index (a Scanner: the same index pages,
    client and progress), with the per-pair cache."""

    def _open(
        self, wheel: WheelFile, body_only: bool, classes: list[tuple[str, str]]
    ) -> TransformersRelease:
        release = TransformersRelease(wheel, self.http, body_only=body_only)
        release.load(["transformers"])
        release.members_of(classes)
        return release

    def check(self, vllm: Version, transformers: Version) -> CompatReport:
        """The pair's report, from the cache when it has it."""
        report = load_cached(vllm, transformers, self.index) if self.use_cache else None
        if report is None:
            report = self._check(vllm, transformers)
            store(report, self.index)
        return report

    def _check(self, vllm: Version, transformers: Version) -> CompatReport:
        start = time.monotonic()
        before = (self.http.traffic.bytes, self.http.traffic.requests)
        self.progress(f"reading vLLM {vllm}'s sources and transformers {transformers}'s")
        with ThreadPoolExecutor(max_workers=3) as pool:  # three wheels read side by side
            listings = {p: pool.submit(self.files, p) for p in ("vllm", "transformers")}
            vwheel = pick_wheel(listings["vllm"].result(), vllm)
            sources = pool.submit(lambda: _vllm_sources(RemoteZip(vwheel.url, self.http)))
            twheel = pick_wheel(listings["transformers"].result(), transformers)
            opened = pool.submit(self._open, twheel, False, [])
            texts = sources.result()
            meta = next((p for p in texts if p.endswith(".dist-info/METADATA")), "")
            declared = requirements(texts.pop(meta, b"").decode("utf-8", "replace"))[0]
            reference = reference_release(
                self.files("transformers"), declared.get("transformers", ""), vwheel.upload_time
            )
            uses = [
                use
                for path, data in texts.items()
                if apisurface.IMPORTS_TRANSFORMERS.search(data)
                for use in _imports(data, path)
            ]
            starts = _classes(uses)
            against = None
            if reference is not None and reference != transformers:
                rwheel = pick_wheel(self.files("transformers"), reference)
                against = pool.submit(self._open, rwheel, True, starts)
            target = opened.result()
            target.load({u.module for u in uses})
            target.members_of(starts)
            hits, undecided = import_findings(uses, target)
            wheels = [vwheel, twheel]
            if against is not None:
                ref = against.result()
                wheels.append(ref.wheel)
                hits.extend(
                    attribute_hits(texts, uses, ref, target, newer=transformers > ref.version)
                )
        report = CompatReport(
            vllm=str(vllm),
            transformers=str(transformers),
            reference=str(reference or ""),
            findings=group(hits, architectures_by_file(texts)),
            imports_checked=len(uses),
            undecided=tuple(sorted(undecided)),
            wheels=tuple(w.filename for w in wheels),
            wheel_bytes=(vwheel.size or 0) + (twheel.size or 0),
            bytes_read=self.http.traffic.bytes - before[0],
            requests=self.http.traffic.requests - before[1],
            seconds=round(time.monotonic() - start, 3),
        )
        return report


def _vllm_sources(archive: RemoteZip) -> dict[str, bytes]:
    wanted = [
        n
        for n in archive.members
        if (n.startswith("vllm/") and n.endswith(".py"))
        or (n.endswith(".dist-info/METADATA") and n.count("/") == 1)
    ]
    return archive.read(wanted)


def _imports(data: bytes, path: str) -> list[Use]:
    tree = apisurface.parse(data, path)
    return apisurface.imports_of(tree, path) if tree is not None else []


def _classes(uses: Iterable[Use]) -> list[tuple[str, str]]:
    """The (module, name) of each class-like name vLLM imports from transformers."""
    return list(dict.fromkeys((u.module, u.name) for u in uses if u.name[:1].isupper()))


def removed_members(
    uses: Iterable[Use], reference: TransformersRelease, target: TransformersRelease
) -> dict[str, str]:
    """Names that the transformers classes vLLM imports define or inherit in the reference
    and not in the target, with the class (``module.Class``) that had them. A class whose
    bases cannot all be read on either side is left out."""
    starts = _classes(uses)
    before = reference.members_of(starts)
    located = {s: reference.where(*s) or s for s in starts}
    after = target.members_of([*located.values(), *starts])
    gone: dict[str, str] = {}
    # a name some read class of the target defines is not gone; nor is one every dict, list
    # or str has (x.get, x.items: the reads cannot tell their receivers apart)
    anywhere = target.names() | _BUILTIN_NAMES
    for start in starts:
        old = before.get(start)
        new = after.get(located[start])
        if new is None:
            new = after.get(start)
        if old is None or new is None:
            continue
        for name in sorted(old - new - anywhere):
            if not name.startswith("__"):
                gone.setdefault(name, ".".join(located[start]))
    return gone


def attribute_hits(
    texts: Mapping[str, bytes],
    uses: Iterable[Use],
    reference: TransformersRelease,
    target: TransformersRelease,
    *,
    newer: bool,
) -> list[tuple[Code, str, str, Use]]:
    """Reads in vLLM (``obj.name``) of the names :func:`removed_members` finds."""
    gone = removed_members(uses, reference, target)
    if not gone:
        return []
    pattern = re.compile(
        rb"\.(?:" + b"|".join(re.escape(n.encode()) for n in sorted(gone)) + rb")\b"
    )
    code = Code.REMOVED_ATTRIBUTE if newer else Code.MISSING_ATTRIBUTE
    hits = []
    for path, data in texts.items():
        if not pattern.search(data):
            continue
        tree = apisurface.parse(data, path)
        if tree is None:
            continue
        for name, file, line in apisurface.attribute_reads(tree, path, set(gone)):
            hits.append((code, name, gone[name], Use(gone[name], name, file, line)))
    return hits
