"""Bounded work, not only bounded bytes (issue 18, item 3): archives are inflated and walked
within caps on members, sizes, inflated bytes and time; zip directories and index pages are
counted before they are built; one command's requests share a budget; and every file envkit
is handed is read only if it is a regular file under a cap, checked before reading.

Each attack is built here, on the fly and small on disk (bombs are repeated gzip members and
sparse files), and run through the real ``envkit`` in a child whose address space is capped:
it must end in seconds, with exit 2 and one message, inside that memory."""

from __future__ import annotations

import gzip
import inspect
import io
import json
import os
import re
import struct
import tarfile
import time
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import loopback
import pytest
from bounded import Case, bounded_cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import PROFILE, examples

from envkit.errors import NetworkError, UnreadableFile, WheelError
from envkit.index import archives, pages
from envkit.index.wheels import read_members
from envkit.io.files import read_small, read_small_text
from envkit.io.http import Http
from envkit.lock.states import _index_entries
from envkit.models.history import SCAN_WORKERS

import indexserver
from helpers import Result, profile_text, said
from wheelhouse import Wheel

REGISTRY = "vllm/model_executor/models/registry.py"
MiB = 1024 * 1024
ZERO_MIB = gzip.compress(bytes(MiB), 9)  # one gzip member: 1 KB that inflates to 1 MiB
PROPERTY = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def refused(res: Result, took: float, says: str) -> None:
    """Exit 2 with one message saying ``says``, in seconds, never a traceback."""
    err = said(res.err)  # without the progress lines of the steps it took
    assert res.code == 2, res.err
    assert says in err, res.err
    assert err.startswith("error: ") and err.count("\n") == 1, res.err
    assert "MemoryError" not in err and "out of memory" not in err.lower()
    assert took < 20, took


def header(name: str, size: int, fmt: Literal[0, 1, 2] = tarfile.GNU_FORMAT) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(format=fmt)


def _sparse_wheel(path: Path, directory: int, entries: int) -> None:
    """A wheel whose end record says its directory is ``directory`` bytes of ``entries``
    entries: the bytes before it are a hole (a sparse file, nothing on disk)."""
    name = b"vllm-0.8.5.dist-info/METADATA"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0)
    count = min(entries, 0xFFFF)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, directory, len(local), 0)
    with open(path, "wb") as handle:
        handle.write(local + name)
        handle.seek(len(local) + len(name) + directory)
        handle.write(end)


def _with_wheel(folder: Path, version: str, sdist: bytes) -> None:
    registry = {REGISTRY: "_VLLM_MODELS = {'A': ('a', 'A')}\n"}
    Wheel("vllm", version, dict(registry)).write(folder)
    (folder / f"vllm-{version}.tar.gz").write_bytes(sdist)


