"""The ``rpcmeter`` parser and its dispatch: each command's module adds its arguments and names
the function that runs it (``handler``); errors a user can cause become one line and an exit
status."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from rpcmeter.cli import cmd, grpc, history, run, trend
from rpcmeter.errors import RpcmeterError
from rpcmeter.text import printable

EXIT_INTERRUPTED = 130
Handler = Callable[[argparse.Namespace, TextIO, TextIO], int]


def _which_build() -> str:
    """What ``--version`` adds: the client's hot path compiled, or why it runs as Python."""
    from rpcmeter.compiled import PYTHON_ENV, not_compiled, running_python, runs_compiled

    if runs_compiled():
        return " (compiled)"
    why = not_compiled()
    if why is not None:
        return f" (Python: the install did not compile: {why})"
    finder = running_python()  # compiled at install, running as Python (rpcmeter.compiled)
    if finder is None:
        return ""
    if finder.edited:
        return " (Python: compiled modules' sources edited since the install)"
    return f" (Python: {PYTHON_ENV}=1)"


class _Version(argparse.Action):
    """``--version``: the version and the build, worked out only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from rpcmeter.version import __version__

        print(f"rpcmeter {__version__}{_which_build()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rpcmeter",
        description="Measure and compare request/response systems.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run.add_parser(sub)
    history.add_parsers(sub)
    trend.add_parser(sub)
    grpc.add_parsers(sub)
    cmd.add_parser(sub)
    return parser


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _warn_if_edited() -> None:
    from rpcmeter.compiled import running_python

    finder = running_python()
    edited = finder.edited if finder is not None else []
    if edited:
        print(
            f"rpcmeter: warning: {len(edited)} compiled module(s) older than their edited source "
            f"({', '.join(edited)}): every compiled module runs as Python until rpcmeter is "
            "installed again (pip install -e .)",
            file=sys.stderr,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["run", *(argv or [])])
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    _warn_if_edited()
    handler: Handler = args.handler
    try:
        return handler(args, sys.stdout, sys.stderr)
    except RpcmeterError as exc:
        print(f"rpcmeter: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nrpcmeter: interrupted; servers and clients stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
