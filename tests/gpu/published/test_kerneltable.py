"""envkit's kernel table: generated from served indexes (incremental by sha256, the PyTorch
index's other CUDA builds where it answers), loaded with every entry checked, and its
verdicts: runs, no-kernel-image, or unknown for what it does not hold, never a guess."""

from __future__ import annotations

import dataclasses
import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.gpu.arch import Capability, target
from envkit.gpu.published import kerneltable, kernelupdate
from envkit.gpu.published.kerneltable import KernelTable, TorchBuild, Verdict, VllmBuild
from envkit.gpu.published.wheelkernels import ModuleKernels, WheelKernels
from envkit.gpu.roles import Role
from envkit.io.cache import BadEntry

import elfbuild
import indexserver
import kernelwheels

SHA = "ab" * 32


def cap(text: str) -> Capability:
    return Capability.parse(text)


def module(member: str, *groups: tuple[tuple[str, ...], int], **more: Any) -> ModuleKernels:
    found = tuple((frozenset(target(t) for t in names), n) for names, n in groups)
    return ModuleKernels(member, more.pop("role", Role.CORE), 1000, found, 10, **more)


def wheel(project: str, version: str, *modules: ModuleKernels, **more: Any) -> WheelKernels:
    name = f"{project}-{version}-cp312-cp312-manylinux1_x86_64.whl"
    return WheelKernels(project, version, name, more.pop("sha", SHA), 1, modules, **more)


MAIN = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90")
LINE = ", ".join(MAIN)
VLLM = wheel(
    "vllm",
    "0.8.5",
    module("vllm/_C.abi3.so", (MAIN, 27), (("sm_90a",), 18), needed=("libcudart.so.12",)),
    module("vllm/_moe_C.abi3.so", ((*MAIN, "compute_90"), 2), needed=("libcudart.so.12",)),
    module("vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", (("sm_80",), 3), role=Role.OPTIONAL),
    requires_torch="==2.6.0",
)
TORCH = wheel(
    "torch",
    "2.6.0",
    module("torch/lib/libtorch_cuda.so", (("sm_50", "sm_60", "sm_70", "sm_80", "sm_90"), 300)),
    torch_cuda="12.4",
)
TABLE = KernelTable(
    "about",
    "2026-01-01",
    "the package index",
    (
        VllmBuild("0.1.4", wheel("vllm", "0.1.4", *VLLM.modules, requires_torch=">=2.0.0"), "x"),
        VllmBuild("0.8.5", VLLM, "the package index"),
        VllmBuild("0.9.0", wheel("vllm", "0.9.0", *VLLM.modules, requires_torch="==2.7.0"), "x"),
    ),
    (TorchBuild("2.6.0", "12.4", True, TORCH, "the package index"),),
)


def test_a_release_runs_where_vllm_and_its_pinned_torch_both_have_kernels() -> None:
    on = TABLE.release_verdict("0.8.5", cap("8.6"))
    assert on.verdict is Verdict.RUNS
    assert on.vllm.has == f"_C: {LINE}; _moe_C: {LINE} + PTX compute_90"  # per core module
    assert on.torch.build == "torch 2.6.0 (CUDA 12.4)"
    assert TABLE.release_verdict("0.8.5", cap("9.0")).verdict is Verdict.RUNS
    blackwell = TABLE.release_verdict("0.8.5", cap("12.0"))
    assert blackwell.verdict is Verdict.NO_KERNEL_IMAGE
    assert "_C.abi3.so has no kernel image for 12.0" in blackwell.describe()
    pascal = TABLE.release_verdict("0.8.5", cap("6.0"))  # torch runs there, vLLM does not
    assert (pascal.verdict, pascal.vllm.verdict, pascal.torch.verdict) == (
        Verdict.NO_KERNEL_IMAGE,
        Verdict.NO_KERNEL_IMAGE,
        Verdict.RUNS,
    )


