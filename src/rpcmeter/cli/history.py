"""The commands that read the history: ``report``, ``history``, ``show``, ``compare``, ``tag``."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from rpcmeter.cli import options
from rpcmeter.errors import UsageError
from rpcmeter.names import COLUMN_FORMATS, TEXT_FORMATS


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("report", help="report a finished run: tables, HTML, PNG plots")
    p.add_argument(
        "run", metavar="RUN", help="the run: id, last, last~N, a tag or a result JSON file"
    )
    options.add_width(p)
    p.add_argument("--format", "-f", choices=COLUMN_FORMATS, default="text", help="default: text")
    options.add_columns_option(p)
    options.add_report_outputs(p)
    options.add_store_option(p)
    p.set_defaults(handler=cmd_report)

    p = sub.add_parser("history", help="list the runs stored in the history")
    options.add_store_option(p)
    p.add_argument("--limit", "-n", type=int, default=20, help="newest N runs (default 20)")
    p.set_defaults(handler=cmd_history)

    p = sub.add_parser("show", help="print a stored run (id, last, last~N, a tag or a JSON file)")
    p.add_argument("run", nargs="?", default="last", help="the run (default: last)")
    p.add_argument("--format", "-f", choices=TEXT_FORMATS, default="text")
    options.add_width(p)
    options.add_columns_option(p)
    options.add_store_option(p)
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("compare", help="compare run B against run A (the baseline), case by case")
    p.add_argument("a", help="baseline run (id, last, last~N, a tag or a JSON file)")
    p.add_argument("b", nargs="?", default="last", help="compared run (default: last)")
    p.add_argument("--format", "-f", choices=TEXT_FORMATS, default="text")
    options.add_width(p)
    options.add_store_option(p)
    options.add_gate_options(p)
    p.set_defaults(handler=cmd_compare)

    p = sub.add_parser("tag", help="tag a stored run as a baseline NAME (moves an existing tag)")
    p.add_argument("name")
    p.add_argument("run", nargs="?", default="last", help="the run (default: last)")
    options.add_store_option(p)
    p.set_defaults(handler=cmd_tag)


def cmd_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.cli.output import render_columns, render_report, write_reports
    from rpcmeter.history.store import resolve_run
    from rpcmeter.reporters.build import build as build_view

    view = build_view(resolve_run(args.run, options.store_path(args)).result)
    if args.columns:
        out.write(render_columns(view, args, out))
    elif not args.html and not args.plots:
        out.write(render_report(view, args.format, args, out))
    write_reports(view, args, out, ("html", "plots"))
    return 0


def cmd_history(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.history.store import Store
    from rpcmeter.reporters import tables, terminal

    path = options.store_path(args)
    with Store(path, read_only=True) as store:
        runs = store.runs(args.limit)
    if not runs:
        out.write(f"no runs in {path}\n")
        return 0
    # the branch column only where the runs are not all on one branch (or all on none)
    branches = len({r.branch for r in runs}) > 1
    columns = ["id", "time", "suite", "commit", "branch", "variants", "cases", "status", "tags"]
    if not branches:
        columns.remove("branch")
    grid = tables.Grid(f"history: {path}", columns, left=len(columns))
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
    out.write(terminal.render_grid(grid, width=options.width(argparse.Namespace(), out)))
    return 0


def cmd_show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.cli.output import render_columns, render_report
    from rpcmeter.history.store import resolve_run
    from rpcmeter.reporters.build import build as build_view

    view = build_view(resolve_run(args.run, options.store_path(args)).result)
    if args.columns:
        out.write(render_columns(view, args, out))
    else:
        out.write(render_report(view, args.format, args, out))
    return 0


def cmd_compare(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.analysis import compare as analysis
    from rpcmeter.cli.output import compare_output, gate_status, run_header
    from rpcmeter.history.store import resolve_run

    path = options.store_path(args)
    a = resolve_run(args.a, path)
    b = resolve_run(args.b, path)
    if a.id is not None and a.id == b.id:
        raise UsageError(
            f"compare: {args.a} and {args.b} are both {a.label}: a run compared with itself "
            "(name two runs, e.g. rpcmeter compare last~1 last)"
        )
    doc = analysis.compare_runs(a.result, b.result, a.label, b.label)
    if not doc.rows:
        raise UsageError(f"{a.label} and {b.label} have no case in common")
    header = [f"{b.label} against {a.label}", run_header(a), run_header(b)]
    out.write(compare_output(doc, header, args.format, options.width(args, out), out.isatty()))
    return gate_status(doc, args, out)


def cmd_tag(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.history.store import Store

    with Store(options.store_path(args), create=False) as store:
        run = store.resolve(args.run)
        store.tag(args.name, run)
    out.write(f"tagged run {run} as {args.name!r}\n")
    return 0
