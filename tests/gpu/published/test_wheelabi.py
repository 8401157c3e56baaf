"""gpu.wheelabi: the torch symbols of wheels' compiled modules and of torch's libraries, read
by range (a local server's range requests) or from disk, within bounds, cached by sha256; and
mangled names made readable without a demangler."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import elfbuild
import indexserver
from abiwheels import MISSING, extension, shared, torch_wheel

pytestmark = elfbuild.needs_cxx


def test_wheels_are_read_by_range_and_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP, the modules come by range; the answers are kept under each wheel's sha256,
    so a second look fetches nothing."""
    from envkit.gpu.published import wheelabi
    from envkit.io.http import Http

    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    files = tmp_path / "files"
    files.mkdir()
    torch = torch_wheel().write(files)
    ext = extension("staleext", "2.0+cu12torch2.5", shared()["stale"]).write(files)
    with indexserver.serve(files) as server:
        base = indexserver.url(server).rsplit("/", 1)[0] + "/files/"
        http = Http()

        def look() -> tuple[wheelabi.WheelNeeds, frozenset[str]]:
            needs = wheelabi.wheel_needs(
                base + ext.name, ext.name, hashlib.sha256(ext.read_bytes()).hexdigest(), http
            )
            wanted = frozenset(s for m in needs.modules for s in m.symbols)
            sha = hashlib.sha256(torch.read_bytes()).hexdigest()
            return needs, wheelabi.torch_defines(base + torch.name, torch.name, sha, wanted, http)

        needs, defined = look()
        fetched = http.traffic.bytes
        assert needs.requires_torch and needs.built_for == "2.5"
        (module,) = [m for m in needs.modules if m.needs_torch]
        assert module.member == "staleext/_C.so" and module.symbols == (MISSING,)
        assert defined == frozenset()
        assert fetched > 0
        assert look() == (needs, defined)
        assert http.traffic.bytes == fetched  # both from the cache


@given(st.text(max_size=200))
def test_readable_takes_any_name(name: str) -> None:
    from envkit.gpu.published.wheelabi import readable

    shown = readable(name)
    assert shown == name or shown.endswith(("(...)", "(...) const"))


@given(st.lists(st.text("abcxyz_:~", min_size=1, max_size=20), min_size=1, max_size=6))
def test_readable_names_every_part_of_a_nested_name(parts: list[str]) -> None:
    from envkit.gpu.published.wheelabi import readable

    mangled = "_ZN" + "".join(f"{len(p)}{p}" for p in parts) + "Ev"
    assert readable(mangled) == "::".join(parts) + "(...)"


def test_readable_is_linear_on_a_crafted_name() -> None:
    from envkit.gpu.published.wheelabi import readable

    assert readable("_ZN" + "1a" * 32_000 + "Ev").startswith("a::a::")
    assert readable("_ZN" + "9" * 60_000) == "_ZN" + "9" * 60_000
    crafted = "_ZN" + "1a" * 500_000 + "Ev"  # 1 MB: longer than any name an ELF reader gives
    assert readable(crafted) == crafted


def local(tmp_path: Path, wheel_name: str = "staleext") -> tuple[str, str, str]:
    """(file:// URL, file name, sha256) of an extension wheel on disk."""
    path = extension(wheel_name, "2.0+cu12torch2.5", shared()["stale"]).write(tmp_path)
    return path.as_uri(), path.name, hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_module_over_the_limits_is_an_answer_not_a_fetch(tmp_path: Path) -> None:
    from envkit.errors import WheelError
    from envkit.gpu.published import wheelabi
    from envkit.gpu.published.wheelkernels import Limits
    from envkit.io.http import Http

    url, name, _sha = local(tmp_path)
    needs = wheelabi.wheel_needs(url, name, "", Http(), limits=Limits(inflated=100))
    assert {m.member for m in needs.modules} == {"staleext/_C.so", "staleext/helper.so"}
    assert all("larger than envkit reads" in m.damaged for m in needs.modules)
    assert not any(m.needs_torch for m in needs.modules)
    with pytest.raises(WheelError, match="envkit reads at most 1 of one wheel"):
        wheelabi.wheel_needs(url, name, "", Http(), limits=Limits(modules=1))
    with pytest.raises(WheelError, match="envkit fetches at most 100 of one wheel"):
        wheelabi.wheel_needs(url, name, "", Http(), total=100)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
        max_leaves=20,
    )
)
def test_a_cache_entry_of_any_shape_is_read_or_refused(data: object) -> None:
    from envkit.gpu.published.wheelabi import WheelNeeds
    from envkit.io.cache import Fields

    try:
        found = WheelNeeds.from_entry(Fields(data, "torch-needs"))
    except (ValueError, TypeError, KeyError):  # what the cache's reader discards
        return
    assert isinstance(found, WheelNeeds)


def test_a_bad_cache_entry_is_discarded_and_the_wheel_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envkit.gpu.published import wheelabi
    from envkit.io.cache import TORCH_NEEDS
    from envkit.io.http import Http

    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    url, name, sha = local(tmp_path)
    first = wheelabi.wheel_needs(url, name, sha, Http())
    entry = TORCH_NEEDS.path(sha)
    data = json.loads(entry.read_text())
    data["modules"][0]["symbols"] = ["not_a_torch_symbol"]  # a forged entry
    entry.write_text(json.dumps(data))
    assert wheelabi.wheel_needs(url, name, sha, Http()) == first
    assert json.loads(entry.read_text())["modules"][0]["symbols"] != ["not_a_torch_symbol"]
