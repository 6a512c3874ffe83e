"""``rpcmeter trend``: each case's metric across the stored runs, with the steps in it."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, TextIO

from rpcmeter.cli import options
from rpcmeter.cli.options import CREATES
from rpcmeter.errors import UsageError
from rpcmeter.names import BY, DEFAULT_THRESHOLD, METRIC_ALIASES, METRICS


def add_parser(sub: Any) -> None:
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
    names = [*(m.name for m in METRICS), *METRIC_ALIASES]
    p.add_argument(
        "--metric",
        action="append",
        metavar="METRIC",
        help=f"metric(s), repeatable or comma-separated: {', '.join(names)} (default: mean)",
    )
    p.add_argument(
        "--by",
        choices=BY,
        default="run",
        help="one point per run (default), per git revision (its runs pooled) or per day",
    )
    p.add_argument("--suite", metavar="NAME", help="only the runs of the suite named NAME")
    p.add_argument("--last", type=int, metavar="N", help="only the newest N runs")
    options.add_width(p)
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
        default=DEFAULT_THRESHOLD,
        metavar="RATIO",
        help="how much worse a step must be to fail --fail-on-step (default: "
        f"{DEFAULT_THRESHOLD}, 5 %% slower or 5 %% less throughput)",
    )
    options.add_store_option(p)
    p.set_defaults(handler=cmd_trend)


def cmd_trend(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.history import trend as trend
    from rpcmeter.history.store import Store
    from rpcmeter.reporters import trend as trend_reporter

    store_path = options.store_path(args)

    names = [n.strip() for arg in args.metric or ["mean"] for n in arg.split(",") if n.strip()]
    metrics = list(dict.fromkeys(trend.trend_metric(n) for n in names))
    if args.last is not None and args.last < 2:
        raise UsageError("--last: at least 2 runs")
    if not (1 <= args.threshold < math.inf):  # nan: no step is ever worse than it
        raise UsageError(
            f"--threshold {args.threshold}: a finite factor of at least 1, e.g. 1.05 for 5 % worse"
        )
    with Store(store_path, read_only=True) as store:
        infos = store.runs(args.last, suite=args.suite)[::-1]
        trends = trend.collect(
            ((info, store.load(info.id)) for info in infos),
            metrics,
            args.by,
            args.case_filter,
        )
    if not infos:
        suite = f" of suite {args.suite!r}" if args.suite else ""
        out.write(f"no runs{suite} in {store_path}\n")
        return 0
    if not trends:
        raise UsageError(
            f"{args.case_filter or 'trend'}: no case of the {len(infos)} runs in {store_path} "
            f"matches, with {', '.join(m.name for m in metrics)} measured"
        )
    out.write(f"{len(infos)} runs in {store_path}, {len(trends)} series\n\n")
    out.write(trend_reporter.render(trends, args.by, options.width(args, out), out.isatty()))
    if args.html:
        title = f"rpcmeter trend · {args.suite or store_path}"
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