def test_what_the_table_does_not_hold_is_unknown() -> None:
    assert TABLE.release_verdict("0.7.0", cap("8.0")).verdict is Verdict.UNKNOWN
    unpinned = TABLE.release_verdict("0.1.4", cap("8.0"))
    assert unpinned.verdict is Verdict.UNKNOWN and "not pinned (it asks >=2.0.0)" in (
        unpinned.describe()
    )
    missing = TABLE.release_verdict("0.9.0", cap("8.0"))
    assert missing.verdict is Verdict.UNKNOWN and "torch 2.7.0" in missing.describe()
    assert TABLE.release_verdict("0.9.0", cap("12.0")).verdict is Verdict.NO_KERNEL_IMAGE
    damaged = VllmBuild("1.0.0", wheel("vllm", "1.0.0", module("vllm/_C.abi3.so", damaged="x")), "")
    assert damaged.on(cap("8.0")).verdict is Verdict.UNKNOWN
    empty = VllmBuild("1.0.0", wheel("vllm", "1.0.0"), "")
    assert "no core module" in empty.on(cap("8.0")).reason
    assert TABLE.release_verdict("not a version", cap("8.0")).verdict is Verdict.UNKNOWN


def test_lookups_by_version_and_cuda() -> None:
    build = TABLE.vllm_build("0.8.5.0")
    assert build is not None and build.torch == "2.6.0" and build.cuda_major == 12
    assert build.targets() == f"_C: {LINE}; _moe_C: {LINE} + PTX compute_90"
    assert TABLE.torch_build("2.6.0") is TABLE.torch_build("2.6.0", "12.4") is not None
    assert TABLE.torch_build("2.6.0+cu124", "12.4.1") is not None
    assert TABLE.torch_build("2.6.0", "11.8") is None and TABLE.torch_build("2.7.0") is None
    moe = VllmBuild("0.8.5", wheel("vllm", "0.8.5", VLLM.modules[1]), "")
    assert moe.targets() == f"{LINE} + PTX compute_90"  # one module: one line
    assert moe.on(cap("12.0")).verdict is Verdict.RUNS  # its PTX compiles for Blackwell


def test_the_document_round_trips_one_module_a_line() -> None:
    text = kerneltable.dumps(TABLE)
    assert kerneltable.load(text) == TABLE
    assert json.loads(text) == TABLE.to_document()
    assert text.count("\n") > 10 and all(len(line) < 2000 for line in text.splitlines())


def _document() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(kerneltable.dumps(TABLE))
    return doc


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *keys, last = path.split(".")
    where: Any = doc
    for key in keys:
        where = where[int(key)] if key.isdigit() else where[key]
    where[int(last) if last.isdigit() else last] = value


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("vllm.0.sha256", "xyz", "64 hex"),
        ("vllm.0.version", "0.8.5-dev", "not a release"),
        ("vllm.0.wheel", "../x.whl", "file name"),
        ("vllm.0.modules.0.member", "vllm/../../etc/passwd.so", "shared object"),
        ("vllm.0.modules.0.role", "library", "core nor optional"),
        ("vllm.0.modules.0.groups.0.targets", ["sm_9x"], "CUDA target"),
        ("vllm.0.modules.0.groups.0.targets", [], "0 targets"),
        ("vllm.0.modules.0.groups.0.containers", 0, "is 0"),
        ("vllm.0.modules.0.groups.0.containers", -1, "whole number"),
        ("vllm.0.modules.0.needed", ["libc.so.6"], "not a CUDA library"),
        ("vllm.0.modules.0.bytes", "many", "whole number"),
        ("vllm.0.project", "torch", "out of place"),
        ("torch.0.torch_cuda", "twelve", "CUDA version"),
        ("torch.0.default", "yes", "true or false"),
        ("vllm.0.modules", {"a": 1}, "list"),
    ],
)
def test_a_bad_entry_is_left_out_with_its_reason(path: str, value: Any, reason: str) -> None:
    doc = _document()
    _set(doc, path, value)
    loaded = kerneltable.load(json.dumps(doc))
    assert len(loaded.problems) == 1 and reason in loaded.problems[0], loaded.problems
    section = path.split(".")[0]
    assert len(getattr(loaded, section)) == len(getattr(TABLE, section)) - 1


def test_duplicates_are_left_out() -> None:
    doc = _document()
    doc["vllm"].append(doc["vllm"][0])
    doc["torch"].append(dict(doc["torch"][0], torch_cuda="12.6"))  # a second default build
    loaded = kerneltable.load(json.dumps(doc))
    assert len(loaded.vllm) == 3 and len(loaded.torch) == 1 and len(loaded.problems) == 2


