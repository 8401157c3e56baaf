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


def _dist(site: Path, folder: str, metadata: str) -> None:
    (site / folder).mkdir(parents=True)
    (site / folder / "METADATA").write_text(metadata, encoding="utf-8")


def test_the_probe_finds_what_it_is_asked_for_by_name_and_reads_no_other_metadata(
    tmp_path: Path,
) -> None:
    """The probe goes by each ``NAME-VERSION.dist-info`` folder's name, as importlib.metadata's
    own look-up does, and reads the METADATA of the projects it is asked for only (a vLLM
    venv holds some 150): a folder spelt another way is found by its normalized name, an
    ``.egg-info`` (whose folder may not say its version) by its metadata, and a project not
    asked for is not opened (its METADATA here is a folder, which would read as empty)."""
    from envkit.env.facts import collect_facts

    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = (venv / "lib").glob("python*/site-packages")
    _dist(site, "FlashInfer_Python-0.2.5.dist-info", "Name: flashinfer-python\nVersion: 0.2.5\n")
    _dist(site, "transformers.egg-info", "Name: transformers\nVersion: 4.51.3\n")
    (site / "numpy-2.0.0.dist-info" / "METADATA").mkdir(parents=True)
    spec = {"distributions": ["flashinfer-python", "transformers", "numpy-x"]}
    facts = collect_facts(venv / "bin" / "python", spec, venv)
    assert [c.version for c in facts.copies("flashinfer-python")] == ["0.2.5"]
    assert [c.version for c in facts.copies("transformers")] == ["4.51.3"]
    assert facts.copies("numpy-x") == ()
    every = collect_facts(venv / "bin" / "python", {"all_distributions": True}, venv)
    assert {"flashinfer-python", "transformers"} <= set(every.distributions)
    # doctor asks for every one: a folder whose METADATA is unreadable goes by its name
    assert [c.version for c in every.copies("numpy")] == [""]
