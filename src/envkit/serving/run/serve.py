"""``envkit serve``: vLLM started from its venv (:mod:`launch` decides how) and watched until
it serves, fails or stalls.

vLLM's output, stdout and stderr merged, is cut into bounded pieces (``io.pieces.Pieces``)
and each is masked (``io.redaction.redact``: the API key, tokens, URL credentials) before it
goes anywhere: the log file and explain's ``BootWatch`` get the pieces, the terminal gets
lines as a terminal shows them (``io.pieces.Screen``: ``Hooks.output``), a progress bar's
updates drawn over each other (``Hooks.progress``).
Then, whichever comes first:

- a known failure (a cause explain knows, or the engine's wrapper): vLLM gets SETTLE
  seconds to print the rest of it and exit, then its process group is stopped;
- vLLM exits before it serves;
- the log stops for ``stall_timeout`` seconds at a known stall point (the encoder cache
  profiling line): its group is stopped;
- a healthy-start line, or the port answering HTTP: ``probe`` (GET /models, a 16-token
  chat) and, when it answers and the socket listening on the port is held by a process of
  vLLM's (not another server that took the port), ready. With ``check`` vLLM is then
  stopped; without, it runs on, its log streaming, until it exits or an interrupt (passed
  on to its processes).

A failure, a stall or an early exit is explained from the log as ``explain`` would. Every
wait is a read with a deadline, and nothing vLLM started (its group, and what left it:
``io.streaming.Streaming``) is left running on return.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TextIO

from envkit.io import interrupts, process
from envkit.io.pieces import Pieces, Screen
from envkit.io.process import Stopped, Streaming
from envkit.io.redaction import redact
from envkit.serving.explain.causes import Explanation, explain
from envkit.serving.explain.envpins import Installed
from envkit.serving.explain.knowledge import Knowledge
from envkit.serving.explain.logread import ReadStats
from envkit.serving.explain.watch import BootWatch, Status
from envkit.serving.run.launch import Launch, listeners, open_log, printable
from envkit.serving.run.probe import ProbeResult, answers, probe

SETTLE = 3.0  # seconds a failing vLLM gets to print the rest of its traceback and exit
TICK = 0.1  # the longest read: deadlines are looked at this often
KNOCK_EVERY = 5.0  # seconds between asks of the port while the log has not said it started
KNOCK_TIMEOUT = 2.0
READY_WAIT = 120.0  # seconds after the healthy line for the port to accept the probe
PROBE_TIMEOUT = 60.0  # each probe request (a first chat can take a while)
DRAIN = 1.0  # seconds to read what is left in the pipe once vLLM has exited


class Outcome(str, Enum):
    READY = "ready"  # the probe's chat answered (with check: then stopped)
    FAILED = "failed"  # a known failure in the log, or the probe failed
    STALLED = "stalled"  # the log stopped at a known stall point
    EXITED = "exited"  # vLLM ended by itself (before it served, or after)
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM, passed on to vLLM


@dataclass(frozen=True)
class Options:
    stall_timeout: float = 300.0
    check: bool = False
    stop_grace: float = 10.0  # seconds between the first signal and SIGKILL


@dataclass(frozen=True)
class Hooks:
    """Where a run reports as it goes (the command line hands render's functions)."""

    output: Callable[[str], None]  # vLLM's log line by line as it comes, already masked
    note: Callable[[str], None]
    ready: Callable[[ProbeResult], None]
    progress: Callable[[str], None] = lambda _line: None  # a bar's newest state, masked


@dataclass(frozen=True)
class ServeResult:
    launch: Launch
    log: Path
    outcome: Outcome
    reason: str  # one sentence: why the run ended
    returncode: int | None  # vLLM's exit code (a negative number: the signal that ended it)
    stopped: Stopped
    explanation: Explanation | None  # a failure, a stall or an early exit, explained
    probe: ProbeResult | None
    lines: int
    signal: str = ""  # the interrupt passed on
    pid: int = 0  # vLLM's pid, the id of its process group

    @property
    def exit_code(self) -> int:
        if self.outcome is Outcome.INTERRUPTED:
            return 130
        return 0 if self.outcome is Outcome.READY else 1

    def to_dict(self) -> dict[str, Any]:
        exp, stop = self.explanation, self.stopped
        return {
            "ok": self.exit_code == 0,
            "profile": self.launch.profile,
            "model": self.launch.model,
            "venv": str(self.launch.venv),
            "command": list(self.launch.shown),
            "base_url": self.launch.base_url,
            "log": str(self.log),
            "outcome": self.outcome.value,
            "reason": self.reason,
            "returncode": self.returncode,
            "stopped": {
                "signal": stop.signal or None,
                "seconds": round(stop.seconds, 3),
                "left": list(stop.left),
            },
            "cause": exp.cause.to_dict() if exp else None,
            "also": [c.to_dict() for c in exp.also] if exp else [],
            "probe": self.probe.to_dict() if self.probe else None,
            "lines": self.lines,
            "notes": list(self.launch.notes),
            "warnings": list(self.launch.warnings),
        }


class _Phase(Enum):
    STARTING = 1
    PROBING = 2
    SERVING = 3


def _probe_until(base: str, key: str, deadline: float, stop: threading.Event) -> Any:
    """Probe, again every quarter second while nothing listens yet (vLLM prints its start line
    just before it binds), until ``deadline``."""
    while True:
        result = probe(base, model=None, key_env=None, key=key, timeout=PROBE_TIMEOUT)
        unheard = bool(result.tried) and result.tried[-1].status == 0 and not result.base
        if result.ok or not unheard or time.monotonic() >= deadline or stop.is_set():
            return result
        stop.wait(0.25)


class _Run:
    """One watched run: the state the loop moves through."""

    def __init__(self, launch: Launch, options: Options, hooks: Hooks, log: TextIO) -> None:
        self.launch, self.options, self.hooks, self.log = launch, options, hooks, log
        self.watch = BootWatch()
        self.pieces = Pieces()
        self.screen = Screen()
        self.live: str | None = None  # the bar's state to draw once the read is taken
        self.previewed = ""
        self.line = 1
        self.bytes = 0
        self.last_output = time.monotonic()
        self.failed_at: float | None = None
        self.phase = _Phase.STARTING
        self.pool = interrupts.thread_pool(1, name="envkit-probe")
        self.pending: Future[Any] | None = None
        self.next_knock = time.monotonic() + KNOCK_EVERY
        self.quit = threading.Event()  # ends the probe's retries
        self.probe: ProbeResult | None = None
        self.reason = ""
        self.child: Streaming | None = None

    # the output: the log file and the watch get the pieces (bytes as they came, masked);
    # the terminal gets lines as a terminal shows them, a bar's updates drawn live
    def take(self, data: bytes) -> None:
        self.bytes += len(data)
        self.last_output = time.monotonic()
        self.live = None
        for piece in self.pieces.feed(data):
            self.write(piece)
        if self.live is not None:  # one draw for the whole read
            self.hooks.progress(self.live)

    def preview(self) -> None:
        """Nothing more came for a moment: a bar's newest update, not yet ended by the
        next carriage return, is drawn."""
        tail = self.pieces.tail()
        now = self.screen.preview(redact(tail.decode("utf-8", "replace"))) if tail else None
        if now is not None and (now := redact(now)) != self.previewed:
            self.previewed = now
            self.hooks.progress(now)

    def finish_output(self) -> None:
        for piece in self.pieces.flush():
            self.write(piece)
        if (last := self.screen.flush()) is not None:
            self.hooks.output(redact(last))

    def write(self, piece: bytes, *, show: bool = True) -> None:
        text = redact(piece.decode("utf-8", "replace"))
        self.log.write(text)
        if show:
            line, now = self.screen.feed(text)
            if line is not None:
                self.hooks.output(redact(line))
                self.live = None
            if now is not None:
                self.live = redact(now)
            self.previewed = ""
        self.watch.feed(text, self.line)
        if text.endswith("\n"):
            self.line += 1
        if self.failed_at is None and self.phase is not _Phase.SERVING and self._failing():
            self.failed_at = time.monotonic()

    def _failing(self) -> bool:
        return self.watch.failure() is not None or self.watch.wrapper() is not None

    # the loop
    def loop(self, child: Streaming) -> Outcome:
        self.child = child
        while True:
            data = child.read(TICK)
            if data:
                self.take(data)
            elif data is None:
                self.preview()
            if child.returncode() is not None or child.eof:
                self._drain(child)
                # a closed pipe comes a moment before the exit code
                return self._ended(child.wait(DRAIN))
            outcome = self._decide(time.monotonic())
            if outcome is not None:
                return outcome

    def _drain(self, child: Streaming) -> None:
        deadline = time.monotonic() + DRAIN
        while time.monotonic() < deadline and (data := child.read(0.05)):
            self.take(data)
        self.finish_output()

    def _ended(self, code: int | None) -> Outcome:
        said = f"with code {code}" if code is not None else "(it closed its output)"
        if self.phase is _Phase.SERVING:
            self.reason = f"vLLM exited {said} after it served"
            return Outcome.EXITED
        if self.failed_at is not None:
            self.reason = f"vLLM failed and exited {said}"
            return Outcome.FAILED
        self.reason = f"vLLM exited {said} before it served"
        return Outcome.EXITED

    def _decide(self, now: float) -> Outcome | None:
        if self.phase is _Phase.SERVING:
            return None
        if self.failed_at is not None:
            if now - self.failed_at < SETTLE:
                return None
            self.reason = f"a known failure in the log; vLLM had not exited {SETTLE:g} s later"
            return Outcome.FAILED
        if self.phase is _Phase.STARTING:
            return self._starting(now)
        return self._probed()

    def _starting(self, now: float) -> Outcome | None:
        stall = self.watch.stall_point()
        if stall is not None and now - self.last_output >= self.options.stall_timeout:
            self.reason = (
                f"the log stopped for {self.options.stall_timeout:g} s at a known stall point "
                f"(line {stall.line.number})"
            )
            return Outcome.STALLED
        knocked = self.pending is not None and self.pending.done() and self.pending.result()
        if self.pending is not None and self.pending.done():
            self.pending = None
        if self.watch.healthy() or knocked:
            why = "the log says it started" if self.watch.healthy() else "its port answers"
            self.hooks.note(f"vLLM is up ({why}); probing {self.launch.base_url}")
            self.phase = _Phase.PROBING
            self.pending = self.pool.submit(
                _probe_until,
                self.launch.base_url,
                self.launch.key,
                now + READY_WAIT,
                self.quit,
            )
        elif self.pending is None and now >= self.next_knock:
            self.next_knock = now + KNOCK_EVERY
            self.pending = self.pool.submit(
                answers, self.launch.base_url, key=self.launch.key, timeout=KNOCK_TIMEOUT
            )
        return None

    def _probed(self) -> Outcome | None:
        if self.pending is None or not self.pending.done():
            return None
        result: ProbeResult = self.pending.result()
        self.pending, self.probe = None, result
        if not result.ok:
            self.reason = "vLLM started, but the probe got no answer from its API"
            return Outcome.FAILED
        if self.child is not None and self.child.holds_port(self.launch.port) is False:
            who = ", ".join(listeners(self.launch.port)) or "a process this user cannot see"
            self.reason = (
                f"the server answering at {self.launch.base_url} is not the vLLM envkit "
                f"started: {who} holds port {self.launch.port}, no process of vLLM's does"
            )
            return Outcome.FAILED
        self.hooks.ready(result)
        if self.options.check:
            self.reason = "the probe's chat answered (--check: stopped)"
            return Outcome.READY
        self.phase = _Phase.SERVING
        return None

    def stats(self) -> ReadStats:
        return ReadStats(lines=self.line - 1, bytes=self.bytes, cut=self.pieces.cut)


def serve(
    launch: Launch,
    options: Options,
    hooks: Hooks,
    knowledge: Knowledge,
    *,
    installed: Installed | None = None,
    root: Path | None = None,
) -> ServeResult:
    """Start ``launch`` and watch it to its end (see the module's docstring). Raises
    BadInput when the program cannot start; an interrupt is an outcome, not an exception."""
    log_path, log = open_log(launch.profile, root)
    with log:
        run = _Run(launch, options, hooks, log)
        # the header: explain and explain --diff read the command line from it
        run.write(
            f"# envkit serve {launch.profile} {launch.model} at {_now()}\n".encode(), show=False
        )
        run.write(f"$ {printable(['vllm', *launch.shown[1:]])}\n".encode(), show=False)
        hooks.note(f"log: {log_path}")
        sent = ""
        child = _start(launch)
        try:
            try:
                outcome = run.loop(child)
                stopped, broke = _stop(child, options.stop_grace, signal.SIGTERM, run.take)
            except KeyboardInterrupt:
                sig = process.last_signal()
                sent, outcome = sig.name, Outcome.INTERRUPTED
                run.reason = f"interrupted ({sig.name}): passed on to vLLM's processes"
                hooks.note(
                    f"passing {sig.name} on to vLLM ({child.pid}) and all it started; waiting up "
                    f"to {options.stop_grace:g} s for it to stop (again: kill it now)"
                )
                stopped, broke = _stop(child, options.stop_grace, sig, run.take)
            if broke and outcome is not Outcome.INTERRUPTED:
                sent, outcome = "SIGINT", Outcome.INTERRUPTED
                run.reason = "interrupted while vLLM was being stopped"
            run.finish_output()
        finally:
            run.quit.set()
            run.pool.shutdown(wait=False, cancel_futures=True)
            if child.members():  # an unexpected error above: never leave vLLM behind
                child.stop(options.stop_grace)
            child.close()
    status = run.watch.status()
    explained = None
    if (
        outcome in (Outcome.FAILED, Outcome.STALLED, Outcome.EXITED)
        and status is not Status.HEALTHY
    ):
        explained = explain(
            run.watch.scan(),
            run.stats(),
            knowledge,
            source=str(log_path),
            installed=installed,
            profile=launch.profile,
            venv=str(launch.venv),
            gpu=launch.gpu,
            passed=tuple(launch.shown[1:]),  # what vllm was given, secrets masked
        )
    return ServeResult(
        launch=launch,
        log=log_path,
        outcome=outcome,
        reason=run.reason,
        returncode=child.returncode(),
        stopped=stopped,
        explanation=explained,
        probe=run.probe,
        lines=run.line - 1,
        signal=sent,
        pid=child.pid,
    )


def _start(launch: Launch) -> Streaming:
    from envkit.errors import BadInput

    try:
        return process.stream(launch.argv, env=launch.env)
    except OSError as exc:
        raise BadInput(
            f"Cannot run {launch.shown[0]}: {exc.strerror or exc}.",
            "The venv's vllm script must be executable and its interpreter present "
            "(a venv moved by hand loses it: envkit build the profile again).",
        ) from None


def _stop(
    child: Streaming, grace: float, first: signal.Signals, drain: Callable[[bytes], None]
) -> tuple[Stopped, bool]:
    """Stop the group; (how, whether a second interrupt cut the wait short)."""
    try:
        return child.stop(grace, first=first, drain=drain), False
    except KeyboardInterrupt:  # stop() has killed the group by now
        return Stopped("SIGKILL", 0.0, child.members()), True


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
