"""Ctrl-C at any moment of a real ``envkit`` process, the first half second included: exit
130 with one line ("envkit: Interrupted.") and never a traceback, whether the signal comes
during the interpreter's imports, the command, or its last output (then it is ignored and
the command's own exit code stands). At named steps by ENVKIT_FAULT, and after delays.

Before envkit's first line runs, the interpreter is on its own: until it has installed its
handler (its first milliseconds) SIGINT's default action ends the process silently, which a
shell reports as 130 too, and a SIGINT while it sets up its streams, runs ``site`` or finds
and compiles the entry module is CPython's KeyboardInterrupt with CPython's traceback. Those
are told apart from envkit's part below (``before_envkit``); from envkit's first line on,
every outcome is the one line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from forked import start_forked

from helpers import FIXTURES, ROOT

MODEL = str(FIXTURES / "models" / "Qwen2-VL-2B-Instruct")
LOG = "INFO starting\nERROR torch.OutOfMemoryError: CUDA out of memory.\n"
COMMANDS = {
    "--version": ["--version"],
    "check-model": ["check-model", "vllm-0.8.5+qwen2-vl", MODEL],
    "explain": ["explain", "{log}"],
}
DELAYS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
INTERRUPTED = "envkit: Interrupted."
# the entry modules, whose loading (definitions only, no import) comes before the guard
ENTRY = tuple(
    f'File "{ROOT / "src" / "envkit" / name}"' for name in ("__init__.py", "cli/__init__.py")
)


def envkit_argv() -> list[str]:
    """The console script, as a user starts it (else ``python -m envkit``)."""
    beside = Path(sys.executable).with_name("envkit")
    found = str(beside) if beside.is_file() else shutil.which("envkit")
    return [found] if found else [sys.executable, "-m", "envkit"]


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str
    signalled: bool  # the signal was sent while the process ran


def start(args: list[str], env: dict[str, str], delay: float | None) -> Ran:
    proc = subprocess.Popen(
        [*envkit_argv(), *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    signalled = False
    if delay is not None:
        if delay:
            time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            signalled = True
    out, err = proc.communicate(timeout=120)
    return Ran(proc.returncode, out, err, signalled)


def start_warm(args: list[str], env: dict[str, str]) -> Ran:
    """``args`` run to the end (or to its ENVKIT_FAULT) in an envkit process forked from the
    warm interpreter (tests/forked.py): a process of its own, with envkit's imports done, for
    the runs whose moment is envkit's own code, never the interpreter's start (a fresh
    check-model spends three quarters of its 0.5 s CPU importing)."""
    proc = start_forked(*args, cwd=ROOT, env=env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode is not None
    return Ran(proc.returncode, out, err, False)


@pytest.fixture(autouse=True)
def ctrl_c_as_a_shell_leaves_it() -> Iterator[None]:
    """Children started with SIGINT at its default action, as a terminal's shell starts them,
    even when pytest itself ignores it (a shell's background job does): an ignored SIGINT is
    inherited through exec, a handler is not."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "boot.log").write_text(LOG)
    environ = {**os.environ, "ENVKIT_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    environ.pop("ENVKIT_FAULT", None)
    return environ


def argv(name: str, env: dict[str, str]) -> list[str]:
    log = str(Path(env["ENVKIT_CACHE_DIR"]).parent / "boot.log")
    return [a.replace("{log}", log) for a in COMMANDS[name]]


def before_envkit(err: str) -> bool:
    """A traceback of the interpreter's own start, before envkit's first line ran: CPython's
    fatal error while it sets up its streams or ``site`` (whatever it ends with: a SIGINT in
    the middle of importing ``io`` there has ended in "TypeError: expected a message
    argument"), or KeyboardInterrupt raised at the console script's ``from envkit.cli import
    run`` while Python was finding, compiling and loading that module (``envkit`` and
    ``envkit.cli`` hold definitions alone; ENTRY)."""
    if err.startswith("Fatal Python error: init_"):
        return "/envkit/" not in err
    if "Traceback" not in err or "KeyboardInterrupt" not in err.splitlines()[-1]:
        return False
    files = [line.strip() for line in err.splitlines() if line.strip().startswith("File ")]
    loading = (f'File "{envkit_argv()[0]}"', 'File "<frozen ', *ENTRY)
    return bool(files) and all(
        (f.startswith(loading) and f.endswith("in <module>")) or f.startswith('File "<frozen ')
        for f in files
    )


def judge(ran: Ran, normal: Ran) -> str:
    """Which part of the run the signal met; fails on a traceback or more than one line."""
    said = f"exit {ran.code}\n--- stdout\n{ran.out}--- stderr\n{ran.err}"
    if not ran.signalled:
        assert (ran.code, ran.out) == (normal.code, normal.out), said
        return "finished first"
    if before_envkit(ran.err):
        return "the interpreter's start"
    assert "Traceback" not in ran.err, said
    if ran.code == -signal.SIGINT:  # before the interpreter had a handler: nothing ran
        assert ran.err == "" and ran.out == "", said
        return "before the interpreter"
    if ran.code == 130:
        lines = ran.err.splitlines()
        assert lines[-1] == INTERRUPTED and lines.count(INTERRUPTED) == 1, said
        assert set(lines[:-1]) <= set(normal.err.splitlines()), said
        return "envkit"
    # it came as the command was ending: ignored, the command's own result stands
    assert (ran.code, ran.out, ran.err) == (normal.code, normal.out, normal.err), said
    return "after the result"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_ctrl_c_in_the_first_half_second(name: str, env: dict[str, str]) -> None:
    args = argv(name, env)
    # the command's own answer, in a forked process (what is under test is the fresh ones
    # below); it fills envkit's cache, as the runs after it find it
    normal = start_warm(args, env)
    assert normal.code in (0, 1) and "Traceback" not in normal.err
    # then each delay's run at once, each signalled by its own clock
    with ThreadPoolExecutor(len(DELAYS)) as pool:
        ran = list(pool.map(lambda delay: start(args, env, delay), DELAYS))
    seen = [judge(each, normal) for each in ran]
    # the later delays reach envkit's own code on any machine that starts Python in 0.1 s
    assert {"envkit", "after the result", "finished first"} & set(seen), seen


@pytest.mark.parametrize("step", ["startup", "command-import"])
@pytest.mark.parametrize("name", ["check-model", "explain"])
def test_ctrl_c_at_a_named_step(name: str, step: str, env: dict[str, str]) -> None:
    ran = start(argv(name, env), {**env, "ENVKIT_FAULT": f"{step}=INT"}, None)
    assert (ran.code, ran.out, ran.err) == (130, "", INTERRUPTED + "\n")


def test_ctrl_c_at_startup_of_version_and_with_json(env: dict[str, str]) -> None:
    faulty = {**env, "ENVKIT_FAULT": "startup=INT"}
    assert start(["--version"], faulty, None) == Ran(130, "", INTERRUPTED + "\n", False)
    ran = start(["explain", "--json", argv("explain", env)[1]], faulty, None)
    assert ran.code == 130 and ran.err == INTERRUPTED + "\n"
    assert '"exit_code": 130' in ran.out and "Traceback" not in ran.out


def test_ctrl_c_while_the_profiles_are_cached(env: dict[str, str]) -> None:
    """The first check-model writes the shipped profiles' parsed TOML into envkit's cache:
    interrupted at that write, one line; the next run parses them again and answers. Both
    runs are envkit processes forked from the warm interpreter: the moment is the command's
    own, long after the start-up the tests above interrupt in fresh ones."""
    args = argv("check-model", env)
    ran = start_warm(args, {**env, "ENVKIT_FAULT": "atomic-written=INT"})
    assert (ran.code, ran.out, ran.err) == (130, "", INTERRUPTED + "\n")
    assert start_warm(args, env).code == 0


# a console script as pip writes one, with the Ctrl-C landing in its own lines: after its
# import of envkit.cli, before its call of run() (where pip's compiles a regular expression)
SCRIPT = """#!{python}
import os, re, signal, sys
from envkit.cli import run
if __name__ == "__main__":
    os.kill(os.getpid(), signal.SIGINT)
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(run())
"""


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ctrl_c_in_the_console_scripts_own_lines_is_one_line_and_130(
    tmp_path: Path, env: dict[str, str], as_json: bool
) -> None:
    script = tmp_path / "bin" / "envkit"
    script.parent.mkdir()
    script.write_text(SCRIPT.format(python=sys.executable))
    script.chmod(0o755)
    args = ["explain", *(["--json"] if as_json else []), argv("explain", env)[1]]
    done = subprocess.run([str(script), *args], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (130, INTERRUPTED + "\n"), done.stderr
    assert ('"exit_code": 130' in done.stdout) if as_json else done.stdout == ""


def test_importing_the_entry_module_leaves_ctrl_c_alone() -> None:
    """Only envkit's start as a command holds a Ctrl-C: a program importing envkit.cli keeps
    Python's handler."""
    check = (
        "import signal, envkit.cli; "
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler"
    )
    subprocess.run([sys.executable, "-c", check], check=True, timeout=60)


def test_a_malformed_fault_is_still_refused_before_the_command(env: dict[str, str]) -> None:
    ran = start(["--version"], {**env, "ENVKIT_FAULT": "startup=NOPE"}, None)
    assert ran.code == 2 and "ENVKIT_FAULT=" in ran.err and "Traceback" not in ran.err


class _RaisesOnNaming:
    def __set_name__(self, owner: type, name: str) -> None:
        raise KeyboardInterrupt


def _defines_a_class_whose_naming_is_interrupted(*_args: object, **_kwargs: object) -> int:
    """A Ctrl-C inside a descriptor's ``__set_name__``, as one landing while an import
    creates ``platform.uname_result``: Python 3.11 raises it as ``RuntimeError: Error calling
    __set_name__``, caused by the KeyboardInterrupt (later Pythons raise the interrupt)."""

    class Owner:
        attr = _RaisesOnNaming()

    return 0


@pytest.mark.parametrize("json_asked", [False, True])
def test_an_interrupt_python_wraps_in_another_error_is_still_one_line_and_130(
    json_asked: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seen in 1 suite run of 8: a Ctrl-C during click's import printed that RuntimeError's
    traceback and exit 1."""
    import json

    from envkit import cli
    from envkit.cli import app

    monkeypatch.setattr(app, "main", _defines_a_class_whose_naming_is_interrupted)
    args = ["explain", "boot.log", *(["--json"] if json_asked else [])]
    assert cli.main(args) == 130
    out, err = capsys.readouterr()
    assert err == "envkit: Interrupted.\n"
    if json_asked:
        assert json.loads(out)["exit_code"] == 130
    else:
        assert out == ""


def test_an_error_with_no_interrupt_behind_it_is_not_taken_for_one() -> None:
    from envkit.cli import interrupt_behind

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as inner:
            raise RuntimeError("cleanup failed") from inner
    except RuntimeError as exc:
        assert interrupt_behind(exc)
    plain = ValueError("x")
    assert not interrupt_behind(plain)
    looped = ValueError("a")
    other = ValueError("b")
    looped.__context__, other.__context__ = other, looped  # a chain that loops ends
    assert not interrupt_behind(looped)
    deep = ValueError(0)
    at = deep
    for n in range(100):  # a KeyboardInterrupt further back than envkit looks is not seen
        at.__cause__ = ValueError(n)
        at = at.__cause__
    at.__cause__ = KeyboardInterrupt()
    assert not interrupt_behind(deep)