X86 = kerneltable.X86


def _same_lookups(text: str) -> None:
    """The shipped table's lazy reading answers every lookup as load's whole reading does,
    asked before and after its whole vLLM section is read."""
    whole = kerneltable.load(text)
    asked = [(b.version, b.platform) for b in whole.vllm] + [("0.0.1", "linux-x86_64")]
    lazy = kerneltable.LazyTable(text)
    assert "_whole" not in lazy.__dict__  # no entry checked yet
    for version, platform in asked:
        assert lazy.vllm_build(version, platform) == whole.vllm_build(version, platform)
        assert lazy.release_verdict(version, cap("8.0"), platform) == (
            whole.release_verdict(version, cap("8.0"), platform)
        )
    builds = [(t.version, t.cuda, t.platform) for t in whole.torch] + [("0.0.1", "", X86)]
    for version, cuda, platform in builds:
        for asked_cuda in (None, cuda, "11.8"):
            assert lazy.torch_build(version, asked_cuda, platform) == (
                whole.torch_build(version, asked_cuda, platform)
            )
        assert lazy.torch_build(f"{version}+cu124", None, platform) == (
            whole.torch_build(f"{version}+cu124", None, platform)
        )
    assert "_whole" not in lazy.__dict__  # each lookup read its release's entries alone
    assert lazy.torch == whole.torch and lazy.no_wheel == whole.no_wheel
    names = [f.name for f in dataclasses.fields(KernelTable)]
    assert KernelTable(*(getattr(lazy, n) for n in names)) == whole  # every field, read whole
    assert lazy.vllm_build("0.8.5.0") == whole.vllm_build("0.8.5")  # the same release


def test_the_lazy_table_answers_as_the_whole_one() -> None:
    _same_lookups((resources.files("envkit") / "data" / "gpu-kernels.json").read_text())
    assert isinstance(kerneltable.packaged(), kerneltable.LazyTable)


def test_the_lazy_table_leaves_out_the_entries_load_leaves_out() -> None:
    doc = _document()
    bad = json.loads(json.dumps(doc["vllm"][0]))
    bad["sha256"] = "not hex"  # a bad entry of a release before its good one: the good kept
    doc["vllm"].insert(0, bad)
    doc["vllm"].append(dict(doc["vllm"][1], source="a second copy"))  # the first one kept
    doc["vllm"].append(dict(doc["vllm"][2], version=7))  # no version: left out
    doc["torch"].append(dict(doc["torch"][0], torch_cuda="12.6"))  # a second default: out
    doc["torch"].append(dict(doc["torch"][0], torch_cuda="12.8", default=False))  # kept
    _same_lookups(json.dumps(doc))


@pytest.mark.parametrize("text", ["[]", "{", '{"vllm": 1}', '{"vllm": [], "torch": NaN}', "7"])
def test_a_document_that_is_not_a_table_is_refused(text: str) -> None:
    with pytest.raises(BadEntry):
        kerneltable.load(text)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**60) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(max_examples=examples(60), deadline=None)
@given(
    key=st.sampled_from(["version", "wheel", "modules", "sha256", "requires_torch", "source"]),
    value=JSON,
)
def test_any_value_in_an_entry_loads_or_is_left_out(key: str, value: Any) -> None:
    doc = _document()
    doc["vllm"][0][key] = value
    loaded = kerneltable.load(json.dumps(doc))
    assert len(loaded.vllm) + len(loaded.problems) == 3


def test_the_shipped_table_holds_every_release_read() -> None:
    """The table shipped with envkit loads whole; vLLM 0.8.5 and its torch as they are."""
    table = kerneltable.shipped()
    assert table.problems == () and len(table.vllm) >= 90 and table.generated
    build = kerneltable.vllm_build("0.8.5")
    assert build is not None and build.torch == "2.6.0" and build.cuda_major == 12
    assert build.targets() == "sm_70, sm_75, sm_80, sm_86, sm_89, sm_90"
    assert kerneltable.vllm_cuda_major("0.33.0") == 13
    torch = kerneltable.torch_build("2.6.0")
    assert torch is not None and torch.cuda == "12.4" and torch.default
    assert kerneltable.vllm_release_verdict("0.8.5", cap("8.9")).verdict is Verdict.RUNS
    assert kerneltable.vllm_release_verdict("0.8.5", cap("12.0")).verdict is (
        Verdict.NO_KERNEL_IMAGE
    )
    assert kerneltable.vllm_release_verdict("0.0.1", cap("8.0")).verdict is Verdict.UNKNOWN
    wheels = [*(b.wheel for b in table.vllm), *(b.wheel for b in table.torch)]
    assert all(len(w.sha256) == 64 and w.filename.endswith(".whl") for w in wheels)


