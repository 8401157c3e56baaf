"""What a vLLM or transformers release can load, read from its published wheel.

vLLM: the model registry (``vllm/model_executor/models/registry.py``; ``models/__init__.py``
or ``model_loader.py`` in older releases), its own config classes (``_CONFIG_REGISTRY`` in
``vllm/transformers_utils/config.py``), the architectures it dropped
(``_PREVIOUSLY_SUPPORTED_MODELS``) or moved to plugins (``_OOT_SUPPORTED_MODELS``).
transformers: ``CONFIG_MAPPING_NAMES`` of ``models/auto/configuration_auto.py`` (and of the
generated ``auto_mappings.py`` in newer 5.x). Both: the requirement metadata.

Sources are parsed with ``ast`` (releases/asttables.py), never imported. Results are cached per
release
in envkit's cache folder (``$ENVKIT_CACHE_DIR`` or the platform's user cache).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit.errors import BadInput, WheelError
from envkit.index.metadata import parse as parse_metadata
from envkit.index.session import IndexSession
from envkit.io.cache import SCANS, BadEntry, Fields
from envkit.io.urls import index_key
from envkit.profiles.bounds import Bound
from envkit.releases.asttables import OPAQUE, SourceError, module_tables

if TYPE_CHECKING:  # a scan from the cache reads no index page and makes no client
    from envkit.io.http import Http

VLLM_REGISTRY = "vllm/model_executor/models/registry.py"
VLLM_OLD_REGISTRY = "vllm/model_executor/models/__init__.py"
VLLM_LOADER = "vllm/model_executor/model_loader.py"
VLLM_CONFIG = "vllm/transformers_utils/config.py"
# Where each generation of vLLM keeps its registry, newest first: (file, table names).
VLLM_LAYOUTS = (
    (VLLM_REGISTRY, ("_VLLM_MODELS",)),
    (VLLM_OLD_REGISTRY, ("_VLLM_MODELS", "_MODELS")),
    (VLLM_LOADER, ("_MODEL_REGISTRY",)),
)
TF_CONFIG_AUTO = "transformers/models/auto/configuration_auto.py"
TF_AUTO_MAPPINGS = "transformers/models/auto/auto_mappings.py"
SCANNABLE = ("vllm", "transformers")


@dataclass(frozen=True, kw_only=True)
class Scan:
    """What one release can load, and where that was read."""

    project: str
    version: str
    architectures: tuple[str, ...] = ()  # vLLM: the model registry's keys
    model_types: tuple[str, ...] = ()  # vLLM: its own config classes; transformers: all
    previously_supported: Mapping[str, str] = field(default_factory=dict)
    out_of_tree: Mapping[str, str] = field(default_factory=dict)
    requires: Mapping[str, str] = field(default_factory=dict)  # name -> specifier
    requires_python: str = ""
    # vLLM: architecture -> its transformers bound from the release's test registry; filled
    # by with_bounds (read from the sdist, cached apart from the wheel scan)
    transformers_bounds: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    wheel: str = ""
    wheel_bytes: int = 0
    bytes_read: int = 0
    requests: int = 0
    seconds: float = 0.0
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["architectures"] = list(self.architectures)
        data["model_types"] = list(self.model_types)
        return data

    @classmethod
    def from_entry(cls, f: Fields) -> Scan:
        """A scan as the cache holds it, every field checked (BadEntry otherwise)."""
        project, version = f.text("project"), f.text("version")
        if project not in SCANNABLE or str(Version(version)) != version:
            raise BadEntry(f"{project} {version} is not a release envkit scans")
        bounds = f.table_map("transformers_bounds")
        return cls(
            project=project,
            version=version,
            architectures=f.texts("architectures", ()),
            model_types=f.texts("model_types", ()),
            previously_supported=f.text_map("previously_supported"),
            out_of_tree=f.text_map("out_of_tree"),
            requires=f.text_map("requires"),
            requires_python=f.text("requires_python", ""),
            transformers_bounds={
                arch: Bound.from_entry(arch, b).to_dict() for arch, b in bounds.items()
            },
            wheel=f.text("wheel", ""),
            wheel_bytes=f.whole("wheel_bytes", 0),
            bytes_read=f.whole("bytes_read", 0),
            requests=f.whole("requests", 0),
            seconds=f.number("seconds", 0.0),
            cached=True,
        )


def with_bounds(scan: Scan, bounds: Mapping[str, Bound]) -> Scan:
    """The scan with vLLM's per-architecture transformers bounds added."""
    table = {k: b.to_dict() for k, b in sorted(bounds.items())}
    return dataclasses.replace(scan, transformers_bounds=table)


