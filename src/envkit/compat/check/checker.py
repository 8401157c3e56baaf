"""``envkit compat``: the transformers API a vLLM release uses and a transformers release lacks.

Read from the two published wheels before anything is installed (range reads of the source
files, parsed with ``ast``; apisurface.py), the answer has these kinds of finding:

- ``missing-module``: vLLM imports a transformers module the release does not have;
- ``missing-name``: vLLM imports a name the module does not provide;
- ``removed-attribute``: vLLM reads ``obj.name`` where ``name`` is defined by the classes of
  the transformers release vLLM was released against (the *reference*: the newest release
  within vLLM's declared range published before the vLLM wheel) and by no class of the
  checked release;
- ``registration-clash``: vLLM registers a name with an auto class that the checked release
  owns (registrations.py), with the first release that took it.

Code the checked release cannot run (guards.py: conditions on its version, flags computed
from it, ``hasattr`` and ``find_spec`` probes) raises nothing. A finding breaks what loads
the code (loading.py): vLLM as a whole, or only the architectures and model types whose
files import it. What cannot be decided from source is left out and counted, never guessed.
Reports are cached per pair and index (report.py).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from envkit.compat import apisurface, receivers
from envkit.compat.apisurface import Use
from envkit.compat.check import startup
from envkit.compat.check.sources import ReleaseProbe, Sources
from envkit.compat.report import Code, CompatReport, Declared, Incompatibility, load_cached, store
from envkit.compat.transformers import modeldefined
from envkit.compat.transformers.transformers_source import TransformersRelease
from envkit.compat.vllm.loading import MODELS_DIR, Loaders, Scope
from envkit.errors import WheelError
from envkit.index.pages import WheelFile
from envkit.index.wheels import RemoteZip
from envkit.io import interrupts
from envkit.releases import modeltypes
from envkit.releases.registry import Scanner, requirements

__all__ = ["Checker", "Code", "CompatReport", "Incompatibility", "store"]
_BUILTIN_NAMES = frozenset(
    n for kind in (dict, list, str, bytes, set, tuple, int, float, object) for n in dir(kind)
)
Hit = tuple[Code, str, str, Use]


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
) -> tuple[list[Hit], list[Use]]:
    """``(code, name, module, use)`` for each failing import; the uses left undecided."""
    out: list[Hit] = []
    undecided: list[Use] = []
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
            undecided.append(use)
    return out, undecided


def group(hits: Iterable[Hit], scope: Callable[[Use], Scope]) -> tuple[Incompatibility, ...]:
    """One finding per (code, name): its first place, how many places, and what it breaks
    (vLLM as a whole when any place is loaded by vLLM as a whole)."""
    places: dict[tuple[Code, str, str], list[Use]] = defaultdict(list)
    for code, name, module, use in hits:
        places[(code, name, module)].append(use)
    findings = []
    for (code, name, module), uses in places.items():
        uses.sort(key=lambda u: (u.file.startswith(MODELS_DIR), u.file, u.line))
        narrow = Scope.union(scope(u) for u in uses)
        findings.append(
            Incompatibility(
                code=code,
                name=name,
                module=module,
                file=uses[0].file,
                line=uses[0].line,
                places=len(uses),
                architectures=narrow.architectures,
                model_types=narrow.model_types,
                processors=narrow.processors,
                conditions=narrow.conditions,
            )
        )
    findings.sort(key=lambda f: (not f.everywhere, f.code.value, f.name))
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
            apisurface.steady_heap()
            with apisurface.collector_paused():  # the trees of a check held to its end
                report = self._check(vllm, transformers)
            store(report, self.index)
        return report

    def _serving(
        self,
        findings: tuple[Incompatibility, ...],
        transformers: Version,
        registered: frozenset[str],
    ) -> tuple[Incompatibility, ...]:
        """Findings that break model types name the architectures of vLLM's registry that
        serve them too (transformers' auto model tables, and the classes named after them:
        releases.modeltypes)."""
        if not any(f.model_types for f in findings):
            return findings
        try:
            tables = modeltypes.model_types(self, transformers)
        except WheelError:
            tables = {}
        out = []
        for f in findings:
            serving = {a for t in f.model_types for a in modeltypes.serving(t, tables, registered)}
            found = tuple(sorted((serving & registered) | set(f.architectures)))
            out.append(dataclasses.replace(f, architectures=found) if f.model_types else f)
        return tuple(out)

    def _check(self, vllm: Version, transformers: Version) -> CompatReport:
        start = time.monotonic()
        before = (self.http.traffic.bytes, self.http.traffic.requests)
        self.progress(f"reading vLLM {vllm}'s sources and transformers {transformers}'s")
        with interrupts.thread_pool(4) as pool:  # three wheels read side by side
            listings = {p: pool.submit(self.files, p) for p in ("vllm", "transformers")}
            listings["vllm"].result()  # listed: the pick below reads no page
            vwheel = self.pick("vllm", vllm)
            read = pool.submit(lambda: _vllm_sources(RemoteZip(vwheel.url, self.http)))
            listings["transformers"].result()
            twheel = self.pick("transformers", transformers)
            opened = pool.submit(self._open, twheel, False, [])
            configs = pool.submit(startup.config_modules, twheel.url, self.http)
            texts = read.result()
            meta = next((p for p in texts if p.endswith(".dist-info/METADATA")), "")
            declared = requirements(texts.pop(meta, b"").decode("utf-8", "replace"))[0]
            spec = declared.get("transformers", "")
            reference = reference_release(self.files("transformers"), spec, vwheel.upload_time)
            sources = Sources(texts)
            uses = [u for path, data in texts.items() for u in apisurface.imports_in(data, path)]
            starts = _classes(uses)
            against = None
            if reference is not None and reference != transformers:
                rwheel = self.pick("transformers", reference)
                against = pool.submit(self._open, rwheel, True, starts)
            loaders = pool.submit(Loaders, texts)
            target = opened.result()
            target.config_classes = startup.config_classes(configs.result())
            target.load({u.module for u in uses})
            target.members_of(starts)
            wheels = [vwheel, twheel]
            ref = against.result() if against is not None else None
            undecided: set[str] = set()
            gone = surely_gone(texts, uses, ref, target, configs.result(), undecided)
            shared = receivers.defined_by_vllm(texts, gone)
            # what the release's classes surely lack: a probe of it answers False
            sources.probe = ReleaseProbe(target, frozenset(gone) - shared)
            hits, unsure = import_findings(uses, target)
            hits = [h for h in hits if sources.live(h[3].file, h[3].line)]
            undecided |= {u.module for u in unsure if sources.live(u.file, u.line)}
            refused = sources.refusals()
            for file, line, _message in refused:
                said = f"transformers {transformers}"
                hits.append((Code.REFUSED_RELEASE, said, "", Use("", said, file, line)))
            clashes = startup.registrations_refused(self, sources, target, undecided)
            hits.extend(startup.clash_hits(clashes))
            if ref is not None:
                wheels.append(ref.wheel)
                code = Code.REMOVED_ATTRIBUTE if transformers > ref.version else None
                hits.extend(attribute_hits(sources, gone, shared, code, undecided))
            where = loaders.result()
            findings = group(hits, lambda use: sources.scope(where, use))
            findings = startup.dated(self, findings, clashes, transformers)
            findings = _said(findings, {(f, n): m for f, n, m in refused})
            findings += startup.config_conflicts(sources, str(transformers), configs.result())
            findings = self._serving(findings, transformers, where.architectures)
        report = CompatReport(
            vllm=str(vllm),
            transformers=str(transformers),
            reference=str(reference or ""),
            declared=Declared.of(spec, transformers),
            findings=findings,
            imports_checked=len(uses),
            undecided=tuple(sorted(undecided)),
            wheels=tuple(w.filename for w in wheels),
            wheel_bytes=(vwheel.size or 0) + (twheel.size or 0),
            bytes_read=self.http.traffic.bytes - before[0],
            requests=self.http.traffic.requests - before[1],
            seconds=round(time.monotonic() - start, 3),
        )
        return report


def _said(
    findings: tuple[Incompatibility, ...], messages: Mapping[tuple[str, int], str]
) -> tuple[Incompatibility, ...]:
    """Refusals with what vLLM raises (its message, cut at a sentence's length)."""
    out = []
    for f in findings:
        said = messages.get((f.file, f.line), "") if f.code is Code.REFUSED_RELEASE else ""
        out.append(dataclasses.replace(f, detail=f"vLLM raises: {said[:200]}") if said else f)
    return tuple(out)


def _vllm_sources(archive: RemoteZip) -> dict[str, bytes]:
    wanted = [
        n
        for n in archive.members
        if (n.startswith("vllm/") and n.endswith(".py"))
        or (n.endswith(".dist-info/METADATA") and n.count("/") == 1)
    ]
    return archive.read(wanted)


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


def _read_pattern(names: Iterable[str]) -> re.Pattern[bytes]:
    return re.compile(rb"\.(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names)) + rb")\b")


def surely_gone(
    texts: Mapping[str, bytes],
    uses: list[Use],
    reference: TransformersRelease | None,
    target: TransformersRelease,
    configs: Mapping[str, bytes],
    undecided: set[str],
) -> dict[str, str]:
    """:func:`removed_members`, but for the names vLLM reads that a model-specific class of
    the target defines (modeldefined.py): those are added to ``undecided``."""
    gone = removed_members(uses, reference, target) if reference is not None else {}
    if not gone:
        return gone
    pattern = _read_pattern(gone)
    read = {m.group(0)[1:].decode() for data in texts.values() for m in pattern.finditer(data)}
    for name in modeldefined.defined_by_models(target, gone, read, configs):
        undecided.add(f"{name} (a model's own class in transformers {target.version} has it)")
        del gone[name]
    return gone


def attribute_hits(
    sources: Sources,
    gone: dict[str, str],
    shared: set[str],
    code: Code | None,
    undecided: set[str],
) -> list[Hit]:
    """Reads in vLLM (``obj.name``) of the names :func:`removed_members` found gone, on
    lines the target release can run, as ``code`` (missing-attribute when None: the target
    is older). A name vLLM defines too (``shared``) counts only where the receiver is typed
    as transformers' (receivers.py); its other reads are added to ``undecided``."""
    if not gone:
        return []
    pattern = _read_pattern(gone)
    code = code or Code.MISSING_ATTRIBUTE
    hits = []
    for path, data in sources.texts.items():
        if not pattern.search(data):
            continue
        tree = sources.tree(path)
        if tree is None:
            continue
        reads = apisurface.attribute_reads(tree, path, set(gone))
        typed = receivers.typed_reads(tree, shared, sources.types(path)) if shared else set()
        for name, file, line in reads:
            if not sources.live(file, line):
                continue
            if name in shared and (name, line) not in typed:
                undecided.add(f"{name} (vLLM defines it too)")
                continue
            hits.append((code, name, gone[name], Use(gone[name], name, file, line)))
    return hits
