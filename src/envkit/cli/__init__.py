"""The command line: parses, calls the core, hands results to render. Decides nothing.

One module per concern (``env``, ``models``, ``locks``, ``serving``) defines plain click
commands; this module adds them to the group, so no command module imports another or this
one. Exit codes: 0 ok, 1 a check (or resolve, install, build) failed, 2 bad input or
configuration, 130 interrupted. Only :func:`run` ends the process.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from envkit import render
from envkit.cli import env, image, lint, locks, models, serving, site
from envkit.cli.group import add_group_options, cli
from envkit.cli.options import State
from envkit.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    BadInput,
    EnvkitError,
    Interrupted,
)
from envkit.io import faults, process, redaction
from envkit.io.atomicfile import sweep_temporary_folders

for _module in (env, image, models, locks, serving, site, lint):
    for _command in _module.COMMANDS:
        add_group_options(_command)
        cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (``sys.exit`` happens only in :func:`run`)."""
    args = list(argv) if argv is not None else sys.argv[1:]
    state = State(json="--json" in args)  # usage errors are JSON too when --json was asked
    render.start()  # nothing wide or cut yet, the progress clock at 0 (main may run many times)
    redaction.forget_secrets()
    redaction.remember_environment_secrets()
    restore = process.install_signal_handlers()
    sweep_temporary_folders()  # what killed envkit processes left in the temporary folder
    try:
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
        restore()


def _usage(exc: click.ClickException) -> tuple[str, str, str]:
    """The message, click's usage line of the command it concerns, and where its help is."""
    ctx = exc.ctx if isinstance(exc, click.UsageError) else None
    if ctx is None:
        return exc.format_message(), "", ""
    return (
        exc.format_message(),
        ctx.get_usage(),
        f"`{ctx.command_path} --help` shows its arguments and options.",
    )


def run() -> None:
    sys.exit(main())
