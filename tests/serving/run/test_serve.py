"""envkit serve against a fake ``vllm`` console script (fake_vllm.py) that fails as report 2
did, stalls where report 3 did, or answers the OpenAI API on a loopback port; after each,
no process of it is left (by pid and by process group)."""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import socket
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from forked import Forked, start_forked
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.env.venvslot import MARKER
from envkit.io.process import stream
from envkit.io.redaction import redact
from envkit.serving.run.launch import arg_keys, masked, printable

from helpers import FIXTURES, ROOT, Result, envkit, output

HERE = Path(__file__).resolve().parent.parent  # tests/serving: its fixture modules
PROFILE = "vllm-0.8.5+qwen2-vl"
KEY = "correct-horse-battery-staple"  # no token shape: only envkit's memory of it masks it
QWEN25_15B = {
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


def fake_venv(folder: Path, profile: str | None = PROFILE) -> Path:
    """A folder shaped as serve needs: bin/vllm (the fake) and, unless None, the marker."""
    (folder / "bin").mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script = folder / "bin" / "vllm"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(HERE)!r})\n"
        "import fake_vllm\nfake_vllm.main()\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    if profile is not None:
        (folder / MARKER).write_text(json.dumps({"profile": profile, "build_id": "b1"}))
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def no_gpu_path() -> str:
    """PATH without nvidia-smi: vLLM's defaults, whatever machine runs the tests."""
    dirs = os.environ["PATH"].split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not (Path(d) / "nvidia-smi").exists())


