"""``rpcmeter run``: run a suite (the built-in demo when none is given) and report it."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rpcmeter.cli import options
from rpcmeter.cli.options import CREATES
from rpcmeter.errors import UsageError

if TYPE_CHECKING:
    from rpcmeter.host.interrupts import Held
    from rpcmeter.reporters.view import View
    from rpcmeter.result.document import Result
    from rpcmeter.run.execute import RunOptions
    from rpcmeter.run.exporter import PrometheusExporter
    from rpcmeter.suite.model import Suite

# What the built-in demo's output ends with.
DEMO_NEXT = """
next:
  rpcmeter run examples/rpyc-thread-binding.toml --quick   # a whole study (study 000), small counts
  rpcmeter report last --html demo.html                     # this run as one page with its plots
  rpcmeter trend                                            # every case across the stored runs
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="run a suite (the built-in demo when no suite is given)")
    p.add_argument(
        "suite",
        nargs="?",
        help="suite file (TOML); - reads it from standard input; default: the built-in demo",
    )
    options.add_set_option(p)
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
        "--variant",
        "-V",
        action="append",
        default=None,
        metavar="NAME",
        help="run only this variant (repeatable; a baseline left out gives way to the first kept)",
    )
    p.add_argument(
        "--cluster",
        metavar="SPEC",
        help="generate the load on a Dask cluster: local:N (N local worker processes) or "
        "tcp://HOST:PORT (a running scheduler); needs rpcmeter[dask]",
    )
    add_rate_search(p)
    add_run_outputs(p)
    p.set_defaults(handler=cmd_run)


# hyperfine's names of the exports, which ``rpcmeter cmd`` takes too
HYPERFINE_EXPORTS = {
    "--output": ("--export-json",),
    "--csv": ("--export-csv",),
    "--markdown": ("--export-markdown",),
}


def add_run_outputs(p: Any, aliases: Mapping[str, Sequence[str]] | None = None) -> None:
    """What every command that runs cases writes and checks: the result document, the reports,
    the history, the live view and Prometheus, the baseline and the gates. ``aliases`` gives a
    flag more names (a peer's: :data:`HYPERFINE_EXPORTS`)."""
    more = aliases or {}
    p.add_argument(
        "--output",
        "-o",
        *more.get("--output", ()),
        type=Path,
        metavar="FILE",
        help="write the result document (JSON) here, after every case" + CREATES,
    )
    options.add_width(p)
    p.add_argument(
        "--max-error-rate",
        type=float,
        default=None,
        metavar="FRACTION",
        help="exit with status 1 when a case's failed requests exceed this fraction of its "
        "requests (a case that failed outright counts as 1)",
    )
    options.add_report_outputs(p)
    options.add_store_option(p)
    p.add_argument("--no-store", action="store_true", help="do not record the run in the history")
    p.add_argument(
        "--prometheus",
        metavar="[HOST]:PORT",
        help="serve the running figures in the Prometheus text format at "
        "http://HOST:PORT/metrics while the run goes on (e.g. :9464; counters of requests and "
        "errors, a latency histogram and gauges of the last interval, labelled by run and case)",
    )
    p.add_argument(
        "--prometheus-linger",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="with --prometheus: after the run, keep answering until a scrape read the last "
        "figures, for this many seconds at most (default 15, a usual scrape interval; 0: stop "
        "at once)",
    )
    p.add_argument(
        "--no-live",
        action="store_true",
        help="no live view of the running case (the last interval's requests/s, p50, p99 and "
        "errors, with sparklines): the progress line only, as when the output is not a terminal",
    )
    p.add_argument(
        "--baseline",
        metavar="NAME",
        help="compare against the stored run tagged NAME; when no run has that tag yet, tag "
        "this run NAME",
    )
    options.add_gate_options(p)
    p.add_argument(
        "--csv",
        *more.get("--csv", ()),
        type=Path,
        metavar="FILE",
        help="write one row per case and metric" + CREATES,
    )
    p.add_argument(
        "--markdown",
        *more.get("--markdown", ()),
        type=Path,
        metavar="FILE",
        help="write the tables as Markdown" + CREATES,
    )


def add_rate_search(p: Any) -> None:
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


def check_run_outputs(args: argparse.Namespace) -> None:
    """The checks of :func:`add_run_outputs`' flags that need no suite, before any work."""
    if args.max_error_rate is not None and not 0 <= args.max_error_rate <= 1:
        raise UsageError("--max-error-rate: a fraction between 0 and 1, e.g. 0.01")
    if args.baseline and args.no_store:
        raise UsageError("--baseline needs the history store (drop --no-store)")
    if args.prometheus_linger is not None and args.prometheus is None:
        raise UsageError("--prometheus-linger is for --prometheus [HOST]:PORT")


