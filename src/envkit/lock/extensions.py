"""At lock time, every locked package whose wheel links torch, checked against the torch the
cell pins: an ABI mismatch (flash-attn built for torch 2.6 beside torch 2.7) refuses the
cell before anything is installed, instead of ``undefined symbol`` at import on the GPU host.

For each package of the cell's pylock but torch whose wheel is built for a platform (a
``none-any`` wheel holds no compiled module), :func:`envkit.gpu.published.wheelabi.wheel_needs`
reads its compiled modules' torch symbols by range; their union is looked up in the pinned
torch wheel's libraries (:func:`~envkit.gpu.published.wheelabi.torch_defines`). A symbol no
torch library defines fails the cell, naming the package, the module, a symbol or two and the fix. A
wheel or module that cannot be read, and an index that cannot be reached, is said through
``note``: never a verdict. A module whose file name names another torch release
(``libtorch_c_dlpack_addon_torch24-cuda.so`` beside torch 2.14) is one its package loads only
beside that release, choosing by torch's version: it is not judged against the pinned one.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.errors import FileSystemError, NetworkError, WheelError
from envkit.io.http import Http
from envkit.lock import pylocks
from envkit.lock.cells import Cell
from envkit.profiles.profile import Profile
from envkit.wording import agree, counted

if TYPE_CHECKING:
    from envkit.gpu.published.wheelabi import WheelNeeds

Say = Callable[[str], None]
SHOWN = 2  # symbols named per module
# a torch release in a module's file name: torch24, torch2.4, torch210 (major, minor)
_FOR_TORCH = re.compile(r"torch([0-9])\.?([0-9]{1,2})(?![0-9])")


def abi_reason(
    profile: Profile,
    cell: Cell,
    pylock: Path,
    http: Http,
    *,
    progress: Say = lambda _m: None,
    note: Say = lambda _m: None,
) -> str:
    """Why the cell must not be locked ('' when every extension links against its torch,
    or when what would say so could not be read: then ``note`` hears why)."""
    from envkit.gpu.published import wheelabi  # reads ELF: only when a cell has a compiled wheel

    where = f"{cell.profile} / {cell.name}"
    locked = pylocks.wheels(pylock)
    torch = next((w for w in locked if w.name == "torch"), None)
    compiled = [w for w in locked if w.name != "torch" and not wheelabi.is_pure(w.filename)]
    if torch is None or not compiled:
        return ""
    needing: list[tuple[pylocks.LockedWheel, wheelabi.WheelNeeds]] = []
    for wheel in compiled:
        try:
            needs = wheelabi.wheel_needs(
                wheel.url, wheel.filename, wheel.sha256, http, progress=progress
            )
        except (WheelError, NetworkError, FileSystemError) as exc:
            note(f"{wheel.name} {wheel.version}'s torch symbols in {where} not checked: "
                 f"{exc.message}")  # fmt: skip
            continue
        others = [m.member for m in needs.modules if _for_other_torch(m.member, torch.version)]
        if others:
            first = _short(_file_name(others[0]))
            more = f" and {len(others) - 1} more" if len(others) > 1 else ""
            ours = any(
                _FOR_TORCH.search(_file_name(m.member))
                for m in needs.modules
                if m.member not in others
            )  # a module named for the pinned release
            loads = (
                "its package loads the one for its torch"
                if ours
                else f"none is for torch {torch.version}, so its package has no such module to "
                "load beside it (it may build one at run time, or go without)"
            )
            note(f"{counted(len(others), 'module')} of {wheel.name} {wheel.version} in {where} "
                 f"{agree(len(others), 'is', 'are')} for "
                 f"other torch releases ({first}{more}): {loads}; they were not checked "
                 f"against torch {torch.version}")  # fmt: skip
            needs = dataclasses.replace(
                needs, modules=tuple(m for m in needs.modules if m.member not in others)
            )
        for module in needs.modules:
            if module.damaged:
                note(f"{module.member} of {wheel.name} {wheel.version} in {where} not "
                     f"checked against torch: {module.damaged}")  # fmt: skip
        if any(m.symbols and not m.damaged for m in needs.modules):
            needing.append((wheel, needs))
    wanted = frozenset(s for _w, n in needing for m in n.modules for s in m.symbols)
    if not wanted:
        return ""
    progress(f"looking up {len(wanted)} torch symbols in torch {torch.version}'s libraries")
    try:
        defined = wheelabi.torch_defines(
            torch.url, torch.filename, torch.sha256, wanted, http, progress=progress
        )
    except (WheelError, NetworkError, FileSystemError) as exc:
        note(f"the extensions of {where} not checked against torch {torch.version}: "
             f"{exc.message}")  # fmt: skip
        return ""
    reasons = []
    for wheel, needs in needing:
        missing = [
            (m.member, [s for s in m.symbols if s not in defined])
            for m in needs.modules
            if any(s not in defined for s in m.symbols)
        ]
        if missing:
            reasons.append(_reason(profile, wheel, needs, missing, torch.version))
    return "; ".join(reasons)


def _reason(
    profile: Profile,
    wheel: pylocks.LockedWheel,
    needs: WheelNeeds,
    missing: list[tuple[str, list[str]]],
    torch: str,
) -> str:
    from envkit.gpu.published.wheelabi import readable

    member, symbols = missing[0]
    count = sum(len(s) for _m, s in missing)
    named = ", ".join(_short(readable(s)) for s in symbols[:SHOWN])
    more = f" and {counted(len(missing) - 1, 'other module')}" if len(missing) > 1 else ""
    need = agree(len(missing), "needs", "need")
    said = (
        f"{wheel.name} {wheel.version} does not link against torch {torch}: {_short(member)}{more} "
        f"{need} {counted(count, 'torch symbol')} its libraries do not define ({named})"
    )
    pins = f"the constraints of profile {profile.name} ({profile.path.absolute()})"
    if needs.built_for:
        return (
            f"{said}; this build is for torch {needs.built_for} (its version says so): pin a "
            f"{wheel.name} build for torch {torch} in {pins}, or torch=={needs.built_for}.* "
            "if the rest of the profile allows it"
        )
    if needs.torch_spec:
        return (
            f"{said}, though its metadata asks for torch{needs.torch_spec}: the published "
            f"wheel was built against another torch; pin another {wheel.name} release in {pins}"
        )
    return (
        f"{said}; it does not say which torch it was built for: pin the {wheel.name} "
        f"release built for torch {torch} in {pins}"
    )


def _short(text: str, most: int = 160) -> str:
    """A name from a wheel, cut to a length a reason can hold (a crafted one may be 64 KiB)."""
    return text if len(text) <= most else text[: most - 3] + "..."


def _file_name(member: str) -> str:
    return member.rpartition("/")[2][:256]


def _for_other_torch(member: str, torch: str) -> bool:
    """The module's file name names a torch release (``torch24``) other than ``torch``'s."""
    named = _FOR_TORCH.search(_file_name(member))
    if named is None:
        return False
    major, _dot, rest = torch.partition(".")
    minor = rest.partition(".")[0]
    return (named.group(1), named.group(2)) != (major, minor)
