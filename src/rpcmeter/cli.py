"""The ``rpcmeter`` command: parse arguments, call the library, map errors to exit codes."""

from __future__ import annotations

import argparse
import math
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from rpcmeter import analysis, gate, model
from rpcmeter.compiled import PYTHON_ENV, not_compiled, running_python
from rpcmeter.errors import RpcmeterError, SuiteError, UsageError
from rpcmeter.events import IntervalFigures, RunEvents, RunListener
from rpcmeter.execute import RunOptions, run_suite
from rpcmeter.exporter import PrometheusExporter, parse_address
from rpcmeter.live import LiveView
from rpcmeter.metrics.environment import compiled
from rpcmeter.plan import Case
from rpcmeter.reporters import registry, tables, terminal
from rpcmeter.reporters.build import build as build_view
from rpcmeter.reporters.build import comparison_view
from rpcmeter.reporters.view import View
from rpcmeter.result import Result, check_output
from rpcmeter.store import DEFAULT_PATH as DEFAULT_STORE
from rpcmeter.store import STORE_ENV, RunRef, Store, resolve_run
from rpcmeter.store import default_path as default_store
from rpcmeter.suite import Suite, builtin_suite_path, load_suite
from rpcmeter.text import printable

EXIT_INTERRUPTED = 130
EXIT_UNDECIDED = gate.UNDECIDED  # --fail-if-slower could not settle a case
# Output files (--output, --html, --csv, --markdown) and --plots create missing directories.
CREATES = " (missing parent directories are created)"


def case_fraction(case: Case, done: int, seconds: float) -> float:
    """How much of ``case`` is done, 0 to 1: by time for a duration, by count for a request
    count (every loop of every client), 0 when unknown (a whole command's runs)."""
    load = case.load
    if case.kind == "command":
        return 0.0
    if load.duration_s is not None:
        return min(1.0, seconds / load.duration_s)
    planned = load.requests * (load.concurrency or load.threads) * load.clients
    return min(1.0, done / planned) if planned else 0.0


