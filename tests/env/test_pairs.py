"""The installed vLLM + transformers pair is decided in one place (env.pairs.known_bad):
verify and doctor give the same code and severity for the same venv, also when the wheels
cannot be read (the offline suite's index answers nothing: no verdict from the wheels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Indexes
from helpers import envkit, install_into, output

PAIR_CODES = {"compat", "known-bad-pair", "requirement-violated", "pair-not-checked"}


@pytest.fixture
def project(built_copy: Path) -> Path:
    return built_copy


def verify_pair(project: Path) -> set[tuple[str, str, str]]:
    res = envkit("verify", "good", "--json", cwd=project)
    output("verify", res.out)
    return {
        (c["code"], c["severity"], c["subject"])
        for c in res.json()["checks"]
        if c["code"] in PAIR_CODES
    }


def doctor_pair(project: Path) -> set[tuple[str, str, str]]:
    res = envkit("doctor", "--venv", ".venv", "--profile", "good", "--json", cwd=project)
    data = output("doctor", res.out)
    return {
        (f["code"], f["severity"], f["subject"])
        for f in data["findings"]
        if f["code"] in PAIR_CODES
    }


def test_unreadable_wheels_are_unknown_in_verify_and_doctor_alike(project: Path) -> None:
    said = verify_pair(project)
    assert said == {("pair-not-checked", "unknown", "vllm 0.8.5 + transformers 4.51.3")}
    assert doctor_pair(project) == said


def test_the_rule_without_the_wheels_is_said_by_both(project: Path, indexes: Indexes) -> None:
    """A vLLM that predates transformers 5 on 5.0.0: no wheel read, but its metadata says
    enough; both commands fail it the same way (verify had only said "not checked")."""
    install_into(project / ".venv", indexes.default, "transformers==5.0.0")
    said = verify_pair(project)
    name = "vllm 0.8.5 + transformers 5.0.0"
    assert said == {("pair-not-checked", "unknown", name), ("known-bad-pair", "error", name)}
    assert doctor_pair(project) == said