class Fake:
    """One test's fake vLLM: its venv, port and record."""

    def __init__(self, tmp_path: Path, profile: str | None = PROFILE) -> None:
        self.root = tmp_path
        self.venv = fake_venv(tmp_path / "venv", profile)
        self.port = free_port()
        self.record = tmp_path / "record.jsonl"

    def env(self, mode: str, **extra: str) -> dict[str, str]:
        return {
            "FAKE_VLLM": mode,
            "FAKE_VLLM_RECORD": str(self.record),
            "PATH": extra.pop("PATH", no_gpu_path()),
            **extra,
        }

    def args(self, model: str = "/models/m", *extra: str) -> list[str]:
        return [
            "--envs", str(ROOT / "envs"), "serve", PROFILE, model,
            "--venv", str(self.venv), "--port", str(self.port), *extra,
        ]  # fmt: skip

    def serve(self, mode: str, *extra: str, model: str = "/models/m", **env: str) -> Result:
        return envkit(*self.args(model, *extra), cwd=self.root, env=self.env(mode, **env))

    def facts(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for line in self.record.read_text().splitlines():
            found.update(json.loads(line))
        return found

    def log(self) -> str:
        """The log file as written (carriage returns kept)."""
        (path,) = (self.root / ".envkit" / "logs").iterdir()
        assert path.name.startswith(f"{PROFILE}-") and path.suffix == ".log"
        return path.read_bytes().decode()

    def assert_nothing_left(self) -> None:
        facts = self.facts()
        pids = [facts["pid"], *(facts[k] for k in ("core", "escaped") if k in facts)]
        deadline = time.monotonic() + 2  # the kernel's bookkeeping, not envkit's wait
        while (alive := [p for p in pids if running(p)]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert alive == [], f"left running: {alive}"
        assert group(facts["pgid"]) == []


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def group(pgid: int) -> list[int]:
    """The live processes of a process group, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return found


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_failing_start_is_stopped_and_explained(tmp_path: Path) -> None:
    fake = Fake(tmp_path)
    res = fake.serve("fail")
    res.assert_fails(1, mentioning=("uva-unavailable", "RuntimeError: UVA is not available"))
    # the log reached the terminal as it came, then the cause and fix as explain says them
    assert "Automatically detected platform cuda." in res.out
    assert res.out.index("Failed core proc(s)") < res.out.index("cause: uva-unavailable")
    assert "no GPU memory known" in res.err and "vLLM's own defaults" in res.err
    assert "warning" not in res.err  # the marker names this profile
    assert "vLLM did not serve: vLLM failed and exited with code 1." in res.out
    log = fake.log()
    assert log.startswith(f"# envkit serve {PROFILE} /models/m at ")
    assert f"$ vllm serve /models/m --host 127.0.0.1 --port {fake.port}\n" in log
    assert "RuntimeError: UVA is not available" in log and "Failed core proc(s)" in log
    assert fake.facts()["argv"] == ["serve", "/models/m", "--host", "127.0.0.1", "--port",
                                    str(fake.port)]  # fmt: skip
    fake.assert_nothing_left()
    # the same as a document: the cause explain gives for the log file serve wrote
    fake.record.unlink()
    (log_file,) = (tmp_path / ".envkit" / "logs").iterdir()
    log_file.rename(tmp_path / "first.log")
    data = output("serve", fake.serve("fail", "--json").out)
    assert (data["outcome"], data["cause"]["code"], data["ok"]) == (
        "failed",
        "uva-unavailable",
        False,
    )
    assert data["returncode"] == 1 and data["stopped"] == {
        "signal": None,
        "seconds": 0.0,
        "left": [],
    }
    again = envkit("explain", data["log"], "--json", cwd=tmp_path).json()
    assert again["cause"]["code"] == "uva-unavailable"
    assert again["cause"]["line"] == data["cause"]["line"]


def test_a_stall_at_the_encoder_cache_is_stopped_with_its_fix(tmp_path: Path) -> None:
    fake = Fake(tmp_path)
    start = time.monotonic()
    # a stall is only counted at a known stall point: the timer starts at the encoder line
    res = fake.serve("stall", "--stall-timeout", "0.2", "--json")
    took = time.monotonic() - start
    assert res.code == 1, res.err
    data = output("serve", res.out)
    assert data["outcome"] == "stalled" and data["cause"]["code"] == "encoder-cache-profiling"
    assert "max_pixels" in json.dumps(data["cause"]["fix"])
    assert data["stopped"]["signal"] == "SIGTERM" and data["stopped"]["left"] == []
    assert data["returncode"] == -signal.SIGTERM
    assert 0.2 <= took < 3.5
    assert "Encoder cache will be initialized" in res.err  # --json: the log went to stderr
    fake.assert_nothing_left()  # the engine core too: the whole group was stopped


def test_a_vllm_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    fake = Fake(tmp_path)
    res = fake.serve(
        "stall", "--stall-timeout", "0.2", "--stop-grace", "0.3", "--json", FAKE_VLLM_STUBBORN="1"
    )
    data = output("serve", res.out)
    assert data["outcome"] == "stalled" and data["returncode"] == -signal.SIGKILL
    assert data["stopped"]["signal"] == "SIGKILL" and data["stopped"]["seconds"] >= 0.3
    fake.assert_nothing_left()


@pytest.mark.parametrize("escape", ["setsid", "double-fork"])
@pytest.mark.parametrize("mode", ["stall", "fail"])
def test_a_process_that_left_vllms_group_is_stopped_too(
    tmp_path: Path, escape: str, mode: str
) -> None:
    """A process of vLLM's in a session of its own (setsid), or a daemon whose parent has
    exited (a double fork): not in the group, but found and stopped all the same."""
    fake = Fake(tmp_path)
    # the escape is made and recorded before the stall point is printed
    res = fake.serve(mode, "--stall-timeout", "0.2", "--json", FAKE_VLLM_ESCAPE=escape)
    assert res.code == 1, res.err
    facts = fake.facts()
    escaped = facts["escaped"]
    assert escaped not in group(facts["pgid"])  # it really left the group
    data = output("serve", res.out)
    assert data["stopped"]["left"] == []
    fake.assert_nothing_left()


def test_check_probes_the_api_says_ready_and_stops_it(tmp_path: Path) -> None:
    fake = Fake(tmp_path)
    # the fake binds after it says it starts: ready only if the probe tries again
    res = fake.serve("serve", "--check", "--api-key-env", "SERVE_KEY", SERVE_KEY=KEY)
    res.assert_ok()
    assert f"envkit: ready: http://127.0.0.1:{fake.port}/v1 lists /models/m" in res.err
    assert "vLLM serves: vLLM serves: the probe's chat answered" not in res.out
    assert "vLLM serves: the probe's chat answered (--check: stopped)." in res.out
    facts = fake.facts()
    assert facts["key"] == KEY and facts["chat"] is True  # vLLM got the key, the chat answered
    assert not any(KEY in a for a in facts["argv"])  # never on the command line ps shows
    log = fake.log()
    for said in (res.out, res.err, log):
        assert KEY not in said
    assert "the server demands ***" in log and "the server demands ***" in res.out
    fake.assert_nothing_left()
    data = output("serve", fake.serve("serve", "--check", "--json", FAKE_VLLM_BIND="early").out)
    assert data["outcome"] == "ready" and data["ok"] is True and data["cause"] is None
    assert data["probe"]["ok"] is True and data["probe"]["models"] == ["/models/m"]
    assert data["stopped"]["signal"] == "SIGTERM" and data["stopped"]["left"] == []
    assert data["command"][1:3] == ["serve", "/models/m"]
    fake.assert_nothing_left()


class Impostor(ThreadingHTTPServer):
    """Another server on the port, answering the OpenAI API as vLLM would."""

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), ImpostorApi)


class ImpostorApi(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "/models/m"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send({"choices": [{"message": {"role": "assistant", "content": "OK"}}]})


def test_another_server_on_the_port_is_not_taken_for_vllm(tmp_path: Path) -> None:
    """A server that takes the port once serve has checked it answers the probe as vLLM
    would: serve tells it apart (the listening socket is not held by vLLM's processes)."""
    fake = Fake(tmp_path)
    servers: list[Impostor] = []

    def take_the_port() -> None:  # once the fake vLLM runs: serve's own check is behind
        deadline = time.monotonic() + 15
        while not fake.record.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        srv = Impostor(fake.port)
        servers.append(srv)
        srv.serve_forever(0.05)

    thread = threading.Thread(target=take_the_port, daemon=True)
    thread.start()
    try:
        res = fake.serve("late", "--check", "--json")
    finally:
        for srv in servers:
            srv.shutdown()
            srv.server_close()
        thread.join(5)
    assert res.code == 1, res.err
    data = output("serve", res.out)
    assert data["outcome"] == "failed" and data["ok"] is False
    assert "is not the vLLM envkit started" in data["reason"]
    assert f"pid {os.getpid()} (" in data["reason"]  # who holds it: this test's process
    assert "envkit: ready" not in res.err
    fake.assert_nothing_left()
    # before anything starts, a port that is taken is refused: who holds it, and a free port
    with Impostor(fake.port) as srv:
        res = fake.serve("serve")
    res.assert_fails(1, mentioning=(f"Port {fake.port} on 127.0.0.1", f"pid {os.getpid()} ("))
    suggested = int(res.err.split("--port ")[-1].split(".")[0])
    assert suggested > fake.port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", suggested))  # it is free


def test_keys_after_the_dashes_are_probed_with_and_masked_everywhere(tmp_path: Path) -> None:
    """``-- --api-key=K`` and ``--api-key K1 K2``: vLLM keeps the last flag's keys, the probe
    sends one of those, and no key is printed or logged, whatever its shape."""
    fake = Fake(tmp_path)
    old, first, second = "old-key-0123456789", "first-key-abcdefgh", "second-key-ijklmnop"
    dashes = ("--", f"--api-key={old}", "--api-key", first, second, "--enforce-eager")
    res = fake.serve("serve", "--check", "--json", *dashes, FAKE_VLLM_BIND="early")
    res.assert_ok()
    data = output("serve", res.out)
    assert data["outcome"] == "ready" and data["probe"]["ok"] is True
    assert data["command"][-5:] == ["--api-key=***", "--api-key", "***", "***", "--enforce-eager"]
    assert fake.facts()["chat"] is True  # the fake answers only with first or second
    text = Fake(tmp_path / "text")
    said = text.serve("serve", "--check", *dashes, FAKE_VLLM_BIND="early")
    said.assert_ok()
    assert "'--api-key=***' '--api-key=***' '***' --enforce-eager" in said.err  # shell-quoted
    for out in (res.out, res.err, fake.log(), said.out, said.err, text.log()):
        assert all(key not in out for key in (old, first, second))
    assert "the server demands ***" in fake.log() and "non-default args" in fake.log()
    fake.assert_nothing_left()
    short = fake.serve("serve", "--", "--api-key", "short")
    short.assert_fails(2, mentioning="shorter than 8")


BAR = "Loading safetensors checkpoint shards: {:3d}% Completed | {}/4"


def test_a_progress_bar_piped_shows_its_last_state_and_the_log_keeps_every_update(
    tmp_path: Path,
) -> None:
    fake = Fake(tmp_path)
    res = fake.serve("fail", FAKE_VLLM_BAR="0.05")  # each update a read of its own
    assert res.code == 1
    lines = res.out.splitlines()
    assert lines.count(BAR.format(100, 4)) == 1  # a line of its own, as a terminal shows it
    assert "\\r" not in res.out and BAR.format(25, 1) not in res.out
    log = fake.log()
    assert "".join(f"\r{BAR.format(n * 25, n)}" for n in range(5)) + "\n" in log  # as it came


def test_a_progress_bar_is_drawn_live_on_a_terminal(tmp_path: Path) -> None:
    """A real terminal (a pty) as serve's stdout: each update drawn over the last. envkit is
    a process of its own forked from the warm interpreter (tests/forked.py), which opens the
    pty's side as its stdout."""
    import pty

    fake = Fake(tmp_path)
    # a pause between updates longer than serve's read (0.1 s): each drawn before the next
    bar = fake.env("fail", FAKE_VLLM_BAR="0.25")
    main, side = pty.openpty()
    try:
        proc = Forked(fake.args(), tmp_path, {**os.environ, **bar}, stdout=Path(os.ttyname(side)))
        seen = b""
        while True:  # until it has ended and the terminal holds nothing more
            if select.select([main], [], [], 0.05)[0]:
                seen += os.read(main, 65536)
            elif proc.poll() is not None:
                break
        proc.communicate(30)
    finally:
        os.close(side)
        os.close(main)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 1
    for n in (1, 2, 3):  # the updates in between, each drawn over the line
        assert f"\r\x1b[K{BAR.format(n * 25, n)}" in text
    # the last update drawn as soon as it came (not at the next carriage return), then the
    # line wiped and written whole as the newline ends it
    assert text.replace("\r\n", "\n").count(f"\r\x1b[K{BAR.format(100, 4)}") == 2
    fake.assert_nothing_left()


def test_ctrl_c_reaches_vllm_and_the_last_line_says_so(tmp_path: Path) -> None:
    """A real process boundary: envkit serve in the foreground, then SIGINT to envkit (a
    process of its own, forked from the warm interpreter: tests/forked.py)."""
    fake = Fake(tmp_path)
    env = {**os.environ, **fake.env("serve", FAKE_VLLM_BIND="early")}
    proc = start_forked(*fake.args(), cwd=tmp_path, env=env)
    assert isinstance(proc, Forked)  # this environment: forked, not started afresh
    try:
        deadline = time.monotonic() + 15
        while "envkit: ready:" not in proc.err_so_far():
            assert proc.poll() is None and time.monotonic() < deadline, proc.err_so_far()
            time.sleep(0.02)
        time.sleep(0.1)  # serving in the foreground now
        assert proc.poll() is None  # without --check it keeps running
        proc.send_signal(signal.SIGINT)
        out, said = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=15)
    err = said.splitlines(keepends=True)
    assert proc.returncode == 130, said
    assert fake.facts()["got"] == "SIGINT"
    assert "Shutting down FastAPI HTTP server." in out  # its log kept streaming to the end
    last = err[-1]
    assert last.startswith("envkit: Interrupted. interrupted (SIGINT): passed on to vLLM's")
    assert "nothing of it is left running" in last and ".envkit/logs/" in last
    fake.assert_nothing_left()


def test_the_plan_from_nvidia_smi_and_the_arguments_after_the_dashes(tmp_path: Path) -> None:
    fake = Fake(tmp_path)
    model = tmp_path / "qwen"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN25_15B))
    smi = tmp_path / "smi"
    smi.mkdir()
    listing, header = (
        FIXTURES / "nvidia-smi" / "rtx2070-query.csv",
        FIXTURES / "nvidia-smi" / "rtx2070-header.txt",
    )
    (smi / "nvidia-smi").write_text(
        f'#!/bin/sh\nif [ -n "$1" ]; then cat {listing}; else cat {header}; fi\n'
    )
    (smi / "nvidia-smi").chmod(0o755)
    res = fake.serve(
        "fail", "--max-model-len", "4096", "--", "--enforce-eager", "--max-model-len", "2048",
        model=str(model), PATH=f"{smi}{os.pathsep}{no_gpu_path()}",
    )  # fmt: skip
    assert res.code == 1
    argv = fake.facts()["argv"]
    # report 2: 6.98 of 8 GiB free, 0.86 fits; compute capability 7.5: half, not bfloat16
    planned = ["--dtype", "half", "--gpu-memory-utilization", "0.86", "--max-model-len", "4096"]
    assert argv[6:] == [*planned, "--enforce-eager", "--max-model-len", "2048"]
    assert "plan (nvidia-smi: NVIDIA GeForce RTX 2070, 6.98 of 8.00 GiB free)" in res.err
    assert "exceeds-free-memory" in res.err  # why it is not the 0.9 asked


