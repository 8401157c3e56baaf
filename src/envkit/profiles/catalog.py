"""Where profiles live and how a PROFILE argument becomes a file.

Profiles are ``*.toml`` files. With ``--envs DIR`` (or ``$ENVKIT_ENVS``) that one folder is
used. Otherwise envkit looks, in order, in ``./envs`` (a project's own), the user's profile
folder (``<user data dir>/envkit/envs``, by platformdirs) and the profiles shipped with
envkit, so ``envkit which MODEL`` works from any folder; a name found earlier hides the same
name later. A PROFILE argument is a profile name (the file stem) or a path to a ``.toml``
file. Each profile's published locks live in ``constraints/`` beside its folder.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.errors import BadInput, ProfileError, ProfileNotFound
from envkit.io.files import present

if TYPE_CHECKING:  # reading a profile (packaging, the validation) is imported when one is read
    from envkit.profiles.profile import Profile


def shipped_envs() -> Path:
    """The profiles that come with envkit (package data, beside their constraints)."""
    return Path(str(resources.files("envkit") / "shipped" / "envs"))


def user_envs() -> Path:
    from platformdirs import user_data_path

    return user_data_path("envkit") / "envs"


@dataclass(frozen=True)
class Catalog:
    """The folders profiles are looked up in, first match wins."""

    folders: tuple[Path, ...]
    explicit: bool  # --envs or $ENVKIT_ENVS: that folder alone, and it must exist

    @classmethod
    def from_option(cls, option: str | None = None) -> Catalog:
        chosen = option or os.environ.get("ENVKIT_ENVS")
        if chosen:
            return cls((Path(chosen),), explicit=True)
        return cls((Path("envs"), user_envs(), shipped_envs()), explicit=False)

    def existing(self) -> tuple[Path, ...]:
        if self.explicit and not self.folders[0].is_dir():
            raise BadInput(
                f"Profiles folder {str(self.folders[0])!r} does not exist.",
                "Pass --envs DIR (or set ENVKIT_ENVS) to a folder of profile files.",
            )
        found = tuple(f for f in self.folders if f.is_dir())
        if not found:
            raise BadInput(
                "No profiles folder: looked in " + ", ".join(map(str, self.folders)) + ".",
                "Run envkit from a project that holds envs/, or pass --envs DIR.",
            )
        return found

    def writable(self) -> Path:
        """Where a new profile goes: --envs, else ./envs when it exists, else the user's."""
        if self.explicit or self.folders[0].is_dir():
            return self.folders[0]
        return self.folders[1]

    def project(self) -> Catalog:
        """The one folder whose profiles ``lock --all``, ``matrix`` and ``publish --all`` work
        on (they write beside it): --envs, else ./envs when it exists, else the user's
        folder, where ``new-profile`` puts drafts when there is no ./envs. BadInput naming
        every folder looked in when none exists."""
        for folder in self.folders if self.explicit else self.folders[:2]:
            if folder.is_dir():
                return Catalog((folder,), explicit=True)
        looked = ", ".join(repr(str(f.absolute())) for f in self.folders[:2])
        raise BadInput(
            f"No profiles folder: {looked} {'does' if self.explicit else 'do'} not exist.",
            "Draft a profile (envkit new-profile NAME --for-model MODEL writes into ./envs "
            f"when it exists, else into {str(user_envs())!r}), or pass --envs DIR.",
        )

    def shipped(self, profile: Profile) -> bool:
        """Whether ``profile`` is one of envkit's shipped profiles (their locks are published
        with envkit, which never writes into its own package), unless that folder is the
        project's own (./envs or --envs: envkit's own repository)."""
        own = profile.path.resolve().parent
        return own == shipped_envs().resolve() and not any(
            f.is_dir() and f.resolve() == own for f in self.folders[:1]
        )

    def list(self) -> ProfileListing:
        """Every profile on the path (the first of each name), and every broken one."""
        from envkit.profiles.profile import load_profile

        profiles: dict[str, Profile] = {}
        errors: list[ProfileError] = []
        for folder in self.existing():
            for path in sorted(folder.glob("*.toml")):
                if path.stem in profiles:
                    continue  # hidden by a profile of that name earlier on the path
                try:
                    profiles[path.stem] = load_profile(path)
                except ProfileError as exc:
                    errors.append(exc)
        shown = self.folders[0] if self.explicit else Path(os.pathsep.join(map(str, self.folders)))
        return ProfileListing(shown, tuple(profiles.values()), tuple(errors))

    def resolve(self, argument: str) -> Profile:
        """The profile a PROFILE argument names. Raises ProfileNotFound, BadInput, ProfileError."""
        from envkit.profiles.profile import NAME_RE, load_profile

        if argument.endswith(".toml"):
            path = Path(argument)
            if not present(path):  # anything else: load_profile says
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
        folders = self.existing()
        for folder in folders:
            candidate = folder / f"{argument}.toml"
            if present(candidate):  # a FIFO is refused, not skipped
                return load_profile(candidate)
        known = sorted({p.stem for f in folders for p in f.glob("*.toml")})
        # a name cut short (vllm-0.8.5 for vllm-0.8.5+qwen2-vl) before one spelt alike; the
        # start of several names (vllm) suggests none of them over the others
        starts = [k for k in known if k.startswith(argument)]
        close = starts if len(starts) < 2 else []
        if not starts:
            close = difflib.get_close_matches(argument, known, n=1, cutoff=0.5)
        hint = f"Did you mean '{close[0]}'? " if close else ""
        where = ", ".join(repr(str(f)) for f in folders)
        raise ProfileNotFound(
            f"No profile named {argument!r} in {where}.",
            f"{hint}Profiles there: {', '.join(known) or 'none'}. "
            "Use --envs DIR or ENVKIT_ENVS to look elsewhere.",
        )


@dataclass(frozen=True)
class ProfileListing:
    """Every profile found: the valid ones and the errors of the invalid ones."""

    folder: Path  # the folder, or the search path joined with os.pathsep
    profiles: tuple[Profile, ...]
    errors: tuple[ProfileError, ...]