def fmt_eta(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress(RunListener):
    """One live line on stderr: case k of n, the case, requests so far, requests/s and the time
    the run has left (ETA: the time per case so far, cases and the running case's part done,
    times what is left; shown once a tenth of a case is done)."""

    def __init__(
        self, stream: TextIO, clock: Callable[[], float] = time.monotonic, live: bool = False
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        # on a terminal, with ``live``: the line and the last interval's figures (rpcmeter.live)
        self.live = LiveView(stream) if live and self.tty else None
        self.clock = clock
        self.last = 0.0
        self.width = 0
        self.started: float | None = None

    def eta(self, case: Case, total: int, fraction: float) -> str:
        """`` · ETA ...`` for a run ``case.index + fraction`` cases into ``total``, or ""."""
        done = case.index + fraction
        if self.started is None or done < 0.1:
            return ""
        elapsed = self.clock() - self.started
        return f" · ETA {fmt_eta(elapsed / done * (total - done))}"

    def case_started(self, case: Case, total: int) -> None:
        if self.started is None:
            self.started = self.clock()
        line = f"[{case.index + 1}/{total}] {printable(case.label())}{self.eta(case, total, 0.0)}"
        if self.live is not None:
            self.live.new_case()
        if self.tty:
            self._show(line)
        else:
            print(line, file=self.stream, flush=True)

    def progress(self, case: Case, total: int, done: int, seconds: float) -> None:
        now = self.clock()
        if not self.tty or now - self.last < 0.2:
            return
        self.last = now
        rate = done / seconds if seconds > 0 else 0.0
        eta = self.eta(case, total, case_fraction(case, done, seconds))
        if case.kind == "command":
            self._show(
                f"[{case.index + 1}/{total}] {printable(case.label())} · {done:,} runs · {seconds:.1f} s{eta}"
            )
            return
        self._show(
            f"[{case.index + 1}/{total}] {printable(case.label())} · {done:,} requests · "
            f"{rate:,.0f} req/s{eta}"
        )

    def interval(self, case: Case, total: int, figures: IntervalFigures) -> None:
        if self.live is not None:
            self.live.interval(figures)

    def _show(self, line: str) -> None:
        if self.live is not None:
            self.live.line(line)
            return
        pad = max(0, self.width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self.width = len(line)

    def note(self, message: str) -> None:
        """A line that stays (environment preparation)."""
        self.clear()
        print(f"rpcmeter: {message}", file=self.stream, flush=True)

    def clear(self) -> None:
        if self.live is not None:
            self.live.stop()
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


class Began(RunListener):
    """Whether the run began (its document and store entry then say how it ended)."""

    began = False

    def run_started(self, result: model.Result) -> None:
        self.began = True


def _add_set_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a suite value (dotted key; value parsed as TOML), repeatable",
    )


def _add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="run a suite (the built-in demo when no suite is given)")
    p.add_argument("suite", nargs="?", help="suite file (TOML); default: the built-in demo")
    _add_set_option(p)
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
        "--output",
        "-o",
        type=Path,
        metavar="FILE",
        help="write the result document (JSON) here, after every case" + CREATES,
    )
    p.add_argument(
        "--width", type=_columns, default=None, help="table width (default: terminal width)"
    )
    p.add_argument(
        "--max-error-rate",
        type=float,
        default=None,
        metavar="FRACTION",
        help="exit with status 1 when a case's failed requests exceed this fraction of its "
        "requests (a case that failed outright counts as 1)",
    )
    p.add_argument(
        "--cluster",
        metavar="SPEC",
        help="generate the load on a Dask cluster: local:N (N local worker processes) or "
        "tcp://HOST:PORT (a running scheduler); needs rpcmeter[dask]",
    )
    _add_report_outputs(p)
    _add_rate_search(p)
    _add_run_history_options(p)


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
        "--html",
        type=Path,
        metavar="FILE",
        help="write a self-contained HTML report here" + CREATES,
    )
    p.add_argument(
        "--plots",
        type=Path,
        metavar="DIR",
        help="write the plots as PNG files into DIR (created, with its parents, if missing)",
    )


def _add_report(sub: Any) -> None:
    p = sub.add_parser("report", help="report a finished run: tables, HTML, PNG plots")
    p.add_argument(
        "run", metavar="RUN", help="the run: id, last, last~N, a tag or a result JSON file"
    )
    p.add_argument(
        "--width", type=_columns, default=None, help="table width (default: terminal width)"
    )
    p.add_argument(
        "--format", "-f", choices=registry.COLUMN_FORMATS, default="text", help="default: text"
    )
    _add_columns_option(p)
    _add_report_outputs(p)
    _add_store_option(p)


def _add_columns_option(p: Any) -> None:
    from rpcmeter.reporters.columns import COLUMN_SETS

    p.add_argument(
        "--columns",
        choices=sorted(COLUMN_SETS),
        metavar="SET",
        help="the run's figures laid out as another tool's table: grpc-bench (grpc_bench's "
        "results table, and each server under rpcmeter's client and a peer tool side by side)",
    )


def load_run(spec: str, store: Path | None = DEFAULT_STORE) -> Result:
    """The run a RUN argument names (id, last, last~N, a tag or a JSON file)."""
    return resolve_run(spec, store).result


def write_reports(
    view: View, args: argparse.Namespace, out: TextIO, formats: tuple[str, ...]
) -> None:
    """The files a command asked for, in the order of ``formats`` (``--csv``, ``--markdown``,
    ``--html``, ``--plots``: the argument of each named as its reporter)."""
    for name in formats:
        path = getattr(args, name, None)
        if path:
            out.write(registry.get(name).write(view, Path(path)) + "\n")


def render_report(view: View, fmt: str, args: argparse.Namespace, out: TextIO) -> str:
    """A run as text in a registered format, for ``out``."""
    options = registry.Options(width=_width(args, out), color=out.isatty())
    render = registry.get(fmt).render
    assert render is not None
    return render(view, options)


