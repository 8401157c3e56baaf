"""Children of envkit: they die with it, parallel workers spread them over the CPUs, and what
they write is read within a cap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from envkit.errors import OutputTooLarge
from envkit.io import process


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
def test_a_child_dies_with_envkit() -> None:
    code = "from envkit.io import process; process.run(['sleep', '60'])"
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(100):
            kids = subprocess.run(
                ["pgrep", "-P", str(parent.pid)], capture_output=True, text=True
            ).stdout.split()
            if kids:
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