def parse_target(text: str) -> tuple[str, Version]:
    """``vllm==0.8.5`` -> (``vllm``, 0.8.5). Raises BadInput for anything else."""
    try:
        req = Requirement(text)
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            raise ValueError
        version = Version(specs[0].version)
    except (InvalidRequirement, InvalidVersion, ValueError):
        raise BadInput(
            f"{text!r} is not an exact release such as vllm==0.8.5.",
            "Scan one release at a time: envkit scan vllm==0.8.5 or transformers==4.51.3.",
        ) from None
    name = canonicalize_name(req.name)
    if name not in SCANNABLE:
        raise BadInput(f"envkit scans vllm and transformers, not {req.name!r}.")
    return name, version


def _key(project: str, version: Version | str, index: str) -> str:
    return f"{project}-{version}.{index_key(index)}"


def load_cached(project: str, version: Version, index: str) -> Scan | None:
    """The cached scan of a release from ``index``; None when there is none or it is bad."""
    scan = SCANS.load(_key(project, version, index), Scan.from_entry)
    same = scan is not None and (scan.project, scan.version) == (project, str(version))
    return scan if same else None


def _store(scan: Scan, index: str) -> None:
    SCANS.store(_key(scan.project, scan.version, index), scan.to_dict())


class Scanner(IndexSession):
    """An index session that also reads what each release can load, with the per-release
    cache (and keeps each scan in memory for the run)."""

    def __init__(
        self,
        index: str,
        *,
        use_cache: bool = True,
        http: Http | None = None,
        progress: Callable[[str], None] = lambda _m: None,
    ) -> None:
        super().__init__(index, use_cache=use_cache, http=http, progress=progress)
        self._scans: dict[tuple[str, Version], Scan] = {}  # read once per run
        self._metadata: dict[tuple[str, Version], str] = {}

    def metadata(self, project: str, version: Version) -> str:
        """The METADATA of the release's wheel, read by range once a run, or kept from the
        scan that read it ('' when the wheel has none). Raises WheelError, NetworkError."""
        key = (project, version)
        if key not in self._metadata:
            from envkit.index.wheels import RemoteZip

            self.progress(f"reading {project} {version}'s requirements from its wheel")
            archive = RemoteZip(self.pick(project, version).url, self.http)
            meta = _metadata_member(archive.members)
            text = archive.read([meta]).get(meta, b"") if meta else b""
            self._metadata[key] = text.decode("utf-8", "replace")
        return self._metadata[key]

    def scan(self, project: str, version: Version) -> Scan:
        key = (project, version)
        if key not in self._scans:
            self._scans[key] = self._scan(project, version)
        return self._scans[key]

    def _scan(self, project: str, version: Version) -> Scan:
        if self.use_cache:
            cached = load_cached(project, version, self.index)
            if cached is not None:
                return cached
        self.progress(f"reading {project} {version} from its wheel")
        start = time.monotonic()
        before = (self.http.traffic.bytes, self.http.traffic.requests)
        from envkit.index.wheels import RemoteZip  # a scan from the cache reads no wheel

        wheel = self.pick(project, version)
        archive = RemoteZip(wheel.url, self.http)
        meta = _metadata_member(archive.members)
        wanted = [*(p for p, _n in VLLM_LAYOUTS), VLLM_CONFIG, TF_CONFIG_AUTO, TF_AUTO_MAPPINGS]
        files = archive.read([*(n for n in wanted if n.startswith(project + "/")), meta])
        texts = {k: v.decode("utf-8", "replace") for k, v in files.items()}
        found = scan_vllm(texts) if project == "vllm" else scan_transformers(texts)
        self._metadata[(project, version)] = texts.get(meta, "")  # read once: metadata()
        requires, requires_python = requirements(self._metadata[(project, version)])
        result = Scan(
            project=project,
            version=str(version),
            requires=requires,
            requires_python=requires_python,
            wheel=wheel.filename,
            wheel_bytes=wheel.size or 0,
            bytes_read=self.http.traffic.bytes - before[0],
            requests=self.http.traffic.requests - before[1],
            seconds=round(time.monotonic() - start, 3),
            **found,
        )
        _store(result, self.index)
        return result