def test_archive_bombs_end_in_seconds_within_memory(tmp_path: Path, scan_cache: Path) -> None:
    """Each release of this index is one attack, all small on disk:

    - 0.8.1 / 0.8.2: one sdist member said to be 30 GiB (a pax size record; GNU base-256),
      refused at its header: nothing of it is inflated;
    - 0.8.3 (with ENVKIT_HYPOTHESIS=thorough): 17 members of 63 MiB zeros each (under the
      member cap): the archive's inflated bytes are counted and the stream stops at 1 GiB
      (2.3 s of inflating; by default the next test proves the cap on a smaller one);
    - 0.8.4: a million members in 1 MB (7 MB made 560 MB before): no member list is kept,
      the walk stops at 100,000;
    - 0.8.6: a wheel whose directory is 64 MB of 1.2 million entries (650 MB before): its
      size is checked from the end record before zipfile reads a byte of it.
    """
    folder = tmp_path / "files"
    folder.mkdir()
    pax, gnu = (
        header("vllm-0.8.1/big", 30 << 30, tarfile.PAX_FORMAT),
        header("vllm-0.8.2/big", 30 << 30, tarfile.GNU_FORMAT),
    )
    _with_wheel(folder, "0.8.1", gzip.compress(pax) + ZERO_MIB * 64)
    _with_wheel(folder, "0.8.2", gzip.compress(gnu) + ZERO_MIB * 64)
    if PROFILE == "thorough":
        zeros = gzip.compress(header("vllm-0.8.3/zeros.bin", 63 * MiB)) + ZERO_MIB * 63
        _with_wheel(folder, "0.8.3", zeros * 17)
    _with_wheel(folder, "0.8.4", gzip.compress(header("vllm-0.8.4/f.py", 0) * 10_000, 9) * 100)
    _sparse_wheel(folder / "vllm-0.8.6-py3-none-any.whl", 64_000_000, 1_200_000)
    expected = {
        "0.8.1": "has a member of 32,212,254,720 bytes",
        "0.8.2": "has a member of 32,212,254,720 bytes",
        "0.8.3": "inflates to more than 1,073,741,824 bytes",
        "0.8.4": "has more than 100,000 members",
        "0.8.6": "has a 64,000,000-byte directory (at most 16,777,216)",
    }
    if PROFILE != "thorough":
        del expected["0.8.3"]
    with indexserver.serve(folder) as server:
        url = indexserver.url(server)
        cases: list[Case] = [
            (tmp_path, ["scan", f"vllm=={v}", "--json", "--index-url", url]) for v in expected
        ]
        results = bounded_cases(cases)
    for (res, took), says in zip(results, expected.values(), strict=True):
        refused(res, took, says)
    assert not (scan_cache / "bounds").exists()  # a refusal is never cached as "no bounds"
    with pytest.raises(WheelError, match="64,000,000-byte directory"):  # a file:// index too
        read_members((folder / "vllm-0.8.6-py3-none-any.whl").as_uri(), Http(), ["a.py"])


