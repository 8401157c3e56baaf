"""What a torch's ``torch/version.py`` says, read with ``ast`` and never imported: the one
reader of that file, for a wheel's members (``releases.torchbuilds``,
``gpu.published.wheelkernels``) and an installed torch (``gpu.installed.modules``). It
imports no index reader, so looking at an installed torch costs no HTTP client, and nothing
but ``re`` until a file is read (the shipped kernel table's readers take its pattern)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envkit.errors import WheelError

# a CUDA version as torch writes it (12.4, 12.4.1): also what the caches accept
CUDA_VERSION = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}(\.[0-9]{1,3})?")
_TORCH_VERSION = re.compile(r"[0-9][0-9a-z.+]{0,40}")  # 2.6.0+cu124: printed, so plain


@dataclass(frozen=True, slots=True)
class VersionFile:
    """What a torch's ``torch/version.py`` says: ``__version__`` ('' when it names none a
    version could be) and ``cuda`` ('' for a CPU build, which says None).

    >>> read_version_file("__version__ = '2.6.0+cu124'\\ncuda = '12.4'\\n", "torch")
    VersionFile(version='2.6.0+cu124', cuda='12.4')
    """

    version: str
    cuda: str


def read_version_file(text: str, where: str) -> VersionFile:
    """``torch/version.py``'s text read with ``ast``; WheelError naming ``where`` when it
    is not Python or its cuda is not a version."""
    from envkit.releases.asttables import SourceError, module_tables  # ast: where it is read

    try:
        tables = module_tables(text, filename="torch/version.py")
    except SourceError as exc:
        raise WheelError(f"{where}: {exc}") from None
    found, version = tables.get("cuda"), tables.get("__version__")
    if found is not None and (not isinstance(found, str) or not CUDA_VERSION.fullmatch(found)):
        raise WheelError(f"torch/version.py in {where} says cuda = {found!r:.40}, not a version.")
    fits = isinstance(version, str) and _TORCH_VERSION.fullmatch(version)
    return VersionFile(version if fits and isinstance(version, str) else "", found or "")


def version_cuda(members: dict[str, bytes], wheel: str) -> str:
    """torch.version.cuda as a torch wheel's ``torch/version.py`` (among ``members``) sets
    it ('' for a CPU build, which says None); WheelError naming ``wheel`` otherwise."""
    if "torch/version.py" not in members:
        raise WheelError(f"{wheel} has no torch/version.py.")
    return read_version_file(members["torch/version.py"].decode("utf-8", "replace"), wheel).cuda
