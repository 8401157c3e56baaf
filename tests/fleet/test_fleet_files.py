"""`envkit fleet check PROFILE FILE...` on fingerprints any launcher made, against the shipped
profile's cell (its exact versions): the node with another GPU and driver is the one
flagged, with what to do; files that are not fingerprints are refused where they enter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.fleet import fingerprint

import fleetnodes as fn
from helpers import output, results_in, run_cli


@pytest.fixture
def fleet(tmp_path: Path) -> list[Path]:
    return [
        fn.write(tmp_path, "a", fn.fingerprint("gpu-a")),
        fn.write(tmp_path, "b", fn.fingerprint("gpu-b")),
        fn.write(tmp_path, "c", fn.fingerprint("gpu-c", fn.P100)),
    ]


def test_a_matching_fleet_passes(fleet: list[Path]) -> None:
    res = run_cli("fleet", "check", fn.SHIPPED, *map(str, fleet[:2]), "--json")
    data = output("fleet-check", res.out)
    assert res.code == 0, res.out
    assert data["ok"] and data["differ"] == [] and data["not_answering"] == []
    node = data["nodes"][0]
    assert node["cell"] == fn.CELL
    status = {c["check"]: c["status"] for c in node["checks"]}
    assert status == dict.fromkeys(
        ("packages", "files", "kernels", "driver", "python", "ray"), "ok"
    )


def test_the_node_with_another_gpu_and_driver_is_flagged(fleet: list[Path]) -> None:
    res = run_cli("fleet", "check", fn.SHIPPED, *map(str, fleet), "--json")
    data = output("fleet-check", res.out)
    assert res.code == 1
    assert data["differ"] == ["gpu-c"]
    bad = {c["check"]: c for c in data["nodes"][2]["checks"]}
    assert bad["kernels"]["status"] == "differs"
    assert "no kernel image for 6.0" in bad["kernels"]["detail"]
    assert fn.SHIPPED in bad["kernels"]["fix"] and fn.CELL in bad["kernels"]["fix"]
    assert bad["driver"]["status"] == "differs"
    assert "520.61.05" in bad["driver"]["detail"] and "550.54.14" in bad["driver"]["fix"]
    assert bad["packages"]["status"] == "ok"
    # each check a result: the node its subject, differs an error
    said = {(r["subject"], r["code"]): r["severity"] for r in results_in(data)}
    assert said["gpu-c", "kernels"] == "error" and said["gpu-c", "packages"] == "ok"
    # text: the table and, for the flagged node, what to do
    text = run_cli("fleet", "check", fn.SHIPPED, *map(str, fleet))
    assert text.code == 1
    assert "3 nodes from 3 fingerprint files:" in text.out
    assert "1 of 3 nodes differs or did not answer:" in text.out
    one = run_cli("fleet", "check", fn.SHIPPED, str(fleet[2]))  # counts of one: no plural
    assert "1 node from 1 fingerprint file:" in one.out
    assert "1 of 1 node differs or did not answer:" in one.out
    assert "gpu-c: kernels:" in text.out and "fix: install NVIDIA driver 550.54.14" in text.out


def test_an_aarch64_node_is_judged_by_the_aarch64_wheels(tmp_path: Path) -> None:
    """vLLM 0.8.5 publishes no linux-aarch64 wheel (a fact of the kernel table, read from the
    index): a GH200 node cannot install the cell, and says so, never a pass."""
    files = [
        fn.write(tmp_path, "x86", fn.fingerprint("x86")),
        fn.write(tmp_path, "grace", fn.fingerprint("grace", fn.GH200, platform="linux-aarch64")),
    ]
    res = run_cli("fleet", "check", fn.SHIPPED, *map(str, files), "--cell", fn.CELL, "--json")
    data = output("fleet-check", res.out)
    assert res.code == 1 and data["differ"] == ["grace"]
    kernels = {c["check"]: c for c in data["nodes"][1]["checks"]}["kernels"]
    assert kernels["status"] == "differs"
    assert "publishes no linux-aarch64 wheel" in kernels["detail"]
    assert "--platform linux-aarch64" in kernels["fix"]


def test_versions_python_and_ray_are_judged(tmp_path: Path) -> None:
    versions = fn.locked_versions()
    versions["torch"] = "2.5.1"
    versions["transformers"] = ""  # its dist-info's METADATA is gone on that node
    del versions["xformers"]
    files = [
        fn.write(tmp_path, "a", fn.fingerprint("a")),
        fn.write(tmp_path, "b", fn.fingerprint("b")),
        fn.write(tmp_path, "c", fn.fingerprint("c", python="3.12.1", versions=versions)),
    ]
    res = run_cli(
        "fleet", "check", fn.SHIPPED, *map(str, files), "--venv", "/srv/vllm/.venv", "--json"
    )
    data = output("fleet-check", res.out)
    assert res.code == 1 and data["differ"] == ["c"]
    bad = {c["check"]: c for c in data["nodes"][2]["checks"]}
    assert "torch 2.5.1 (locked 2.6.0)" in bad["packages"]["detail"]
    assert "xformers missing" in bad["packages"]["detail"]
    assert (
        "transformers with no version in its metadata (locked 4.51.3)" in bad["packages"]["detail"]
    )
    assert bad["packages"]["fix"].endswith(f"envkit build {fn.SHIPPED} --venv /srv/vllm/.venv")
    assert bad["python"]["status"] == "differs" and "3.12.3" in bad["python"]["detail"]


def test_modified_files_and_a_node_without_gpu(tmp_path: Path) -> None:
    doc = fn.fingerprint("a")
    for dist in doc["fingerprint"]["distributions"]:
        if dist["name"] == "transformers":
            dist.update(files="modified", modified=["transformers/__init__.py"])
    files = [fn.write(tmp_path, "a", doc), fn.write(tmp_path, "b", fn.fingerprint("b", None))]
    data = output(
        "fleet-check", run_cli("fleet", "check", fn.SHIPPED, *map(str, files), "--json").out
    )
    assert data["differ"] == ["a", "b"]
    files_a = next(c for c in data["nodes"][0]["checks"] if c["check"] == "files")
    assert "transformers (transformers/__init__.py)" in files_a["detail"]
    kernels_b = next(c for c in data["nodes"][1]["checks"] if c["check"] == "kernels")
    assert "no GPU visible (nvidia-smi is not on PATH)" in kernels_b["detail"]


def test_a_secret_variable_in_a_file_is_masked_on_reading(tmp_path: Path) -> None:
    doc = fn.fingerprint("a", variables={"VLLM_API_KEY": "s3cr3t-value-123", "NCCL_DEBUG": "INFO"})
    res = run_cli("fleet", "check", fn.SHIPPED, str(fn.write(tmp_path, "a", doc)), "--json")
    assert "s3cr3t" not in res.out
    variables = res.json()["nodes"][0]["fingerprint"]["variables"]
    assert variables == {"NCCL_DEBUG": "INFO", "VLLM_API_KEY": "***"}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
        ('{"fingerprint": {"format": 1, "host": NaN}}', "not JSON"),
        ('{"fingerprint": {"format": 2}}', "fingerprint.format"),
        ("{}", "expected an object"),
    ],
)
def test_files_that_are_not_fingerprints_are_refused(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "f.json"
    path.write_text(text)
    res = run_cli("fleet", "check", fn.SHIPPED, str(path), "--json")
    assert res.code == 2 and said in res.json()["message"], res.out


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("gpus", [{"index": 0, "name": "x", "compute_capability": "8.0", "memory": -1}],
         "fingerprint.gpus[0].memory"),
        ("gpus", [{"index": 0, "name": "x", "compute_capability": "eight", "memory": 1}],
         "fingerprint.gpus[0].compute_capability"),
        ("distributions", [{"name": "vllm", "version": "0.8.5", "files": "fine"}],
         "fingerprint.distributions[0].files"),
        ("infiniband", ["x"] * 300, "fingerprint.infiniband"),
        ("host", "h" * 5000, "fingerprint.host"),
        ("variables", {"NCCL_X": 3}, "fingerprint.variables"),
    ],
)  # fmt: skip
def test_each_field_is_checked_with_its_key_path(
    tmp_path: Path, key: str, value: object, said: str
) -> None:
    doc = fn.fingerprint("a")
    doc["fingerprint"][key] = value
    res = run_cli("fleet", "check", fn.SHIPPED, str(fn.write(tmp_path, "a", doc)), "--json")
    assert res.code == 2 and said in res.json()["message"], res.out


def test_a_wrong_value_is_named_in_json_spelling_and_a_missing_one_as_missing(
    tmp_path: Path,
) -> None:
    """Never Python's spelling of what the file held: null, not None; a missing key, not a
    None it never held."""
    said = {}
    for name, change in (("null", None), ("flag", True), ("gone", ...)):
        doc = fn.fingerprint(name)
        if change is ...:
            del doc["fingerprint"]["host"]
        else:
            doc["fingerprint"]["host"] = change
        res = run_cli("fleet", "check", fn.SHIPPED, str(fn.write(tmp_path, name, doc)), "--json")
        said[name] = res.json()["message"]
    assert (
        "fingerprint.host: expected a non-empty string of at most 4096 characters, got null"
        in said["null"]
    )
    assert "got true" in said["flag"] and "None" not in said["null"] + said["flag"]
    assert "got nothing (the key is missing)" in said["gone"]


def test_a_fifo_and_an_oversize_file_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    res = run_cli("fleet", "check", fn.SHIPPED, str(fifo), "--json")
    assert res.code == 2 and "named pipe" in res.json()["message"]
    big = tmp_path / "big.json"
    big.write_text(" " * (fingerprint.MAX_FILE + 1))
    assert run_cli("fleet", "check", fn.SHIPPED, str(big)).code == 2


@settings(max_examples=examples(200), deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
        ),
        max_leaves=30,
    )
)
def test_any_json_is_a_fingerprint_or_a_key_path(data: object) -> None:
    """Whatever a file holds, reading it is a Fingerprint or one ValueError naming a key."""
    try:
        fingerprint.from_dict(data)
    except ValueError as exc:
        assert str(exc).startswith("fingerprint")


@settings(max_examples=examples(50), deadline=None)
@given(
    st.sampled_from(sorted(fn.fingerprint("a")["fingerprint"])),
    # any JSON value (not from_type(object) filtered down to these kinds: the same values,
    # without building and throwing away objects of every other type first)
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=6,
    ),
)
def test_one_field_changed_is_read_or_named(key: str, value: object) -> None:
    doc = fn.fingerprint("a")["fingerprint"]
    doc[key] = value
    try:
        found = fingerprint.from_dict(json.loads(json.dumps(doc)))
    except ValueError as exc:
        assert key in str(exc) or "format" in str(exc)
    else:
        assert found.host


def test_nodes_need_one_source_and_a_known_cell(fleet: list[Path]) -> None:
    assert run_cli("fleet", "check", fn.SHIPPED).code == 2
    both = run_cli("fleet", "check", fn.SHIPPED, str(fleet[0]), "--ray", "auto")
    assert both.code == 2 and "not both" in both.err
    local = run_cli("fleet", "check", fn.SHIPPED, "--ray", "local", "--json")
    assert local.code == 2 and "would start a new" in local.json()["message"]
    res = run_cli("fleet", "check", fn.SHIPPED, str(fleet[0]), "--cell", "py3.9-x-cu1", "--json")
    assert res.code == 2 and "has no cell py3.9-x-cu1" in res.json()["message"]