def _zero_members(count: int, size: int) -> bytes:
    """``count`` tar members of ``size`` zeros (a multiple of 512), one gzip member per MiB."""
    one = gzip.compress(header("vllm-0.8.3/zeros.bin", size)) + ZERO_MIB * (size // MiB)
    return one * count


def test_the_inflated_cap_stops_the_stream_at_the_cap_whatever_the_bombs_size() -> None:
    """The archive-wide cap on inflated bytes, shown on a 32 MiB cap (the scan's is 1 GiB, the
    default every caller keeps; the member-size and member-count cases above go through the
    same defaults from ``envkit scan``): an archive that inflates to exactly the cap is read,
    one byte more is refused; a bomb of 36 MiB and one of 4 GiB are refused alike, and neither
    is read past the cap (garbage placed after it is never reached); what is held while
    inflating is a piece, not the bytes inflated."""
    cap, member = 32 * MiB, 4 * MiB
    kwargs: dict[str, int] = {"max_member": 2 * member, "max_inflated": cap}
    full = _zero_members(cap // member - 1, member)  # 28 MiB of members and their headers
    tail = cap - (cap // member - 1) * (member + 512) - 1024  # up to the cap with the end
    exact = full + gzip.compress(header("vllm-0.8.3/tail.bin", tail - 512) + bytes(tail + 512))
    assert archives.tar_member(exact, "u", lambda _n: False, **kwargs) is None
    with pytest.raises(WheelError, match=f"inflates to more than {cap - 1:,} bytes"):
        archives.tar_member(exact, "u", lambda _n: False, **{**kwargs, "max_inflated": cap - 1})
    garbage = b"not gzip, and never reached" * 100
    small = _zero_members(cap // member + 1, member) + garbage  # 36 MiB, then garbage
    huge = _zero_members(1024, member) + garbage  # 4 GiB, then garbage
    says = f"inflates to more than {cap:,} bytes"
    for bomb in (small, huge):
        tracemalloc.start()
        try:
            with pytest.raises(WheelError, match=says):
                archives.tar_member(bomb, "u", lambda _n: False, **kwargs)
            held = tracemalloc.get_traced_memory()[1]  # the bomb was made before
        finally:
            tracemalloc.stop()
        assert held < 4 * MiB, held  # 32 MiB inflated, a few 256 KiB pieces held
    tar_members = inspect.signature(archives.tar_members).parameters
    assert tar_members["max_inflated"].default == archives.MAX_INFLATED == 1024 * MiB


def test_a_cut_short_or_garbage_sdist_is_one_message() -> None:
    good = io.BytesIO()
    with tarfile.open(fileobj=good, mode="w:gz") as tar:
        data = os.urandom(200_000)
        info = tarfile.TarInfo("vllm-0.8.5/blob")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    cut = good.getvalue()[: len(good.getvalue()) // 2]
    with pytest.raises(WheelError, match="cut short"):
        archives.tar_member(cut, "u", lambda _n: False)
    with pytest.raises(WheelError, match="not a gzip stream"):
        archives.tar_member(b"PK\x03\x04 not gzip at all", "u", lambda _n: False)
    with pytest.raises(WheelError, match="not a tar archive"):
        archives.tar_member(gzip.compress(b"x" * 2048), "u", lambda _n: False)


def test_the_inflate_deadline_counts_reading_not_waiting_for_bytes() -> None:
    """An sdist is read as it downloads: the time its pieces take to arrive is the HTTP
    deadline's, and the inflate deadline counts only the reading (a bomb is still stopped)."""
    data = os.urandom(30_000)
    good = io.BytesIO()
    with tarfile.open(fileobj=good, mode="w:gz") as tar:
        info = tarfile.TarInfo("vllm-0.8.5/tests/models/registry.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    archive = good.getvalue()

    def arriving(body: bytes) -> Iterator[bytes]:
        for at in range(0, len(body), len(body) // 3 + 1):
            time.sleep(0.1)
            yield body[at : at + len(body) // 3 + 1]

    wanted = "vllm-0.8.5/tests/models/registry.py"
    assert archives.tar_member(arriving(archive), "u", lambda n: n == wanted, seconds=0.2) == data
    zeros = gzip.compress(header("vllm-0.8.5/zeros.bin", 63 * MiB)) + ZERO_MIB * 63
    with pytest.raises(WheelError, match="took more than 0 s to inflate"):
        archives.tar_member(zeros, "u", lambda _n: False, seconds=0.01)


def test_a_directory_that_understates_its_entries_is_counted(tmp_path: Path) -> None:
    """An end record that says 10 entries for a directory of 150,000: the entries are counted
    by their signatures before zipfile builds one object each."""
    name = b"a"
    one = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0
    )
    directory = (one + name) * 150_000
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 0, 0, 1, 0) + name
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 10, 10, len(directory), len(local), 0)
    path = tmp_path / "lying.whl"
    path.write_bytes(local + directory + end)
    with pytest.raises(WheelError, match="lists 150,000 entries"):
        read_members(path.as_uri(), Http(), ["a"])


def test_real_wheels_pass_the_directory_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files: dict[str, str | bytes] = {f"vllm/m{i}.py": "x = 1\n" for i in range(300)}
    path = Wheel("vllm", "0.8.5", files).write(tmp_path)
    assert read_members(path.as_uri(), Http(), ["vllm/m7.py"]) == {"vllm/m7.py": b"x = 1\n"}
    zip64 = tmp_path / "zip64.whl"  # zipfile writes zip64 end records past this many entries
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)
    with zipfile.ZipFile(zip64, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    assert b"PK\x06\x06" in zip64.read_bytes()[-200:]
    assert read_members(zip64.as_uri(), Http(), ["vllm/m9.py"]) == {"vllm/m9.py": b"x = 1\n"}


# ---- index pages, and a command's whole budget ----


def _page(count: int, html: bool = False, *, repeated: int = 1) -> bytes:
    """A page listing ``count`` wheels of as many vLLM releases (``repeated`` times over: a
    page of ``count * repeated`` entries, made without building each)."""
    names = [f"vllm-0.{i}.0-py3-none-any.whl" for i in range(count)]
    if html:
        return "".join(f'<a href="/f/{n}">{n}</a>\n' for n in names).encode()
    entries = ",".join(f'{{"filename": "{n}", "url": "/f/{n}"}}' for n in names)
    return f'{{"files": [{",".join([entries] * repeated)}]}}'.encode()


JSON = "application/vnd.pypi.simple.v1+json"


def _wheels(handler: loopback.Handler) -> None:
    """Any file: the same bytes by range (a wheel that is no zip), slowly under /slow/."""
    blob = b"not a wheel " * 200
    if handler.path.startswith("/slow/"):
        time.sleep(0.1)
    found = re.fullmatch(r"bytes=(-?\d+)-?(\d*)", handler.headers.get("Range", ""))
    start = int(found.group(1)) if found else 0
    start = max(0, len(blob) + start) if start < 0 else start
    end = int(found.group(2)) if found and found.group(2) else len(blob) - 1
    rng = {"Content-Range": f"bytes {start}-{end}/{len(blob)}"}
    handler.send(206, blob[start : end + 1], "application/octet-stream", rng)


def test_hostile_index_pages_end_in_seconds_within_memory(tmp_path: Path, scan_cache: Path) -> None:
    """Each index of this server is one attack on the page or on the run's length:

    - /huge: 400,000 entries (35 MB: 1,000 releases 400 times over; 600 MB in scan before,
      history did not end in 5 minutes): refused by size before it is parsed;
    - /many, /many-html: 20,001 entries within the size cap, PEP 691 and PEP 503: the
      entries are counted as the page is parsed;
    - /endless: 1,500 releases whose wheels are no zip, each a wheel read in history and
      site: refused for listing more releases than any project envkit reads;
    - /slow: 200 releases, each wheel answered slowly but within the deadline: the run's
      requests together meet ENVKIT_HTTP_BUDGET.
    """
    huge, many = _page(1_000, repeated=400), _page(20_001)
    assert len(huge) > 35_000_000  # twice the size cap
    routes: dict[str, loopback.Route] = {
        "/huge/vllm/": lambda h: h.send(200, huge, JSON),
        "/many/vllm/": lambda h: h.send(200, many, JSON),
        "/many-html/vllm/": lambda h: h.send(200, _page(20_001, True), "text/html"),
        "/endless/vllm/": lambda h: h.send(200, _page(1_500), JSON),
        "/slow/vllm/": lambda h: h.send(200, _page(200).replace(b"/f/", b"/slow/"), JSON),
        "*": _wheels,
    }
    history = ["history", "LlamaForCausalLM"]
    with loopback.serve(routes) as server:
        at = loopback.origin(server)
        cases: list[Case] = [
            (tmp_path, ["scan", "vllm==0.1.0", "--index-url", f"{at}/huge"]),
            (tmp_path, [*history, "--index-url", f"{at}/huge"]),
            (tmp_path, ["scan", "vllm==0.1.0", "--index-url", f"{at}/many"]),
            (tmp_path, ["scan", "vllm==0.1.0", "--index-url", f"{at}/many-html"]),
            (tmp_path, [*history, "--index-url", f"{at}/endless"]),
            (tmp_path, ["site", "--out", "site", "--index-url", f"{at}/endless"]),
            (tmp_path, [*history, "--index-url", f"{at}/slow"], {"ENVKIT_HTTP_BUDGET": "1"}),
            (tmp_path, ["scan", "vllm==0.1.0"], {"ENVKIT_HTTP_BUDGET": "soon"}),
        ]
        results = bounded_cases(cases)
        slow = sum(1 for _m, path, _h in server.seen if path.startswith("/slow/"))
    says = [
        "larger than envkit reads (16,777,216 bytes)",
        "larger than envkit reads (16,777,216 bytes)",
        "lists more than 20,000 files",
        "lists more than 20,000 files",
        "lists 1,500 releases of vllm; envkit reads at most 1,000",
        "lists 1,500 releases of vllm; envkit reads at most 1,000",
        "requests have taken 1 s together, its whole budget",
        "ENVKIT_HTTP_BUDGET='soon' is not a number of seconds",
    ]
    for (res, took), expected in zip(results, says, strict=True):
        refused(res, took, expected)
    # about one second of 0.1 s answers, SCAN_WORKERS at a time (history reads that many
    # releases at once), plus those in flight when the budget ends: the run's time is the promise
    assert slow <= 10 * SCAN_WORKERS + SCAN_WORKERS and results[6][1] < 10


# ---- files envkit is handed ----


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _huge(path: Path) -> None:
    with open(path, "wb") as handle:  # sparse: 2 GB said, nothing on disk
        handle.truncate(2 * 1024**3)


def _folder(path: Path) -> None:
    path.mkdir()


KINDS: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "is a named pipe (FIFO), not a regular file"),
    "dev-zero": (_dev_zero, "is a character device, not a regular file"),
    "huge": (_huge, "is 2,147,483,648 bytes or more"),
    "folder": (_folder, "is a folder"),
}


MODEL_FILES = [
    ("check-model", "config.json"),
    ("plan", "config.json"),
    ("plan", "preprocessor_config.json"),
    ("plan", "model.safetensors.index.json"),
]


def test_profiles_and_model_files_that_are_no_small_regular_file_are_refused_unread(
    tmp_path: Path,
) -> None:
    """A profile symlinked to /dev/zero grew to 1.8 GB; a FIFO blocked forever. Profiles and
    each model file, as a FIFO, a link to /dev/zero, a 2 GB (sparse) file and a folder, are
    refused by what they are, before a byte is read."""
    cases: list[Case] = []
    expected: list[tuple[str, str]] = []
    config = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 64}
    config.update({"num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})
    for kind, (make, says) in sorted(KINDS.items()):
        root = tmp_path / kind
        (root / "envs").mkdir(parents=True)
        (root / "envs" / "good.toml").write_text(profile_text())
        make(root / "envs" / "bad.toml")
        for argv in (["profiles"], ["show", "bad"], ["show", "envs/bad.toml"]):
            cases.append((root, argv))
            expected.append((says, "bad.toml"))
        for command, name in MODEL_FILES:
            model = root / f"model-{command}-{name}"
            model.mkdir()
            if name != "config.json":
                (model / "config.json").write_text(json.dumps(config))
            make(model / name)
            plan = ["--gpu-memory", "24GiB"] if command == "plan" else []
            cases.append((root, [command, "good", str(model), *plan]))
            expected.append((says, name))
    results = bounded_cases(cases)
    for (cwd, argv, *_env), (says, name), (res, took) in zip(cases, expected, results, strict=True):
        assert took < 10, (cwd.name, argv)
        shown = res.out + res.err
        assert res.code == 2 and says in shown and name in shown, (cwd.name, argv, shown)
        assert "Traceback" not in shown


def test_lock_files_that_are_fifos_never_block(tmp_path: Path) -> None:
    """matrix reads every cell file and lock.json: a FIFO there is a file envkit did not
    write (the cell is stale or missing), never a wait."""
    from envkit.lock.cells import cells
    from envkit.profiles.profile import load_profile

    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "good.toml").write_text(profile_text())
    folder = tmp_path / "constraints" / "good"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "lock.json")
    first = cells(load_profile(tmp_path / "envs" / "good.toml"))[0]
    os.mkfifo(folder / first.txt_name)
    os.mkfifo(folder / first.pylock_name)
    [(res, _took)] = bounded_cases([(tmp_path, ["matrix", "good", "--json"])])
    assert "Traceback" not in res.err, res.err
    state = {c["cell"]: c["state"] for c in res.json()["cells"]}
    assert state[first.name] in ("stale", "missing")
    os.mkfifo(tmp_path / "index.json")
    with pytest.raises(UnreadableFile, match="named pipe"):
        _index_entries(tmp_path / "index.json")


def test_read_small_checks_the_opened_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"12345")
    assert read_small(path, 5) == b"12345"
    with pytest.raises(UnreadableFile, match="5 bytes or more; envkit reads at most 4") as exc:
        read_small(path, 4)
    assert exc.value.kind == "too-large"
    # a file whose size says 0 and whose reads go on (as /proc's do) is cut off at cap + 1
    with pytest.raises(UnreadableFile, match="envkit reads at most 10"):
        read_small("/proc/self/maps", 10)
    link = tmp_path / "link"
    link.symlink_to(path)
    assert read_small(link, 9) == b"12345"
    with pytest.raises(UnreadableFile, match="symbolic link") as exc:
        read_small(link, 9, follow=False)
    assert exc.value.kind == "symlink"
    with pytest.raises(UnreadableFile, match="does not exist") as exc:
        read_small(tmp_path / "nothing", 9)
    assert exc.value.kind == "missing"
    (tmp_path / "latin1").write_bytes(b"caf\xe9")
    with pytest.raises(UnreadableFile, match="not UTF-8"):
        read_small_text(tmp_path / "latin1", 9)


# ---- properties ----

names = st.text(alphabet="abc/_.", min_size=1, max_size=120).map(lambda n: f"vllm-0.8.5/{n}")
members = st.lists(
    st.tuples(names, st.binary(max_size=1500), st.sampled_from(["file", "dir"])), max_size=12
)
formats = st.sampled_from([tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])


def _archive(items: list[tuple[str, bytes, str]], fmt: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=fmt) as tar:
        for name, data, kind in items:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            else:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if kind == "file" else None)
    return out.getvalue()