def scan_vllm(texts: Mapping[str, str]) -> dict[str, Any]:
    """Registry facts from vLLM source files (path -> text)."""
    registry: dict[str, Any] = {}
    models: dict[str, Any] | None = None
    for path, names in VLLM_LAYOUTS:
        if path in texts:
            registry = _tables(texts[path], path)
            if any(isinstance(registry.get(n), dict) or registry.get(n) is OPAQUE for n in names):
                models = _table(registry, names, path)
                break
    if models is None:
        raise WheelError(
            "The wheel has no model registry where envkit looks ("
            + ", ".join(path for path, _n in VLLM_LAYOUTS)
            + ").",
            "This vLLM release lays out its registry in a way envkit does not know.",
        )
    configs: dict[str, Any] = {}
    if VLLM_CONFIG in texts:
        configs = _table(_tables(texts[VLLM_CONFIG], VLLM_CONFIG), ("_CONFIG_REGISTRY",), "")
    return {
        "architectures": tuple(sorted(models)),
        "model_types": tuple(sorted(configs)),
        "previously_supported": _str_table(registry.get("_PREVIOUSLY_SUPPORTED_MODELS")),
        "out_of_tree": _str_table(registry.get("_OOT_SUPPORTED_MODELS")),
    }


def scan_transformers(texts: Mapping[str, str]) -> dict[str, Any]:
    """Model types from transformers source files (path -> text)."""
    if TF_CONFIG_AUTO not in texts:
        raise WheelError(
            f"The wheel has no {TF_CONFIG_AUTO}.",
            "This transformers release lays out its auto mappings differently.",
        )
    imports = {}
    if TF_AUTO_MAPPINGS in texts:
        imports["auto_mappings"] = _tables(texts[TF_AUTO_MAPPINGS], TF_AUTO_MAPPINGS)
    tables = _tables(texts[TF_CONFIG_AUTO], TF_CONFIG_AUTO, imports)
    names = _table(tables, ("CONFIG_MAPPING_NAMES",), TF_CONFIG_AUTO)
    return {"model_types": tuple(sorted(names))}


def _tables(text: str, path: str, imports: Mapping[str, Any] | None = None) -> dict[str, Any]:
    try:
        return module_tables(text, imports=imports, filename=path)
    except SourceError as exc:
        raise WheelError(str(exc)) from None


def _table(tables: Mapping[str, Any], names: tuple[str, ...], path: str) -> dict[str, Any]:
    for name in names:
        value = tables.get(name)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
        if value is OPAQUE:
            raise WheelError(
                f"{path}: {name} is built in a way envkit cannot read as data.",
                "Report it; envkit parses these tables without running vLLM's code.",
            )
    if not path:
        return {}
    raise WheelError(f"{path} has no table named {' or '.join(names)}.")


def _str_table(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}


