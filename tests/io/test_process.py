"""Children of envkit: they die with it, parallel workers spread them over the CPUs, and what
they write is read within a cap."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest
from properties import examples

from envkit.errors import OutputTooLarge
from envkit.io import process
from envkit.io.interrupts import SIGNALS

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc, prctl")
# how a child is started: by vfork through setpriv (found on PATH), or forked (ENVKIT_SETPRIV
# empty: the documented way to go without it)
WAYS = pytest.mark.parametrize("way", ["setpriv", "forked"])


def _start_children(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if way == "forked":
        monkeypatch.setenv(process.SETPRIV_VARIABLE, "")
        assert process.setpriv() is None
    else:
        monkeypatch.delenv(process.SETPRIV_VARIABLE, raising=False)
        if process.setpriv() is None:
            pytest.skip("no setpriv with --pdeathsig here")


@LINUX
@WAYS
@pytest.mark.parametrize("how", ["run", "stream"])
def test_a_child_dies_with_envkit(way: str, how: str) -> None:
    """SIGKILL to envkit: its child (sleep) dies of the parent-death signal, whichever way
    it was started."""
    start = "process.run(['sleep', '60'])"
    if how == "stream":
        start = "process.stream(['sleep', '60']); time.sleep(60)"
    code = f"import time\nfrom envkit.io import process\n{start}"
    env = dict(os.environ, **({process.SETPRIV_VARIABLE: ""} if way == "forked" else {}))
    parent = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        for _ in range(100):
            kids = subprocess.run(
                ["pgrep", "-P", str(parent.pid)], capture_output=True, text=True
            ).stdout.split()
            if kids and _program(int(kids[0])) == "sleep":  # not setpriv: the signal is set
                break
            time.sleep(0.05)
        assert kids, "the child never started"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    child = int(kids[0])
    for _ in range(100):
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":
            return
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the child outlived envkit")


@pytest.mark.skipif(
    len(getattr(os, "sched_getaffinity", lambda _p: ())(0)) < 2, reason="needs Linux, 2 CPUs"
)
def test_parallel_workers_start_their_children_on_one_cpu_each() -> None:
    ask = "import os; print(sorted(os.sched_getaffinity(0)))"
    cpus = sorted(os.sched_getaffinity(0))
    with ThreadPoolExecutor(2, initializer=process.one_cpu_per_worker(2)) as pool:
        seen = list(pool.map(lambda _i: process.run([sys.executable, "-c", ask]).stdout, range(8)))
    assert {len(json.loads(out)) for out in seen} == {1}
    assert {json.loads(out)[0] for out in seen} <= set(cpus)
    # one worker, or the main thread: children keep every CPU
    with ThreadPoolExecutor(1, initializer=process.one_cpu_per_worker(1)) as pool:
        alone = pool.submit(process.run, [sys.executable, "-c", ask]).result()
    assert json.loads(alone.stdout) == cpus
    assert json.loads(process.run([sys.executable, "-c", ask]).stdout) == cpus


def test_run_keeps_output_within_its_cap_and_stops_a_child_past_it() -> None:
    """What a child writes is read as it comes, each stream within the cap: past it, the
    child is stopped and OutputTooLarge names the program and the stream."""
    write = "import sys; sys.{}.buffer.write(b'x' * {}); sys.stdout.buffer.write(b'\\xff\\r\\n')"
    done = process.run([sys.executable, "-c", write.format("stderr", 1000)], max_output=1000)
    assert done.stderr == "x" * 1000 and done.stdout == "\ufffd\n"  # UTF-8, universal newlines
    for stream in ("stdout", "stderr"):
        endless = f"import sys\nwhile True: sys.{stream}.buffer.write(b'x' * 65536)"
        with pytest.raises(OutputTooLarge) as caught:
            process.run([sys.executable, "-c", endless], max_output=1 << 20)
        assert (caught.value.stream, caught.value.limit) == (stream, 1 << 20)
        assert caught.value.program == sys.executable
    merged = process.run([sys.executable, "-c", write.format("stderr", 10)], merge_stderr=True)
    assert merged.stdout == "x" * 10 + "\ufffd\n" and merged.stderr == ""


def test_run_still_ends_a_child_at_its_timeout_while_it_writes() -> None:
    drip = "import sys, time\nwhile True: print('.', flush=True); time.sleep(0.01)"
    with pytest.raises(subprocess.TimeoutExpired):
        process.run([sys.executable, "-c", drip], timeout=0.3)


DOUBLE_FORK = """
import os, sys, time
read, write = os.pipe()
if os.fork() == 0:
    os.setsid()  # a session, and a group, of its own
    if os.fork() == 0:
        os.write(write, str(os.getpid()).encode())
        os.execvp("sleep", ["sleep", "63"])
    os._exit(0)  # its parent is gone: the sleeper is an orphan
