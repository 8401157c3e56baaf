"""What vLLM does at start-up that a transformers release can refuse, as compat findings:
the names it registers with transformers' auto classes (registrations.py) and the config
fields its loader checks against what the release's config classes write (configfields.py).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from packaging.version import Version

from envkit import syntax
from envkit.compat.apisurface import Use
from envkit.compat.check import configfields, nestedrope, registrations
from envkit.compat.check.sources import Sources
from envkit.compat.report import Code, Incompatibility
from envkit.compat.transformers.transformers_source import TransformersRelease
from envkit.errors import WheelError
from envkit.index.wheels import RemoteZip
from envkit.io.http import Http
from envkit.releases.registry import VLLM_CONFIG

if TYPE_CHECKING:
    from envkit.releases.registry import Scanner

AUTO_MODULES = "transformers/models/auto/"
# a class at the start of a line, the text read with a newline before it (a literal first
# is searched far faster than ``^`` at every line)
_CLASS = re.compile(rb"\nclass[ \t]+(\w+)")
Registration = registrations.Registration


def registrations_refused(
    scanner: Scanner, sources: Sources, target: TransformersRelease, undecided: set[str]
) -> list[Registration]:
    """The registrations that raise with the target release (what cannot be told is added
    to ``undecided``)."""
    found = []
    for path, data in sources.texts.items():
        # ``.register(`` first: every match holds it, and it is found far faster
        wanted = b".register(" in data and registrations.REGISTERS.search(data)
        tree = sources.tree(path) if wanted else None
        if tree is not None:
            found.extend(registrations.registrations(tree, path, partial(_dead, sources, path)))
    if not found:
        return []
    autos: dict[str, bytes] = {}

    def auto_modules() -> Mapping[str, bytes]:
        if not autos:
            wanted = [n for n in target.zip.members if n.startswith(AUTO_MODULES)]
            autos.update(target.zip.read(n for n in wanted if n.endswith(".py")))
        return autos

    types = frozenset(scanner.scan("transformers", target.version).model_types)
    tables = registrations.Tables(types, auto_modules)
    out = []
    for registration in found:
        verdict = tables.clashes(registration)
        if verdict is None:
            undecided.add(f"{registration.kind}.register({registration.key})")
        elif verdict:
            out.append(registration)
    return out


def _dead(sources: Sources, path: str, line: int) -> bool:
    return not sources.live(path, line)


def clash_hits(clashes: Iterable[Registration]) -> list[tuple[Code, str, str, Use]]:
    out = []
    for r in clashes:
        module = f"transformers.{r.kind}"
        out.append((Code.REGISTRATION_CLASH, r.key, module, Use(module, r.key, r.file, r.line)))
    return out


def dated(
    scanner: Scanner,
    findings: tuple[Incompatibility, ...],
    clashes: list[Registration],
    transformers: Version,
) -> tuple[Incompatibility, ...]:
    """Registration clashes with the first release owning the name (by bisection over the
    releases' scans, each cached) and what happens at run time."""
    by_key = {r.key: r for r in clashes}
    releases = [v for v in scanner.releases("transformers") if v <= transformers]

    def owns(version: Version, model_type: str) -> bool | None:
        try:
            return model_type in scanner.scan("transformers", version).model_types
        except WheelError:
            return False  # a release whose tables cannot be read predates the layout

    out = []
    for finding in findings:
        registration = by_key.get(finding.name)
        if finding.code is Code.REGISTRATION_CLASH and registration is not None:
            taken = ""
            if not registration.by_class:
                taken = registrations.first_owner(
                    registration.key, releases, partial(owns, model_type=registration.key)
                )
            finding = dataclasses.replace(
                finding,
                taken_in=taken,
                detail=registrations.describe(registration, str(transformers)),
            )
        out.append(finding)
    return tuple(out)


def config_modules(url: str, http: Http) -> dict[str, bytes]:
    """The config modules of a transformers wheel (``models/*/configuration_*.py``), read
    through a zip of their own so that they come beside the other reads."""
    archive = RemoteZip(url, http)
    return archive.read(n for n in archive.members if configfields.CONFIG_MODULE.fullmatch(n))


def config_classes(modules: Mapping[str, bytes]) -> frozenset[str]:
    """The classes the config modules of :func:`config_modules` define."""
    return frozenset(m.decode() for text in modules.values() for m in _CLASS.findall(b"\n" + text))


def config_conflicts(
    sources: Sources, transformers: str, modules: Mapping[str, bytes]
) -> tuple[Incompatibility, ...]:
    """Config fields vLLM's loader refuses after the release's config classes (``modules``,
    from :func:`config_modules`) rewrote them, scoped to each config module's model types:
    one finding per conflict (``rope_type=longrope with type=yarn``), naming every config
    module that writes it."""
    tree = sources.tree(VLLM_CONFIG)
    rules = [
        r
        for r in (configfields.vllm_rules(tree, VLLM_CONFIG) if tree else [])
        if sources.live(r.file, r.line)
    ]
    grouped: dict[str, list[tuple[configfields.KeyRule, configfields.Rewrite, str]]] = {}
    for rule in rules:
        marker = f'["{rule.modern}"] ='.encode()
        found = [
            rewrite
            for path, text in sorted(modules.items())
            if marker in text and (parsed := _parse(text)) is not None
            for rewrite in configfields.rewrites(parsed, path, rule.modern, rule.legacy)
        ]
        for rewrite, failing in configfields.conflicts(rule, found):
            values = "/".join(failing)
            name = f"{rule.modern}={rewrite.new} with {rule.legacy}={values}"
            grouped.setdefault(name, []).append((rule, rewrite, values))
    out = tuple(_conflict(name, seen, transformers) for name, seen in grouped.items())
    return out + _nested(sources, transformers, modules)


def _nested(
    sources: Sources, transformers: str, modules: Mapping[str, bytes]
) -> tuple[Incompatibility, ...]:
    """RoPE dicts nested by layer type that vLLM's loader refuses whole (nestedrope.py)."""
    tree = sources.tree(VLLM_CONFIG)
    out = []
    for rule in nestedrope.required_keys(tree, VLLM_CONFIG) if tree else []:
        if not sources.live(rule.file, rule.line):
            continue
        marker = f'"{rule.key}"'.encode()
        found = [
            nested
            for path, text in sorted(modules.items())
            if marker in text and (parsed := _parse(text)) is not None
            for nested in nestedrope.nested_dicts(parsed, path, rule.key)
        ]
        if not found:
            continue
        writers = ", ".join(dict.fromkeys(f"{n.file.rpartition('/')[2]}:{n.line}" for n in found))
        layers = "/".join(dict.fromkeys(t for n in found for t in n.layer_types))
        out.append(
            Incompatibility(
                code=Code.CONFIG_CONFLICT,
                name=f"{rule.key} missing from a RoPE dict nested by layer type",
                module=found[0].file[:-3].replace("/", "."),
                file=rule.file,
                line=rule.line,
                detail=(
                    f"transformers {transformers} writes one RoPE dict per layer type "
                    f"({layers}; {writers}) with no {rule.key!r} of its own; vLLM's "
                    f"{rule.function} refuses a dict without {rule.key!r}: every config of "
                    "these model types fails to load"
                ),
                model_types=tuple(sorted({t for n in found for t in n.model_types})),
            )
        )
    return tuple(out)


def _conflict(
    name: str,
    seen: list[tuple[configfields.KeyRule, configfields.Rewrite, str]],
    transformers: str,
) -> Incompatibility:
    rule, rewrite, values = seen[0]
    writers = list(dict.fromkeys(f"{w.file.rpartition('/')[2]}:{w.line}" for _r, w, _v in seen))
    return Incompatibility(
        code=Code.CONFIG_CONFLICT,
        name=name,
        module=rewrite.file[:-3].replace("/", "."),
        file=rule.file,
        line=rule.line,
        places=len({(r.file, r.line) for r, _w, _v in seen}),
        detail=(
            f"transformers {transformers} writes {rule.modern}={rewrite.new!r} for "
            f"{rule.legacy}={values} ({', '.join(writers)}) and keeps "
            f"{rule.legacy!r}; vLLM refuses the two differing: a checkpoint giving "
            f"{rule.legacy}={values} fails to load"
        ),
        model_types=tuple(sorted({t for _r, w, _v in seen for t in w.model_types})),
        config_key=rule.legacy,
        config_values=tuple(values.split("/")),
    )


def _parse(text: bytes) -> ast.Module | None:
    try:
        return syntax.parse_module(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
