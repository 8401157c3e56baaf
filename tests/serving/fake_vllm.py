"""A stand-in for vLLM's ``vllm`` console script, for the tests of ``envkit serve``: it takes
``serve MODEL --host H --port P ...`` and, by ``FAKE_VLLM``, prints lines in the shapes
vLLM prints (our own, from :mod:`bootlogs`) and then

- ``fail``: report 2's UVA error and the engine's wrapper, and exits 1 (with
  ``FAKE_VLLM_ESCAPE``, leaving its processes behind);
- ``stall``: the encoder cache profiling line of report 3, then hangs (with a second
  process, as vLLM's engine core is one); ``FAKE_VLLM_STUBBORN=1`` ignores SIGTERM;
- ``serve``: the start line, then (a moment later, as uvicorn binds after vLLM says it
  starts) answers the OpenAI API on the loopback port given: GET /v1/models and POST
  /v1/chat/completions, demanding ``VLLM_API_KEY`` when it is set; on SIGINT it says it
  shuts down and exits 0 (with ``FAKE_VLLM_BIND=early`` it listens before it says it
  starts, so the probe's first try is answered: for the tests whose subject is not the
  probe's retry);
- ``late``: as if another server had taken the port: it waits for something to listen on
  it, then says it started (and binds nothing).

``FAKE_VLLM_BAR=SECONDS`` draws a progress bar first (carriage returns, on stderr, as tqdm
does), pausing that long between updates.

What it was given and what it did (argv, the key, its pids, the signals) go as JSON lines to
``FAKE_VLLM_RECORD``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

from bootlogs import FAILURES, NOISE, TAIL, WRAPPER, preamble

ENCODER = (
    "(EngineCore_DP0 pid={pid}) INFO 05-12 10:01:06 [gpu_model_runner.py:2] Encoder cache will "
    "be initialized with a budget of 16384 tokens, and profiled with 1 image items of the "
    "maximum feature size."
)


def record(**facts: Any) -> None:
    with open(os.environ["FAKE_VLLM_RECORD"], "a", encoding="utf-8") as f:
        f.write(json.dumps(facts) + "\n")


def say(line: str, stream: Any = None) -> None:
    print(line, file=stream or sys.stdout, flush=True)


def engine_core() -> None:
    """A second process in the group, as vLLM's engine core is; with ``FAKE_VLLM_ESCAPE``
    also one that leaves the group: ``setsid`` (a session of its own) or ``double-fork`` (a
    daemon whose parent has exited, in a session of its own)."""
    core = subprocess.Popen(["sleep", "60"])
    record(core=core.pid)
    escape = os.environ.get("FAKE_VLLM_ESCAPE", "")
    if escape == "setsid":
        record(escaped=subprocess.Popen(["sleep", "61"], start_new_session=True).pid)
    elif escape == "double-fork":
        read, write = os.pipe()
        middle = os.fork()
        if middle == 0:
            os.setsid()
            if os.fork() == 0:
                os.write(write, str(os.getpid()).encode())
                os.close(write)
                os.execvp("sleep", ["sleep", "62"])
            os._exit(0)
        os.close(write)
        os.waitpid(middle, 0)  # the middle is gone: the sleeper's parent is no more
        with os.fdopen(read) as said:
            record(escaped=int(said.read()))


def api(model: str) -> type[BaseHTTPRequestHandler]:
    """The OpenAI API's two routes, for ``model`` (http.server is imported only here: the
    other modes start quicker without it)."""
    from http.server import BaseHTTPRequestHandler

    class Api(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            say(f'INFO:     127.0.0.1:1 - "{self.command} {self.path} HTTP/1.1" 200 OK')

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _allowed(self) -> bool:
            keys = demanded(sys.argv[1:])
            if keys and self.headers.get("Authorization") not in [f"Bearer {k}" for k in keys]:
                self._answer(401, {"error": "Unauthorized"})
                return False
            return True

        def do_GET(self) -> None:
            if self._allowed():
                self._answer(200, {"object": "list", "data": [{"id": model, "object": "model"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if self._allowed():
                record(chat=True)
                self._answer(
                    200, {"choices": [{"message": {"role": "assistant", "content": "OK"}}]}
                )

    return Api


def progress_bar(pause: float) -> None:
    """A bar drawing over itself, as tqdm's do: a carriage return before each update."""
    for n in range(5):
        sys.stderr.write(f"\rLoading safetensors checkpoint shards: {n * 25:3d}% Completed | {n}/4")
        sys.stderr.flush()
        time.sleep(pause)
    sys.stderr.write("\n")


