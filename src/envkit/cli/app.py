"""One run of the command line: the group parses, the command runs, and every failure
becomes one message and an exit code (0 ok, 1 a check failed, 2 bad input, 130
interrupted). ``envkit.cli`` calls :func:`main`, inside its own guard against an interrupt
that arrives before or after this module's ``try``."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click

from envkit import render
from envkit.cli.group import cli
from envkit.cli.options import State
from envkit.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    BadInput,
    EnvkitError,
    Interrupted,
)
from envkit.io import faults, interrupts, process, redaction
from envkit.io.atomicfile import sweep_temporary_folders


def main(args: list[str], *, last: bool = False) -> int:
    """Run the CLI on ``args``; returns the exit code. ``last``: the process ends after this
    run, so Ctrl-C is ignored from the moment the run is over (see ``envkit.cli``)."""
    state = State(json="--json" in args)  # usage errors are JSON too when --json was asked
    restore: Callable[[], None] | None = None
    try:
        render.start()  # nothing wide or cut yet, the progress clock at 0 (main may run many times)
        redaction.forget_secrets()
        redaction.remember_environment_secrets()
        restore = process.install_signal_handlers()
        sweep_temporary_folders()  # what killed envkit processes left in the temporary folder
        faults.check_faults()  # a malformed ENVKIT_FAULT is refused before anything runs
        code = cli.main(args=args, obj=state, standalone_mode=False, prog_name="envkit")
        return int(code) if isinstance(code, int) else EXIT_OK
    except Interrupted as exc:
        render.interrupted(state.json, exc.message)
        return EXIT_INTERRUPTED
    except EnvkitError as exc:
        render.error(exc, state.json)
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        render.interrupted(state.json)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        render.usage_error(*_usage(exc), as_json=state.json)
        return EXIT_BAD_INPUT
    except (RecursionError, MemoryError):
        render.error(
            BadInput(
                "The input is nested too deeply or is too large to read.",
                "Check the files and arguments given; envkit reads model and profile files "
                "of ordinary size.",
            ),
            state.json,
        )
        return EXIT_BAD_INPUT
    except OSError as exc:
        # a file or folder the command needed (read-only, full disk, vanished): one message
        where = f" {exc.filename!r}" if exc.filename else ""
        render.error(
            BadInput(
                f"Cannot access{where}: {exc.strerror or type(exc).__name__}.",
                "Check the path, its permissions and the free space, then run again.",
            ),
            state.json,
        )
        return EXIT_BAD_INPUT
    finally:
        render.finish()
        if "envkit.io.http" in sys.modules:  # loaded only by commands that use the network
            sys.modules["envkit.io.http"].close_all()
        if "envkit.index.snapshot" in sys.modules:  # a --knowledge snapshot: this run's alone
            sys.modules["envkit.index.snapshot"].use(None)
        if last:
            interrupts.result_is_out()
        elif restore is not None:
            restore()


def _usage(exc: click.ClickException) -> tuple[str, str, str]:
    """The message, click's usage line of the command it concerns, and where its help is."""
    ctx = exc.ctx if isinstance(exc, click.UsageError) else None
    message = exc.format_message()
    if isinstance(exc, click.MissingParameter):  # its choices laid out on lines of their own
        message = message.replace(":\n\t", ": ").replace(",\n\t", ", ")  # names, no value
    if ctx is None:
        return message, "", ""
    return (
        message,
        ctx.get_usage(),
        f"`{ctx.command_path} --help` shows its arguments and options.",
    )