# --- generating the table from served indexes ---------------------------------------------


@pytest.fixture
def indexes(tmp_path: Path) -> tuple[Path, Path]:
    default, pytorch = tmp_path / "default", tmp_path / "pytorch"
    default.mkdir()
    pytorch.mkdir()
    kernelwheels.vllm(default, "0.8.5")
    kernelwheels.vllm(default, "0.9.0", torch="torch==2.7.0")  # not on the index
    built = kernelwheels.modules()
    kernelwheels.vllm(default, "0.9.1", {"vllm/x.abi3.so": built["plain"]})  # no kernels
    kernelwheels.torch(default, "2.6.0", "12.4")
    kernelwheels.torch(pytorch, "2.6.0+cu118", "11.8")
    kernelwheels.torch(pytorch, "2.6.0+cu124", "12.4")  # the default build: not read again
    return default, pytorch


@elfbuild.needs_cxx
def test_the_table_is_generated_and_regenerated_by_sha256(
    indexes: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "gpu-kernels.json"
    with indexserver.serve(indexes[0]) as default, indexserver.serve(indexes[1]) as pytorch:
        default.hashes = True
        args = ["--out", str(out), "--index-url", indexserver.url(default)]
        host, port = pytorch.server_address[:2]
        first = [*args, "--pytorch-index", f"http://{host!s}:{port}/whl"]
        assert kernelupdate.main(first) == 0
        table = kerneltable.load(out.read_text())
        assert [b.version for b in table.vllm] == ["0.8.5", "0.9.0"]
        assert [(t.version, t.cuda, t.default) for t in table.torch] == [
            ("2.6.0", "12.4", True),
            ("2.6.0", "11.8", False),
        ]
        assert "PyTorch index" in table.torch[1].source
        assert any("0.9.1" in n and "no GPU kernels" in n for n in table.notes)
        assert any("torch 2.7.0" in n and "no Linux x86_64 wheel" in n for n in table.notes)
        err = capsys.readouterr().err
        assert "[1/3] vllm 0.8.5: reading" in err and "vllm/_C.abi3.so" in err
        assert table.release_verdict("0.8.5", cap("8.0")).verdict is Verdict.RUNS
        assert table.release_verdict("0.9.0", cap("8.0")).verdict is Verdict.UNKNOWN

        # again, with an empty cache: the wheels whose sha256 is unchanged are kept
        monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "empty-cache"))
        before = len(default.paths)
        assert kernelupdate.main([*args, "--vllm", "0.8.5"]) == 0
        assert not any(p.startswith("/files/") for p in default.paths[before:])
        assert "kept (its sha256 is unchanged)" in capsys.readouterr().err
        again = kerneltable.load(out.read_text())
        assert again.vllm == table.vllm and again.torch == table.torch  # 0.9.0 kept as it was
        # every release, without the PyTorch index: its builds read before are kept
        assert kernelupdate.main(args) == 0
        assert kerneltable.load(out.read_text()).torch == table.torch

    # an index that does not answer: an error, the table left as it was
    assert kernelupdate.main(["--out", str(out), "--index-url", "http://127.0.0.1:9/simple"]) == 2
    assert kerneltable.load(out.read_text()) == again
    assert kernelupdate.main(["--out", str(out), "--vllm", "zero"]) == 2
    assert "error:" in capsys.readouterr().err


@elfbuild.needs_cxx
def test_an_unreachable_pytorch_index_is_a_note(indexes: tuple[Path, Path], tmp_path: Path) -> None:
    shutil.rmtree(indexes[1])
    out = tmp_path / "gpu-kernels.json"
    with indexserver.serve(indexes[0]) as default:
        args = ["--out", str(out), "--index-url", indexserver.url(default), "--vllm", "0.8.5"]
        assert kernelupdate.main(args) == 0  # without the index's sha256: nothing recorded
        unsigned = kerneltable.load(out.read_text())
        assert unsigned.vllm == () and any("gives no sha256" in n for n in unsigned.notes)
        default.hashes = True
        assert kernelupdate.main([*args, "--pytorch-index", "http://127.0.0.1:9/whl"]) == 0
    table = kerneltable.load(out.read_text())
    assert [t.cuda for t in table.torch] == ["12.4"] and table.problems == ()
    assert any("PyTorch index" in n and "not reachable" in n for n in table.notes)


