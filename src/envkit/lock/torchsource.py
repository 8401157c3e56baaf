"""Where torch comes from: decided once, from ``--torch-index`` and the backend, and used by
build, lock and verify alike.

Three places can supply torch:

- the PyTorch index, through uv's ``--torch-backend cu124`` (the default);
- the default index (``--torch-index default``): on PyPI, torch 2.6.0 for Linux x86_64 *is*
  the CUDA 12.4 build, so a machine that cannot reach the PyTorch index still builds, and
  verification still demands the CUDA the profile names;
- a mirror of the PyTorch index (``--torch-index URL``, ``{backend}`` substituted).

A lock records which of the three it used (:class:`~envkit.lock.cells.TorchOrigin`), never a
mirror's URL (it may hold credentials): a build from that lock asks the same place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envkit.errors import BadInput, NetworkError, WheelError
from envkit.io.http import Http
from envkit.io.redaction import redact
from envkit.io.urls import check_torch_index
from envkit.lock import pylocks
from envkit.lock.cells import Cell, TorchOrigin
from envkit.profiles.forms import BACKEND
from envkit.profiles.profile import Profile, Torch, cuda_for_backend
from envkit.releases.torchbuilds import shipped_table, wheel_cuda


@dataclass(frozen=True)
class TorchIndex:
    """The user's choice of index for torch (``--torch-index``, ``$ENVKIT_TORCH_INDEX``)."""

    origin: TorchOrigin = TorchOrigin.BACKEND
    mirror: str = ""  # a URL template with {backend}, for MIRROR

    @classmethod
    def parse(cls, text: str | None, where: str = "--torch-index") -> TorchIndex:
        """BadInput unless ``default``, an index URL, or nothing."""
        choice = check_torch_index(text, where)
        if choice is None:
            return cls()
        if choice == "default":
            return cls(TorchOrigin.DEFAULT)
        return cls(TorchOrigin.MIRROR, choice)

    def mirror_url(self, backend: str) -> str:
        return self.mirror.replace("{backend}", backend or "cpu")

    def uv_args(self, backend: str) -> tuple[str, ...]:
        if self.origin is TorchOrigin.MIRROR:
            return ("--index", self.mirror_url(backend))
        if self.origin is TorchOrigin.BACKEND and backend:
            return ("--torch-backend", backend)
        return ()

    def flag(self) -> tuple[str, ...]:
        """The option's words that reproduce this choice, as lock headers show it (redacted)."""
        if self.origin is TorchOrigin.DEFAULT:
            return ("--torch-index", "default")
        if self.origin is TorchOrigin.MIRROR:
            return ("--torch-index", redact(self.mirror))
        return ()

    def header_text(self, backend: str) -> str:
        """Where torch came from, as lock headers say it."""
        if self.origin is TorchOrigin.DEFAULT:
            return "the default index"
        if self.origin is TorchOrigin.MIRROR:
            return redact(self.mirror)
        return f"uv --torch-backend {backend}" if backend else "default index"


@dataclass(frozen=True, kw_only=True)
class TorchSource:
    """Torch for one build: where it comes from, and the CUDA verification demands."""

    index: TorchIndex
    backend: str
    cuda: str
    as_locked: bool = False  # taken from where the installed lock took it

    @property
    def uv_args(self) -> tuple[str, ...]:
        return self.index.uv_args(self.backend)

    @property
    def expected(self) -> Torch:
        return Torch(backend=self.backend, cuda=self.cuda)

    @property
    def description(self) -> str:
        origin, backend = self.index.origin, self.backend
        if origin is TorchOrigin.DEFAULT:
            if self.as_locked:
                return "the default index, as locked"
            return "the default index (its torch must be the CUDA build verified below)"
        if origin is TorchOrigin.MIRROR:
            return f"mirror {redact(self.index.mirror_url(backend))}"
        if not backend:
            return "the default index"
        if self.as_locked:
            return f"uv --torch-backend {backend}, as locked"
        return f"the PyTorch index for {backend} (uv --torch-backend {backend})"


