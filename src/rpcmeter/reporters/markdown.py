"""The tables as GitHub-flavoured Markdown (``--markdown``, ``show --format markdown``), ready for
a README or a pull-request comment. Pure functions from a document to text."""

from __future__ import annotations

import re
from typing import Any

from rpcmeter import analysis
from rpcmeter.aggregate import cells
from rpcmeter.reporters.format import fmt_ratio
from rpcmeter.reporters.tables import (
    Grid,
    GridCell,
    Mark,
    RatioCell,
    comparison_grids,
    comparisons_of,
    summary_grid,
    workload_grid,
)
from rpcmeter.reporters.terminal import environment_line
from rpcmeter.result import Result
from rpcmeter.text import printable

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
        "|" + "|".join(":--" if i < grid.left else "--:" for i in range(len(grid.columns))) + "|"
    )
    for row in grid.rows:
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def comparison_markdown(doc: dict[str, Any], level: int = 3) -> str:
    parts = [grid_markdown(g, level) for g in comparison_grids(doc)]
    summary = summary_grid(doc)
    if summary is not None:
        parts.append(grid_markdown(summary, level))
    return "\n".join(parts)


def _bullets(title: str, items: list[str]) -> str:
    return f"**{title}**\n\n" + "".join(f"- {_escape(i)}\n" for i in items) if items else ""


def render(result: Result) -> str:
    """A run: per workload the summary table, then ratios with intervals and verdicts."""
    suite = result["suite"]
    status = result.get("status", "?")
    parts = [
        f"## {_escape(suite.get('name', 'suite'))}\n\n"
        f"{len(result['cases'])} cases · {status} · run `{result.get('run_id', '?')}` · "
        f"{result.get('started_at', '?')}\n\n{_escape(environment_line(result))}\n"
    ]
    parts += [grid_markdown(workload_grid(result, w)) for w in cells(result)]
    comparisons = comparisons_of(result)
    if analysis.has_verdicts(comparisons):
        parts.append(comparison_markdown(comparisons))
    failed = [
        f"{c['variant']} · {c['workload']} · {analysis.point_label(c['point'])} "
        f"(rep {c['repetition']}): {c['reason']}"
        for c in result["cases"]
        if c["status"] != "ok"
    ]
    parts.append(_bullets("Failed cases", failed))
    parts.append(_bullets("Warnings", list(result.get("warnings", []))))
    return "\n".join(p for p in parts if p)


def render_comparison(doc: dict[str, Any], header: list[str]) -> str:
    """A comparison of two runs (``rpcmeter compare --format markdown``)."""
    parts = [f"## {_escape(header[0])}\n\n" + "".join(f"{_escape(h)}  \n" for h in header[1:])]
    parts.append(comparison_markdown(doc) if doc["rows"] else "No case in common.\n")
    parts.append(_bullets("Warnings", list(doc["warnings"])))
    return "\n".join(p for p in parts if p)
