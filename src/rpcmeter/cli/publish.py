"""``rpcmeter publish DIR``: a static site of the history store (rpcmeter.publish)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from rpcmeter.cli import options
from rpcmeter.errors import UsageError

DEFAULT_PLOTS = 5  # rpcmeter.publish.DEFAULT_PLOTS, without importing it to parse


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "publish",
        help="write a static site of the stored runs: an index, each suite's trends, each run's "
        "report, comparisons",
        description="Write a static site of the history into DIR: it opens from disk or any "
        "static host (GitHub Pages). A second publish into DIR renders only the new runs.",
    )
    p.add_argument("directory", type=Path, metavar="DIR", help="the site's directory")
    p.add_argument("--suite", metavar="NAME", help="only the runs of the suite named NAME")
    p.add_argument("--last", type=int, metavar="N", help="only the newest N runs")
    p.add_argument(
        "--plots",
        type=int,
        default=DEFAULT_PLOTS,
        metavar="N",
        help="the newest N runs' pages draw the report's plots (about a second or two a run; "
        f"default {DEFAULT_PLOTS}); the others carry its tables",
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="worker processes that render the pages (default: one per CPU)",
    )
    p.add_argument(
        "--repo",
        type=Path,
        metavar="DIR",
        help="the git checkout that holds the runs' commits, for their messages (default: the "
        "current directory)",
    )
    options.add_store_option(p)
    p.set_defaults(handler=cmd_publish)


def cmd_publish(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.publish import publish

    if args.last is not None and args.last < 1:
        raise UsageError(f"--last {args.last}: at least 1 run")
    if args.plots < 0:
        raise UsageError(f"--plots {args.plots}: 0 or more runs")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: at least 1 process")
    store = options.store_path(args)
    done = publish(
        args.directory,
        store,
        suite=args.suite,
        last=args.last,
        jobs=args.jobs,
        plots=args.plots,
        repo=args.repo,
    )
    if not done.runs:
        suite = f" of suite {args.suite!r}" if args.suite else ""
        out.write(f"no runs{suite} in {store}: nothing published\n")
        return 0
    out.write(done.line() + "\n")
    out.write(f"open {done.directory / 'index.html'}\n")
    return 0
