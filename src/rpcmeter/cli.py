"""The ``rpcmeter`` command: parse arguments, call the library, map errors to exit codes."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from rpcmeter.errors import RpcmeterError, UsageError
from rpcmeter.execute import RunOptions, run_suite
from rpcmeter.plan import Case
from rpcmeter.reporters import terminal
from rpcmeter.result import Result
from rpcmeter.suite import Suite, builtin_suite_path, load_suite

EXIT_INTERRUPTED = 130


class Progress:
    """One live line on stderr: case k of n, the case, requests so far and requests/s."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last = 0.0
        self.width = 0

    def case_start(self, case: Case, total: int) -> None:
        line = f"[{case.index + 1}/{total}] {case.label()}"
        if self.tty:
            self._show(line)
        else:
            print(line, file=self.stream, flush=True)

    def update(self, case: Case, total: int, done: int, seconds: float) -> None:
        now = time.monotonic()
        if not self.tty or now - self.last < 0.2:
            return
        self.last = now
        rate = done / seconds if seconds > 0 else 0.0
        if case.kind == "command":
            self._show(
                f"[{case.index + 1}/{total}] {case.label()} · {done:,} runs · {seconds:.1f} s"
            )
            return
        self._show(
            f"[{case.index + 1}/{total}] {case.label()} · {done:,} requests · {rate:,.0f} req/s"
        )

    def _show(self, line: str) -> None:
        pad = max(0, self.width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self.width = len(line)

    def note(self, message: str) -> None:
        """A line that stays (environment preparation)."""
        self.clear()
        print(f"rpcmeter: {message}", file=self.stream, flush=True)

    def clear(self) -> None:
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def _add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="run a suite (the built-in demo when no suite is given)")
    p.add_argument("suite", nargs="?", help="suite file (TOML); default: the built-in demo")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a suite value (dotted key; value parsed as TOML), repeatable",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="small counts and one repetition: a smoke test of the suite",
    )
    p.add_argument(
        "--workload",
        "-w",
        action="append",
        default=None,
        metavar="NAME",
        help="run only this workload (repeatable)",
    )
    p.add_argument(
        "--output", "-o", type=Path, help="write the result document (JSON) here, after every case"
    )
    p.add_argument("--width", type=int, default=None, help="table width (default: terminal width)")
    p.add_argument(
        "--cluster",
        metavar="SPEC",
        help="generate the load on a Dask cluster: local:N (N local worker processes) or "
        "tcp://HOST:PORT (a running scheduler); needs rpcmeter[dask]",
    )
    _add_report_outputs(p)
    _add_rate_search(p)


def _add_rate_search(p: Any) -> None:
    g = p.add_argument_group("rate search (open loop)")
    g.add_argument(
        "--find-max-rate",
        action="store_true",
        help="search for the highest open-loop rate meeting --slo, per workload and variant",
    )
    g.add_argument(
        "--slo",
        metavar="OBJECTIVE",
        help="latency objective: p99=5ms, p99.9=20ms, mean=1ms, or several comma-separated",
    )
    g.add_argument(
        "--search-steps", type=int, default=12, metavar="N", help="at most N probes per search"
    )
    g.add_argument(
        "--search-tolerance",
        type=float,
        default=0.05,
        metavar="F",
        help="stop when the passing and failing rates are within F (relative) of each other",
    )


def _add_report_outputs(p: Any) -> None:
    p.add_argument(
        "--html", type=Path, metavar="FILE", help="write a self-contained HTML report here"
    )
    p.add_argument("--plots", type=Path, metavar="DIR", help="write the plots as PNG files here")


def _add_report(sub: Any) -> None:
    p = sub.add_parser("report", help="report a finished run: tables, HTML, PNG plots")
    p.add_argument("run", metavar="RUN", help="a result JSON file")
    p.add_argument("--width", type=int, default=None, help="table width (default: terminal width)")
    _add_report_outputs(p)


def load_run(spec: str) -> dict[str, Any]:
    """The result document a RUN argument names."""
    from rpcmeter.result import read_json

    return read_json(spec)


def write_reports(result: dict[str, Any], args: argparse.Namespace, out: TextIO) -> None:
    """The HTML report and PNG plots a command asked for (``--html``, ``--plots``)."""
    if args.html:
        from rpcmeter.reporters import html

        html.write(result, args.html)
        out.write(f"HTML report written to {args.html}\n")
    if args.plots:
        from rpcmeter.reporters import figures

        paths = figures.write_pngs(result, args.plots)
        out.write(f"{len(paths)} plots written to {args.plots}\n")


def cmd_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    result = load_run(args.run)
    if not args.html and not args.plots:
        width = args.width or (None if out.isatty() else 120)
        out.write(terminal.render(result, width=width or 120, color=out.isatty()))
    write_reports(result, args, out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from rpcmeter import __version__

    parser = argparse.ArgumentParser(
        prog="rpcmeter",
        description="Measure and compare request/response systems.",
    )
    parser.add_argument("--version", action="version", version=f"rpcmeter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)
    _add_report(sub)
    return parser


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path = Path(args.suite) if args.suite else builtin_suite_path("demo")
    suite = load_suite(path, args.overrides, quick=args.quick, only_workloads=args.workload)
    progress = Progress(err)
    options = RunOptions(
        output=args.output,
        on_progress=progress.update,
        on_case_start=progress.case_start,
        cluster=args.cluster,
        on_note=progress.note,
    )
    try:
        result = _run_or_search(args, suite, options)
    finally:
        progress.clear()
    width = args.width or (None if out.isatty() else 120)
    out.write(terminal.render(result, width=width or 120, color=out.isatty()))
    if args.output:
        out.write(f"\nresult written to {args.output}\n")
    write_reports(result, args, out)
    failed = sum(1 for c in result["cases"] if c["status"] != "ok")
    return 1 if failed == len(result["cases"]) else 0


def _run_or_search(args: argparse.Namespace, suite: Suite, options: RunOptions) -> Result:
    if not args.find_max_rate:
        if args.slo:
            raise UsageError("--slo is the objective of --find-max-rate; give both")
        return run_suite(suite, options)
    from rpcmeter.maxrate import find_max_rate
    from rpcmeter.rates import parse_slo

    if not args.slo:
        raise UsageError("--find-max-rate needs a latency objective, e.g. --slo p99=5ms")
    if not 1 <= args.search_steps <= 100:
        raise UsageError("--search-steps: between 1 and 100")
    if not 0 < args.search_tolerance < 1:
        raise UsageError("--search-tolerance: a fraction between 0 and 1, e.g. 0.05")
    return find_max_rate(
        suite,
        parse_slo(args.slo),
        tolerance=args.search_tolerance,
        max_steps=args.search_steps,
        options=options,
    )


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["run", *(argv or [])])
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        if args.command == "run":
            return cmd_run(args, sys.stdout, sys.stderr)
        if args.command == "report":
            return cmd_report(args, sys.stdout, sys.stderr)
        parser.error(f"unknown command {args.command}")
    except RpcmeterError as exc:
        print(f"rpcmeter: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nrpcmeter: interrupted; servers and clients stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
