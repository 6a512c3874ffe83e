"""The ``rpcmeter`` parser and its dispatch: each command's module adds its arguments and names
the function that runs it (``handler``); errors a user can cause become one line and an exit
status."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from rpcmeter.cli import cmd, grpc, grpc_oneline, history, http, publish, run, trend
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
    publish.add_parser(sub)
    grpc.add_parsers(sub)
    http.add_parser(sub)
    cmd.add_parser(sub)
    return parser


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
    from rpcmeter.host import interrupts  # (light: first, so that a signal is handled from here on)

    with interrupts.handled():
        try:
            parser = build_parser()
            typed = list(argv) if argv is not None else sys.argv[1:]
            args, extra = parser.parse_known_args(grpc_oneline.implicit_load(typed))
            if extra:  # a one-liner names a flag it does not know in one line (brief_errors)
                brief = getattr(args, "brief_parser", None)
                (brief or parser).error(f"unrecognized arguments: {' '.join(extra)}")
            if args.command is None:
                args = parser.parse_args(["run", *(argv or [])])
            args.argv = typed  # as typed: what a one-liner's suite says made it
            _warn_if_edited()
            handler: Handler = args.handler
            return handler(args, sys.stdout, sys.stderr)
        except BaseException as exc:
            # Ctrl-C or SIGTERM, also where a library wrapped the KeyboardInterrupt in an
            # error of its own (pydantic's serializers do)
            if isinstance(exc, KeyboardInterrupt) or interrupts.stopping():
                print("\nrpcmeter: interrupted; servers and clients stopped", file=sys.stderr)
                return EXIT_INTERRUPTED
            if isinstance(exc, RpcmeterError):
                print(f"rpcmeter: error: {printable(str(exc))}", file=sys.stderr)
                return exc.exit_code
            raise