def render_columns(view: View, args: argparse.Namespace, out: TextIO) -> str:
    """A run as the column set ``--columns`` names, in ``--format`` (text or Markdown)."""
    if args.format not in registry.COLUMN_FORMATS:
        raise UsageError(
            f"--columns {args.columns}: only with --format text or markdown (got {args.format})"
        )
    options = registry.Options(width=_width(args, out), color=out.isatty())
    return registry.render_columns(view, args.columns, args.format, options)


def cmd_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    view = build_view(load_run(args.run, args.store))
    if args.columns:
        out.write(render_columns(view, args, out))
    elif not args.html and not args.plots:
        out.write(render_report(view, args.format, args, out))
    write_reports(view, args, out, ("html", "plots"))
    return 0


# ---- history, comparisons, exports --------------------------------------------------------------

FORMATS = registry.TEXT_FORMATS


def _add_store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        type=Path,
        default=default_store(),
        metavar="PATH",
        help=f"history database (default: ${STORE_ENV}, else {DEFAULT_STORE} under the "
        "current directory)",
    )


def _add_gate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-if-slower",
        type=float,
        metavar="PCT",
        help="exit with status 1 when any case's --metric is significantly worse than the "
        "baseline by more than PCT percent (listing which), 3 when a case cannot be settled "
        "(too few repetitions for significance, or a difference beyond PCT that is not "
        "significant)",
    )
    p.add_argument(
        "--metric",
        default="mean",
        choices=[m.name for m in analysis.METRICS],
        help="metric that --fail-if-slower gates on (default: mean latency)",
    )


