"""Which CUDA builds a torch release is published with, and the highest CUDA this machine's
driver runs.

Three sources, best first, and every answer says which one it came from:

1. the PyTorch index (:data:`PYTORCH_INDEX`, or ``$ENVKIT_PYTORCH_INDEX``):
   one page per backend (``cu124/torch/``) lists the torch releases built for it;
2. the table shipped with envkit (``data/torch-cuda.json``, per release series), for where
   that index cannot be reached; regenerate it where it can::

       python -m envkit.releases.torchbuilds --out src/envkit/data/torch-cuda.json

3. the release's wheel on the default index (``torch/version.py``): one build, for a series
   the table does not know yet.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.errors import EnvkitError, NetworkError, WheelError
from envkit.index.pages import html_entries
from envkit.index.wheels import read_members
from envkit.io.atomicfile import write_atomic
from envkit.io.cache import TORCH_BUILDS, BadEntry, Fields, is_sha256
from envkit.io.http import Http
from envkit.io.redaction import redact
from envkit.releases.registry import Scanner
from envkit.releases.torchversion import CUDA_VERSION, version_cuda

PYTORCH_INDEX = "https://download.pytorch.org/whl"
# the CUDA backends PyTorch has published wheels for; asked one page each
BACKENDS = ("11.7", "11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0", "13.1", "13.2")
_WHEEL = re.compile(r"^torch-([0-9][0-9a-z.]*)\+cu([0-9]+)-")


@dataclass(frozen=True)
class Builds:
    torch: str
    cuda: tuple[str, ...]  # oldest first
    source: str  # where this was learnt, for the output

    def fitting(self, driver: str) -> tuple[str, ...]:
        """The builds a driver that runs CUDA ``driver`` can run."""
        return tuple(c for c in self.cuda if _v(c) <= _v(driver))


def _v(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def pytorch_index() -> str:
    return os.environ.get("ENVKIT_PYTORCH_INDEX", PYTORCH_INDEX).rstrip("/")


class CudaBuilds:
    """Answers per torch release, asking each source at most once per run."""

    def __init__(self, scanner: Scanner, *, index: str | None = None) -> None:
        self.scanner = scanner
        self.index = index or pytorch_index()
        self._pages: dict[str, set[str]] | None = None  # backend -> torch versions
        self.unreachable = "not asked"  # or why the PyTorch index did not answer

    def builds(self, torch: str) -> Builds:
        pages = self._index_pages()
        if pages:
            found = tuple(c for c in BACKENDS if torch in pages.get(c, set()))
            return Builds(torch, found, "the PyTorch index")
        table = shipped_table()
        series = ".".join(torch.split(".")[:2])
        if series in table["series"]:
            return Builds(
                torch,
                tuple(table["series"][series]),
                f"envkit's table of {table['generated']} (the PyTorch index {self.unreachable})",
            )
        try:
            cuda = torch_cuda(self.scanner, Version(torch))
        except (WheelError, NetworkError, InvalidVersion):
            cuda = ""
        return Builds(
            torch,
            (cuda,) if cuda else (),
            f"the default index's wheel alone (not in envkit's table; the PyTorch index "
            f"{self.unreachable})",
        )

    def _index_pages(self) -> dict[str, set[str]]:
        if self._pages is None:
            try:
                self._pages = read_index(self.index, self.scanner.http)
            except EnvkitError as exc:
                self.unreachable = "unreachable" if isinstance(exc, NetworkError) else exc.message
                self._pages = {}
        return self._pages


def read_index(index: str, http: Http) -> dict[str, set[str]]:
    """backend ('12.4') -> the torch releases its page lists. NetworkError when the index
    cannot be reached at all; a backend without a page is simply absent."""
    out: dict[str, set[str]] = {}
    for cuda in BACKENDS:
        url = f"{index}/cu{cuda.replace('.', '')}/torch/"
        answer = http.request("GET", url, max_bytes=16 * 1024 * 1024, deadline=20)
        if answer.status != 200:
            continue
        versions = set()
        for entry in html_entries(answer.text(), url):
            match = _WHEEL.match(str(entry.get("filename", "")))
            if match:
                versions.add(match.group(1))
        if versions:
            out[cuda] = versions
    return out


@functools.cache
def shipped_table() -> dict[str, Any]:
    text = (resources.files("envkit") / "data" / "torch-cuda.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def table_from_index(pages: dict[str, set[str]]) -> dict[str, list[str]]:
    """series ('2.6') -> CUDA builds, from the index's pages."""
    series: dict[str, set[str]] = {}
    for cuda, versions in pages.items():
        for version in versions:
            parsed = _v(version)
            if parsed.is_prerelease or parsed.is_devrelease or parsed == Version("0"):
                continue
            series.setdefault(f"{parsed.major}.{parsed.minor}", set()).add(cuda)
    return {k: sorted(v, key=_v) for k, v in sorted(series.items(), key=lambda kv: _v(kv[0]))}


def torch_cuda(scanner: Scanner, version: Version) -> str:
    """The CUDA version torch ``version``'s wheel for this platform was built with ('' if CPU),
    kept in the cache under the wheel's sha256 when the index gives one (so a knowledge
    snapshot holds it too)."""
    wheel = scanner.pick("torch", version)
    return wheel_cuda(wheel.url, scanner.http, wheel.sha256)


def wheel_cuda(url: str, http: Http, sha256: str = "") -> str:
    """The CUDA version the torch wheel at ``url`` was built with ('' if CPU), from its
    ``torch/version.py``: a range read, never an install. With the wheel's ``sha256`` the
    answer is kept in the cache under that hash (the same bytes always give it)."""
    cacheable = is_sha256(sha256)
    if cacheable:
        known = TORCH_BUILDS.load(sha256, _cuda_entry)
        if known is not None:
            return known
    name = redact(url.rsplit("/", 1)[-1])
    found = version_cuda(read_members(url, http, ["torch/version.py"]), name)
    if cacheable:
        with _torch_cache:  # one writer at a time (the locker's threads)
            TORCH_BUILDS.store(sha256, {"cuda": found})
    return found


def _cuda_entry(f: Fields) -> str:
    cuda = f.text("cuda")
    if cuda and not CUDA_VERSION.fullmatch(cuda):
        raise BadEntry(f"cuda {cuda!r:.40} is not a CUDA version")
    return cuda


_torch_cache = threading.Lock()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m envkit.releases.torchbuilds",
        description="Regenerate envkit's table of torch CUDA builds from the PyTorch index.",
    )
    parser.add_argument("--index", default=pytorch_index(), help="the PyTorch index")
    parser.add_argument("--out", help="write the table here (default: print it)")
    args = parser.parse_args(argv)
    try:
        pages = read_index(args.index.rstrip("/"), Http())
    except EnvkitError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    if not pages:
        print(f"error: {args.index} lists no torch wheels for any CUDA backend", file=sys.stderr)
        return 1
    table = {
        "about": shipped_table()["about"],
        "generated": dt.date.today().isoformat(),
        "source": f"the PyTorch index ({args.index})",
        "series": table_from_index(pages),
    }
    text = json.dumps(table, indent=2) + "\n"
    if args.out:
        try:
            write_atomic(Path(args.out), text)
        except EnvkitError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
