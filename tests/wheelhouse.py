"""Tiny wheels and PEP 503 indexes on disk, for running the real uv offline."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


@dataclass
class Wheel:
    name: str
    version: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    requires: list[str] = field(default_factory=list)
    scripts: dict[str, str] = field(default_factory=dict)  # console_scripts name -> mod:func
    requires_python: str = ""
    tag: str = "py3-none-any"
    sdist: bool = False  # also publish a source distribution
    sdist_files: dict[str, str] = field(default_factory=dict)  # more files in it (path -> text)

    @property
    def filename(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}-{self.tag}.whl"

    def write(self, folder: Path) -> Path:
        dist_info = f"{self.name.replace('-', '_')}-{self.version}.dist-info"
        metadata = f"Metadata-Version: 2.1\nName: {self.name}\nVersion: {self.version}\n"
        if self.requires_python:
            metadata += f"Requires-Python: {self.requires_python}\n"
        metadata += "".join(f"Requires-Dist: {r}\n" for r in self.requires)
        entries: dict[str, str | bytes] = dict(self.files)
        entries[f"{dist_info}/METADATA"] = metadata
        entries[f"{dist_info}/WHEEL"] = (
            f"Wheel-Version: 1.0\nGenerator: envkit-tests\nRoot-Is-Purelib: true\nTag: {self.tag}\n"
        )
        if self.scripts:
            entries[f"{dist_info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
                f"{k} = {v}\n" for k, v in self.scripts.items()
            )
        blobs = {k: v if isinstance(v, bytes) else v.encode() for k, v in entries.items()}
        record = "".join(
            f"{path},{_record_hash(data)},{len(data)}\n" for path, data in blobs.items()
        )
        entries[f"{dist_info}/RECORD"] = record + f"{dist_info}/RECORD,,\n"
        if self.sdist:
            self._write_sdist(folder, str(entries[f"{dist_info}/METADATA"]))
        path = folder / self.filename
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in sorted(entries.items()):
                info = zipfile.ZipInfo(name, date_time=(2025, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
        return path

    def _write_sdist(self, folder: Path, metadata: str) -> None:
        base = f"{self.name.replace('-', '_')}-{self.version}"
        with tarfile.open(folder / f"{base}.tar.gz", "w:gz") as tar:
            for name, text in (
                (f"{base}/PKG-INFO", metadata),
                (f"{base}/setup.py", "raise SystemExit('would compile')\n"),
                *((f"{base}/{path}", body) for path, body in self.sdist_files.items()),
            ):
                data = text.encode()
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def write_index(root: Path, wheels: list[Wheel]) -> str:
    """A PEP 503 simple index under ``root``; returns its file:// URL."""
    simple = root / "simple"
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        folder = simple / wheel.name
        folder.mkdir(parents=True, exist_ok=True)
        projects.setdefault(wheel.name, []).append(wheel.write(folder))
        projects[wheel.name] += [
            p for p in folder.glob("*.tar.gz") if p not in projects[wheel.name]
        ]
    for name, paths in projects.items():
        links = "".join(
            f'<a href="{p.name}#sha256={hashlib.sha256(p.read_bytes()).hexdigest()}">{p.name}</a>\n'
            for p in paths
        )
        (simple / name / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    links = "".join(f'<a href="{n}/">{n}</a>\n' for n in sorted(projects))
    (simple / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return simple.as_uri()


TOKENIZER_4 = """
class PreTrainedTokenizerBase:
    @property
    def all_special_tokens_extended(self):
        return []
"""
TOKENIZER_5 = """
class PreTrainedTokenizerBase:
    pass
"""


def transformers(version: str, with_attribute: bool) -> Wheel:
    body = TOKENIZER_4 if with_attribute else TOKENIZER_5
    return Wheel(
        "transformers",
        version,
        {
            "transformers/__init__.py": f"__version__ = {version!r}\n"
            "from .tokenization_utils_base import PreTrainedTokenizerBase\n",
            "transformers/tokenization_utils_base.py": body,
        },
    )


def torch(version: str, cuda: str | None) -> Wheel:
    return Wheel(
        "torch",
        version,
        {
            "torch/__init__.py": f"__version__ = {version!r}\nfrom . import version, cuda\n",
            "torch/version.py": f"cuda = {cuda!r}\n",
            "torch/cuda.py": "def is_available():\n    return False\n",
        },
    )


def vllm(version: str = "0.8.5") -> Wheel:
    return Wheel(
        "vllm",
        version,
        {
            "vllm/__init__.py": f"__version__ = {version!r}\nimport transformers, torch\n",
            "vllm/cli.py": "def main():\n    import vllm\n    print('vllm', vllm.__version__)\n",
        },
        requires=["transformers>=4.51", "torch==2.6.0"],
        scripts={"vllm": "vllm.cli:main"},
        requires_python=">=3.10",
    )


def flashinfer(name: str, version: str) -> Wheel:
    """One of FlashInfer's distributions (flashinfer-python, -cubin, -jit-cache): a module of
    its own, nothing required, as their metadata has it."""
    module = name.replace("-", "_").replace("_python", "")
    return Wheel(name, version, {f"{module}/__init__.py": f"__version__ = {version!r}\n"})


def standard_index(root: Path) -> str:
    """The default test index: vllm 0.8.5, transformers 4.51.3 and 5.0.0, a CUDA 12.4 torch."""
    return write_index(
        root,
        [
            vllm(),
            transformers("4.51.3", with_attribute=True),
            transformers("5.0.0", with_attribute=False),
            torch("2.6.0", cuda="12.4"),
        ],
    )


def mirror_index(root: Path) -> str:
    """A PyTorch-index mirror: only a local-version torch build."""
    return write_index(root, [torch("2.6.0+cu124", cuda="12.4")])