def _add_run_history_options(p: argparse.ArgumentParser) -> None:
    _add_store_option(p)
    p.add_argument("--no-store", action="store_true", help="do not record the run in the history")
    p.add_argument(
        "--prometheus",
        metavar="[HOST]:PORT",
        help="serve the running figures in the Prometheus text format at "
        "http://HOST:PORT/metrics while the run goes on (e.g. :9464; counters of requests and "
        "errors, a latency histogram and gauges of the last interval, labelled by case)",
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
    _add_gate_options(p)
    p.add_argument(
        "--csv", type=Path, metavar="FILE", help="write one row per case and metric" + CREATES
    )
    p.add_argument(
        "--markdown", type=Path, metavar="FILE", help="write the tables as Markdown" + CREATES
    )


def _add_history_commands(sub: Any) -> None:
    p = sub.add_parser("history", help="list the runs stored in the history")
    _add_store_option(p)
    p.add_argument("--limit", "-n", type=int, default=20, help="newest N runs (default 20)")

    p = sub.add_parser("show", help="print a stored run (id, last, last~N, a tag or a JSON file)")
    p.add_argument("run", nargs="?", default="last", help="the run (default: last)")
    p.add_argument("--format", "-f", choices=FORMATS, default="text")
    p.add_argument(
        "--width", type=_columns, default=None, help="table width (default: terminal width)"
    )
    _add_columns_option(p)
    _add_store_option(p)

    p = sub.add_parser("compare", help="compare run B against run A (the baseline), case by case")
    p.add_argument("a", help="baseline run (id, last, last~N, a tag or a JSON file)")
    p.add_argument("b", nargs="?", default="last", help="compared run (default: last)")
    p.add_argument("--format", "-f", choices=FORMATS, default="text")
    p.add_argument(
        "--width", type=_columns, default=None, help="table width (default: terminal width)"
    )
    _add_store_option(p)
    _add_gate_options(p)

    p = sub.add_parser("tag", help="tag a stored run as a baseline NAME (moves an existing tag)")
    p.add_argument("name")
    p.add_argument("run", nargs="?", default="last", help="the run (default: last)")
    _add_store_option(p)


def _add_trend(sub: Any) -> None:
    from rpcmeter import trend

    p = sub.add_parser(
        "trend",
        help="each case's metric across the stored runs, oldest first, with the steps in it",
    )
    p.add_argument(
        "case_filter",
        nargs="?",
        metavar="CASE-FILTER",
        help="only the cases whose 'suite · workload · point · variant' contains this text "
        "(or matches it as a shell pattern with * ? [ ]; case-insensitive)",
    )
    names = [*(m.name for m in analysis.METRICS), *trend.METRIC_ALIASES]
    p.add_argument(
        "--metric",
        action="append",
        metavar="METRIC",
        help=f"metric(s), repeatable or comma-separated: {', '.join(names)} (default: mean)",
    )
    p.add_argument(
        "--by",
        choices=trend.BY,
        default="run",
        help="one point per run (default), per git revision (its runs pooled) or per day",
    )
    p.add_argument("--suite", metavar="NAME", help="only the runs of the suite named NAME")
    p.add_argument("--last", type=int, metavar="N", help="only the newest N runs")
    p.add_argument(
        "--width", type=_columns, default=None, help="table width (default: terminal width)"
    )
    p.add_argument(
        "--html", type=Path, metavar="FILE", help="write a self-contained HTML page" + CREATES
    )
    p.add_argument(
        "--png", type=Path, metavar="DIR", help="write one PNG plot per case into DIR" + CREATES
    )
    p.add_argument(
        "--fail-on-step",
        action="store_true",
        help="exit with status 1 when the newest runs of a case sit after a step that made its "
        "metric worse by more than --threshold",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=trend.DEFAULT_THRESHOLD,
        metavar="RATIO",
        help="how much worse a step must be to fail --fail-on-step (default: "
        f"{trend.DEFAULT_THRESHOLD}, 5 %% slower or 5 %% less throughput)",
    )
    _add_store_option(p)


def cmd_trend(args: argparse.Namespace, out: TextIO) -> int:
    from rpcmeter import trend
    from rpcmeter.reporters import trend as trend_reporter

    names = [n.strip() for arg in args.metric or ["mean"] for n in arg.split(",") if n.strip()]
    metrics = list(dict.fromkeys(trend.trend_metric(n) for n in names))
    if args.last is not None and args.last < 2:
        raise UsageError("--last: at least 2 runs")
    if not (1 <= args.threshold < math.inf):  # nan: no step is ever worse than it
        raise UsageError(
            f"--threshold {args.threshold}: a finite factor of at least 1, e.g. 1.05 for 5 % worse"
        )
    with Store(args.store, read_only=True) as store:
        infos = store.runs(args.last, suite=args.suite)[::-1]
        trends = trend.collect(
            ((info, store.load(info.id)) for info in infos),
            metrics,
            args.by,
            args.case_filter,
        )
    if not infos:
        suite = f" of suite {args.suite!r}" if args.suite else ""
        out.write(f"no runs{suite} in {args.store}\n")
        return 0
    if not trends:
        raise UsageError(
            f"{args.case_filter or 'trend'}: no case of the {len(infos)} runs in {args.store} "
            f"matches, with {', '.join(m.name for m in metrics)} measured"
        )
    out.write(f"{len(infos)} runs in {args.store}, {len(trends)} series\n\n")
    out.write(trend_reporter.render(trends, args.by, _width(args, out), out.isatty()))
    if args.html:
        title = f"rpcmeter trend · {args.suite or args.store}"
        trend_reporter.write_html(trends, args.by, title, args.html)
        out.write(f"HTML page written to {args.html}\n")
    if args.png:
        paths = trend_reporter.write_pngs(trends, args.by, args.png)
        out.write(f"{len(paths)} plots written to {args.png}\n")
    if not args.fail_on_step:
        return 0
    failed = trend.gated(trends, args.threshold)
    out.write("\n")
    if not failed:
        out.write(
            f"gate: no series' newest runs sit after a step worse than {args.threshold:g}x "
            f"({len(trends)} series)\n"
        )
        return 0
    out.write(
        f"gate: {len(failed)} series' newest runs sit after a step worse than "
        f"{args.threshold:g}x:\n"
    )
    for t, step in failed:
        out.write(f"  {t.label}: {t.metric.label} {trend_reporter.step_text(t, step)}\n")
    return 1


def _columns(text: str) -> int:
    """``--width``'s value: a whole number of columns, 40 or more."""
    try:
        width = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if width < 40:
        raise argparse.ArgumentTypeError(f"{width}: at least 40 columns")
    return width


def _width(args: argparse.Namespace, out: TextIO) -> int:
    """``--width``, else the terminal's width where ``out`` is one, else 120 columns."""
    given = getattr(args, "width", None)
    if given:
        return int(given)
    return shutil.get_terminal_size((120, 40)).columns if out.isatty() else 120


def _run_header(ref: RunRef) -> str:
    r = ref.result
    git = r.suite.git
    commit = f" · commit {(git.commit or '')[:10]}{' (dirty)' if git.dirty else ''}" if git else ""
    return (
        f"{ref.label}: {r.suite.name or '?'} · {r.started_at or '?'}{commit} · "
        f"{len(r.cases)} cases · {r.status}"
    )


def _gate(doc: analysis.Comparison, args: argparse.Namespace, out: TextIO) -> int:
    """--fail-if-slower: the gate's verdict (rpcmeter.gate) printed, its exit status returned."""
    if args.fail_if_slower is None:
        return 0
    verdict = gate.judge(doc, args.metric, args.fail_if_slower)
    out.write("\n" + "".join(f"{line}\n" for line in verdict.lines))
    return verdict.status


def _compare_output(
    doc: analysis.Comparison, header: list[str], fmt: str, width: int, color: bool
) -> str:
    compare = registry.get(fmt).compare
    assert compare is not None
    return compare(comparison_view(doc, header), registry.Options(width=width, color=color))


def _after_run(
    result: Result, view: View, args: argparse.Namespace, stored: int | None, out: TextIO
) -> int:
    """Exports, the baseline tag or comparison, and the gate after ``rpcmeter run``."""
    write_reports(view, args, out, ("csv", "markdown"))
    if stored is not None:
        out.write(f"stored as run {stored} in {args.store}\n")
    doc = view.comparisons
    if args.baseline and stored is not None:
        with Store(args.store) as store:
            base = store.baseline(args.baseline, stored)
        if base is None:
            out.write(f"tagged run {stored} as baseline {args.baseline!r}\n")
        else:
            doc = analysis.compare_runs(base.result, result, base.label, f"run {stored}")
            header = [f"run {stored} against baseline {args.baseline!r}", _run_header(base)]
            out.write("\n")
            out.write(_compare_output(doc, header, "text", _width(args, out), out.isatty()))
    return _gate(doc, args, out)


def cmd_history(args: argparse.Namespace, out: TextIO) -> int:
    with Store(args.store, read_only=True) as store:
        runs = store.runs(args.limit)
    if not runs:
        out.write(f"no runs in {args.store}\n")
        return 0
    # the branch column only where the runs are not all on one branch (or all on none)
    branches = len({r.branch for r in runs}) > 1
    columns = ["id", "time", "suite", "commit", "branch", "variants", "cases", "status", "tags"]
    if not branches:
        columns.remove("branch")
    grid = tables.Grid(f"history: {args.store}", columns, left=len(columns))
    for r in runs:
        commit = (r.commit[:10] + ("*" if r.dirty else "")) if r.commit else "-"
        planned = f"/{r.planned_cases}" if r.planned_cases and r.planned_cases != r.cases else ""
        row: list[tables.GridCell] = [
            str(r.id),
            r.started_at.replace("T", " ").removesuffix("+00:00"),
            r.suite,
            commit,
            r.branch or "-",
            ", ".join(r.variants),
            f"{r.cases}{planned}",
            r.status,
            ", ".join(r.tags),
        ]
        if not branches:
            del row[4]
        grid.rows.append(row)
    out.write(terminal.render_grid(grid, width=_width(argparse.Namespace(width=None), out)))
    return 0


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    view = build_view(resolve_run(args.run, args.store).result)
    if args.columns:
        out.write(render_columns(view, args, out))
    else:
        out.write(render_report(view, args.format, args, out))
    return 0


def cmd_compare(args: argparse.Namespace, out: TextIO) -> int:
    a = resolve_run(args.a, args.store)
    b = resolve_run(args.b, args.store)
    if a.id is not None and a.id == b.id:
        raise UsageError(
            f"compare: {args.a} and {args.b} are both {a.label}: a run compared with itself "
            "(name two runs, e.g. rpcmeter compare last~1 last)"
        )
    doc = analysis.compare_runs(a.result, b.result, a.label, b.label)
    if not doc.rows:
        raise UsageError(f"{a.label} and {b.label} have no case in common")
    header = [f"{b.label} against {a.label}", _run_header(a), _run_header(b)]
    out.write(_compare_output(doc, header, args.format, _width(args, out), out.isatty()))
    return _gate(doc, args, out)


def cmd_tag(args: argparse.Namespace, out: TextIO) -> int:
    with Store(args.store, create=False) as store:
        run = store.resolve(args.run)
        store.tag(args.name, run)
    out.write(f"tagged run {run} as {args.name!r}\n")
    return 0


def _which_build() -> str:
    """What ``--version`` adds: the client's hot path compiled, or why it runs as Python."""
    if compiled():
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


def build_parser() -> argparse.ArgumentParser:
    from rpcmeter.version import __version__

    parser = argparse.ArgumentParser(
        prog="rpcmeter",
        description="Measure and compare request/response systems.",
    )
    parser.add_argument(
        "--version", action="version", version=f"rpcmeter {__version__}{_which_build()}"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)
    _add_report(sub)
    _add_history_commands(sub)
    _add_trend(sub)
    _add_describe(sub)
    return parser


def _add_describe(sub: Any) -> None:
    p = sub.add_parser(
        "describe",
        help="the gRPC services and methods a suite's schemas offer, each method's input as JSON",
    )
    p.add_argument("suite", help="suite file (TOML)")
    _add_set_option(p)
    g = sub.add_parser("grpc", help="gRPC tools: list a server's services by reflection")
    gsub = g.add_subparsers(dest="grpc_command", metavar="COMMAND", required=True)
    p = gsub.add_parser(
        "list", help="the services and methods a server's reflection service offers"
    )
    p.add_argument("address", help="host:port or a Unix socket path")
    p.add_argument(
        "--tls", action="store_true", help="over TLS (the system's CAs unless --ca-file)"
    )
    p.add_argument("--ca-file", help="TLS: the CA to trust (implies --tls)")
    p.add_argument("--server-name", help="TLS: the name to check the certificate against")
    p.add_argument("--cert-file", help="TLS: a client certificate (with --key-file)")
    p.add_argument("--key-file", help="TLS: the client certificate's key")
    p.add_argument(
        "--metadata",
        "-H",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="request metadata sent with the reflection calls, repeatable",
    )
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default 10)")