os.close(write)
print(os.read(read, 32).decode(), flush=True)
time.sleep(30)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreaper and /proc: Linux")
@pytest.mark.parametrize("child_exits", [False, True])
def test_a_streamed_childs_orphans_are_found_and_stopped(child_exits: bool) -> None:
    """A double fork into a session of its own leaves neither the tree nor the group
    holding it: envkit, a subreaper while it streams, adopts it and stops it."""
    code = DOUBLE_FORK.replace("time.sleep(30)", "") if child_exits else DOUBLE_FORK
    child = process.stream([sys.executable, "-c", code])
    try:
        data = b""
        deadline = time.monotonic() + 10
        while not data.endswith(b"\n") and time.monotonic() < deadline:
            data += child.read(0.5) or b""
        orphan = int(data)
        assert os.getpgid(orphan) != child.pgid
        if child_exits:
            assert child.wait(5) == 0
        assert orphan in child.members()
        stopped = child.stop(2)
        assert stopped.left == () and stopped.signal == "SIGTERM"
        assert not _alive(orphan)
    finally:
        child.stop(0)
        child.close()


def _program(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return ""


def _signals(line: str) -> set[signal.Signals]:
    """``SigBlk:\t<hex mask>`` (or SigIgn) of /proc/PID/status: bit N-1 set for signal N."""
    mask = int(line.split()[1], 16)
    return {s for s in signal.Signals if 0 < s < 64 and mask & (1 << (s - 1))}


def _mask_of_a_child(how: str, field: str = "SigBlk") -> set[signal.Signals]:
    """The signals a real child's program starts with blocked (or ignored): it reads its own
    status, or, streamed, it sleeps and its status is read."""
    if how == "run":
        return _signals(process.run(["grep", f"{field}:", "/proc/self/status"]).stdout)
    child = process.stream(["sleep", "30"])
    try:
        for _ in range(200):
            if _program(child.pid) == "sleep":
                status = Path(f"/proc/{child.pid}/status").read_text().splitlines()
                return _signals(next(row for row in status if row.startswith(f"{field}:")))
            time.sleep(0.01)
        raise AssertionError("the streamed child never ran its program")
    finally:
        child.stop(0)
        child.close()


@LINUX
@WAYS
@pytest.mark.parametrize("how", ["run", "stream"])
def test_a_child_runs_with_the_interrupts_unblocked(
    way: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the main thread (envkit's handlers or Python's), and from a worker thread that
    blocks SIGINT and SIGTERM itself: the child's program starts with neither blocked. One
    ignored by envkit is ignored by the child, as Popen has it."""
    _start_children(way, monkeypatch)
    assert not _mask_of_a_child(how) & SIGNALS
    restore = process.install_signal_handlers()
    try:
        assert not _mask_of_a_child(how) & SIGNALS
    finally:
        restore()

    def blocking() -> set[signal.Signals]:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            return _mask_of_a_child(how)
        finally:
            assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) >= SIGNALS  # kept
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)

    with ThreadPoolExecutor(1) as pool:
        assert not pool.submit(blocking).result() & SIGNALS
    saved = signal.signal(signal.SIGINT, signal.SIG_IGN)  # ignored: the child inherits that
    try:
        assert signal.SIGINT in _mask_of_a_child(how, "SigIgn")
    finally:
        signal.signal(signal.SIGINT, saved)


def test_setpriv_is_found_tried_once_and_set_aside_when_it_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENVKIT_SETPRIV names the setpriv (empty: none); one that is missing, or refuses
    --pdeathsig (as util-linux before 2.33 does), is not used: children are then forked."""
    old = tmp_path / "setpriv"
    old.write_text("#!/bin/sh\necho \"setpriv: unrecognized option '$1'\" >&2\nexit 1\n")
    old.chmod(0o755)
    for named in ("", str(tmp_path / "missing"), str(old)):
        monkeypatch.setenv(process.SETPRIV_VARIABLE, named)
        assert process.setpriv() is None
        assert process.run(["sh", "-c", "echo $0"]).stdout == "sh\n"  # started forked
    found = subprocess.run(["sh", "-c", "command -v setpriv"], capture_output=True, text=True)
    if found.returncode == 0:
        monkeypatch.setenv(process.SETPRIV_VARIABLE, found.stdout.strip())
        assert process.setpriv() == found.stdout.strip()
        monkeypatch.delenv(process.SETPRIV_VARIABLE)
        assert process.setpriv() == found.stdout.strip()


def _failure(call: Callable[[], object]) -> tuple[type[BaseException], int | None, object]:
    with pytest.raises(OSError) as caught:
        call()
    return type(caught.value), caught.value.errno, caught.value.filename


@LINUX
@WAYS
def test_a_program_that_cannot_start_raises_what_popen_raises(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Missing (by name or path), not executable, a folder, a script whose interpreter is
    missing or that has none, a bad cwd: run and stream raise what Popen itself raises, the
    caller's program named (never the trampoline's exit code 127)."""
    _start_children(way, monkeypatch)
    plain = tmp_path / "plain"
    plain.write_text("echo hi\n")
    lost = tmp_path / "lost-interpreter"
    lost.write_text("#!/nowhere/python\nprint(1)\n")
    noshebang = tmp_path / "no-shebang"
    noshebang.write_bytes(b"\x00\x01binary\n")
    for script in (lost, noshebang):
        script.chmod(0o755)
    cases: list[tuple[list[str], Path | None]] = [
        (["envkit-no-such-program"], None),
        ([str(tmp_path / "missing")], None),
        ([str(plain)], None),  # not executable
        ([str(tmp_path)], None),  # a folder
        ([str(lost)], None),
        ([str(noshebang)], None),
        (["true"], tmp_path / "missing"),
        (["true"], plain),  # a cwd that is a file
        (["./plain"], tmp_path),
    ]
    for args, cwd in cases:
        expected = _failure(partial(subprocess.Popen, args, cwd=cwd))
        assert _failure(partial(process.run, args, cwd=cwd)) == expected, (args, cwd)
        assert _failure(partial(process.stream, args, cwd=cwd)) == expected, (args, cwd)


@LINUX
@WAYS
def test_a_child_keeps_the_callers_argv(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _start_children(way, monkeypatch)
    script = tmp_path / "say"
    script.write_text('#!/bin/sh\necho "$0 $1"\n')
    script.chmod(0o755)
    done = process.run(["./say", "x"], cwd=tmp_path)
    assert (done.args, done.stdout) == (("./say", "x"), "./say x\n")
    assert process.run(["sh", "-c", "echo $0"]).stdout == "sh\n"
    child = process.stream(["sh", "-c", "echo $0"])
    try:
        assert child.proc.args == ["sh", "-c", "echo $0"]
        assert child.wait(10) == 0 and child.read(5) == b"sh\n"
    finally:
        child.stop(0)
        child.close()


def _my_children() -> set[int]:
    """Every process whose parent is this one, zombies included (not reaped)."""
    me, found = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                found.add(int(entry.name))
    return found


def _run_or_stream(how: str) -> None:
    """A long child, run to its end or streamed and waited for: only an interrupt ends it
    (a Streaming that stream() returned is stopped here, as its caller would)."""
    if how == "run":
        process.run(["sleep", "30"])
        return
    child = None
    try:
        child = process.stream(["sleep", "30"])
        child.wait(30)
    finally:
        if child is not None:
            try:
                child.stop(0)
            finally:
                child.close()


def _subreaper() -> bool:
    import ctypes

    flag = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    return bool(flag.value)


@LINUX
@WAYS
@pytest.mark.parametrize("handlers", ["envkit", "python"])
@pytest.mark.parametrize("how", ["run", "stream"])
def test_an_interrupt_at_any_moment_of_a_spawn_leaves_no_child(
    way: str, handlers: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT (and SIGTERM, under envkit's handlers) sent to envkit at random moments around
    the spawn of a long child: each ends in KeyboardInterrupt, every child started is
    stopped and reaped, and envkit is no longer a subreaper.

    The timer sends each to the main thread, as the kernel delivers a Ctrl-C to a process
    whose other threads block it (envkit's do: io.interrupts.to_main_thread). Sent with
    os.kill, Linux hands it to the sending thread, which wakes no one: the main thread then
    notices it only when it next runs bytecode (250 ms later in Popen.wait's polling, and
    only when ``sleep 30`` ends in a blocking wait)."""
    _start_children(way, monkeypatch)
    before = _my_children()
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    signals = [signal.SIGINT, signal.SIGTERM] if handlers == "envkit" else [signal.SIGINT]
    chance = random.Random()  # every run looks at other moments (properties.py)
    main = threading.main_thread().ident
    assert main == threading.get_ident()
    try:
        for round_ in range(examples(16)):
            sig = signals[round_ % len(signals)]
            timer = threading.Timer(chance.uniform(0, 0.004), signal.pthread_kill, (main, sig))
            restore = process.install_signal_handlers() if handlers == "envkit" else None
            try:  # envkit's handlers installed again each round: the request recorded cleared
                with pytest.raises(KeyboardInterrupt):
                    try:
                        timer.start()
                        _run_or_stream(how)
                    finally:
                        timer.join()
            finally:
                if restore is not None:
                    restore()
    finally:
        signal.signal(signal.SIGINT, saved)
    assert _my_children() - before == set()
    assert not _subreaper()
    assert signal.set_wakeup_fd(-1) == -1  # no interrupt left envkit's wakeup descriptor set
    process.checkpoint()  # nor a request recorded: the next run in this process goes on


def test_the_trampoline_is_taken_only_for_a_program_exec_will_start(tmp_path: Path) -> None:
    """io.programs finds a program as Popen does (a slash: the name itself, from the child's
    folder; else the child's PATH, passing over what exec passes over) and says yes only for
    an ELF program or a script whose interpreter is one: else the child is forked, and Popen
    raises what exec says."""
    from envkit.io import programs

    def script(name: str, text: str, mode: int = 0o755) -> Path:
        path = tmp_path / name
        path.write_text(text)
        path.chmod(mode)
        return path

    script("sh-script", "#!/bin/sh\necho hi\n")
    script("env-script", "#! /usr/bin/env python3 -u\nprint(1)\n")
    inner = script("of-a-script", f"#!{tmp_path / 'sh-script'}\n")
    script("no-newline", "#!/bin/sh" + " " * 300)
    script("lost", "#!/nowhere/sh\n")
    script("plain", "echo hi\n", 0o644)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "plain").symlink_to(tmp_path / "plain")  # passed over: not executable
    (tmp_path / "bin" / "sh-script").symlink_to(tmp_path / "sh-script")
    path = {"PATH": f"{tmp_path / 'bin'}:{tmp_path}"}
    assert programs.starts_surely(sys.executable)
    assert programs.starts_surely("sh") and programs.starts_surely("sh", {"PATH": "/bin"})
    for sure in ("./sh-script", "./env-script", "bin/sh-script"):
        assert programs.starts_surely(sure, None, tmp_path), sure
    assert programs.starts_surely(str(tmp_path / "sh-script"))
    assert programs.starts_surely("sh-script", path)
    for unsure in ("./of-a-script", "./no-newline", "./lost", "./plain", "./missing", "."):
        assert not programs.starts_surely(unsure, None, tmp_path), unsure
    assert not programs.starts_surely(str(inner)) and not programs.starts_surely("")
    assert not programs.starts_surely("sh-script") and not programs.starts_surely("plain", path)
    assert not programs.starts_surely("sh", {"PATH": str(tmp_path / "bin")})


def _interrupted_from_elsewhere(handlers: str, wait: Callable[[bool], None]) -> float:
    """The seconds ``wait(deferred)`` took to end in KeyboardInterrupt, a SIGINT sent 0.2 s
    after it began (the main thread is in its select by then) by another thread to itself:
    the signal's C handler runs in that thread, not the main one. ``handlers``: envkit's,
    Python's, or envkit's with the wait inside ``signals_deferred``."""

    def elsewhere() -> None:
        time.sleep(0.2)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    restore = process.install_signal_handlers() if handlers != "python" else None
    thread = threading.Thread(target=elsewhere)
    try:
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            thread.start()
            if handlers == "deferred":
                with process.signals_deferred():
                    wait(True)
            else:
                wait(False)
        return time.monotonic() - start
    finally:
        thread.join()
        if restore is not None:
            restore()
        signal.signal(signal.SIGINT, saved)


@LINUX
@WAYS
@pytest.mark.parametrize("handlers", ["envkit", "python", "deferred"])
def test_a_signal_another_thread_takes_still_ends_the_wait_at_once(
    way: str, handlers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGINT whose C handler runs in another thread (a library's, or any thread the
    kernel picks while the main thread blocks it) wakes run()'s wait on the child at once:
    its handler runs in the main thread, and the child is stopped. Without the wakeup
    descriptor the main thread would sleep in select until ``sleep 30`` ended. Inside
    ``signals_deferred`` the handler only records it: the wait goes on to the child's end
    (here a short one) and the interrupt is raised there."""
    _start_children(way, monkeypatch)
    before = _my_children()

    def wait(deferred: bool) -> None:
        if deferred:
            done = process.run(["sleep", "0.5"])
            assert done.returncode == 0  # run to its end, then raised
        else:
            process.run(["sleep", "30"])

    took = _interrupted_from_elsewhere(handlers, wait)
    assert took < (10 if handlers == "deferred" else 5), took
    assert handlers != "deferred" or took >= 0.5
    assert _my_children() - before == set()


@LINUX
@pytest.mark.parametrize("handlers", ["envkit", "python", "deferred"])
def test_a_signal_another_thread_takes_ends_a_streamed_read_at_once(handlers: str) -> None:
    """serve's wait on vLLM's output (Streaming.read) is woken as run()'s is: the handler
    runs in the main thread at once and raises; inside ``signals_deferred`` it only records
    the interrupt, the read returns None (nothing came) long before its 30 s, and the
    interrupt is raised where the deferral ends."""
    child = process.stream(["sleep", "30"])
    read: list[bytes | None] = []
    try:
        took = _interrupted_from_elsewhere(handlers, lambda _deferred: read.append(child.read(30)))
    finally:
        child.stop(1.0)
        child.close()
    assert took < 5, took
    assert read == ([None] if handlers == "deferred" else [])
