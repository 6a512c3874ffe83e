"""Terminal tables: per workload, one row per matrix point; the baseline's latency and throughput,
and every other variant as a ratio to the baseline; with repetitions, a comparison table per
workload (ratio, 95 % interval and verdict per metric) and the geometric means of the ratios;
then the ranking, where the time goes, streaming, CPU and memory, connection and whole-command
tables. A pure function from a :class:`~rpcmeter.reporters.view.View` to text."""

from __future__ import annotations

import io
import math

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rpcmeter.analysis.rates import ACHIEVED_MIN, KNEE_FACTOR, Series
from rpcmeter.model import MaxRate
from rpcmeter.reporters.fit import FitTable
from rpcmeter.reporters.format import fmt_ms, fmt_rate, fmt_ratio
from rpcmeter.reporters.tables import Grid, GridCell, Mark, RatioCell
from rpcmeter.reporters.view import (
    MAX_RATIO_VARIANTS,
    ComparisonView,
    Problem,
    View,
)
from rpcmeter.text import details, headline, printable

__all__ = [
    "grid_table",
    "render",
    "render_comparison",
    "render_grid",
]

STYLES = {"bad": "red", "warn": "yellow", "dim": "dim", "good": "green"}
VERDICT_STYLES = {"faster": "green", "slower": "red", "same": "", "unknown": "dim"}


