"""The maintainer's command that regenerates envkit's kernel table, incrementally: a wheel
whose sha256 is unchanged is not read again, the other platform's entries are kept whole::

    python -m envkit.gpu.published.kernelupdate --out src/envkit/data/gpu-kernels.json \\
        [--index-url URL] [--pytorch-index URL] [--vllm 0.8.5,0.9.0] [--platform linux-aarch64]

It reads the indexes through :mod:`envkit.gpu.published.kernelgen` and writes the table
:mod:`envkit.gpu.published.kerneltable` reads.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

from envkit.errors import EnvkitError
from envkit.gpu.published import kernelgen
from envkit.gpu.published.kerneltable import (
    ABOUT,
    MAX_TABLE,
    PLATFORMS,
    X86,
    KernelTable,
    TorchBuild,
    VllmBuild,
    dumps,
    load,
)
from envkit.io.atomicfile import write_atomic
from envkit.io.cache import BadEntry
from envkit.io.files import read_small_text
from envkit.io.http import Http
from envkit.io.urls import index_url
from envkit.wording import counted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m envkit.gpu.published.kernelupdate",
        description="Regenerate envkit's table of the GPU kernels of vLLM and torch builds.",
    )
    parser.add_argument("--out", required=True, help="the table to write (and update)")
    parser.add_argument("--index-url", help="the package index (default: as uv picks it)")
    parser.add_argument("--pytorch-index", default="", help="also read torch's other CUDA builds")
    parser.add_argument("--vllm", help="only these vLLM releases (comma-separated)")
    parser.add_argument(
        "--platform", choices=PLATFORMS, default=X86, help="the wheels read (default: x86_64)"
    )
    args = parser.parse_args(argv)
    say = functools.partial(print, file=sys.stderr, flush=True)
    try:
        versions = [str(Version(v)) for v in args.vllm.split(",")] if args.vllm else None
    except InvalidVersion as exc:
        say(f"error: --vllm: {exc}")
        return 2
    out = Path(args.out)
    try:
        old = load(read_small_text(out, MAX_TABLE, what="kernel table")) if out.exists() else None
        held = [*(b.wheel for b in old.vllm), *(b.wheel for b in old.torch)] if old else []
        known = {w.sha256: w for w in held}
        index = index_url(args.index_url)
        found = kernelgen.harvest(
            index,
            Http(budget=86400.0),
            pytorch_index=args.pytorch_index,
            versions=versions,
            known=known,
            progress=say,
            platform=args.platform,
        )
    except (EnvkitError, BadEntry) as exc:
        say(f"error: {exc.message if isinstance(exc, EnvkitError) else exc}")
        return 2
    table = merged(
        old, found, versions, index, others=not args.pytorch_index, platform=args.platform
    )
    try:
        write_atomic(out, dumps(table))
    except EnvkitError as exc:
        say(f"error: {exc.message}")
        return 2
    say(
        f"wrote {out}: {counted(len(table.vllm), 'vLLM release')}, "
        f"{counted(len(table.torch), 'torch build')}; {found.fetched / 1e9:.2f} GB fetched in "
        f"{found.seconds:.0f} s, {counted(found.kept, 'wheel')} kept; "
        f"{counted(len(found.notes), 'note')}"
    )
    return 0


def merged(
    old: KernelTable | None,
    found: kernelgen.Harvest,
    versions: list[str] | None,
    index: str,
    *,
    others: bool,
    platform: str = X86,
) -> KernelTable:
    """The new reads of ``platform``; the old table's entries of the other platform whole;
    with --vllm, the old entries of the releases not asked for; without --pytorch-index
    (``others``), the old table's other CUDA builds of torch."""
    vllm = {(w.version, platform): VllmBuild(w.version, w, src) for w, src in found.vllm}
    builds: dict[tuple[str, str, str], TorchBuild] = {}
    for read in found.torch:
        public = Version(read.wheel.version).public
        build = TorchBuild(public, read.wheel.torch_cuda, read.default, read.wheel, read.source)
        builds[(public, build.cuda, build.platform)] = build
    notes = list(found.notes)
    no_wheel = {(platform, v) for v in found.no_wheel}
    if old is not None:
        pins = {v.torch for v in vllm.values()}
        defaults = {t.version for t in builds.values() if t.default}
        for t in old.torch:
            other = t.platform != platform
            keep = other or versions is not None or (others and not t.default and t.version in pins)
            if keep and (other or not (t.default and t.version in defaults)):
                builds.setdefault((t.version, t.cuda, t.platform), t)
        for v in old.vllm:
            if v.platform != platform or versions is not None:
                vllm.setdefault((v.version, v.platform), v)
        no_wheel |= {(p, v) for p, v in old.no_wheel if p != platform or versions is not None}
        notes = [*old.notes, *(n for n in notes if n not in old.notes)]
    today = dt.date.today().isoformat()
    return KernelTable(
        about=ABOUT,
        generated=today,
        source=f"{kernelgen.index_source(index)} (each wheel read by range, not installed)",
        vllm=tuple(sorted(vllm.values(), key=lambda b: (Version(b.version), b.platform))),
        torch=tuple(
            sorted(
                builds.values(),
                key=lambda b: (Version(b.version), b.platform, not b.default, b.cuda),
            )
        ),
        notes=tuple(notes),
        no_wheel=tuple(sorted(no_wheel, key=lambda pv: (pv[0], Version(pv[1])))),
    )


if __name__ == "__main__":
    raise SystemExit(main())