def check_rate_search(args: argparse.Namespace) -> None:
    if not args.find_max_rate:
        if args.slo:
            raise UsageError("--slo is the objective of --find-max-rate; give both")
        return
    if not args.slo:
        raise UsageError("--find-max-rate needs a latency objective, e.g. --slo p99=5ms")
    if not 1 <= args.search_steps <= 100:
        raise UsageError("--search-steps: between 1 and 100")
    if not 0 < args.search_tolerance < 1:
        raise UsageError("--search-tolerance: a fraction between 0 and 1, e.g. 0.05")


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import sys

    from rpcmeter.plan.load import builtin_suite_path, load_suite, load_suite_bytes

    check_run_outputs(args)
    check_rate_search(args)
    if args.suite == "-":  # the suite's text on standard input
        suite = load_suite_bytes(
            sys.stdin.buffer.read(),
            "<stdin>",
            args.overrides,
            quick=args.quick,
            only_workloads=args.workload,
            only_variants=args.variant,
        )
        return run_and_report(suite, args, out, err)
    path = Path(args.suite) if args.suite else builtin_suite_path("demo")
    suite = load_suite(
        path,
        args.overrides,
        quick=args.quick,
        only_workloads=args.workload,
        only_variants=args.variant,
    )
    status = run_and_report(suite, args, out, err)
    if not args.suite:
        out.write(DEMO_NEXT)
    return status


def run_and_report(
    suite: Suite,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    render: Callable[[View, int, bool], str] | None = None,
    summary: Callable[[Result, View], tuple[str, bool]] | None = None,
) -> int:
    """Run ``suite`` with the options of :func:`add_run_outputs` (and, where the parser has
    them, the rate search's and the cluster's), print its tables and write what was asked for;
    the exit status. ``render(view, width, color)``: the text printed instead of the terminal
    report's (a one-liner's single target). ``summary``: printed before the tables (its text,
    and whether the tables follow it).

    Ctrl-C or SIGTERM from here until the run has started waits until it has: the suite is
    read, so the run's document and store entry then exist, marked ``interrupted``."""
    from rpcmeter.host import interrupts as interrupts

    _start_forkserver(suite, args)
    held = interrupts.Held()
    try:
        return _run_and_report(suite, args, out, err, held, render, summary)
    finally:
        held.release()


def _run_and_report(
    suite: Suite,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    held: Held,
    render: Callable[[View, int, bool], str] | None,
    summary: Callable[[Result, View], tuple[str, bool]] | None,
) -> int:
    from rpcmeter.cli.output import render_report, write_reports
    from rpcmeter.cli.progress import Began, Progress
    from rpcmeter.errors import RpcmeterError, SuiteError
    from rpcmeter.history.store import Store
    from rpcmeter.reporters import gate as gate
    from rpcmeter.reporters.build import build as build_view
    from rpcmeter.result.document import check_output
    from rpcmeter.run.events import RunEvents
    from rpcmeter.run.execute import RunOptions

    json_out = out if args.output is not None and str(args.output) == "-" else None
    if json_out is not None:  # -o -: the document alone on stdout, the tables on stderr
        args.output, out = None, err
    elif args.output is not None:
        check_output(args.output)
    progress = Progress(err, live=not args.no_live)
    events = RunEvents(progress)
    exporter = None
    if args.prometheus is not None:  # imported only here: prometheus_client
        from rpcmeter.run.exporter import LINGER_S, PrometheusExporter, parse_address

        linger = LINGER_S if args.prometheus_linger is None else args.prometheus_linger
        exporter = events.subscribe(PrometheusExporter(*parse_address(args.prometheus), linger))
    run_options = RunOptions(
        output=args.output, events=events, cluster=getattr(args, "cluster", None)
    )
    store = None if args.no_store else Store(options.store_path(args))
    recorder = events.subscribe(store.listener()) if store is not None else None
    began = events.subscribe(Began(held.release))
    ran = False
    try:
        result = _run_or_search(args, suite, run_options)
        ran = True
    except RpcmeterError as exc:
        # the run began: its document and store entry say "failed"; what the suite asks wrongly
        # and only the run can find (a server without reflection) stays a suite error
        if began.began and not isinstance(exc, SuiteError):
            exc.exit_code = 1
        raise
    finally:
        progress.clear()
        if store is not None:
            store.close()
        if exporter is not None and not ran:  # an error, Ctrl-C: nothing waits for a scrape
            exporter.close(linger=False)
    try:
        view = build_view(result)
        if json_out is not None:
            json_out.write(render_report(view, "json", args, json_out))
        tables = True
        if summary is not None:
            text, tables = summary(result, view)
            out.write(text)
        if render is not None:
            out.write(render(view, options.width(args, out), out.isatty()))
        elif tables:
            out.write(render_report(view, "text", args, out))
        if args.output:
            out.write(f"\nresult written to {args.output}\n")
        write_reports(view, args, out, ("html", "plots"))
        stored = recorder.run if recorder is not None else None
        verdict = _after_run(result, view, args, stored, out)
        if suite.gate is not None:
            own = gate.check(view.comparisons, suite.gate)
            out.write("\n" + "".join(f"{line}\n" for line in own.lines))
            verdict = gate.worst(verdict, own.status)
        failed = sum(1 for c in result.cases if c.status != "ok")
        status = 1 if failed == len(result.cases) else verdict
        if args.max_error_rate is not None:
            over = [c for c in result.cases if c.error_rate() > args.max_error_rate]
            if over:
                err.write(
                    f"rpcmeter: {len(over)} of {len(result.cases)} case(s) above "
                    f"--max-error-rate {args.max_error_rate:g}\n"
                )
                status = max(status, 1)
        return status
    finally:
        if exporter is not None:
            _linger(exporter, err)


