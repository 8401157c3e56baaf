"""A profile's ``[models]`` table made true to its pins, for check-model, which and plan.

A table written for the pinned vLLM and transformers is used as it is, and then nothing of
the release reader is loaded: the scanner is asked for (``scanner()``) only when a table is
stale, so the common case, a current shipped profile, starts no index session and imports
neither the registry nor the index pages (benchmarks/speed.py, docs/benchmarks.md).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from packaging.version import Version

from envkit.io.escaping import shell_command
from envkit.profiles.bounds import Bound
from envkit.profiles.profile import Models, Profile

if TYPE_CHECKING:
    from envkit.releases.registry import Scanner


def transformers_bounds(scanner: Scanner, vllm: Version) -> dict[str, Bound]:
    """vLLM's test-registry bounds for ``vllm`` (imported here: a profile whose table is
    current reads none, and the test registry brings archive reading with it)."""
    from envkit.releases.testregistry import transformers_bounds as read

    return read(scanner, vllm)


def current_models(profile: Profile, scanner: Callable[[], Scanner]) -> tuple[Profile, str]:
    """The profile with a ``[models]`` table true to its pins: as written when it names the
    pinned vLLM and transformers, or was never scanned (judged as "profile-not-scanned", not
    rescanned behind the user's back), or the pair is not pinned exactly; else scanned from
    those releases with ``scanner()`` (NetworkError when they cannot be read: never a
    verdict), with a note saying the table is stale."""
    pair = profile.pair()
    table = profile.models
    if not table.vllm or pair is None or (table.vllm, table.transformers) == pair:
        return profile, ""
    vllm, transformers = pair
    reader = scanner()
    v = reader.scan("vllm", Version(vllm))
    t = reader.scan("transformers", Version(transformers))
    bounds = transformers_bounds(reader, Version(vllm))
    fresh = Models(
        vllm=v.version,
        transformers=t.version,
        model_types=tuple(sorted(set(v.model_types) | set(t.model_types))),
        vllm_model_types=tuple(sorted(v.model_types)),
        architectures=tuple(sorted(v.architectures)),
        previously_supported=dict(v.previously_supported),
        out_of_tree=dict(v.out_of_tree),
        transformers_bounds={a: b for a, b in bounds.items() if b.excludes(t.version)},
        source=f"{v.wheel}; {t.wheel}",
    )
    note = (
        f"the [models] table of {profile.name} is stale (it is for vLLM {table.vllm or '?'} + "
        f"transformers {table.transformers or '?'}, the pins are {vllm} + {transformers}); "
        f"answered from the pinned releases: "
        f"{shell_command(['envkit', 'scan', '--update', profile.name])} rewrites it"
    )
    return dataclasses.replace(profile, models=fresh), note


def lazy_scanner(index: str | None, progress: Callable[[str], None]) -> Callable[[], Scanner]:
    """A scanner of ``index`` (``--index-url``, checked now: a bad option is refused whether
    or not a table turns out stale) made the first time it is asked for, then the same one."""
    from envkit.io.urls import index_url

    url = index_url(index)

    @functools.cache
    def scanner() -> Scanner:
        from envkit.releases.registry import Scanner

        return Scanner(url, progress=progress)

    return scanner