@PROPERTY
@given(
    items=members,
    wanted_at=st.integers(min_value=0, max_value=12),
    fmt=formats,
    piece=st.integers(1, 5000),
)
def test_any_archive_shape_gives_the_member_tarfile_sees(
    items: list[tuple[str, bytes, str]], wanted_at: int, fmt: int, piece: int
) -> None:
    """Within the caps, the walk finds what tarfile itself finds, in every tar format, from
    the archive's bytes or from its pieces as a download hands them over (any size)."""
    wanted = "vllm-0.8.5/tests/models/registry.py"
    body = b"_EXAMPLES = {}\n" * (wanted_at + 1)
    try:
        archive = _archive([*items[:wanted_at], (wanted, body, "file"), *items[wanted_at:]], fmt)
    except ValueError:  # a name this format cannot hold (ustar's limits)
        return
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        first = next(m for m in tar.getmembers() if m.name == wanted and m.isfile())
        expected = tar.extractfile(first).read()  # type: ignore[union-attr]
    assert archives.tar_member(archive, "u", lambda n: n == wanted) == expected
    assert archives.tar_member(archive, "u", lambda _n: False) is None
    pieces = (archive[at : at + piece] for at in range(0, len(archive), piece))
    assert archives.tar_member(pieces, "u", lambda n: n == wanted) == expected