def cmd_describe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.drivers.grpc_calls import describe_calls
    from rpcmeter.execute import suite_calls

    suite = load_suite(Path(args.suite), args.overrides)
    lines = describe_calls(suite_calls(suite, Progress(err)))
    if not lines:
        out.write(
            f"{args.suite}: no variant names a gRPC call from a schema "
            "(options proto, protoset or reflection = true, with call)\n"
        )
        return 0
    out.write("\n".join(printable(line) for line in lines) + "\n")
    return 0


def cmd_grpc(args: argparse.Namespace, out: TextIO) -> int:
    from rpcmeter.drivers.grpc_calls import reflect
    from rpcmeter.endpoints import remote_endpoint
    from rpcmeter.protocols.grpc_schema import SchemaError, listing
    from rpcmeter.tls import ClientTls, TlsSettings

    try:
        endpoint = remote_endpoint(args.address)
    except ValueError as exc:
        raise UsageError(f"grpc list: {exc}") from None
    metadata = []
    for item in args.metadata:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"grpc list --metadata {item}: expected KEY=VALUE")
        metadata.append((key.strip().lower(), value.strip()))
    tls = None
    if args.tls or args.ca_file or args.cert_file or args.key_file or args.server_name:
        if bool(args.cert_file) != bool(args.key_file):
            raise UsageError("grpc list: --cert-file and --key-file go together")
        for name in ("ca_file", "cert_file", "key_file"):
            path = getattr(args, name)
            if path and not Path(path).is_file():
                raise UsageError(f"grpc list --{name.replace('_', '-')}: no such file {path}")
        settings = TlsSettings(
            ca_file=args.ca_file,
            server_name=args.server_name,
            cert_file=args.cert_file,
            key_file=args.key_file,
        )
        tls = ClientTls(settings, args.ca_file, args.server_name)
    try:
        schema = reflect(endpoint, tls, tuple(metadata), args.timeout)
    except SchemaError as exc:
        raise UsageError(f"grpc list {args.address}: {exc}") from None
    out.write(f"{args.address}: {schema.origin}, sha256 {schema.sha256[:12]}\n")
    out.write("\n".join(printable(line) for line in listing(schema)) + "\n")
    if schema.undescribed:
        out.write(f"listed without descriptors: {', '.join(schema.undescribed)}\n")
    return 0


