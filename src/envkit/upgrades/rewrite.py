"""``upgrade --write``: the profile rewritten for the release it moves to, with tomlkit, so its
comments and layout stay; in one atomic write (``io.atomicfile``), under the file's lock.

What changes: the ``vllm``, ``transformers`` and ``torch`` pins (where the profile has them,
extras and markers kept; ``[verify] versions`` too),
an exact pin of another package the new vLLM's own requirement refuses (dropped: uv takes one
in that range, and the lock records it), ``[torch]`` backend and CUDA (and ``[matrix]``
backends) for the new torch's default build, ``[matrix]`` Pythons the new release refuses,
``exclude_newer`` (a week after the newest pinned release, when the profile has one), and the
``[models]`` table, scanned from the new pins. A comment above the pins says the move."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from envkit.io.atomicfile import held, write_atomic
from envkit.io.escaping import visible
from envkit.io.files import read_small_text
from envkit.models.drafts import models_table
from envkit.profiles.profile import MAX_PROFILE_BYTES, Profile, load_profile, minor_fits
from envkit.releases.registry import Scanner
from envkit.upgrades.target import Move


def _pin_for(text: str, move: Move) -> str | None:
    """The entry ``text`` of requirements or constraints after the move (None: dropped)."""
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return text
    name = canonicalize_name(req.name)
    new = move.new
    exact = {"vllm": new.vllm.version, "transformers": new.transformers.version}
    if new.torch:
        exact["torch"] = new.torch
    if name in exact:
        if any(s.operator in ("==", "===") for s in req.specifier):
            extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            marker = f"; {req.marker}" if req.marker else ""
            return f"{req.name}{extras}=={exact[name]}{marker}"
        return text
    needs = new.vllm.requires.get(name, "")
    pinned = [s.version for s in req.specifier if s.operator == "=="]
    try:
        if pinned and needs and not SpecifierSet(needs).contains(pinned[0], prereleases=True):
            return None
    except InvalidSpecifier:
        pass
    return text


def pinned(profile: Profile, move: Move) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The requirements and constraints after the move."""

    def each(entries: Iterable[str]) -> tuple[str, ...]:
        return tuple(p for t in entries if (p := _pin_for(t, move)) is not None)

    return each(profile.requirements), each(profile.constraints)


def moved_profile(profile: Profile, move: Move) -> Profile:
    """The profile as the move leaves it, in memory (for lint against the new release)."""
    requirements, constraints = pinned(profile, move)
    return dataclasses.replace(profile, requirements=requirements, constraints=constraints)


def _backend(move: Move) -> str:
    return "cu" + move.new.cuda.replace(".", "") if move.new.cuda else ""


def backends_after(profile: Profile, move: Move) -> tuple[str, ...]:
    """The torch backends the profile's cells have after the move (a CUDA backend follows
    the new torch's default build)."""
    new, old = _backend(move), profile.torch.backend
    if not new or not old.startswith("cu"):
        return profile.matrix.backends
    return tuple(dict.fromkeys(new if b == old else b for b in profile.matrix.backends))


def _set_list(doc: Any, key: str, values: tuple[str, ...]) -> None:
    """Replace the items of the array ``doc[key]`` in place (its comments stay)."""
    array = doc[key]
    while len(array):
        array.pop()
    array.extend(values)


def _repin(array: Any, move: Move) -> None:
    """Each entry of a requirements or constraints array as the move leaves it, in place:
    the comment on an entry's line stays with it; a dropped entry goes with its comment."""
    for i in reversed(range(len(array))):
        after = _pin_for(str(array[i]), move)
        if after is None:
            del array[i]
        elif after != str(array[i]):
            array[i] = after


def write(profile: Profile, move: Move, scanner: Scanner) -> Profile:
    """Rewrite ``profile``'s file for ``move`` and return it as read back."""
    import tomlkit
    from tomlkit.items import Table

    from envkit.releases.testregistry import transformers_bounds

    path = profile.path
    bounds = transformers_bounds(scanner, _version(move.new.vllm.version))
    with held(path):
        doc = tomlkit.parse(read_small_text(path, MAX_PROFILE_BYTES, what="profile"))
        for key in ("requirements", "constraints"):
            if key in doc:
                _repin(doc[key], move)
        _torch(doc, profile, move)
        _versions(doc, move)
        _matrix(doc, profile, move)
        if "exclude_newer" in doc:
            cutoff = _cutoff(scanner, move)
            if cutoff:
                doc["exclude_newer"] = cutoff
        fresh = models_table(move.new.vllm, move.new.transformers, bounds)
        existing = doc.get("models")
        if isinstance(existing, Table):
            for key in [k for k in existing if k not in fresh]:
                del existing[key]
            for key, value in fresh.items():
                existing[key] = value
        else:
            doc.add("models", fresh)
        text = _said(tomlkit.dumps(doc), move)
        write_atomic(path, text)
    return load_profile(path, profile.name)


def _torch(doc: Any, profile: Profile, move: Move) -> None:
    backend = _backend(move)
    torch = doc.get("torch")
    old = profile.torch.backend
    if not backend or torch is None or not old.startswith("cu"):
        return
    torch["backend"] = backend
    if "cuda" in torch:
        torch["cuda"] = move.new.cuda


def _versions(doc: Any, move: Move) -> None:
    """``[verify] versions`` of the moved releases follow them (verify checks them)."""
    versions = doc.get("verify", {}).get("versions")
    if versions is None:
        return
    new = move.new
    moved = {"vllm": new.vllm.version, "transformers": new.transformers.version}
    if new.torch:
        moved["torch"] = new.torch
    for key in list(versions):
        name = canonicalize_name(str(key))
        if name in moved:
            versions[key] = moved[name]


def _matrix(doc: Any, profile: Profile, move: Move) -> None:
    matrix = doc.get("matrix")
    if matrix is None:
        return
    backend, old = _backend(move), profile.torch.backend
    if backend and "backends" in matrix and old.startswith("cu"):
        values = tuple(dict.fromkeys(backend if b == old else b for b in matrix["backends"]))
        _set_list(matrix, "backends", values)
    if "python" in matrix:
        try:
            spec = SpecifierSet(move.new.vllm.requires_python)
        except InvalidSpecifier:
            return
        keep = tuple(str(p) for p in matrix["python"] if minor_fits(spec, str(p)))
        if keep:  # none left: the lock says why, the file keeps what was asked
            _set_list(matrix, "python", keep)


def _cutoff(scanner: Scanner, move: Move) -> str:
    times = [
        scanner.upload_time("vllm", _version(move.new.vllm.version)),
        scanner.upload_time("transformers", _version(move.new.transformers.version)),
    ]
    known = [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in times if t]
    if not known:
        return ""
    return f"{(max(known) + dt.timedelta(days=7)).date().isoformat()}T00:00:00Z"


MOVED = "# Moved from"  # the line that says the last move (one: the next replaces it)


def _said(text: str, move: Move) -> str:
    """The move said in a comment line above the first key (after a ``#:schema`` line)."""
    line = MOVED + visible(
        f" vLLM {move.old.vllm.version} + transformers "
        f"{move.old.transformers.version} to vLLM {move.new.vllm.version} + transformers "
        f"{move.new.transformers.version} by envkit upgrade {move.profile.name} --write."
    )
    lines = [t for t in text.splitlines(keepends=True) if not t.startswith(MOVED)]
    at = 1 if lines and lines[0].startswith("#:schema") else 0
    return "".join([*lines[:at], line + "\n", *lines[at:]])


def _version(text: str) -> Any:
    from packaging.version import Version

    return Version(text)