def for_build(profile: Profile, backend_option: str | None, index: TorchIndex) -> TorchSource:
    """The source a fresh build asks; ``backend_option`` overrides the profile's backend."""
    if backend_option and not BACKEND.fits(backend_option):
        raise BadInput(
            f"--torch-backend {backend_option!r} is not a torch backend.",
            "Use cpu, a CUDA one such as cu124, rocm6.2 or xpu.",
        )
    backend = backend_option or profile.torch.backend
    cuda = cuda_for_backend(backend_option) if backend_option else profile.torch.cuda
    if backend_option and cuda:
        _published(profile, backend_option, cuda)
    return TorchSource(index=index, backend=backend, cuda=cuda)


def _published(profile: Profile, backend: str, cuda: str) -> None:
    """BadInput, before anything is made, when the pinned torch's release series is in
    envkit's table of the PyTorch index's CUDA builds and ``cuda`` is not among them (uv
    would refuse or fail after the venv is made); no verdict when the table lacks it."""
    torch = profile.expected_versions().get("torch", "")
    series = ".".join(torch.split("+")[0].split(".")[:2])
    builds = shipped_table().get("series", {}).get(series) if series else None
    if not isinstance(builds, list) or cuda in builds:
        return
    raise BadInput(
        f"--torch-backend {backend}: torch {torch}, which {profile.name} pins, is published "
        f"for CUDA {', '.join(builds)}, not {cuda} (envkit's table of the PyTorch index).",
        "Pass one of " + ", ".join("cu" + c.replace(".", "") for c in builds) + ", or cpu.",
    )


def as_locked(origin: TorchOrigin, backend: str, asked: TorchSource) -> TorchSource:
    """Torch from where a lock took it (its hashes are of those files), whatever the build
    asked; a mirror's URL is not in the lock, so the build must name the mirror again."""
    if origin is TorchOrigin.MIRROR:
        if asked.index.origin is not TorchOrigin.MIRROR:
            raise BadInput(
                "This lock took torch from a PyTorch index mirror, which is not recorded.",
                "Pass the mirror with --torch-index URL (or ENVKIT_TORCH_INDEX), or --no-lock.",
            )
        return asked
    return TorchSource(index=TorchIndex(origin), backend=backend, cuda=asked.cuda, as_locked=True)


def build_mismatch(
    cell: Cell,
    pylock: Path,
    torch: TorchIndex,
    http: Http,
    progress: Callable[[str], None],
    note: Callable[[str], None],
) -> str:
    """Why the torch this cell resolved to is not the build its backend names: '' when it
    is, when uv's ``--torch-backend`` chose it from that backend's own page, or when its
    wheel cannot be read (said through ``note``: an unread wheel is no verdict). The wheel
    is read by range through ``http``, which the caller gave the index's credentials."""
    wanted = cuda_for_backend(cell.backend)  # '' for cpu: a build torch/version.py names
    if torch.origin is TorchOrigin.BACKEND or not (wanted or cell.backend == "cpu"):
        return ""
    found = pylocks.torch_wheel(pylock)
    if found is None:
        return ""
    version, url, sha256 = found
    progress(
        f"reading which build torch {version} in {cell.name} is (its wheel's "
        "torch/version.py, by range)"
    )
    try:
        built = wheel_cuda(url, http, sha256)
    except (WheelError, NetworkError) as exc:
        note(f"torch {version}'s build in {cell.profile} / {cell.name} not checked: {exc.message}")
        return ""
    if built == wanted:
        return ""
    where = "the default index's" if torch.origin is TorchOrigin.DEFAULT else "the mirror's"
    return (
        f"{where} torch {version} for {cell.platform} is "
        f"{f'built for CUDA {built}' if built else 'a CPU-only build'}, not the "
        f"{f'CUDA {wanted}' if wanted else 'CPU'} build {cell.backend} names; lock this cell "
        f"from the PyTorch index (without --torch-index), or take {cell.platform} out of "
        "the profile's matrix"
    )
