"""``envkit build``: recreate a venv from a profile with uv, verify it, then swap it in.

The order is what makes it safe: create a relocatable venv aside, install the profile in one
uv resolution, verify inside that venv, and only then replace the user's venv (venvslot.py).
Any failure, Ctrl-C or kill before the swap leaves the previous venv where it was.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from envkit.env.checks import CompatLookup, Report
from envkit.env.facts import venv_python
from envkit.env.interpreters import find_interpreter
from envkit.env.venvslot import VenvSlot, new_build_id
from envkit.env.verify import NO_TARGET, verify
from envkit.errors import EnvkitError, Interrupted, StaleLock
from envkit.gpu.installed import remembered
from envkit.gpu.installed.detect import Choice
from envkit.io import faults, process
from envkit.io.redaction import redact, redact_words
from envkit.io.uv import Uv
from envkit.lock.cells import CellStatus, cell_name, digest, machine_platform
from envkit.lock.place import Place, place
from envkit.lock.states import states
from envkit.lock.torchsource import TorchIndex, TorchSource, as_locked, for_build
from envkit.profiles.profile import Profile
from envkit.progress import Progress, quiet

Note = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    venv: Path = Path(".venv")
    python: str | None = None
    torch_backend: str | None = None
    torch_index: TorchIndex = field(default_factory=TorchIndex)
    index_url: str | None = None
    stream: bool = True  # let uv draw its progress on the terminal
    use_lock: bool = True  # install the published lock of this machine's cell, if any
    constraints: str | None = None  # the constraints folder (default: beside envs/)
    compat: CompatLookup | None = None  # the installed pair against `envkit compat`
    gpu: Choice = NO_TARGET  # the GPU the build's compiled modules must have kernels for


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    profile: str
    venv: Path
    interpreter: str
    torch: TorchSource
    command: tuple[str, ...]
    replaced: bool
    recovered: tuple[str, ...]
    seconds: dict[str, float] = field(default_factory=dict)
    report: Report | None = None
    lock: Path | None = None
    cell: str = ""  # this machine's cell of the profile's lock matrix
    fresh: str = ""  # why it resolved afresh instead of installing the cell's lock
    where: Place | None = None  # the profile's file and its locks folder

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "profile": self.profile,
            "venv": str(self.venv),
            "interpreter": self.interpreter,
            "torch": {"source": self.torch.description, "cuda": self.torch.cuda or None},
            "command": list(self.command),
            "lock": str(self.lock) if self.lock else None,
            "cell": self.cell,
            "resolved_afresh": self.fresh or None,
            "profile_path": str(self.where.path) if self.where else None,
            "locks": str(self.where.locks) if self.where else None,
            "replaced_previous": self.replaced,
            "kept_previous": not self.ok,
            "recovered": list(self.recovered),
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "verify": self.report.to_dict() if self.report else None,
        }


def constraints_text(profile: Profile) -> str:
    lines = [f"# envkit constraints for profile {profile.name}", *profile.constraints]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True)
class Install:
    """What the one `uv pip install` gets: a fresh resolution, or the published lock."""

    requirements: tuple[str, ...]
    uv_args: tuple[str, ...]
    constraints: str | None  # the constraints file's text; None when installing a lock
    lock: Path | None
    describe: str
    torch: TorchSource
    cell: str  # this machine's cell
    fresh: str = ""  # why not the cell's published lock ('' when installing it)


def choose_install(
    profile: Profile,
    options: BuildOptions,
    python: Version,
    source: TorchSource,
    profile_digest: str,
) -> Install:
    """Use the lock of this machine's cell when one is published (unless --no-lock).

    The lock is installed with the same torch source as a fresh resolution would use; a
    lock made from another source fails its hash check, and the build keeps the old venv.

    A stale lock is refused (StaleLock, exit 2) with the command that refreshes it; a cell without a
    lock, or one that could not resolve, is resolved afresh.
    """
    cell = cell_name(f"{python.major}.{python.minor}", machine_platform(), source.backend)
    where = place(profile, options.constraints)
    fresh = "--no-lock was given"
    if options.use_lock:
        fresh = f"{profile.name}'s lock matrix has no cell {cell} (this machine's)"
        for state in states(profile, options.constraints, current=profile_digest):
            if state.cell.name != cell:
                continue
            if state.status is CellStatus.STALE:
                raise StaleLock(
                    f"The published lock for {profile.name} / {cell} is stale: {state.reason}.",
                    "Refresh it (that command), or build without it: --no-lock.",
                )
            if state.status.usable:
                locked = state.files[0]
                torch = as_locked(state.torch, state.cell.backend, source)
                # The requirements form of the lock, not the pylock: uv installs registry
                # pins from its cache, where pylock URLs are fetched again every time.
                args = (
                    "-r",
                    str(locked),
                    "--require-hashes",
                    *torch.uv_args,
                    *(("--default-index", options.index_url) if options.index_url else ()),
                )
                return Install(
                    requirements=(),
                    uv_args=args,
                    constraints=None,
                    lock=locked,
                    describe=f"installing the published lock of cell {cell}, "
                    f"{locked.absolute()} (exact, hash-checked; torch from {torch.description})",
                    torch=torch,
                    cell=cell,
                )
            fresh = (
                f"no lock of cell {cell} in {where.locks} (envkit lock {profile.name} "
                f"--cell {cell} writes one)"
                if state.status is CellStatus.MISSING
                else f"cell {cell} is recorded {state.state}: {state.reason}"
            )
    extra = list(source.uv_args)
    if options.index_url:
        extra += ["--default-index", options.index_url]
    if profile.exclude_newer:
        extra += ["--exclude-newer", profile.exclude_newer]
    return Install(
        torch=source,
        requirements=profile.requirements,
        uv_args=tuple(extra),
        constraints=constraints_text(profile),
        lock=None,
        describe=f"resolving afresh ({fresh}): installing {' '.join(profile.requirements)} "
        f"(torch from {source.description})",
        cell=cell,
        fresh=fresh,
    )


def build(
    profile: Profile,
    options: BuildOptions,
    *,
    uv: Uv | None = None,
    progress: Progress = quiet,
    note: Note = lambda _msg: None,
) -> BuildResult:
    """Build ``profile`` into ``options.venv``. Raises EnvkitError subclasses on failure to
    build; a build whose verification fails returns a result with ``ok`` False.
    ``progress`` hears each step; ``note`` what the user must learn of (recovery, waiting)."""
    uv = uv or Uv()
    source = for_build(profile, options.torch_backend, options.torch_index)
    profile_digest = digest(profile)  # read once: the lock's state and the marker agree
    progress(f"looking for Python {profile.python}")
    interpreter = find_interpreter(profile.python, options.python)
    plan = choose_install(profile, options, interpreter.version, source, profile_digest)
    slot = VenvSlot(options.venv)
    slot.check_replaceable()  # before anything is created beside it
    seconds: dict[str, float] = {}
    marker = _marker(profile, profile_digest, interpreter.path, plan)
    with slot.locked(note) as recovered:
        for done in recovered:
            note(f"recovered: {done}")
        build_id = new_build_id()
        staging = slot.begin(build_id)
        try:
            start = time.monotonic()
            progress(f"creating a venv with Python {interpreter.version} ({interpreter.path})")
            uv.create_venv(staging, str(interpreter.path), stream=False)
            slot.mark(build_id, {**marker, "state": "building"})
            faults.fault_point("venv-created")
            seconds["venv"] = time.monotonic() - start
            constraints = None
            if plan.constraints is not None:
                constraints = staging / "envkit-constraints.txt"
                constraints.write_text(plan.constraints, encoding="utf-8")
            progress(plan.describe, child_draws=options.stream)
            start = time.monotonic()
            ran = uv.pip_install(
                venv_python(staging),
                plan.requirements,
                constraints=constraints,
                options=plan.uv_args,
                stream=options.stream,
                # envkit chose where torch comes from (the plan); a backend in the user's
                # environment would overrule that choice
                unset_env=("UV_TORCH_BACKEND",),
            )
            marker = {**marker, "command": redact_words(ran)}  # values, then JSON
            faults.fault_point("installed")
            seconds["install"] = time.monotonic() - start
            start = time.monotonic()
            report = verify(
                profile,
                staging,
                shown=slot.venv,
                torch=source.expected,
                compat=options.compat,
                gpu=options.gpu,
                progress=progress,
                built=True,
            )
            seconds["verify"] = time.monotonic() - start
            faults.fault_point("verified")
            replaced = False
            if report.ok:
                process.checkpoint()
                progress(f"swapping the verified environment into {slot.venv}")
                start = time.monotonic()
                sites = [p.relative_to(staging) for p in staging.glob("lib*/python*/site-packages")]
                replaced = slot.commit(build_id, marker)
                for site in sites:  # what the GPU layer read of its files, for the next verify
                    remembered.moved(staging / site, slot.venv / site)
                seconds["swap"] = time.monotonic() - start
            else:
                slot.abort()
        except KeyboardInterrupt:
            if not slot.committed:
                with contextlib.suppress(KeyboardInterrupt, EnvkitError, OSError):
                    slot.abort()
            raise Interrupted(slot.describe()) from None
        except BaseException:
            slot.abort()
            raise
    return BuildResult(
        profile=profile.name,
        venv=slot.venv,
        interpreter=str(interpreter.path),
        torch=plan.torch,
        command=ran,
        replaced=replaced,
        recovered=tuple(recovered),
        seconds=seconds,
        report=report,
        lock=plan.lock,
        cell=plan.cell,
        fresh=plan.fresh,
        where=place(profile, options.constraints),
    )


def _marker(
    profile: Profile, profile_digest: str, python: Path, plan: Install
) -> dict[str, object]:
    return {
        "profile": profile.name,
        "profile_digest": profile_digest,
        "python": str(python),
        "torch_source": redact(plan.torch.description),
        "command": [],  # the argv that ran, once the install has run
        "lock": str(plan.lock) if plan.lock else None,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
