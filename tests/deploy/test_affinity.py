"""Where a pod may land: the node selector terms, read as the scheduler reads them (terms
ORed, expressions ANDed, ``Gt`` on whole numbers, a label that is not one never matching),
admit exactly the nodes whose GPU the pinned builds carry kernels for and whose driver is at
or above the floor; and every value written into a file parses back as the value meant."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.deploy import affinity, kubernetes, ray, slurm
from envkit.deploy.export import Engine, ExportOptions, facts_for, yaml_text
from envkit.deploy.facts import image_for
from envkit.gpu.arch import Capability
from envkit.image.spec import ImageSpec
from envkit.io.redaction import redact
from envkit.lock.torchsource import TorchIndex, TorchSource


def matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    value = labels.get(expr["key"])
    if value is None:
        return False
    if expr["operator"] == "In":
        return value in expr["values"]
    assert expr["operator"] == "Gt" and len(expr["values"]) == 1
    try:
        return int(value) > int(expr["values"][0])
    except ValueError:
        return False


def schedules(terms: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    return any(all(matches(e, labels) for e in t["matchExpressions"]) for t in terms)


def node(cap: tuple[int, int], driver: tuple[int, ...], memory_mib: int = 81920) -> dict[str, str]:
    return {
        affinity.COMPUTE_MAJOR: str(cap[0]),
        affinity.COMPUTE_MINOR: str(cap[1]),
        affinity.DRIVER_MAJOR: str(driver[0]),
        affinity.DRIVER_MINOR: str(driver[1]),
        affinity.DRIVER_REV: f"{driver[2]:02d}" if len(driver) > 2 else "",
        affinity.GPU_MEMORY: str(memory_mib),
    }


CAPS = st.tuples(st.integers(5, 12), st.integers(0, 9))
DRIVERS = st.tuples(st.integers(400, 700), st.integers(0, 200)) | st.tuples(
    st.integers(400, 700), st.integers(0, 200), st.integers(0, 99)
)


def padded(version: tuple[int, ...]) -> tuple[int, ...]:
    return (*version, 0, 0)[:3]


def near(version: tuple[int, ...]) -> set[tuple[int, ...]]:
    """The drivers on either side of a floor: each part one less and one more, in two and
    three parts (the floor itself among them)."""
    found = {version}
    for n, part in enumerate(version):
        for step in (-1, 1):
            if part + step >= 0:
                found.add((*version[:n], part + step, *version[n + 1 :]))
    return found | {padded(v) for v in found} | {v[:2] for v in found}


# each example asks for the drawn node and for every node at the edges of its terms (each
# allowed GPU and its neighbours, the drivers around the floor): some sixty nodes an
# example, so 100 examples ask more of them, nearer the boundaries, than 400 drawn nodes did
@settings(max_examples=examples(100), deadline=None)
@given(
    allowed=st.lists(CAPS, min_size=1, max_size=8, unique=True),
    floor=DRIVERS,
    gpu=CAPS,
    driver=DRIVERS,
)
def test_a_node_is_admitted_exactly_when_its_gpu_and_driver_fit(
    allowed: list[tuple[int, int]],
    floor: tuple[int, ...],
    gpu: tuple[int, int],
    driver: tuple[int, ...],
) -> None:
    caps = tuple(Capability(*c) for c in allowed)
    terms = affinity.node_selector_terms(caps, ".".join(map(str, floor)))
    gpus = {gpu, *allowed} | {(major, minor + 1) for major, minor in allowed}
    gpus |= {(major + 1, minor) for major, minor in allowed}
    for each_gpu in gpus:
        for each_driver in {driver, *near(floor)}:
            fits = each_gpu in allowed and padded(each_driver) >= padded(floor)
            assert schedules(terms, node(each_gpu, each_driver)) == fits, (each_gpu, each_driver)


def test_the_driver_floor_alone_and_the_memory_floor() -> None:
    terms = affinity.node_selector_terms(None, "550.54.14", 24 * 1024**3)
    assert schedules(terms, node((7, 5), (550, 54, 14), 24564))
    assert not schedules(terms, node((7, 5), (550, 54, 13), 24564))
    assert schedules(terms, node((9, 0), (560, 0), 81920))
    assert not schedules(terms, node((8, 9), (570, 1), 16376)), "a 16 GiB card is refused"
    assert affinity.node_selector_terms(None, "") == []  # a CPU build with unknown kernels


def spec(tmp: Path) -> ImageSpec:
    lock = tmp / "lock.txt"
    lock.write_text(
        "# envkit lock\nvllm==0.8.5 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via x\n"
        "torch==2.6.0 \\\n    --hash=sha256:"
        + "b" * 64
        + " \\\n    --hash=sha256:"
        + "c" * 64
        + "\n"
    )
    return ImageSpec(
        profile="p", cell="py3.11-linux-x86_64-cu124", python="3.11", platform="linux-x86_64",
        backend="cu124", lock=lock, lock_sha256="d" * 64,
        pins=(("vllm", "0.8.5"), ("torch", "2.6.0")),
        torch=TorchSource(index=TorchIndex(), backend="cu124", cuda="12.4"),
        index_url="", cuda="12.4", driver="550.54.14",
        capabilities=(Capability(8, 0), Capability(8, 9)), kernels_known=True,
    )  # fmt: skip


def test_ray_takes_the_lock_with_its_hashes_and_the_torch_backend(tmp_path: Path) -> None:
    facts = facts_for(spec(tmp_path), "org/m", [], ExportOptions(Engine.RAY, tmp_path))
    env = ray.runtime_env(facts)
    assert env["uv"]["packages"] == [
        "vllm==0.8.5 --hash=sha256:" + "a" * 64,
        f"torch==2.6.0 --hash=sha256:{'b' * 64} --hash=sha256:{'c' * 64}",
    ]
    assert env["uv"]["uv_pip_install_options"] == [
        "--require-hashes", "--no-deps", "--torch-backend", "cu124",
    ]  # fmt: skip
    assert env["env_vars"]["ENVKIT_LOCK_SHA256"] == "d" * 64
    assert "HF_HUB_OFFLINE" not in env["env_vars"]  # a Hub model: online


# the YAML read back by libyaml's safe loader where PyYAML has it (the same documents as
# its Python one reads, at a tenth of the cost per example)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)


@settings(max_examples=examples(100), deadline=None)
@given(model=TEXT, word=TEXT)
def test_every_value_parses_back_as_meant(tmp_path_factory: Any, model: str, word: str) -> None:
    """A model id or flag value with quotes, newlines, ``$``, YAML's own characters or
    non-ASCII: the YAML and the sbatch script give vLLM the words meant, no more."""
    assume(redact(model) == model and redact(word) == word)  # a credential is masked: below
    tmp = tmp_path_factory.getbasetemp()
    options = ExportOptions(Engine.KUBERNETES, tmp, image=image_for(
        "r.test/v@sha256:" + "e" * 64, False))  # fmt: skip
    facts = facts_for(spec(tmp), model, ["--served-model-name", word], options)
    text = yaml_text(facts, kubernetes.objects(facts, kubernetes.Secrets()))
    docs = list(yaml.load_all(text, Loader=SAFE_LOADER))
    container = docs[0]["spec"]["template"]["spec"]["containers"][0]
    # the model as the pod sees it: itself, or a folder that names one (even "/") under the
    # weights mount
    assert container["args"][0] == kubernetes.served_in_pod(facts)
    # looked for after the model, which may itself read "--served-model-name"
    assert container["args"][container["args"].index("--served-model-name", 1) + 1] == word
    assert len(docs) == 2  # nothing a value holds starts another document
    script = slurm.script(facts, Path("/v"))
    start = 'exec "${RUN[@]}" '
    serve = script[script.index(start) + len(start) :]  # bash splits lines on \n alone
    assert shlex.split(serve)[:3] == ["vllm", "serve", facts.served]
    assert shlex.split(serve)[-1] == word


def test_a_credential_in_a_value_is_masked_before_it_is_encoded(tmp_path: Path) -> None:
    options = ExportOptions(Engine.SLURM, tmp_path, venv=Path("/v"))
    url = "https://user:s3cretpass@weights.test/m"
    facts = facts_for(spec(tmp_path), "org/m", ["--served-model-name", url], options)
    script = slurm.script(facts, Path("/v"))
    text = yaml_text(facts, [{"args": facts.serve_args()}])
    for written in (script, text):
        assert "s3cretpass" not in written and "https://***@weights.test/m" in written


def test_a_variable_holding_a_credential_is_never_written(tmp_path: Path) -> None:
    import dataclasses

    import pytest

    from envkit.deploy.facts import checked
    from envkit.errors import BadInput
    from envkit.profiles.profile import Profile

    options = ExportOptions(Engine.RAY, tmp_path)
    facts = facts_for(spec(tmp_path), "org/m", [], options)
    leaky = dataclasses.replace(facts, env=(("HF_TOKEN", "hf_" + "x" * 30),))
    with pytest.raises(BadInput, match="HF_TOKEN's value, a credential"):
        profile = Profile(name="p", path=tmp_path, description="", python=">=3.10", requirements=())
        checked(profile, leaky, "runtime_env.yaml")
