"""What the commands print and write: a run's text in a format, the report files asked for."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from rpcmeter.analysis import compare as analysis
from rpcmeter.cli.options import width
from rpcmeter.errors import UsageError
from rpcmeter.history.store import RunRef
from rpcmeter.reporters import gate as gate
from rpcmeter.reporters import registry
from rpcmeter.reporters.build import comparison_view
from rpcmeter.reporters.view import View


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
    options = registry.Options(width=width(args, out), color=out.isatty())
    render = registry.get(fmt).render
    assert render is not None
    return render(view, options)


def render_columns(view: View, args: argparse.Namespace, out: TextIO) -> str:
    """A run as the column set ``--columns`` names, in ``--format`` (text or Markdown)."""
    if args.format not in registry.COLUMN_FORMATS:
        raise UsageError(
            f"--columns {args.columns}: only with --format text or markdown (got {args.format})"
        )
    options = registry.Options(width=width(args, out), color=out.isatty())
    return registry.render_columns(view, args.columns, args.format, options)


def run_header(ref: RunRef) -> str:
    r = ref.result
    git = r.suite.git
    commit = f" · commit {(git.commit or '')[:10]}{' (dirty)' if git.dirty else ''}" if git else ""
    return (
        f"{ref.label}: {r.suite.name or '?'} · {r.started_at or '?'}{commit} · "
        f"{len(r.cases)} cases · {r.status}"
    )


def gate_status(doc: analysis.Comparison, args: argparse.Namespace, out: TextIO) -> int:
    """--fail-if-slower: the gate's verdict (rpcmeter.reporters.gate) printed, its exit status returned."""
    if args.fail_if_slower is None:
        return 0
    verdict = gate.judge(doc, args.metric, args.fail_if_slower)
    out.write("\n" + "".join(f"{line}\n" for line in verdict.lines))
    return verdict.status


def compare_output(
    doc: analysis.Comparison, header: list[str], fmt: str, width: int, color: bool
) -> str:
    compare = registry.get(fmt).compare
    assert compare is not None
    return compare(comparison_view(doc, header), registry.Options(width=width, color=color))
