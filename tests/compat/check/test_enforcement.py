"""verify's and doctor's look-up of the installed pair (compat.check.enforcement): a pair
checked before is answered from envkit's cache without the checker being made; one not
checked yet goes to the checker, made once; a bad version is one sentence, no verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from packaging.version import Version

from envkit.compat.check.enforcement import cached_first
from envkit.compat.report import CompatReport, store
from envkit.errors import NetworkError

INDEX = "http://127.0.0.1:9/simple"


class Unreachable:
    """A checker whose index cannot be read (what a check afresh raises offline)."""

    def check(self, vllm: Version, transformers: Version) -> Any:
        raise NetworkError(f"cannot read {INDEX} for vLLM {vllm}", "check the network")


def test_a_cached_pair_is_answered_without_the_checker(scan_cache: Path) -> None:
    report = CompatReport(vllm="0.8.5", transformers="4.51.3", reference="", findings=())
    store(report, INDEX)
    made: list[Unreachable] = []

    def make() -> Any:
        made.append(Unreachable())
        return made[-1]

    look = cached_first(INDEX, make)
    found = look("0.8.5", "4.51.3")
    assert isinstance(found, CompatReport) and found.compatible and made == []
    assert (found.vllm, found.transformers) == ("0.8.5", "4.51.3")
    other = look("0.8.5", "5.0.0")  # not cached: the checker, whose index is unreadable
    assert isinstance(other, str) and other.startswith("compat not checked: cannot read")
    assert look("0.9.0", "5.0.0") == other.replace("0.8.5", "0.9.0") and len(made) == 1
    bad = look("0.8.5", "not-a-version")
    assert bad == "compat not checked: transformers 'not-a-version' is not a version"
    assert len(made) == 1
