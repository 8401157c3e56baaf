"""What an image of a lock cell is: the cell, its published hash-locked lock, what the lock
pins (vLLM, transformers, torch), the CUDA and driver floor of its backend, the compute
capabilities whose kernels its builds carry (from envkit's kernel table), and the OCI labels
that say all of it on the image.

Only a published, current, installable cell becomes an image: a stale, missing, unresolvable
or refused cell is refused here with the command that fixes it, before any builder runs.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from envkit.errors import BadInput, StaleLock
from envkit.gpu.arch import KNOWN, Capability
from envkit.gpu.needs import for_backend
from envkit.gpu.published.kerneltable import KernelTable, shipped
from envkit.gpu.published.kernelverdict import Verdict
from envkit.io.escaping import shell_command
from envkit.io.files import read_small_text
from envkit.io.redaction import has_credentials
from envkit.io.urls import DEFAULT_INDEX, index_url
from envkit.lock.cells import CellState, CellStatus, machine_platform
from envkit.lock.states import states
from envkit.lock.torchsource import TorchIndex, TorchSource, as_locked
from envkit.profiles.profile import Profile

MAX_LOCK = 32 * 1024 * 1024  # a lock file, as lock/cells reads them
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)", re.M)
# what a label value may hold: names, versions, digests, lists of them
_LABEL_VALUE = re.compile(r"[A-Za-z0-9 ._:+,/=@()-]*")
LABEL_PREFIX = "envkit."
PLATFORMS = ("linux-x86_64", "linux-aarch64")


@dataclass(frozen=True)
class ImageSpec:
    """One cell as an image: where its lock is, what it pins, what it needs and carries."""

    profile: str
    cell: str
    python: str  # X.Y, the cell's
    platform: str  # linux-x86_64 or linux-aarch64
    backend: str  # cu124, cpu, ...
    lock: Path  # the requirements form of the lock: pins and hashes
    lock_sha256: str
    pins: tuple[tuple[str, str], ...]  # (name, version) of every locked package
    torch: TorchSource  # where uv takes torch from, as the lock took it
    index_url: str  # the default index the install asks ('' for uv's own default)
    cuda: str  # the CUDA the backend's torch build needs ('' for CPU builds)
    driver: str  # the NVIDIA Linux driver that runs it ('' when none or unknown)
    capabilities: tuple[Capability, ...]  # where vLLM's and torch's builds both have kernels
    kernels_known: bool  # False: the kernel table lacks a build, so nothing is claimed

    def version(self, name: str) -> str:
        return dict(self.pins).get(name, "")

    def labels(self, base: str) -> dict[str, str]:
        """The image's labels: the OCI keys where a standard one fits, ``envkit.*`` for the
        rest. Every value is checked to be a plain word list (no quote, newline or ``$``)."""
        vllm, transformers, torch = (self.version(n) for n in ("vllm", "transformers", "torch"))
        stack = ", ".join(
            f"{name} {version}"
            for name, version in (("vLLM", vllm), ("transformers", transformers), ("torch", torch))
            if version
        )
        labels = {
            "org.opencontainers.image.title": f"{self.profile} ({self.cell})",
            "org.opencontainers.image.description": f"{stack} from envkit profile {self.profile}",
            "org.opencontainers.image.version": vllm or "unknown",
            "org.opencontainers.image.base.name": base,
            f"{LABEL_PREFIX}profile": self.profile,
            f"{LABEL_PREFIX}cell": self.cell,
            f"{LABEL_PREFIX}lock.sha256": self.lock_sha256,
            f"{LABEL_PREFIX}vllm": vllm or "none",
            f"{LABEL_PREFIX}transformers": transformers or "none",
            f"{LABEL_PREFIX}torch": torch or "none",
            f"{LABEL_PREFIX}cuda": self.cuda or "none",
            f"{LABEL_PREFIX}driver.floor": self.driver or "none",
            f"{LABEL_PREFIX}compute-capabilities": self.capabilities_text(),
        }
        for key, value in labels.items():
            if not _LABEL_VALUE.fullmatch(value):
                raise BadInput(
                    f"The image label {key} would hold {value!r}, which is not a plain value.",
                    "Profile names, cells and versions use letters, digits and . _ + - only.",
                )
        return labels

    def capabilities_text(self, sep: str = ",") -> str:
        """The compute capabilities the image's kernels run on: for a label (``sep`` ','), or
        for people (', ')."""
        if not self.kernels_known:
            return "unknown"
        return sep.join(str(c) for c in self.capabilities) or "none"


def spec_for(
    profile: Profile,
    cell: str | None,
    *,
    constraints: str | None = None,
    index: str | None = None,
    torch_index: TorchIndex | None = None,
    table: KernelTable | None = None,
    runs: str = "the image",
) -> ImageSpec:
    """The image of ``profile``'s ``cell`` (None: the one usable cell for this machine's
    platform), installed from ``index`` (the ``--index-url`` option, else as uv picks it).
    ``runs``: what will run the cell, as the question for a missing --cell names it.
    BadInput for a cell that does not exist, is not Linux, or names an index with
    credentials (they would be written into the image); StaleLock for a stale cell."""
    chosen = index_url(index)  # --index-url, else uv's variables, as uv picks it
    install_from = "" if chosen == DEFAULT_INDEX else chosen  # '': uv's own default
    state = _chosen(profile, cell, constraints, runs)
    lock = state.files[0]
    text = read_small_text(lock, MAX_LOCK, what="lock file")
    if install_from and has_credentials(install_from):
        raise BadInput(
            "The index URL holds credentials, and an image build would write them into the "
            "image's history.",
            "Give an index without credentials (a netrc or a mirror reachable from the build).",
        )
    source = as_locked(
        state.torch,
        state.cell.backend,
        TorchSource(index=torch_index or TorchIndex(), backend="", cuda=""),
    )
    if any(has_credentials(a) for a in source.uv_args):
        raise BadInput(
            "The torch mirror's URL holds credentials, which an image build would write into "
            "the image's history.",
            "Use a mirror reachable without credentials from the build.",
        )
    pins = tuple((m.group(1).lower(), m.group(2)) for m in _PIN.finditer(text))
    need = for_backend(state.cell.backend)
    capabilities, known = _capabilities(dict(pins), need.cuda if need else "", table or shipped())
    return ImageSpec(
        profile=profile.name,
        cell=state.cell.name,
        python=state.cell.python,
        platform=state.cell.platform,
        backend=state.cell.backend,
        lock=lock,
        lock_sha256=hashlib.sha256(text.encode()).hexdigest(),
        pins=pins,
        torch=source,
        index_url=install_from,
        cuda=need.cuda if need else "",
        driver=need.linux_driver if need else "",
        capabilities=capabilities,
        kernels_known=known,
    )


def _chosen(profile: Profile, cell: str | None, constraints: str | None, runs: str) -> CellState:
    found = states(profile, constraints)
    names = [s.cell.name for s in found]
    if cell is None:
        here = [s for s in found if s.cell.platform == machine_platform() and s.status.usable]
        if len(here) != 1:
            listed = ", ".join(s.cell.name for s in here) or "none is published"
            raise BadInput(
                f"Which cell of {profile.name} should {runs} hold? For this machine's "
                f"platform ({machine_platform()}): {listed}.",
                "Pass --cell CELL with the Python that runs it (a base image's or the nodes'): "
                "a Debian bookworm base has 3.11.",
            )
        return here[0]
    state = next((s for s in found if s.cell.name == cell), None)
    if state is None:
        raise BadInput(
            f"{profile.name} has no cell {cell!r}.", f"Its cells: {', '.join(names) or 'none'}."
        )
    if state.cell.platform not in PLATFORMS:
        raise BadInput(
            f"Cell {cell} is for {state.cell.platform}; images are built for Linux cells only.",
            f"Pick one of: {', '.join(n for n in names if '-linux-' in n) or 'none'}.",
        )
    if state.status is CellStatus.STALE:
        raise StaleLock(
            f"The published lock of {profile.name} / {cell} is stale: {state.reason}.",
            "Relock it (that command), then build the image.",
        )
    if not state.status.usable:
        relock = shell_command(["envkit", "lock", profile.name, "--cell", cell])
        raise BadInput(
            f"Cell {cell} of {profile.name} has no installable lock ({state.status.value}: "
            f"{state.reason}).",
            f"An image installs exactly a published lock: `{relock}` writes one.",
        )
    return state


def _capabilities(
    pins: dict[str, str], cuda: str, table: KernelTable
) -> tuple[tuple[Capability, ...], bool]:
    """The compute capabilities where the locked vLLM's and torch's builds both have kernel
    images; (), False when the table lacks either build (nothing is claimed then)."""
    if "vllm" not in pins or "torch" not in pins or not cuda:
        return (), False
    vllm = table.vllm_build(pins["vllm"])
    torch = table.torch_build(pins["torch"], cuda)
    if vllm is None or torch is None:
        return (), False
    runs = tuple(
        c
        for c in KNOWN
        if vllm.on(c).verdict is Verdict.RUNS and torch.on(c).verdict is Verdict.RUNS
    )
    return runs, True
