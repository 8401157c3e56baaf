"""A distribution's METADATA, read by its one reader (envkit.index.metadata): the headers
only, as the email format has them, within a cap, from a wheel's text or an installed file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import UnreadableFile
from envkit.index.metadata import MAX_HEADERS, parse, read_installed
from envkit.releases.registry import requirements
from envkit.serving.explain.envpins import from_venv

TEXT = (
    "Metadata-Version: 2.1\r\n"
    "Name: vllm\r\n"
    "Version: 0.8.5\r\n"
    "Requires-Python: >=3.9\r\n"
    "Requires-Dist: torch==2.6.0\r\n"
    "Requires-Dist: transformers>=4.51.1\r\n"
    'Requires-Dist: pytest; extra == "test"\r\n'
    "\r\n"
    "Name: not-a-header (the description)\r\n"
)


def test_the_headers_are_read_and_the_body_is_not() -> None:
    found = parse(TEXT)
    assert (found.name, found.version, found.requires_python) == ("vllm", "0.8.5", ">=3.9")
    assert found.requires_dist == (
        "torch==2.6.0",
        "transformers>=4.51.1",
        'pytest; extra == "test"',
    )
    assert requirements(TEXT) == ({"torch": "==2.6.0", "transformers": ">=4.51.1"}, ">=3.9")


def test_a_file_lacking_headers_gives_empty_values() -> None:
    found = parse("Metadata-Version: 2.1\n\nName: body\n")
    assert (found.name, found.version, found.requires_dist) == ("", "", ())


def test_an_installed_file_is_read_through_io_files(tmp_path: Path) -> None:
    info = tmp_path / "lib" / "python3.12" / "site-packages" / "vllm-0.8.5.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(TEXT.replace("\r\n", "\n") + "x" * (4 * MAX_HEADERS))
    assert read_installed(info / "METADATA").version == "0.8.5"
    assert from_venv(tmp_path).versions == {"vllm": "0.8.5"}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableFile):  # refused at once, never waited on
        read_installed(fifo)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=2000))
def test_any_text_reads_as_headers_or_nothing(text: str) -> None:
    found = parse(text)
    assert all(isinstance(r, str) for r in found.requires_dist)
