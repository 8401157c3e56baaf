"""Where profiles live and how a PROFILE argument becomes a file.

Profiles are ``*.toml`` files in one folder: ``--envs DIR``, else ``$ENVKIT_ENVS``, else
``./envs``. A PROFILE argument is a profile name (the file stem) or a path to a ``.toml`` file.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import BadInput, ProfileError, ProfileNotFound
from .profile import NAME_RE, Profile, load_profile


def envs_dir(option: str | None = None) -> Path:
    """The profiles folder: the option, then ``$ENVKIT_ENVS``, then ``./envs``."""
    return Path(option or os.environ.get("ENVKIT_ENVS") or "envs")


@dataclass(frozen=True)
class ProfileListing:
    """Every profile in a folder: the valid ones and the errors of the invalid ones."""

    folder: Path
    profiles: tuple[Profile, ...]
    errors: tuple[ProfileError, ...]


def list_profiles(folder: Path) -> ProfileListing:
    if not folder.is_dir():
        raise BadInput(
            f"Profiles folder {str(folder)!r} does not exist.",
            "Run envkit from the project that holds envs/, or pass --envs DIR "
            "(or set ENVKIT_ENVS).",
        )
    profiles: list[Profile] = []
    errors: list[ProfileError] = []
    for path in sorted(folder.glob("*.toml")):
        try:
            profiles.append(load_profile(path))
        except ProfileError as exc:
            errors.append(exc)
    return ProfileListing(folder, tuple(profiles), tuple(errors))


def resolve_profile(argument: str, folder: Path) -> Profile:
    """Load the profile a PROFILE argument names. Raises ProfileNotFound, BadInput, ProfileError."""
    if argument.endswith(".toml"):
        path = Path(argument)
        if not path.is_file():
            raise ProfileNotFound(
                f"Profile file {argument!r} does not exist.",
                "Check the path, or give a profile name from `envkit profiles`.",
            )
        return load_profile(path)
    if not NAME_RE.fullmatch(argument) or argument in (".", ".."):
        raise BadInput(
            f"{argument!r} is not a profile name: names hold only letters, digits, "
            "'.', '_', '+' and '-' (no '/' or '..').",
            "Give a name from `envkit profiles`, or a path to a file ending in .toml.",
        )
    path = folder / f"{argument}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []
        close = difflib.get_close_matches(argument, known, n=1, cutoff=0.5)
        hint = f"Did you mean '{close[0]}'? " if close else ""
        where = f"Profiles in {str(folder)!r}: {', '.join(known) or 'none'}."
        raise ProfileNotFound(
            f"No profile named {argument!r} in {str(folder)!r}.",
            f"{hint}{where} Use --envs DIR or ENVKIT_ENVS to look elsewhere.",
        )
    return load_profile(path)