@PROPERTY
@given(items=members.filter(lambda m: len(m) >= 2), fmt=formats, cap=st.integers(1, 11))
def test_every_cap_is_a_refusal_never_a_partial_answer(
    items: list[tuple[str, bytes, str]], fmt: int, cap: int
) -> None:
    try:
        archive = _archive(items, fmt)
    except ValueError:
        return
    if cap < len(items):
        with pytest.raises(WheelError, match=f"more than {cap:,} members"):
            archives.tar_member(archive, "u", lambda _n: False, max_members=cap)
    largest = (
        max(len(data) for _n, data, kind in items if kind == "file")
        if any(kind == "file" for _n, _d, kind in items)
        else 0
    )
    if largest:
        with pytest.raises(WheelError, match="has a member of"):
            archives.tar_member(archive, "u", lambda _n: False, max_member=largest - 1)
    with pytest.raises(WheelError, match="inflates to more than 512 bytes"):
        archives.tar_member(archive, "u", lambda _n: False, max_inflated=512)


@PROPERTY
@given(
    items=members,
    fmt=formats,
    cuts=st.lists(st.tuples(st.integers(0, 10**6), st.binary(max_size=8)), max_size=4),
)
def test_damaged_archives_are_a_wheel_error_or_an_answer(
    items: list[tuple[str, bytes, str]], fmt: int, cuts: list[tuple[int, bytes]]
) -> None:
    """Bytes overwritten anywhere (header, deflate data, trailer): the walk answers, or
    refuses with a WheelError; nothing else escapes, and it ends."""
    try:
        archive = bytearray(_archive(items, fmt))
    except ValueError:
        return
    for at, patch in cuts:
        at %= max(1, len(archive))
        archive[at : at + len(patch)] = patch
    try:
        found = archives.tar_member(bytes(archive), "u", lambda n: n.endswith("a"))
    except WheelError:
        return
    assert found is None or isinstance(found, bytes)