def _start_forkserver(suite: Suite, args: argparse.Namespace) -> None:
    """Start the forkserver before this process imports the run's code: it imports the client
    code (seconds on a busy machine) while this process imports the rest, and the first client
    starts at once. What :func:`rpcmeter.run.execute.run_suite` does, earlier: the same drivers
    preloaded, on the same condition (no cluster, a variant with a client); nothing where a
    driver cannot be loaded (the run reports that)."""
    if getattr(args, "cluster", None) or all(
        suite.driver_of(v) == "command" for v in suite.variants
    ):
        return
    from rpcmeter.plan.targets import target_class
    from rpcmeter.runners.closed_loop import preload_drivers, start_forkserver

    try:
        drivers = [
            target_class(suite.driver_of(v), {**suite.target.options, **suite.variants[v].options})
            for v in suite.variants
        ]
    except KeyError:
        return
    preload_drivers(dict.fromkeys(drivers))
    start_forkserver()


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"expected seconds from 0 to 86400 (got {text!r})")
    return value


def _linger(exporter: PrometheusExporter, err: TextIO) -> None:
    """Keep the finished run's figures at --prometheus until a scrape read them (see
    :meth:`rpcmeter.run.exporter.PrometheusExporter.close`), saying so while it waits."""
    wait = exporter.lingers()
    if wait > 0:
        err.write(
            f"rpcmeter: --prometheus: answering for up to {wait:.0f} s more, until a scrape "
            "reads the last figures (--prometheus-linger 0: stop at once)\n"
        )
        err.flush()
    exporter.close()


def _after_run(
    result: Result, view: View, args: argparse.Namespace, stored: int | None, out: TextIO
) -> int:
    """Exports, the baseline tag or comparison, and the gate after a run."""
    from rpcmeter.analysis import compare as analysis
    from rpcmeter.cli.output import compare_output, gate_status, run_header, write_reports
    from rpcmeter.history.store import Store

    write_reports(view, args, out, ("csv", "markdown"))
    store_path = options.store_path(args)
    if stored is not None:
        out.write(f"stored as run {stored} in {store_path}\n")
    doc = view.comparisons
    if args.baseline and stored is not None:
        with Store(store_path) as store:
            base = store.baseline(args.baseline, stored)
        if base is None:
            out.write(f"tagged run {stored} as baseline {args.baseline!r}\n")
        else:
            doc = analysis.compare_runs(base.result, result, base.label, f"run {stored}")
            header = [f"run {stored} against baseline {args.baseline!r}", run_header(base)]
            out.write("\n")
            out.write(compare_output(doc, header, "text", options.width(args, out), out.isatty()))
    return gate_status(doc, args, out)


def _run_or_search(args: argparse.Namespace, suite: Suite, run_options: RunOptions) -> Result:
    from rpcmeter.run.execute import run_suite

    if not getattr(args, "find_max_rate", False):
        return run_suite(suite, run_options)
    from rpcmeter.analysis.rates import parse_slo
    from rpcmeter.run.maxrate import find_max_rate

    return find_max_rate(
        suite,
        parse_slo(args.slo),
        tolerance=args.search_tolerance,
        max_steps=args.search_steps,
        options=run_options,
    )
