"""Shared files written with care: index.json and lock.json changed under a file lock by
real concurrent processes, `publish --to` checked whole before anything is copied, atomic
writes that keep a symlink a link and a file its mode, a lock that must reach the indexes
it names whatever uv's cache could answer; and the small ones: ENVKIT_FAULT read where it
enters, plan's config values checked by type, and impossible sizes refused."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from forked import Started, start_forked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import BadInput
from envkit.io.atomicfile import held, write_atomic
from envkit.io.faults import parse_faults
from envkit.serving.plan.memory_plan import PlanInput, make_plan

import indexserver
from conftest import Indexes
from helpers import PY, ROOT, envkit, made_once, matrix_profile, run_cli

FUZZ = settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ONE_CELL = matrix_profile([PY]).replace('"linux-x86_64", "linux-aarch64"', '"linux-x86_64"')
PROFILES = ("m1", "m2", "m3", "m4")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def index_profiles(folder: Path) -> set[str]:
    return {e["profile"] for e in json.loads((folder / "index.json").read_text())["files"]}


@pytest.fixture(scope="module")
def locked_template(tmp_path_factory: pytest.TempPathFactory, indexes: Indexes) -> Path:
    """Four one-cell profiles with the same content, so one lock serves all four; made once a
    run (helpers.made_once), copied by each test (``four``)."""

    def make(root: Path) -> None:
        (root / "envs").mkdir()
        (root / "envs" / "m1.toml").write_text(ONE_CELL)
        args = ("--index-url", indexes.default, "--torch-index", "default")
        envkit("lock", "m1", *args, cwd=root).assert_ok()
        for name in PROFILES[1:]:
            shutil.copy(root / "envs" / "m1.toml", root / "envs" / f"{name}.toml")
            shutil.copytree(root / "constraints" / "m1", root / "constraints" / name)

    return made_once(tmp_path_factory, "locked-four", make)


@pytest.fixture
def four(locked_template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "four"
    shutil.copytree(locked_template, copy)
    return copy


def start(project: Path, *args: str, fault: str = "") -> Started:
    env = {k: v for k, v in os.environ.items() if k != "ENVKIT_FAULT"}
    if fault:
        env["ENVKIT_FAULT"] = fault
    return start_forked(*args, cwd=project, env=env)


def finish(proc: Started, timeout: float = 120) -> tuple[int, str]:
    """Wait for ``proc`` to end, reading (and closing) its pipes: its code and stderr."""
    _out, err = proc.communicate(timeout=timeout)
    assert proc.returncode is not None
    return proc.returncode, err


def stopped(proc: Started, timeout: float = 60) -> None:
    """Wait until ``proc`` has stopped itself (SIGSTOP at a fault point)."""
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        state = Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0]
        if state in ("T", "t"):
            return
        assert proc.poll() is None, finish(proc)
        time.sleep(0.02)
    pytest.fail("the process never reached its fault point")


def is_stopped(proc: Started) -> bool:
    try:
        stat_line = Path(f"/proc/{proc.pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rpartition(")")[2].split()[0] in ("T", "t")


def at_the_lock(procs: list[Started]) -> None:
    """Wait until each of ``procs`` has stopped itself just before taking a file lock, let
    them go on, and give them time to pass the read they stop at next: had they not to
    wait for the lock, they would be stopped there by the end of this."""
    for proc in procs:
        stopped(proc)
    for proc in procs:
        os.kill(proc.pid, signal.SIGCONT)
    time.sleep(0.5)  # from the lock to the read is one open() and read(): microseconds


def one_at_a_time(procs: list[Started], timeout: float = 120) -> None:
    """Let processes that stop themselves at a fault point go on, one at a time, until all
    have ended; each stops once (the fault fires the first time only)."""
    ends = time.monotonic() + timeout
    while any(p.poll() is None for p in procs) and time.monotonic() < ends:
        held_now = [p for p in procs if is_stopped(p)]
        assert len(held_now) <= 1, "two processes inside the read-modify-write at once"
        for proc in held_now:
            os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.02)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_four_publishers_at_once_keep_every_profile(four: Path) -> None:
    """Four `envkit publish` processes at once, each stopping right after it read
    index.json: while one is stopped there, the others wait for the lock (without it they
    would read the same index.json, and all but the last writer would lose their profile)."""
    fault = "index-read#1=STOP"
    first = start(four, "publish", "m1", fault=fault)
    others: list[Started] = []
    try:
        stopped(first)
        others = [
            start(four, "publish", name, fault=f"file-lock#1=STOP,{fault}") for name in PROFILES[1:]
        ]
        at_the_lock(others)
        assert not any(is_stopped(p) or p.poll() is not None for p in others)
        os.kill(first.pid, signal.SIGCONT)
        one_at_a_time([first, *others])
    finally:
        for proc in [first, *others]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
    for proc in [first, *others]:
        code, err = finish(proc)
        assert code == 0, err
    assert index_profiles(four / "constraints") == set(PROFILES)


def test_a_killed_holder_never_leaves_the_lock_held(four: Path) -> None:
    killed = start(four, "publish", "m1", fault="index-read=9")  # a signal by its number
    assert finish(killed)[0] == -signal.SIGKILL
    started = time.monotonic()
    assert run_cli("--envs", str(four / "envs"), "publish", "m2").code == 0
    assert time.monotonic() - started < 10
    assert index_profiles(four / "constraints") == {"m2"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_two_locks_of_one_profile_at_once_keep_both_cells(tmp_path: Path, indexes: Indexes) -> None:
    """lock.json is merged under its lock: a second `lock --cell` finishing while the first
    is stopped between reading and writing lock.json loses no cell."""
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "m.toml").write_text(matrix_profile([PY]))
    cells = [f"py{PY}-linux-x86_64-cu124", f"py{PY}-linux-aarch64-cu124"]
    args = ["--index-url", indexes.default, "--torch-index", "default", "--cell"]
    fault = "manifest-read#1=STOP"
    first = start(tmp_path, "lock", "m", *args, cells[0], fault=fault)
    second: Started | None = None
    try:
        stopped(first)
        second = start(tmp_path, "lock", "m", *args, cells[1], fault=f"file-lock#1=STOP,{fault}")
        at_the_lock([second])
        assert not is_stopped(second) and second.poll() is None
        os.kill(first.pid, signal.SIGCONT)
        one_at_a_time([first, second])
    finally:
        for proc in (first, second):
            if proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
    for proc in (first, second):
        assert proc is not None
        code, err = finish(proc)
        assert code == 0, err
    manifest = json.loads((tmp_path / "constraints" / "m" / "lock.json").read_text())
    assert sorted(manifest["cells"]) == sorted(cells)


# -- publish --to DIR: checked whole before anything is written ------------------------------


@pytest.mark.parametrize(
    "planted",
    ["foreign index", "user's file", "folder in the way", "link out", "index links out"],
)
def test_publish_to_refuses_before_copying_anything(
    four: Path, tmp_path: Path, planted: str
) -> None:
    out, outside = tmp_path / "out", tmp_path / "outside"
    (out / "m1").mkdir(parents=True)
    outside.mkdir()
    (outside / "keep.txt").write_text("someone else's\n")
    cell = next((four / "constraints" / "m1").glob("*.txt")).name
    if planted == "foreign index":
        (out / "index.json").write_text('{"mine": true}\n')
    elif planted == "user's file":
        (out / "m1" / cell).write_text("my own notes\n")
    elif planted == "folder in the way":
        (out / "m1" / cell).mkdir()
    elif planted == "link out":
        shutil.rmtree(out / "m1")
        (out / "m1").symlink_to(outside)
    else:
        (out / "index.json").symlink_to(outside / "index.json")
    before, outside_before = listing(out), snapshot(outside)
    res = run_cli("--envs", str(four / "envs"), "publish", "m1", "m2", "--to", str(out))
    assert res.code == 2, res.err
    assert "nothing was published" in res.err or "not an index.json written by" in res.err
    assert listing(out) == before  # no copy, no index.json, not even a lock file
    assert snapshot(outside) == outside_before
    if planted == "user's file":
        assert (out / "m1" / cell).read_text() == "my own notes\n"


def test_publish_to_over_its_own_earlier_copy_is_fine(four: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    for _ in range(2):
        res = run_cli("--envs", str(four / "envs"), "publish", "m1", "--to", str(out))
        res.assert_ok()
    assert index_profiles(out) == {"m1"} and len(list((out / "m1").iterdir())) == 2


# -- atomic writes: a link stays a link, a file keeps its mode --------------------------------


@FUZZ
@given(
    mode=st.integers(0o400, 0o777),
    depth=st.integers(0, 3),
    absolute=st.booleans(),
    data=st.binary(max_size=64),
)
def test_write_atomic_keeps_links_and_modes(
    mode: int, depth: int, absolute: bool, data: bytes
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shared = root / "shared"
        shared.mkdir()
        real = shared / "profile.toml"
        real.write_text("old\n")
        real.chmod(mode)
        path = real
        for n in range(depth):  # a chain of links, each in a folder of its own
            folder = root / f"l{n}"
            folder.mkdir()
            link = folder / "profile.toml"
            link.symlink_to(path if absolute else os.path.relpath(path, folder))
            path = link
        chain = [(p, os.readlink(p)) for p in root.rglob("*") if p.is_symlink()]
        write_atomic(path, data)
        assert [(p, os.readlink(p)) for p in root.rglob("*") if p.is_symlink()] == chain
        assert real.read_bytes() == data and stat.S_IMODE(real.stat().st_mode) == mode
        assert not [p for p in root.rglob("*.tmp")]


def test_write_atomic_refuses_what_it_cannot_keep(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    with pytest.raises(BadInput, match="a loop"):
        write_atomic(loop, "x")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "unmounted" / "file")
    with pytest.raises(BadInput, match="whose folder does not exist"):
        write_atomic(dangling, "x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file"):
        write_atomic(fifo, "x")  # refused at once, never opened (that would block)
    assert dangling.is_symlink() and stat.S_ISFIFO(fifo.lstat().st_mode)
    # a link to nothing in a folder that exists is written through, as open() would
    to_nothing = tmp_path / "new-link"
    to_nothing.symlink_to("created.txt")
    write_atomic(to_nothing, "made\n")
    assert to_nothing.is_symlink() and (tmp_path / "created.txt").read_text() == "made\n"
    # envkit's own files (a journal) are never written through a link: the link is replaced
    (tmp_path / "elsewhere").write_text("untouched\n")
    journal = tmp_path / "journal.json"
    journal.symlink_to(tmp_path / "elsewhere")
    write_atomic(journal, "{}\n", own=True)
    assert not journal.is_symlink() and (tmp_path / "elsewhere").read_text() == "untouched\n"


def test_a_long_command_fails_on_its_output_path_before_its_work(tmp_path: Path) -> None:
    """knowledge export, refresh --out and image --save check the path they end by writing
    before they read anything: a missing folder, one that takes no file, a FIFO; a folder
    that takes the file keeps nothing of the check."""
    from envkit.errors import FileSystemError
    from envkit.io.atomicfile import writable

    missing = tmp_path / "no" / "such" / "k.zip"
    res = envkit("knowledge", "export", str(missing), "--all", cwd=tmp_path)
    assert res.code == 2 and "does not exist; nothing was read or written" in res.err
    assert "knowledge:" not in res.err  # no read was started
    res = envkit("refresh", "--out", str(missing), cwd=tmp_path)
    assert res.code == 2 and "does not exist; nothing was read or written" in res.err
    with pytest.raises(FileSystemError, match="Cannot write"):
        writable(Path("/proc/envkit-takes-no-file.zip"))  # a folder, and no file goes there
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file"):
        writable(fifo)
    assert writable(tmp_path / "k.zip") == tmp_path / "k.zip"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_scan_update_writes_through_a_link_and_keeps_the_mode(
    world: indexserver.Server, tmp_path: Path
) -> None:
    """A profile linked from a shared folder: the shared file is what gets updated (so the
    "Updated" line is true), the link stays, and a 0600 profile stays 0600."""
    shared, envs = tmp_path / "shared", tmp_path / "envs"
    shared.mkdir()
    envs.mkdir()
    real = shared / "team.toml"
    real.write_text(
        'python = "3.12"\nrequirements = ["vllm==0.8.5"]\n'
        'constraints = ["transformers==4.51.3"]\n\n[torch]\nbackend = "cu124"\n'
    )
    real.chmod(0o600)
    (envs / "team.toml").symlink_to(Path("..") / "shared" / "team.toml")
    res = envkit(
        "--envs", str(envs), "scan", "--update", "team", "--index-url", indexserver.url(world),
        cwd=tmp_path,
    )  # fmt: skip
    res.assert_ok()
    assert "Updated" in res.out + res.err
    assert (envs / "team.toml").is_symlink()
    assert os.readlink(envs / "team.toml") == str(Path("..") / "shared" / "team.toml")
    assert "[models]" in real.read_text() and 'vllm = "0.8.5"' in real.read_text()
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert sorted(p.name for p in shared.iterdir()) == ["team.toml"]


def test_held_serialises_one_file_whatever_link_names_it(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_text("{}")
    (tmp_path / "alias.json").symlink_to("index.json")
    busy = pytest.raises(BadInput, match="Another envkit process")
    with held(tmp_path / "index.json"), busy, held(tmp_path / "alias.json", wait=0.2):
        pass  # pragma: no cover - never reached
    with held(tmp_path / "alias.json", wait=0.2):
        pass  # released: free again
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".index.json.lock",
        "alias.json",
        "index.json",
    ]


# -- a lock must reach every index it names --------------------------------------------------


@pytest.fixture
def served_indexes(indexes: Indexes, tmp_path: Path) -> tuple[Path, Path]:
    """The default index and a PyTorch-index mirror as flat folders for indexserver (with
    hashes and upload times, as a real index gives them, so uv's cache can answer alone);
    the mirror holds every package, as a full mirror would."""
    default_files = Path(indexes.default.removeprefix("file://"))
    mirror_files = Path(indexes.mirror.removeprefix("file://"))
    default, mirror = tmp_path / "default", tmp_path / "mirror"
    default.mkdir()
    mirror.mkdir()
    for wheel in default_files.glob("*/*.whl"):
        shutil.copy(wheel, default)
        if not wheel.name.startswith("torch-"):
            shutil.copy(wheel, mirror)
    for wheel in mirror_files.glob("*/*.whl"):
        shutil.copy(wheel, mirror)
    return default, mirror


@contextmanager
def serving(folder: Path) -> Iterator[str]:
    with indexserver.serve(folder) as server:
        server.hashes = True
        yield indexserver.url(server)


def test_a_lock_never_takes_uvs_cache_for_an_index_that_is_gone(
    served_indexes: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With exclude_newer, a lock asks uv's cache first; once a mirror (or the index) has
    gone, the cache could still answer, and the lock would record a mirror never reached.
    It is `Cannot reach <URL>`, exit 2, and no file changes."""
    default, mirror = served_indexes
    project = tmp_path / "p"
    (project / "envs").mkdir(parents=True)
    profile = project / "envs" / "x.toml"
    cutoff = 'exclude_newer = "2026-01-01T00:00:00Z"\n'
    profile.write_text(ONE_CELL.replace("[torch]", cutoff + "\n[torch]"))
    monkeypatch.chdir(project)
    with serving(default) as index:
        first = run_cli("lock", "x", "--index-url", index, "--torch-index", "default")
        first.assert_ok()
        with serving(mirror) as gone:
            res = run_cli("lock", "x", "--index-url", index, "--torch-index", gone)
            res.assert_ok()
        before, text = snapshot(project / "constraints"), profile.read_text()
        profile.write_text(text + "# edited: the cell is stale now\n")
        res = run_cli("lock", "x", "--index-url", index, "--torch-index", gone, "--json")
        assert res.code == 2, res.out + res.err
        (cell,) = json.loads(res.out)["cells"]
        assert cell["state"] == "unreachable"
        assert f"Cannot reach {gone}/torch/" in cell["reason"]
        assert snapshot(project / "constraints") == before
    # the index itself gone: the same, for --index-url (uv's cache holds its pages too)
    res = run_cli("lock", "x", "--index-url", index, "--torch-index", "default", "--json")
    assert res.code == 2 and f"Cannot reach {index}/" in res.out, res.out + res.err
    profile.write_text(text)  # current again: --check --resolve asks the index, which is gone
    check = run_cli(
        "lock", "x", "--check", "--resolve", "--index-url", index, "--torch-index", gone
    )
    assert check.code == 2 and f"Cannot reach {index}/" in check.err, check.err
    assert snapshot(project / "constraints") == before


def test_a_local_index_that_is_not_a_folder_is_out_of_reach(
    tmp_path: Path, indexes: Indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "m.toml").write_text(ONE_CELL)
    monkeypatch.chdir(tmp_path)
    missing = (tmp_path / "no-such-mirror").as_uri()
    res = run_cli("lock", "m", "--index-url", indexes.default, "--torch-index", missing, "--json")
    assert res.code == 2, res.out
    assert f"Cannot reach {missing}: no such folder" in json.loads(res.out)["cells"][0]["reason"]
    assert not (tmp_path / "constraints").exists()


# -- ENVKIT_FAULT ----------------------------------------------------------------------------


@pytest.mark.parametrize("signal_text", ["SIGTERM", "TERM", "term", "15", " SIGTERM "])
def test_envkit_fault_takes_a_signal_by_name_or_number(signal_text: str) -> None:
    (fault,) = parse_faults(f"atomic-written#2={signal_text}")
    assert (fault.step, fault.nth, fault.signal) == ("atomic-written", 2, signal.SIGTERM)


@pytest.mark.parametrize(
    "value",
    ["atomic-written=SIGFOO", "atomic-written=99", "atomic-written=SIG", "atomic-writen=TERM",
     "atomic-written#0=TERM", "atomic-written#x=KILL", "swap-old-moved=KILL,verified=NOPE"],
)  # fmt: skip
def test_a_malformed_envkit_fault_is_one_message(
    value: str, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVKIT_FAULT", value)
    monkeypatch.chdir(project)
    res = run_cli("profiles")
    assert res.code == 2 and "ENVKIT_FAULT=" in res.err and "step[#N]=SIGNAL" in res.err
    assert res.err.count("error:") == 1 and "Traceback" not in res.err and res.out == ""


@FUZZ
@given(text=st.text(max_size=30))
def test_envkit_fault_parses_or_refuses_anything(text: str) -> None:
    try:
        faults = parse_faults(text)
    except BadInput as exc:
        assert "ENVKIT_FAULT=" in exc.message
    else:
        assert all(isinstance(f.signal, signal.Signals) for f in faults)


# -- plan: every config value's type, impossible sizes ---------------------------------------

CONFIG: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 1536,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "intermediate_size": 8960,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}
# every field plan reads, with values of a wrong type (the path names where it sits)
WRONG: dict[str, list[Any]] = {
    "layer_types": [5, "full_attention", {"a": 1}, [["x"]], ["full_attention", 3]],
    "text_config": ["oops", 5, ["a"], True],
    "vision_config": ["oops", 3, [1]],
    "tie_word_embeddings": ["false", 0, "yes", [True]],
    "num_hidden_layers": ["28", [28], {"n": 28}, True, 28.5],
    "num_key_value_heads": ["2", [2]],
    "max_position_embeddings": ["32k", [1]],
    "torch_dtype": [16, ["bfloat16"]],
    "num_experts": ["8", [8]],
}


def plan_of(config: dict[str, Any], tmp: Path) -> None:
    (tmp / "config.json").write_text(json.dumps(config))
    make_plan(config, tmp, "m", PlanInput(model=tmp, gpu_memory=24 * 2**30))


@FUZZ
@given(data=st.data(), inside=st.booleans())
def test_plan_refuses_a_config_value_of_the_wrong_type(data: st.DataObject, inside: bool) -> None:
    key = data.draw(st.sampled_from(sorted(WRONG)))
    value = data.draw(st.sampled_from(WRONG[key]))
    inside = inside and key not in ("text_config", "vision_config")
    config = dict(CONFIG)
    if inside:  # the same field inside text_config, where multimodal configs keep it
        config["text_config"] = {**{k: CONFIG[k] for k in ("hidden_size",)}, key: value}
    else:
        config[key] = value
    with tempfile.TemporaryDirectory() as tmp, pytest.raises(BadInput) as caught:
        plan_of(config, Path(tmp))
    message = caught.value.message
    assert ("text_config." + key if inside else key) in message, message
    assert json.dumps(value)[:20] in message, message


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"layer_types": 5}, "layer_types is 5, not a list of layer kinds"),
        ({"text_config": "oops"}, 'text_config is "oops", not an object'),
        ({"text_config": {"num_hidden_layers": "28"}}, 'text_config.num_hidden_layers is "28"'),
    ],
)
def test_plan_names_the_field_and_value_and_exits_2(
    change: dict[str, Any], said: str, tmp_path: Path
) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**CONFIG, **change}))
    res = envkit(
        "--envs", str(ROOT / "envs"), "plan", "vllm-0.8.5+qwen2-vl", str(model),
        "--gpu-memory", "24GiB", cwd=tmp_path,
    )  # fmt: skip
    assert res.code == 2 and said in res.err, res.err
    assert "Traceback" not in res.err


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--gpu-memory", "99999999999TiB"),
        ("--gpu-memory", "9" * 400 + "TiB"),
        ("--gpu-memory", "0.5b"),
        ("--reserve", "9" * 400 + "GiB"),
        ("--free", "1" + "0" * 30 + "TiB"),
        ("--max-model-len", "9" * 40),
    ],
)
def test_plan_refuses_impossible_sizes_naming_the_option(
    option: str, value: str, tmp_path: Path
) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(CONFIG))
    extra = [] if option == "--gpu-memory" else ["--gpu-memory", "24GiB"]
    res = envkit(
        "--envs", str(ROOT / "envs"), "plan", "vllm-0.8.5+qwen2-vl", str(model),
        *extra, option, value, cwd=tmp_path,
    )  # fmt: skip
    assert res.code == 2 and option in res.err, res.err
    assert "Traceback" not in res.err and len(res.err) < 600