pages_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=30,
)


@PROPERTY
@given(page=pages_json, html=st.text(max_size=300))
def test_any_index_page_is_entries_or_one_network_error(page: object, html: str) -> None:
    parses: list[Callable[[], list[dict[str, object]]]] = [
        lambda: pages._json_entries(json.dumps({"files": page}).encode(), "u"),
        lambda: pages._json_entries(json.dumps(page).encode(), "u"),
        lambda: pages.html_entries(html, "u"),
        lambda: pages.html_entries(f"<a href='{html}'>{html}</a>", "u"),
    ]
    for parse in parses:
        try:
            found = parse()
        except NetworkError:
            continue
        assert isinstance(found, list) and all(isinstance(e, dict) for e in found)


@PROPERTY
@given(count=st.integers(0, 120), html=st.booleans(), extra=st.integers(0, 8))
def test_the_entry_cap_holds_for_any_page_size(
    count: int, html: bool, extra: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page is refused exactly when it lists more files than the cap (here 60), whatever
    else each entry carries."""
    monkeypatch.setattr(pages, "MAX_INDEX_ENTRIES", 60)
    monkeypatch.setattr(pages, "MAX_PAGE_ITEMS", 60 * (extra + 4))
    files = [
        {
            "filename": f"vllm-0.{i}.0-py3-none-any.whl",
            "url": f"/f/{i}",
            **{f"k{j}": j for j in range(extra)},
        }
        for i in range(count)
    ]
    body = _page(count, True) if html else json.dumps({"files": files}).encode()
    try:
        found = pages.html_entries(body.decode(), "u") if html else pages._json_entries(body, "u")
    except NetworkError as exc:
        assert count > 60, exc.message
        return
    assert count <= 60 and len(found) == count


@PROPERTY
@given(
    entries=st.integers(0, 2**64 - 1),
    length=st.integers(0, 2**64 - 1),
    zip64=st.booleans(),
    junk=st.binary(max_size=40),
)
def test_any_end_record_is_a_span_within_the_file_or_a_refusal(
    entries: int, length: int, zip64: bool, junk: bytes
) -> None:
    size = 100 * MiB
    if zip64:
        record = struct.pack(
            "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, length, 0
        )
        record_at = size - 22 - 20 - len(record)
        locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, record_at, 1)
        end = struct.pack(
            "<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0
        )
        tail = junk + record + locator + end
    else:
        end = struct.pack(
            "<4s4H2LH",
            b"PK\x05\x06",
            0,
            0,
            entries & 0xFFFF,
            entries & 0xFFFF,
            length & 0xFFFFFFFF,
            0,
            0,
        )
        tail = junk + end
    try:
        start, span = archives.zip_directory(tail, size, "u")
    except WheelError:
        return
    assert span <= archives.MAX_ZIP_DIRECTORY and start >= 0 and start + span <= size


@PROPERTY
@given(content=st.binary(max_size=300), cap=st.integers(0, 300))
def test_read_small_gives_the_file_or_refuses_it(content: bytes, cap: int, tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(content)
    try:
        assert read_small(path, cap) == content and len(content) <= cap
    except UnreadableFile as exc:
        assert len(content) > cap and exc.kind == "too-large"
