"""The facts probe's answer is parsed once into VenvFacts; nonsense is one message with its key
path, never a KeyError or a TypeError later in verify or doctor."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bounded import bounded_cases
from hypothesis import given
from hypothesis import strategies as st

from envkit.env.facts import VenvFacts, parse_facts
from envkit.errors import EnvironmentBroken

from helpers import output, profile_text, said

GOOD: dict[str, Any] = {
    "executable": "/v/bin/python",
    "prefix": "/v",
    "base_prefix": "/usr",
    "version": "3.11.7",
    "sys_path": ["/v/lib/python3.11/site-packages"],
    "pythonpath": [],
    "user_site": "",
    "site_packages": ["/v/lib/python3.11/site-packages"],
    "distributions": {
        "vllm": [{"version": "0.8.5", "location": "/v/lib", "installer": "uv", "requires": []}]
    },
    "imports": {"vllm": {"ok": True, "file": "/v/lib/vllm/__init__.py", "seconds": 1.5,
                         "copies": [{"index": 0, "entry": "/v/lib"}]}},
    "probes": {"transformers.X": {"ok": False, "module": "transformers", "error": "no X"}},
    "torch": {"ok": True, "version": "2.6.0", "file": "", "cuda": None, "cuda_available": False},
}  # fmt: skip


def test_a_good_answer_becomes_typed_facts() -> None:
    facts = parse_facts(GOOD)
    assert isinstance(facts, VenvFacts) and facts.is_venv
    assert facts.copies("vllm")[0].installer == "uv"
    assert facts.imports["vllm"].copies[0].entry == "/v/lib"
    assert facts.probes["transformers.X"].module == "transformers"
    assert facts.torch is not None and facts.torch.cuda is None
    assert facts.copies("torch") == ()


NAN = float("nan")


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"version": 3}, "facts.version"),
        ({"prefix": None}, "facts.prefix"),
        ({"sys_path": "x"}, "facts.sys_path"),
        ({"distributions": {"vllm": [{"version": [1]}]}}, "facts.distributions['vllm'][0].version"),
        ({"imports": {"vllm": {"ok": "yes"}}}, "facts.imports['vllm'].ok"),
        ({"imports": {"vllm": {"ok": True, "seconds": NAN}}}, "facts.imports['vllm'].seconds"),
        ({"torch": {"ok": True, "cuda": 12.4}}, "facts.torch.cuda"),
    ],
)
def test_nonsense_names_its_key_path(change: dict[str, Any], path: str) -> None:
    with pytest.raises(EnvironmentBroken) as caught:
        parse_facts({**GOOD, **change})
    assert f"at {path}:" in caught.value.message


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=20,
)


@given(JSON)
def test_any_json_is_facts_or_one_message(data: object) -> None:
    for candidate in (data, {**GOOD, "imports": data}, {**GOOD, "distributions": data}):
        with contextlib.suppress(EnvironmentBroken):
            parse_facts(candidate)


# a sitecustomize.py that prints 4 GiB to stdout (and some to stderr) when the venv's python starts
FLOOD = """import sys
sys.stderr.write("starting\\n")
chunk = b"x" * (1 << 20)
for _ in range(4096):
    sys.stdout.buffer.write(chunk)
"""


def test_a_venv_whose_python_prints_gigabytes_is_one_message_within_memory(
    tmp_path: Path,
) -> None:
    """verify and doctor read what the venv's python prints within io.process's cap: a
    sitecustomize.py that writes 4 GiB ends in one paragraph (exit 1), in a child whose
    memory is limited to bounded.LIMIT_MB (it grew with the output before)."""
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = (venv / "lib").glob("python*/site-packages")
    (site / "sitecustomize.py").write_text(FLOOD)
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "good.toml").write_text(profile_text())
    runs = bounded_cases(
        [
            (tmp_path, ["verify", "good", "--venv", ".venv"]),
            (tmp_path, ["verify", "good", "--venv", ".venv", "--json"]),
            (tmp_path, ["doctor", "--venv", ".venv", "--json"]),
        ]
    )
    for res, _seconds in runs:
        assert res.code == 1, res.out + res.err
        shown = " ".join((res.out + res.err).split())
        assert "wrote more than 16,777,216 bytes to its stdout" in shown
        assert "sitecustomize.py" in shown
    (text, _), (as_json, _), (doctor, _) = runs
    assert len(said(text.err).strip().splitlines()) == 1  # one paragraph, besides progress
    assert output("error", as_json.out)["error"] == "EnvironmentBroken"
    assert output("error", doctor.out)["error"] == "EnvironmentBroken"