@elfbuild.needs_cxx
def test_the_text_lists_kernels_from_every_main_container_group(tmp_path: Path) -> None:
    """vLLM 0.32's _C_stable_libtorch: most main containers hold sm_100, one holds sm_100f
    instead; each runs on 10.0, so the verdict says runs, and the text says sm_100 too (it
    listed what every main container held alike, which left sm_100 out)."""
    from envkit.gpu.binaries import fatbin, images
    from envkit.gpu.published.kernelverdict import build_verdict

    import fatbins
    from fatbins import FAMILY, SASS, E

    plain = fatbins.container(*fatbins.sass(75, 80, 86, 89, 90, 100, 120))
    family = fatbins.container(*fatbins.sass(75, 80, 86, 89, 90), E(SASS, 100, FAMILY),
                               E(SASS, 120))  # fmt: skip
    so = fatbins.with_fatbin(
        elfbuild.built().ext_stable,
        fatbins.section(plain, plain, family),
        tmp_path / "_C_stable_libtorch.abi3.so",
    )
    read = fatbin.read(so)
    assert isinstance(read, fatbin.Fatbin)
    held = images.images(read)
    assert len(held.main) == 2  # two main container groups
    member = "vllm/_C_stable_libtorch.abi3.so"
    found = module(member, *((tuple(map(str, t)), n) for t, n in held.groups))
    build = wheel("vllm", "0.32.0", found)
    on = build_verdict("vLLM 0.32.0", build, cap("10.0"))
    assert on.verdict is Verdict.RUNS
    # sm_100f adds no GPU beside sm_100, as sm_90a none beside sm_90
    assert on.has == "sm_75, sm_80, sm_86, sm_89, sm_90, sm_100, sm_120"
    assert "sm_100" in on.reason
    # a target only one main group holds is not listed, and its GPU has no kernel image
    apart = module(member, (("sm_75", "sm_80", "sm_100"), 2), (("sm_70", "sm_75", "sm_80"), 1))
    split = wheel("vllm", "0.32.0", apart)
    assert build_verdict("vLLM", split, cap("10.0")).verdict is Verdict.NO_KERNEL_IMAGE
    assert build_verdict("vLLM", split, cap("7.0")).verdict is Verdict.NO_KERNEL_IMAGE
    assert build_verdict("vLLM", split, cap("8.0")).has == "sm_75, sm_80"
    alone = module(member, (("sm_90a", "sm_100f"), 2), (("sm_90a", "sm_100"), 1))
    assert build_verdict("vLLM", wheel("vllm", "1", alone), cap("9.0")).has == "sm_90a, sm_100"
    # PTX is listed when every main group has PTX for its GPUs
    ptx = module(member, (("sm_80", "compute_80"), 2), (("sm_80", "compute_90"), 1))
    assert build_verdict("vLLM", wheel("vllm", "1", ptx), cap("8.0")).has == (
        "sm_80 + PTX compute_90"
    )


