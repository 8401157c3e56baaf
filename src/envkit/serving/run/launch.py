"""What ``envkit serve`` starts: the venv's own ``vllm serve MODEL`` with the host, the port,
the plan's arguments and the user's, the child's environment (the API key in it), the
masked command shown and kept, the log file under ``.envkit/logs/``, and the checks made
before anything starts (the console script is there, the marker names the profile, the
port is free).

The API key goes to vLLM as ``VLLM_API_KEY``, never on the command line that ``ps`` shows:
every vLLM with a ``vllm`` console script (0.5.2 on) reads it when ``--api-key`` is not
given (0.3.0 on; read in the wheels of 0.3.0, 0.4.2, 0.8.5, 0.9.2, 0.17.1 and 0.33.0).
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from envkit.env.venvslot import MARKER, built_profile
from envkit.errors import BadInput, ServeRefused
from envkit.io import procfs
from envkit.io.atomicfile import open_new
from envkit.io.escaping import shell_command
from envkit.io.redaction import redact_words, remember_secret

KEY_VARIABLE = "VLLM_API_KEY"
MIN_KEY = 8  # shorter keys could not be masked reliably (and protect nothing)
LOGS = Path(".envkit") / "logs"
_SECRET_FLAGS = frozenset({"--api-key", "--hf-token"})


@dataclass(frozen=True)
class Launch:
    """One start of vLLM, everything decided before it runs."""

    profile: str
    model: str
    venv: Path
    argv: tuple[str, ...]  # what runs
    shown: tuple[str, ...]  # argv with secrets masked: what is printed and kept
    env: Mapping[str, str] = field(repr=False)  # the child's whole environment
    key: str = field(repr=False)  # the key the probe sends ('' for none)
    host: str
    port: int
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    gpu: str = ""  # the GPU the plan was made for, as named ('' when none is known)

    @property
    def base_url(self) -> str:
        """Where the probe asks: a wildcard host is asked on loopback."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/v1"


def vllm_program(venv: Path, profile: str) -> Path:
    """``<venv>/bin/vllm``; BadInput when it is missing or cannot be run, with the build of
    ``profile`` into that venv that makes it."""
    program = venv / "bin" / "vllm"
    if not program.is_file() or not os.access(program, os.X_OK):
        build = shell_command(["envkit", "build", profile, "--venv", str(venv)])
        raise BadInput(
            f"{program} is not there (or cannot be run): {venv} holds no vLLM to serve with.",
            f"Build it first: {build}; or give the venv that holds vLLM with --venv.",
        )
    return program


def marker_warning(venv: Path, profile: str) -> str:
    """A warning when the venv's envkit marker names another profile, or none ('' else)."""
    built = built_profile(venv)
    if built is None:
        return (
            f"{venv} has no envkit marker ({MARKER}): envkit did not build it, so nothing "
            f"says it holds {profile}'s pins (envkit verify {profile} --venv {venv} checks)"
        )
    if built != profile:
        return (
            f"{venv} was built from profile {built}, not {profile}: the plan and fixes below "
            f"are {profile}'s (envkit build {profile} --venv {venv} builds it)"
        )
    return ""


def api_key(variable: str | None) -> str:
    """The key in ``variable`` (remembered, so it is masked everywhere), '' for none.
    Raises BadInput when the variable is unset, empty, or too short to mask."""
    if variable is None:
        return ""
    value = os.environ.get(variable, "").strip()
    if not value:
        raise BadInput(
            f"--api-key-env {variable}: no such environment variable is set (or it is empty).",
            "Export it first; envkit hands the key to vLLM and never prints it.",
        )
    if len(value) < MIN_KEY:
        raise BadInput(
            f"--api-key-env {variable}: the key is shorter than {MIN_KEY} characters.",
            "Use a longer key: a short one protects little, and could not be told from "
            "ordinary words to mask it in the log.",
        )
    remember_secret(value)
    return value


