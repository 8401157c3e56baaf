"""vllm serve's parser read from source: both shapes (add_argument calls; flags generated from
config dataclasses), what cannot be read, and the dating of a flag over a served index."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from envkit.index.session import IndexSession
from envkit.releases.serveflags import FlagReader, ServeFlags, read_release

import indexserver
import lint_world


@pytest.fixture
def server(lint_world_index: indexserver.Server) -> indexserver.Server:
    return lint_world_index  # conftest's session index of lint_world's wheels


def test_the_add_argument_shape() -> None:
    found = read_release("0.1.0", lint_world.texts(lint_world.old()))
    assert found.readable
    flags = found.flags
    assert flags["--max-model-len"] == "1" and flags["-tp"] == "1"
    assert flags["--enable-reasoning"] == "0" and flags["--disable-log-requests"] == "0"
    assert flags["--enable-prefix-caching"] == "0" and flags["--no-enable-prefix-caching"] == "0"
    assert flags["--lora-modules"] == "+"
    assert {"--host", "--port", "--api-key", "-h", "--help"} <= set(flags)
    assert found.positional_model and found.model_flag == "error"
    assert found.deprecated == {"--enable-reasoning": "--reasoning-parser"}
    assert found.variables == ("VLLM_LOGGING_LEVEL", "VLLM_OLD_KNOB")


def test_the_dataclass_shape() -> None:
    found = read_release("0.2.0", lint_world.texts(lint_world.new()))
    flags = found.flags
    assert flags["--max-model-len"] == "1" and flags["--dtype"] == "1"
    assert flags["--enforce-eager"] == "0" and flags["--no-enforce-eager"] == "0"
    assert flags["--tensor-parallel-size"] == "1" and flags["-tp"] == "1"
    assert flags["--cudagraph-sizes"] == "+"  # tuple[int, ...], spread into a dict
    assert flags["--shape"] == "2" and flags["--mode"] == "?"
    # the frontend dataclass in a loop over its fields, bases first; nargs deleted by its hook
    assert flags["--chat-template"] == "1" and flags["--allowed-origins"] == "1"
    assert flags["--port"] == "1" and flags["--enable-ssl-refresh"] == "0"
    # EnableDisableAction: --enable-log-requests gives --disable-log-requests too
    assert flags["--enable-log-requests"] == "0" and flags["--disable-log-requests"] == "0"
    assert "--enable-reasoning" not in flags
    assert found.positional_model and found.model_flag == "warning"
    assert found.variables == ("VLLM_LOGGING_LEVEL", "VLLM_NEW_KNOB")


def test_a_parser_built_by_code_is_unreadable_not_empty() -> None:
    found = read_release("0.3.0", lint_world.texts(lint_world.unreadable()))
    assert not found.readable and "computed" in found.unreadable
    assert found.flags == {}
    nothing = read_release("0.3.0", {"vllm/envs.py": "x = 1\n"})
    assert "no vllm serve flag" in nothing.unreadable
    assert "environment_variables" in nothing.variables_unreadable


def test_flags_are_read_by_range_cached_and_dated(
    server: indexserver.Server, scan_cache: Path
) -> None:
    reader = FlagReader(IndexSession(indexserver.url(server)))
    new = reader.flags(Version("0.2.1"))
    assert new.readable and not new.cached and new.bytes_read > 0
    again = FlagReader(IndexSession(indexserver.url(server))).flags(Version("0.2.1"))
    assert again.cached and again.flags == new.flags
    # the newest release before 0.2.1 with --enable-reasoning
    assert reader.last_with(lambda s: "--enable-reasoning" in s.flags, Version("0.2.1")) == "0.1.1"
    assert reader.last_with(lambda s: "--nowhere" in s.flags, Version("0.2.1")) == ""
    assert not reader.flags(Version("0.3.0")).readable


def test_a_bad_cache_entry_is_read_again(server: indexserver.Server, scan_cache: Path) -> None:
    FlagReader(IndexSession(indexserver.url(server))).flags(Version("0.1.0"))
    (entry,) = (scan_cache / "serve-flags").iterdir()
    entry.write_text('{"version": "0.1.0", "flags": {"--x": "many"}}')
    fresh = FlagReader(IndexSession(indexserver.url(server))).flags(Version("0.1.0"))
    assert not fresh.cached and fresh.flags["--enable-reasoning"] == "0"
    assert isinstance(fresh, ServeFlags)
