"""The facts probe: ``env/inside_venv.py`` run inside a venv's own interpreter (never envkit's),
once per command, returning what verify and doctor judge. A probe that hangs, cannot start
or crashes is one EnvironmentBroken message."""

from __future__ import annotations

import json
import os
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

from envkit.errors import EnvironmentBroken, UnreadableFile
from envkit.io import process
from envkit.io.atomicfile import temporary_folder
from envkit.io.files import MiB, read_small_text

MAX_FACTS = 64 * MiB  # what the probe writes: versions, paths, symbol lists


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def collect_facts(
    python: Path, spec: dict[str, Any], where: Path, timeout: float = 900
) -> dict[str, Any]:
    """Run ``env/inside_venv.py`` with ``spec`` in the interpreter ``python``; its facts."""
    venv = where
    source = resources.files("envkit.env").joinpath("inside_venv.py").read_text(encoding="utf-8")
    with temporary_folder("facts") as tmp:
        script, spec_file, out_file = (Path(tmp) / n for n in ("probe.py", "spec.json", "out"))
        script.write_text(source, encoding="utf-8")
        spec_file.write_text(json.dumps(spec), encoding="utf-8")
        try:
            done = process.run(
                [str(python), str(script), str(spec_file), str(out_file)], timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise EnvironmentBroken(
                f"Verification in {venv} did not finish within {timeout:.0f} s.",
                "An import hangs there; run its python and import the profile's modules by hand.",
            ) from None
        except OSError as exc:
            raise EnvironmentBroken(
                f"Cannot run {python}: {exc.strerror}.", "Rebuild the venv with `envkit build`."
            ) from None
        crashed = done.returncode != 0 or not out_file.exists()
        try:
            text = "" if crashed else read_small_text(out_file, MAX_FACTS, what="probe output")
            facts = json.loads(text) if text else None
        except (UnreadableFile, ValueError, RecursionError):
            facts = None
        if not isinstance(facts, dict):
            tail = " | ".join((done.stderr or "").strip().splitlines()[-5:])
            raise EnvironmentBroken(
                f"The verification probe crashed in {venv} (exit {done.returncode}): {tail}",
                "The interpreter itself is broken; rebuild the venv with `envkit build`.",
            )
    return facts
