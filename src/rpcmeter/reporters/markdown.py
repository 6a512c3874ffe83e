"""The tables as GitHub-flavoured Markdown (``--markdown``, ``show --format markdown``), ready for
a README or a pull-request comment. Pure functions from a view to text."""

from __future__ import annotations

import re

from rpcmeter.analysis import compare as analysis
from rpcmeter.reporters.format import fmt_ratio
from rpcmeter.reporters.tables import Grid, GridCell, Mark, RatioCell
from rpcmeter.reporters.view import ComparisonView, View
from rpcmeter.text import details, headline, printable

_MARKDOWN = re.compile(r"([\\`*_<>|~]|\](?=\())")


def _escape(text: str) -> str:
    """Text as itself in Markdown: line breaks as spaces, other control characters escaped, and
    every character that would start emphasis, code, HTML, a link's target or a table cell
    backslash-escaped."""
    return _MARKDOWN.sub(r"\\\1", printable(text.replace("\n", " ")))


def _cell(cell: GridCell) -> str:
    if isinstance(cell, Mark):
        return f"**{_escape(cell.text)}**" if cell.style == "bad" else _escape(cell.text)
    if isinstance(cell, RatioCell):
        text = fmt_ratio(cell.ratio)
        if cell.low is not None and cell.high is not None:
            text += f" ({fmt_ratio(cell.low)}–{fmt_ratio(cell.high)})"
        if cell.verdict == "unknown":
            return text
        verdict = f"**{cell.word}**" if cell.verdict in ("faster", "slower") else cell.word
        return f"{text} {verdict}"
    return _escape(cell)


def grid_markdown(grid: Grid, level: int = 3) -> str:
    """A grid as a heading and a GitHub table."""
    lines = [f"{'#' * level} {_escape(grid.title)}", ""]
    if grid.note:
        lines += [f"_{_escape(grid.note)}_", ""]
    lines.append("| " + " | ".join(_escape(c).strip() for c in grid.columns) + " |")
    lines.append(
        "|" + "|".join(":--" if grid.is_left(i) else "--:" for i in range(len(grid.columns))) + "|"
    )
    for row in grid.rows:
        cells = [_cell(c) for c in row]
        cells += [""] * (len(grid.columns) - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def grids_markdown(grids: tuple[Grid, ...] | list[Grid], level: int = 3) -> str:
    return "\n".join(grid_markdown(g, level) for g in grids)


def _bullets(title: str, items: list[str]) -> str:
    return f"**{title}**\n\n" + "".join(f"- {_escape(i)}\n" for i in items) if items else ""


def render(view: View) -> str:
    """A run: per workload the summary table (a whole-command workload: its runs) and the tables
    of where the time goes, streaming per message, CPU and memory and connection costs; then
    ratios with intervals and verdicts."""
    run = view.run
    parts = [
        f"## {_escape(run.title)}\n\n"
        f"{run.cases} cases · {run.status} · run `{run.run_id or '?'}` · "
        f"{run.started_at}\n\n{_escape(run.environment_line)}\n",
        *[f"{_escape(line)}\n" for line in view.wait_lines],
    ]
    for w in view.workloads:
        if w.kind == "requests":
            parts.append(grid_markdown(w.summary))
        parts += [grid_markdown(g) for g in w.tables]
    parts.append(grids_markdown(view.comparison_tables))
    failed = [
        f"{p.variant} · {p.workload} · {analysis.point_label(dict(p.point))} "
        f"(rep {p.repetition}): {p.reason}" + "".join(f"; {line}" for line in p.sample_lines)
        for p in view.failed
    ]
    parts.append(_bullets("Failed cases", failed))
    parts.append(_bullets("Warnings", _warnings(view.warnings)))
    return "\n".join(p for p in parts if p)


def _warnings(warnings: tuple[str, ...]) -> list[str]:
    """Each warning on one line: its headline, then its details."""
    return [f"{headline(w)} — {details(w)}" if details(w) else w for w in warnings]


def render_comparison(view: ComparisonView) -> str:
    """A comparison of two runs (``rpcmeter compare --format markdown``)."""
    header = view.header
    parts = [f"## {_escape(header[0])}\n\n" + "".join(f"{_escape(h)}  \n" for h in header[1:])]
    parts.append(grids_markdown(view.tables) if not view.empty else "No case in common.\n")
    parts.append(_bullets("Warnings", _warnings(view.warnings)))
    return "\n".join(p for p in parts if p)
