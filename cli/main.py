"""The `llamay` command group and the one place user errors become `error: ...` lines."""

from __future__ import annotations

import os
import sys
import traceback

import click

from llamay import __version__
from llamay.errors import LlamayError


class LlamayGroup(click.Group):
    """Turns llamay's own errors (and OS errors on user files) into one line on stderr, exit 1.

    A traceback is for bugs, not for a bad file or a wrong name; LLAMAY_DEBUG=1 shows it anyway.
    """

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # The reader went away (`llamay show ... | head`): stop quietly, as other tools do.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(1)
        except (LlamayError, OSError) as exc:
            if os.environ.get("LLAMAY_DEBUG"):
                traceback.print_exc()
            message = str(exc) if isinstance(exc, LlamayError) else _os_error(exc)
            click.echo(f"error: {message}", err=True)
            sys.exit(1)


def _os_error(exc: OSError) -> str:
    if exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc)


@click.group(cls=LlamayGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="llamay")
def cli() -> None:
    """llamay: run GGUF language models on this machine.

    MODEL is a path to a .gguf file or a name in the local store (`gemma3:270m`).
    """


def _register() -> None:
    from .bench import bench
    from .cp import cp
    from .ls import ls
    from .perplexity import perplexity
    from .prune import prune
    from .pull import pull
    from .quantize import quantize
    from .rm import rm
    from .run import run
    from .serve import serve
    from .show import show
    from .tokenize import tokenize
    from .verify import verify

    commands = (show, tokenize, run, perplexity, bench, serve, verify, pull, ls, rm, cp, prune)
    for command in (*commands, quantize):
        cli.add_command(command)


_register()


def main() -> None:
    cli(prog_name="llamay")