def wait_for_listener(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)


def demanded(args: list[str]) -> list[str]:
    """The keys the server demands, as vLLM's parser reads them: the values of the last
    ``--api-key`` (one or more), else ``VLLM_API_KEY``."""
    keys: list[str] | None = None
    for n, arg in enumerate(args):
        if arg.startswith("--api-key="):
            keys = [arg.partition("=")[2]]
        elif arg == "--api-key":
            rest = args[n + 1 :]
            keys = [
                a
                for a in rest[
                    : next((i for i, a in enumerate(rest) if a.startswith("-")), len(rest))
                ]
            ]
    if keys is not None:
        return keys
    return [os.environ["VLLM_API_KEY"]] if os.environ.get("VLLM_API_KEY") else []


def interrupted(_signum: int, _frame: FrameType | None) -> None:
    record(got="SIGINT")
    say("INFO 05-12 10:02:00 [launcher.py:80] Shutting down FastAPI HTTP server.")
    os._exit(0)


def main() -> None:
    args = sys.argv[1:]
    mode = os.environ["FAKE_VLLM"]
    model = args[1]
    host, port = args[args.index("--host") + 1], int(args[args.index("--port") + 1])
    key = os.environ.get("VLLM_API_KEY", "")
    record(argv=args, key=key or None, pid=os.getpid(), pgid=os.getpgid(0))
    for line in [*preamble(model=model), *NOISE]:
        say(line)
    if os.environ.get("FAKE_VLLM_BAR"):
        progress_bar(float(os.environ["FAKE_VLLM_BAR"]))
    for each in demanded(args):  # careless log lines: envkit must mask them everywhere
        say(f"DEBUG 05-12 10:01:01 [api_server.py:900] the server demands {each}")
    if "--api-key" in " ".join(args):
        dump = {"api_key": demanded(args)}
        say(f"INFO 05-12 10:01:01 [cli_args.py:1] non-default args: {dump!r}")
    if mode == "fail":
        if os.environ.get("FAKE_VLLM_ESCAPE"):
            engine_core()  # left behind when it exits
        for line in [*WRAPPER[:1], *FAILURES["uva-unavailable"], *WRAPPER[1:]]:
            say(line)
        for line in TAIL:
            say(line, sys.stderr)
        sys.exit(1)
    engine_core()
    if mode == "stall":
        if os.environ.get("FAKE_VLLM_STUBBORN"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        say(ENCODER.format(pid=os.getpid()))
        time.sleep(60)
        sys.exit(0)
    signal.signal(signal.SIGINT, interrupted)
    if mode == "late":  # another server took the port: vLLM says it starts, binds nothing
        wait_for_listener(port)
        say(
            f"INFO 05-12 10:01:08 [api_server.py:1090] Starting vLLM API server on http://{host}:{port}"
        )
        say("INFO:     Application startup complete.")
        time.sleep(60)
        sys.exit(0)
    serve_api(host, port, model)


def serve_api(host: str, port: int, model: str) -> None:
    """Say vLLM starts, then answer its API (after a moment, unless it binds early)."""
    from http.server import ThreadingHTTPServer

    early = os.environ.get("FAKE_VLLM_BIND") == "early"
    server = ThreadingHTTPServer((host, port), api(model)) if early else None
    say(
        f"INFO 05-12 10:01:08 [api_server.py:1090] Starting vLLM API server on http://{host}:{port}"
    )
    if server is None:
        time.sleep(0.15)  # the probe's first try finds nothing listening
        server = ThreadingHTTPServer((host, port), api(model))
    say("INFO:     Application startup complete.")
    server.serve_forever()


if __name__ == "__main__":
    main()
