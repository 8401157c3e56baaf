"""The command line: parses, calls the core, hands results to render. Decides nothing.

One module per concern (``env``, ``models``, ``locks``, ``serving``, ``site``) defines plain
click commands; ``group`` names them, and imports a command's module only when that command
runs (``envkit --version`` loads none of them). ``app`` turns every failure into a message
and an exit code: 0 ok, 1 a check (or resolve, install, build) failed, 2 bad input or
configuration, 130 interrupted. Only :func:`run` ends the process.

This module is the entry point, kept to definitions alone, so that a Ctrl-C from envkit's
first line on (the imports of everything else included) is one line and exit 130, never a
traceback. Its one act besides them (the statements at its end): imported by the console
script (``bin/envkit``) or ``python -m envkit``, it holds a Ctrl-C that lands in the
starter's own lines before :func:`run` is called (pip's wrapper compiles a regular
expression there), for :func:`run` to say.
"""

import sys  # and nothing else: no import may run before the guard (sys is always loaded)


def main(argv: list[str] | tuple[str, ...] | None = None) -> int:
    """Run the CLI; returns the exit code (``sys.exit`` happens only in :func:`run`)."""
    return _guarded(list(argv) if argv is not None else sys.argv[1:], last=False)


def run() -> None:
    sys.exit(_guarded(sys.argv[1:], last=True))


def _guarded(args: list[str], *, last: bool) -> int:
    """``app.main`` with an interrupt anywhere, its own imports included, turned into 130.

    ``last``: the process ends after this run, so once the command has finished a late
    Ctrl-C is ignored (its result is written; the exit code stays the command's) instead of
    raising inside the interpreter's shutdown."""
    try:
        _release_held()
        _startup_fault()
        if args == ["--version"] and _version():
            if last:
                from envkit.io import interrupts

                interrupts.result_is_out()
            return 0
        from envkit.cli import app

        return app.main(args, last=last)
    except KeyboardInterrupt:
        return _interrupted("--json" in args, last=last)
    except Exception as exc:  # what no handler of app.main's took: a Ctrl-C behind it, or a bug
        if interrupt_behind(exc):
            return _interrupted("--json" in args, last=last)
        return _internal_error(exc, "--json" in args)


def _internal_error(exc: Exception, as_json: bool) -> int:
    """A bug, said in one paragraph (errors.InternalError) with exit 1; raised again as it
    is, traceback and all, when ENVKIT_TRACEBACK is set (the tests set it: a bug fails them)."""
    import os

    from envkit.errors import TRACEBACK_VARIABLE, InternalError
    from envkit.io import redaction
    from envkit.render import term

    if os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
        raise exc
    redaction.remember_environment_secrets()  # the bug may come before app.main took them
    said = InternalError.of(exc)
    term.error(said, as_json)
    return said.exit_code


def interrupt_behind(exc: BaseException, links: int = 32) -> bool:
    """Whether a KeyboardInterrupt is behind ``exc``: its cause or context, or theirs (at
    most ``links`` deep; a chain that loops ends). Python 3.11 turns an exception raised in a
    descriptor's ``__set_name__`` into ``RuntimeError: Error calling __set_name__``, caused
    by it: a Ctrl-C while an import creates such a class (``platform.uname_result``, under
    click's import of ``uuid``) arrives as that RuntimeError."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < links:
        each = todo.pop()
        if id(each) in seen:
            continue
        seen.add(id(each))
        if isinstance(each, KeyboardInterrupt):
            return True
        todo.extend(e for e in (each.__cause__, each.__context__) if e is not None)
    return False


_held: list[int] = []  # the signals held before run() was called (the statement at the end)


def _hold(signum: int, _frame: object) -> None:
    _held.append(signum)


def _release_held() -> None:
    """Python's SIGINT handler back in place of :func:`_hold`, then the held Ctrl-C, if one
    came, raised here: inside the guard, said as any other."""
    import _signal  # type: ignore[import-not-found]  # the interpreter's own, loaded at its start

    if _signal.getsignal(_signal.SIGINT) is _hold:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    if _held:
        _held.clear()
        raise KeyboardInterrupt


def _startup_fault() -> None:
    """The ``startup`` fault point (``io.faults``): before anything else is imported."""
    import contextlib

    from envkit.errors import BadInput
    from envkit.io import faults

    with contextlib.suppress(BadInput):  # a malformed ENVKIT_FAULT: app.main says so
        faults.fault_point("startup")


def _version() -> bool:
    """``envkit --version`` alone, said as click's version option says it, without loading
    click or the command group (the most common quick call). False when ENVKIT_FAULT is
    malformed: the full run says so."""
    from envkit import __version__
    from envkit.errors import BadInput
    from envkit.io import faults
    from envkit.render import term

    try:
        faults.check_faults()
    except BadInput:
        return False
    term.echo(f"envkit, version {__version__}")
    return True


def _interrupted(as_json: bool, *, last: bool) -> int:
    """Say "Interrupted." once; a second Ctrl-C meanwhile cannot cut the line short."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        from envkit.errors import EXIT_INTERRUPTED
        from envkit.render import term

        term.interrupted(as_json)
    finally:
        if not last:
            signal.signal(signal.SIGINT, previous)
    return EXIT_INTERRUPTED


# Started as a command (``__main__`` is the console script, a file named ``envkit`` as pip and
# uv write it, or ``envkit/__main__.py``) with Python's own SIGINT handler in place: a Ctrl-C
# is held (``_hold``) instead of raised in the starter's lines, until ``_release_held``. A
# program's import of this module, or a SIGINT someone else set (ignored, or handled), is left
# as it is. Module-level statements, not a function: until the handler is in place a Ctrl-C is
# the loading of this module, as for its definitions; ``_signal`` is the interpreter's own
# module, loaded at its start (``signal`` would be an import, with an interrupt of its own).
_started_by = (getattr(sys.modules.get("__main__"), "__file__", None) or "").replace("\\", "/")
if _started_by.endswith(("/envkit", "/envkit/__main__.py")):
    import _signal

    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _hold)
del _started_by