def _lines(text: str) -> str:
    """Text with its control characters escaped but its line breaks kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def _text(text: str, style: str = "") -> Text:
    """Text from the document, drawn as itself (control characters escaped, no markup)."""
    return Text(_lines(text), style=style)


def _markup(text: str) -> str:
    """Text from the document inside rich markup: control characters and markup escaped."""
    return escape(_lines(text))


def _cell(cell: GridCell) -> Text:
    if isinstance(cell, Mark):
        return _text(cell.text, STYLES.get(cell.style, ""))
    if isinstance(cell, RatioCell):
        text = Text(fmt_ratio(cell.ratio))
        if cell.verdict != "unknown":
            text.append(f" {cell.word}", style=VERDICT_STYLES.get(cell.verdict, ""))
        if cell.low is not None and cell.high is not None:
            text.append(f"\n{fmt_ratio(cell.low)}-{fmt_ratio(cell.high)}", style="dim")
        return text
    return _text(cell)


def grid_table(grid: Grid, title: bool = True) -> Table:
    """A :class:`~rpcmeter.reporters.tables.Grid` as a rich table (``title=False``: the caller
    prints the title, which then does not wrap to the table's width)."""
    note = f"  [dim]({_markup(grid.note)})[/dim]" if grid.note else ""
    table = FitTable(
        title=f"[bold]{_markup(grid.title)}[/bold]{note}" if title else None,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for i, column in enumerate(grid.columns):
        table.add_column(
            _markup(column),
            justify="left" if grid.is_left(i) else "right",
            no_wrap=i in grid.no_wrap,
        )
    for row in grid.rows:
        table.add_row(*(_cell(c) for c in row))
    return table


def _console(width: int, color: bool) -> tuple[io.StringIO, Console]:
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width,
        color_system="standard" if color else None,
        force_terminal=color,
        highlight=False,
        soft_wrap=False,
    )
    return buf, console


def render_grid(grid: Grid, width: int = 120, color: bool = False) -> str:
    """One grid as text."""
    buf, console = _console(width, color)
    console.print(grid_table(grid))
    return buf.getvalue()


def _print_grids(console: Console, grids: tuple[Grid, ...]) -> None:
    """Comparison tables: each after its own title line (which then does not wrap)."""
    for grid in grids:
        console.print()
        console.print(_text(grid.title, "bold"))
        if grid.note:  # why a ratio has no verdict
            console.print(_text(grid.note, "dim"))
        console.print(grid_table(grid, title=False))


def _print_samples(console: Console, problem: Problem) -> None:
    """Under a case's failure or errors line, the first kept sample of each error kind (what
    says why: ``mismatch: name: expected ..., got ...``), cut to a line."""
    for line in problem.sample_lines:
        console.print(_text(f"  {line[:300]}", "dim"))


RUN_DETAILS = "the HTML report (--html) and the result's JSON"
COMPARE_DETAILS = "--format markdown or json"


def _print_warnings(console: Console, warnings: tuple[str, ...], where: str) -> None:
    """Each warning as its one-line headline; where they have details, a line saying ``where``
    those are (the reports show them whole: :func:`rpcmeter.text.warning`)."""
    for w in warnings:
        console.print(_text(f"warning: {headline(w)}", "yellow"))
    if any(details(w) for w in warnings):
        console.print(_text(f"  (each warning's details: {where})", "dim"))


def render_comparison(view: ComparisonView, width: int = 120, color: bool = False) -> str:
    """A comparison of two runs (``rpcmeter compare``) as text."""
    buf, console = _console(width, color)
    for i, line in enumerate(view.header):
        console.print(_text(line, "bold" if i == 0 else "dim"))
    if view.empty:
        console.print(Text("no case in common", style="yellow"))
    _print_grids(console, view.tables)
    if view.warnings:
        console.print()
    _print_warnings(console, view.warnings, COMPARE_DETAILS)
    return buf.getvalue()


def render(view: View, width: int = 120, color: bool = False) -> str:
    """The run's tables as text (names from the document drawn as themselves)."""
    buf, console = _console(width, color)
    run = view.run
    header = f"{run.title} · {run.cases} cases"
    if run.status != "complete":
        header += f" · {run.status}"
    console.print(_text(header, "bold"))
    console.print(_text(run.environment_line, "dim"))
    for line in view.tls_lines:
        console.print(_text(line, "yellow"))
    for line in view.wait_lines:
        console.print(_text(line, "dim"))

    def table(grid: Grid | None) -> None:
        if grid is not None:
            console.print()
            console.print(grid_table(grid))

    n_variants = len(view.variants)
    for w in view.workloads:
        if w.command is not None:  # its own table: runs, wall and CPU
            table(w.command)
            continue
        requests = w.kind != "idle"  # an idle workload has no latency to show
        if n_variants <= MAX_RATIO_VARIANTS and requests:  # wider comparisons: ranking only
            table(w.summary_narrow)
        if requests:
            table(w.ranking)
        table(w.clients)
        table(w.calls)
        table(w.breakdown)
        if w.profile_lines:
            console.print()
            console.print(_text("\n".join(w.profile_lines)))
        table(w.streams)
        table(w.resources)
        table(w.connections)
        for grid in w.stages:
            table(grid)
    _print_grids(console, view.comparison_tables)
    render_rates(console, view)
    if view.spread_lines:
        console.print()
    for line in view.spread_lines:
        console.print(_text(line))
    if view.problems:
        console.print()
    for p in view.failed:
        console.print(_text(f"{p.status}: {p.where} (rep {p.repetition}): {p.reason}", "red"))
        _print_samples(console, p)
        if p.server_output_tail:
            tail = p.server_output_tail.splitlines()[-1][:200]
            console.print(_text("  server output: " + tail, "dim"))
    for p in view.problems:
        if p.status != "ok":
            continue
        kinds = ", ".join(f"{k}: {n:,}" for k, n in p.errors)
        console.print(_text(f"errors: {p.where}: {kinds}", "yellow"))
        _print_samples(console, p)
    if view.warnings:
        console.print()
    _print_warnings(console, view.warnings, RUN_DETAILS)
    return buf.getvalue()


# ---- open loop: latency against offered rate, the rate search --------------------------------


def rate_table(series: Series) -> Table:
    """Latency (corrected, and p99 uncorrected) against offered rate; the knee marked."""
    point = _markup(" ".join(f"{k}={v}" for k, v in series.point))
    title = f"[bold]{_markup(series.workload)}[/bold] · {_markup(series.variant)}" + (
        f" · {point}" if point else ""
    )
    table = FitTable(
        title=f"{title} · latency vs offered rate (from the intended send time)",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for name in ("offered req/s", "achieved req/s", "p50 ms", "p99 ms", "p99.9 ms"):
        table.add_column(name, justify="right")
    table.add_column("p99 ms\nuncorrected", justify="right")
    table.add_column("late", justify="right")
    table.add_column("dropped", justify="right")
    table.add_column("")
    for p in series.points:
        table.add_row(
            fmt_rate(p.offered_rps),
            Text(fmt_rate(p.achieved_rps), style="" if p.keeps_up else "yellow"),
            fmt_ms(p.p50_us),
            fmt_ms(p.p99_us),
            fmt_ms(p.p999_us),
            fmt_ms(p.p99_uncorrected_us),
            f"{p.late:,}",
            f"{p.dropped:,}",
            Text("◀ knee", style="bold red") if p.knee else "",
        )
    return table


def max_rate_table(entries: tuple[MaxRate, ...]) -> Table:
    """One row per search: the highest rate meeting the objective and the latency there."""
    keys = list(dict.fromkeys(k for e in entries for k in e.point))
    table = FitTable(
        title=f"[bold]highest rate meeting {_markup(str(entries[0].slo))}[/bold]",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for name in ("workload", "variant", *keys):
        table.add_column(_markup(name))
    for name in ("max req/s", "achieved req/s", "p50 ms", "p99 ms", "p99.9 ms", "steps"):
        table.add_column(name, justify="right")
    for e in entries:
        lat = e.latency_us or {}
        steps = f"{len(e.steps)}" + ("" if e.converged else " (not converged)")
        table.add_row(
            _text(e.workload),
            _text(e.variant),
            *[_text(str(e.point.get(k, ""))) for k in keys],
            Text("none", style="red") if e.max_rate_rps is None else fmt_rate(e.max_rate_rps),
            fmt_rate(e.achieved_rps if e.achieved_rps is not None else math.nan),
            *[fmt_ms(_or_nan(lat.get(k))) for k in ("p50", "p99", "p999")],
            steps,
        )
    return table


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


def render_rates(console: Console, view: View) -> None:
    """The open-loop tables, when the run has a rate dimension or a rate search."""
    all_series = view.rates
    for series in all_series:
        console.print()
        console.print(rate_table(series))
    if any(s.knee for s in all_series):
        console.print(
            Text(
                f"knee: the lowest rate from which on every rate's p99 exceeds "
                f"{KNEE_FACTOR:g}x the lowest p99 of the rates that kept up, or under "
                f"{ACHIEVED_MIN:.0%} of the offered rate was achieved or over "
                f"{1 - ACHIEVED_MIN:.0%} of the requests dropped",
                style="dim",
            )
        )
    if view.max_rate:
        console.print()
        console.print(max_rate_table(view.max_rate))