def requirements(metadata: str) -> tuple[dict[str, str], str]:
    """The torch, transformers, tokenizers, torchvision and torchaudio a wheel's METADATA
    text requires (name -> specifier), and its Requires-Python (``index.metadata``)."""
    if not metadata:
        return {}, ""
    headers = parse_metadata(metadata)
    out: dict[str, str] = {}
    for req in dependencies(headers.requires_dist):
        name = canonicalize_name(req.name)
        if name in ("torch", "transformers", "tokenizers", "torchvision", "torchaudio"):
            spec = str(req.specifier)
            out[name] = f"{out[name]},{spec}" if name in out and spec else spec or out.get(name, "")
    return out, headers.requires_python


def dependencies(requires_dist: Iterable[str]) -> Iterator[Requirement]:
    """A METADATA's ``Requires-Dist`` lines as requirements, extras' left out (and any line
    that is no requirement: a wheel's METADATA is read as data, never trusted)."""
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or "extra" not in str(req.marker):
            yield req


def _metadata_member(members: Iterable[str]) -> str:
    """The wheel's own ``*.dist-info/METADATA`` ('' when it has none)."""
    return next((n for n in members if n.endswith(".dist-info/METADATA") and n.count("/") == 1), "")


@dataclass(frozen=True)
class ReleaseSpan:
    """The published vLLM releases whose registry lists an architecture."""

    architecture: str
    first: str  # '' when no release lists it in vLLM itself
    newest: str
    latest_release: str  # the newest vLLM release on the index, for context
    plugin: str = ""  # where the newest release says it lives now, when it moved to a plugin

    @property
    def listed(self) -> bool:
        return bool(self.newest)


def releases_listing(scanner: Scanner, architecture: str) -> ReleaseSpan | None:
    """First and newest vLLM release listing ``architecture``; None when no release lists
    it and none records it as moved to a plugin.

    The newest release is asked first. A record of a dropped architecture ("until X") is a
    hint, not an answer: the releases after X are checked until one lacks it, or X and older
    when X does not list it. An architecture the newest release knows nothing of is looked
    for in every release, newest first. The first release is then found by bisection, since
    an architecture stays in the registry from the release that adds it until it is dropped.
    """
    releases = scanner.releases("vllm")
    if not releases:
        return None
    latest = scanner.scan("vllm", releases[-1])
    plugin = latest.out_of_tree.get(architecture, "")
    if architecture in latest.architectures:
        newest: Version | None = releases[-1]
    elif architecture in latest.previously_supported:
        newest = _newest_after_record(
            scanner, releases, architecture, latest.previously_supported[architecture]
        )
    else:
        newest = next((v for v in reversed(releases) if _lists(scanner, v, architecture)), None)
    if newest is None:
        if not plugin:
            return None
        return ReleaseSpan(architecture, "", "", str(releases[-1]), plugin)
    candidates = [v for v in releases if v <= newest]
    low, high = 0, len(candidates) - 1  # candidates[high] lists it
    while low < high:
        mid = (low + high) // 2
        if _lists(scanner, candidates[mid], architecture):
            high = mid
        else:
            low = mid + 1
    return ReleaseSpan(architecture, str(candidates[high]), str(newest), str(releases[-1]), plugin)


def _newest_after_record(
    scanner: Scanner, releases: list[Version], architecture: str, recorded: str
) -> Version | None:
    """The newest release listing an architecture vLLM records as supported until
    ``recorded``: confirmed by scanning, whichever way the record is wrong."""
    try:
        until = Version(recorded)
    except InvalidVersion:
        until = releases[-1]
    after = [v for v in releases if v > until]
    upto = [v for v in reversed(releases) if v <= until]
    newest = None
    for version in after:  # the record may be too early: later releases may still list it
        if not _lists(scanner, version, architecture):
            break
        newest = version
    if newest is not None:
        return newest
    return next((v for v in upto if _lists(scanner, v, architecture)), None)


def _lists(scanner: Scanner, version: Version, architecture: str) -> bool:
    try:
        return architecture in scanner.scan("vllm", version).architectures
    except WheelError:
        return False  # a release whose registry cannot be read is not counted