@elfbuild.needs_cxx
def test_aarch64_wheels_are_read_into_the_same_table_and_a_missing_one_is_a_fact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each platform's wheels are read by their own run; the other platform's entries stay;
    a release the index lists without an aarch64 wheel is recorded as having none."""
    index = tmp_path / "index"
    index.mkdir()
    arm = "cp38-abi3-manylinux_2_28_aarch64"
    kernelwheels.vllm(index, "0.8.5")  # x86_64 only
    kernelwheels.vllm(index, "0.9.0")
    kernelwheels.vllm(index, "0.9.0", tag=arm)
    kernelwheels.torch(index, "2.6.0", "12.4")
    kernelwheels.torch(index, "2.6.0", "12.8", tag="cp312-cp312-manylinux_2_28_aarch64")
    out = tmp_path / "gpu-kernels.json"
    with indexserver.serve(index) as server:
        server.hashes = True
        args = ["--out", str(out), "--index-url", indexserver.url(server)]
        assert kernelupdate.main(args) == 0
        x86 = kerneltable.load(out.read_text())
        assert kernelupdate.main([*args, "--platform", "linux-aarch64"]) == 0
    table = kerneltable.load(out.read_text())
    assert table.problems == ()
    assert [b for b in table.vllm if b.platform == "linux-x86_64"] == list(x86.vllm)
    arm_builds = [(b.version, b.platform) for b in table.vllm if b.platform != "linux-x86_64"]
    assert arm_builds == [("0.9.0", "linux-aarch64")]
    assert table.publishes_no_wheel("0.8.5", "linux-aarch64")
    assert not table.publishes_no_wheel("0.9.0", "linux-aarch64")
    assert not table.publishes_no_wheel("0.8.5", "linux-x86_64")
    torch_arm = table.torch_build("2.6.0", None, "linux-aarch64")
    assert torch_arm is not None and torch_arm.cuda == "12.8" and torch_arm.default
    assert table.torch_build("2.6.0").cuda == "12.4"  # type: ignore[union-attr]
    assert table.release_verdict("0.9.0", cap("8.0"), "linux-aarch64").verdict is Verdict.RUNS
    gone = table.release_verdict("0.8.5", cap("9.0"), "linux-aarch64")
    assert gone.verdict is Verdict.UNKNOWN and "publishes no linux-aarch64 wheel" in gone.describe()
    assert "no Linux aarch64 wheel" in capsys.readouterr().err
    # the shape survives a write and a read
    assert kerneltable.load(kerneltable.dumps(table)) == table


def test_a_gh200_host_is_told_a_release_without_an_aarch64_wheel_does_not_install() -> None:
    from envkit.gpu.cards import card as find_card
    from envkit.gpu.published.profilefit import on_gpu, runs_on
    from envkit.gpu.target import GpuTarget
    from envkit.profiles.profile import parse_profile

    table = kerneltable.KernelTable("", "", "", (), (), no_wheel=(("linux-aarch64", "0.8.5"),))
    card = find_card("gh200")
    assert card.platform == "linux-aarch64" and find_card("h100-80gb").platform == "linux-x86_64"
    target = GpuTarget(card.capability, card.name, None, card.platform)
    text = (
        'python = "3.12"\nrequirements = ["vllm==0.8.5"]\nconstraints = ["transformers==4.51.3"]\n'
        '[torch]\nbackend = "cu124"\n[matrix]\nplatforms = ["linux-x86_64", "linux-aarch64"]\n'
    )
    profile = parse_profile(text, path=Path("p.toml"), name="p")
    found = on_gpu(profile, target, table)
    assert [f.code for f in found] == ["no-platform-wheel"]
    assert "linux-aarch64" in found[0].message and "--platform linux-aarch64" in found[0].fix
    assert [f.code for f in runs_on(profile, table)] == ["no-platform-wheel"]
    # on an x86_64 host the same table decides nothing about aarch64
    x86 = GpuTarget(card.capability, card.name, None, "linux-x86_64")
    assert "no-platform-wheel" not in [f.code for f in on_gpu(profile, x86, table)]


def test_the_shipped_table_knows_the_aarch64_releases_read_from_the_index() -> None:
    """Facts read from the package index (tests/gpu: the shipped data, not a guess): vLLM's
    aarch64 wheels start at 0.10.2; torch 2.8-2.10's default aarch64 wheels are CPU-only."""
    table = kerneltable.shipped()
    arm = "linux-aarch64"
    assert table.publishes_no_wheel("0.8.5", arm) and not table.publishes_no_wheel("0.10.2", arm)
    assert table.vllm_build("0.33.0", arm) is not None
    cpu = table.release_verdict("0.10.2", cap("9.0"), arm)
    assert cpu.verdict is Verdict.NO_KERNEL_IMAGE and "CPU-only build" in cpu.describe()
    for gpu in ("9.0", "10.0", "12.1"):  # GH200, GB200, GB10
        assert table.release_verdict("0.33.0", cap(gpu), arm).verdict is Verdict.RUNS
    assert table.release_verdict("0.8.5", cap("9.0")).verdict is Verdict.RUNS  # x86_64 as before