# What the built-in demo's output ends with.
DEMO_NEXT = """
next:
  rpcmeter run examples/rpyc-thread-binding.toml --quick   # a whole study (study 000), small counts
  rpcmeter report last --html demo.html                     # this run as one page with its plots
  rpcmeter trend                                            # every case across the stored runs
"""


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path = Path(args.suite) if args.suite else builtin_suite_path("demo")
    suite = load_suite(
        path,
        args.overrides,
        quick=args.quick,
        only_workloads=args.workload,
        only_variants=args.variant,
    )
    json_out = out if args.output is not None and str(args.output) == "-" else None
    if json_out is not None:  # -o -: the document alone on stdout, the tables on stderr
        args.output, out = None, err
    elif args.output is not None:
        check_output(args.output)
    progress = Progress(err, live=not args.no_live)
    events = RunEvents(progress)
    exporter = None
    if args.prometheus is not None:
        exporter = events.subscribe(PrometheusExporter(*parse_address(args.prometheus)))
    options = RunOptions(output=args.output, events=events, cluster=args.cluster)
    if args.max_error_rate is not None and not 0 <= args.max_error_rate <= 1:
        raise UsageError("--max-error-rate: a fraction between 0 and 1, e.g. 0.01")
    if args.baseline and args.no_store:
        raise UsageError("--baseline needs the history store (drop --no-store)")
    store = None if args.no_store else Store(args.store)
    recorder = events.subscribe(store.listener()) if store is not None else None
    began = events.subscribe(Began())
    try:
        result = _run_or_search(args, suite, options)
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
        if exporter is not None:
            exporter.close()
    view = build_view(result)
    if json_out is not None:
        json_out.write(render_report(view, "json", args, json_out))
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
    if not args.suite:
        out.write(DEMO_NEXT)
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
    finder = running_python()
    edited = finder.edited if finder is not None else []
    if edited:
        print(
            f"rpcmeter: warning: {len(edited)} compiled module(s) older than their edited source "
            f"({', '.join(edited)}): every compiled module runs as Python until rpcmeter is "
            "installed again (pip install -e .)",
            file=sys.stderr,
        )
    try:
        if args.command == "run":
            return cmd_run(args, sys.stdout, sys.stderr)
        if args.command == "report":
            return cmd_report(args, sys.stdout, sys.stderr)
        if args.command == "describe":
            return cmd_describe(args, sys.stdout, sys.stderr)
        if args.command == "grpc":
            return cmd_grpc(args, sys.stdout)
        history_commands = {
            "history": cmd_history,
            "show": cmd_show,
            "compare": cmd_compare,
            "tag": cmd_tag,
            "trend": cmd_trend,
        }
        if args.command in history_commands:
            return history_commands[args.command](args, sys.stdout)
        parser.error(f"unknown command {args.command}")
    except RpcmeterError as exc:
        print(f"rpcmeter: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nrpcmeter: interrupted; servers and clients stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
