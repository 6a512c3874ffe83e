"""The ``rpcmeter`` parser and its dispatch: each command's module adds its arguments and names
the function that runs it (``handler``); errors a user can cause become one line and an exit
status."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
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


class _Interrupts:
    """Ctrl-C (SIGINT) and SIGTERM while a command runs: the first raises KeyboardInterrupt (the
    command stops, and stops what it started); those that come while it stops are noted, not
    raised. Raised again, one would cut the stopping short (servers, the result document) and
    could end in a traceback, or in rpcmeter killed by SIGINT instead of exiting with 130."""

    def __init__(self) -> None:
        self.hit = False
        self.said = False
        self.previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        if self.previous[signal.SIGINT] is signal.default_int_handler:  # (ignored: left so)
            signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)

    def on_signal(self, signum: int, frame: object) -> None:
        if not self.hit:
            self.hit = True
            raise KeyboardInterrupt
        if not self.said:  # a raw write: a signal handler may run in the middle of a print
            self.said = True
            with contextlib.suppress(OSError):
                os.write(2, b"\nrpcmeter: stopping what it started; please wait\n")

    def close(self) -> None:
        """Back to the handlers before; after an interruption the process is ending: a late
        Ctrl-C is ignored until it exits (Python's own handler is gone while it shuts down,
        and the signal would kill it: status -2, not 130)."""
        for signum, handler in self.previous.items():
            if self.hit:
                signal.signal(signum, signal.SIG_IGN)
            elif handler is not None:
                signal.signal(signum, handler)


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
    typed = list(argv) if argv is not None else sys.argv[1:]
    args, extra = parser.parse_known_args(grpc_oneline.implicit_load(typed))
    if extra:  # a one-liner names a flag it does not know in one line (oneline.brief_errors)
        brief = getattr(args, "brief_parser", None)
        (brief or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        args = parser.parse_args(["run", *(argv or [])])
    args.argv = typed  # as typed: what a one-liner's suite says made it
    interrupts = _Interrupts()
    try:
        _warn_if_edited()
        handler: Handler = args.handler
        return handler(args, sys.stdout, sys.stderr)
    except RpcmeterError as exc:
        print(f"rpcmeter: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nrpcmeter: interrupted; servers and clients stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        interrupts.close()