def checked_host(host: str) -> str:
    """A host vLLM can bind and the probe can ask: an IP address or a plain name."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})", host):
        raise BadInput(f"--host {host!r} is not an IP address or a host name.")
    return host


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on ``host:port`` (vLLM would fail to bind, and
    the probe would ask the other server)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            if exc.errno == errno.EADDRNOTAVAIL:
                raise BadInput(f"--host {host}: no interface of this machine has it.") from None
            raise
    return False


def listeners(port: int) -> tuple[str, ...]:
    """Who listens on TCP ``port``, as far as ``/proc`` shows this user ("pid 123
    (python3)"): another user's process is not visible, so may be missing."""
    holders = procfs.holders(procfs.listening(port))
    return tuple(f"pid {pid} ({procfs.name(pid) or '?'})" for pid in sorted(set(holders)))


def free_port(host: str, after: int, tries: int = 200) -> int | None:
    """The first port after ``after`` that binds both on ``host`` and on 127.0.0.1 (the
    probe's loopback), or None when none of ``tries`` does."""
    for port in range(after + 1, min(after + 1 + tries, 65536)):
        if not port_in_use(host, port) and (
            host == "127.0.0.1" or not port_in_use("127.0.0.1", port)
        ):
            return port
    return None


def refuse_busy_port(host: str, port: int) -> None:
    """Raises ServeRefused when ``host:port`` is taken (the port-in-use fix, beforehand),
    naming who holds it when that is visible and a port that is free."""
    if not port_in_use(host, port):
        return
    who = listeners(port)
    held = f" by {', '.join(who)}" if who else " (by a process this user cannot see)"
    other = free_port(host, port)
    instead = f"give a port that is free: --port {other}" if other else "give another --port"
    raise ServeRefused(
        f"Port {port} on {host} is already in use{held}: vLLM would fail to bind it "
        "(port-in-use), and the probe would ask whatever listens there.",
        f"Stop what listens there (ss -ltnp 'sport = :{port}' names it), or {instead}.",
    )


def _flag_values(argv: Sequence[str], flag: str) -> list[list[str]]:
    """The values of each ``flag`` in ``argv``: ``flag=V``, or ``flag V...`` up to the next
    word that starts with ``-`` (vLLM's ``--api-key`` takes one or more keys)."""
    found: list[list[str]] = []
    taking = False
    for arg in argv:
        name, eq, value = arg.partition("=")
        if taking and not arg.startswith("-"):
            found[-1].append(arg)
            continue
        taking = False
        if eq and name == flag:
            found.append([value])
        elif arg == flag:
            found.append([])
            taking = True
    return found


def arg_keys(vllm_args: Sequence[str]) -> tuple[str, ...]:
    """The API keys given after ``--`` (``--api-key K...``, ``--api-key=K``), each one
    remembered (so masked everywhere), the one the probe sends first: the first of the last
    ``--api-key`` (argparse keeps the last). Raises BadInput for a key too short to mask."""
    given = _flag_values(vllm_args, "--api-key")
    keys = [key for values in given for key in values]
    if any(not values for values in given):
        raise BadInput("--api-key after -- has no value.", "Give the key: -- --api-key KEY.")
    for key in keys:
        if len(key.strip()) < MIN_KEY:
            raise BadInput(
                f"--api-key after --: a key is shorter than {MIN_KEY} characters.",
                "Use a longer key: a short one protects little, and could not be told from "
                "ordinary words to mask it in the log.",
            )
        remember_secret(key)
    if not keys:
        return ()
    lead = given[-1][0]
    return (lead, *(k for k in keys if k != lead))


def masked(argv: Sequence[str]) -> tuple[str, ...]:
    """The command with secrets masked: every value after --api-key/--hf-token (a list of
    keys too, and --api-key=K), known keys, tokens by shape (``io.redaction.redact_words``)."""
    return tuple(redact_words(argv))


def printable(shown: Sequence[str]) -> str:
    """The masked command as one line a POSIX shell splits back into its words
    (``io.escaping.shell_command``), a secret flag joined to its first masked value
    (``--api-key=***``): printed text is masked once more as it is written, and that would
    take the quotes off a ``'***'`` standing after ``--api-key``, leaving a glob."""
    words: list[str] = []
    for word in shown:
        if words and words[-1] in _SECRET_FLAGS and word == "***":
            words[-1] += "=***"
        else:
            words.append(word)
    return shell_command(words)


def command(
    program: Path, model: str, host: str, port: int, planned: Sequence[str], extra: Sequence[str]
) -> tuple[str, ...]:
    """``vllm serve MODEL --host H --port P`` with the plan's arguments, then the user's
    (after, so vLLM's parser lets them win)."""
    return (str(program), "serve", model, "--host", host, "--port", str(port), *planned, *extra)


def child_env(key: str, arg_key: str = "") -> tuple[dict[str, str], str]:
    """The environment vLLM runs with (ours, the key of --api-key-env as VLLM_API_KEY), and
    the key the probe sends: one given after -- (vLLM takes --api-key over the variable),
    else that key, else a VLLM_API_KEY the user exported."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"  # each line as it is printed, not in 8 KiB lumps
    if key:
        env[KEY_VARIABLE] = key
    exported = env.get(KEY_VARIABLE, "").strip()
    remember_secret(exported)
    return env, arg_key or exported


def open_log(profile: str, root: Path | None = None) -> tuple[Path, TextIO]:
    """A new log file ``.envkit/logs/<profile>-<UTC time>.log`` (owner-only), never an
    existing one: a second start in the same second gets ``-2``, ``-3``..."""
    folder = (root or Path.cwd()) / LOGS
    folder.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^\w.+-]", "_", profile) + time.strftime("-%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1, 100):
        path = folder / (f"{stem}.log" if n == 1 else f"{stem}-{n}.log")
        log = open_new(path)
        if log is not None:
            return path, log
    raise BadInput(f"{folder} already holds 99 logs of {profile} from this second.")