def test_what_serve_refuses_before_anything_starts(tmp_path: Path) -> None:
    fake = Fake(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", fake.port))
        taken.listen()
        fake.serve("serve").assert_fails(1, mentioning=(f"Port {fake.port} on 127.0.0.1", "--port"))
    cannot = fake.serve(
        "serve", "--gpu-memory", "24GiB", model=str(FIXTURES / "models" / "Qwen3.5-9B")
    )
    plan = f"envkit plan {PROFILE} {FIXTURES / 'models' / 'Qwen3.5-9B'} --gpu-memory 24.00GiB"
    cannot.assert_fails(1, mentioning=("envkit plan has no command", plan, "--no-plan"))
    fake.serve("serve", "--", "--port", "9").assert_fails(2, mentioning="sets vLLM's host, port")
    fake.serve("serve", "--api-key-env", "UNSET_KEY").assert_fails(2, mentioning="UNSET_KEY")
    fake.serve("serve", "--api-key-env", "K", K="short").assert_fails(2, mentioning="shorter")
    empty = Fake(tmp_path / "other")
    (empty.venv / "bin" / "vllm").unlink()
    empty.serve("serve").assert_fails(
        2, mentioning=("holds no vLLM", f"envkit build {PROFILE} --venv {empty.venv}")
    )  # the build that makes it: the profile and venv in use
    assert not fake.record.exists() and not empty.record.exists()  # nothing was started


@pytest.mark.parametrize(
    ("profile", "said"),
    [(None, "has no envkit marker"), ("vllm-0.33.0", "was built from profile vllm-0.33.0")],
)
def test_a_venv_of_another_profile_or_none_gets_a_warning(
    tmp_path: Path, profile: str | None, said: str
) -> None:
    fake = Fake(tmp_path, profile)
    res = fake.serve("fail")
    assert res.code == 1 and "envkit: warning: " in res.err and said in res.err


def test_masked_commands() -> None:
    argv = ["vllm", "serve", "m", "--api-key", "abc123secret", "--hf-token=hf_abcdefghijklmnop"]
    assert masked(argv) == ("vllm", "serve", "m", "--api-key", "***", "--hf-token=***")
    several = ["vllm", "--api-key", "key-one-1234", "key-two-1234", "--x", "y"]
    assert masked(several) == ("vllm", "--api-key", "***", "***", "--x", "y")
    assert printable(masked(several)) == "vllm '--api-key=***' '***' --x y"
    assert arg_keys(["--api-key=key-zero-123", "--api-key", "key-one-1234", "key-two-1234"]) == (
        "key-one-1234", "key-zero-123", "key-two-1234",
    )  # fmt: skip
    assert arg_keys(["--enforce-eager"]) == ()


WORD = st.text(st.sampled_from("ab-=*'\" $;&|"), max_size=8)


@given(st.lists(st.one_of(WORD, st.sampled_from(["--api-key", "--hf-token", "***"])), max_size=8))
@settings(max_examples=examples(300), deadline=None)
def test_a_printed_command_is_the_words_and_survives_the_masking_of_output(
    words: list[str],
) -> None:
    """What serve prints splits back into the masked words (a flag joined to its first
    masked value), and the masking every printed line passes leaves it as it is."""
    shown = masked(["vllm", *words])
    # --api-key without a value is refused (arg_keys) before anything is printed
    assume(all(w != "--api-key" or shown[n + 1 : n + 2] == ("***",) for n, w in enumerate(shown)))
    line = printable(shown)
    assert redact(line) == line
    split = shlex.split(line)
    assert " ".join(split).replace("=***", " ***") == " ".join(shown).replace("=***", " ***")


def test_a_streamed_child_is_read_with_a_deadline_and_its_group_stopped() -> None:
    child = stream([sys.executable, "-c", "import time; print('hi', flush=True); time.sleep(30)"])
    try:
        data = b""
        deadline = time.monotonic() + 5
        while b"hi\n" not in data and time.monotonic() < deadline:
            data += child.read(0.5) or b""
        assert data == b"hi\n"
        assert child.read(0.05) is None  # nothing more within the deadline
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
        stopped = child.stop(2)
        assert (stopped.signal, stopped.left) == ("SIGTERM", ())
        assert child.returncode() == -signal.SIGTERM
        assert child.stop(2).signal == ""  # already gone: nothing sent
    finally:
        child.stop(0)
        child.close()
