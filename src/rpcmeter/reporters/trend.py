"""``rpcmeter trend`` output: per metric a compact table (a sparkline per case, steps marked), the
steps and drifts in sentences, and the plots (one per case: the points with their repetitions'
range, the steps marked, the revision and date under each point) as PNG files or one
self-contained HTML page."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from pathlib import Path

from rpcmeter.analysis import compare as analysis
from rpcmeter.analysis.compare import Metric
from rpcmeter.errors import StoreError
from rpcmeter.history.trend import Step, Trend, TrendPoint
from rpcmeter.reporters.plots import Plot, Series, latency_unit, palette, slug
from rpcmeter.reporters.tables import Grid, GridCell, Mark

SPARKS = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 40  # the newest points a sparkline shows
MAX_TICK_LABELS = 10  # a plot labels at most this many points (and every step)


def unit_of(trend: Trend) -> tuple[str, float]:
    """How a series' values are shown: (unit, value units per shown unit). Latencies in ms or µs
    (the largest point decides), anything else in the metric's own unit."""
    m = trend.metric
    if m.path.startswith("latency."):
        return latency_unit(max(p.value for p in trend.points))
    return {"1/s": "req/s", "us": "µs"}.get(m.unit, m.unit), 1.0


def fmt(value: float, scale: float = 1.0) -> str:
    if not math.isfinite(value):
        return "-"
    v = value / scale
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def short_date(iso: str) -> str:
    return iso[:16].replace("T", " ") if len(iso) >= 16 else iso


def sparkline(values: Sequence[float], steps: Sequence[int] = ()) -> str:
    """The values as block characters from their minimum to their maximum, a ``│`` before each
    point a step starts at; the newest ``SPARK_POINTS`` only (``…`` first when cut)."""
    start = max(0, len(values) - SPARK_POINTS)
    shown = values[start:]
    finite = [v for v in shown if math.isfinite(v)]
    if not finite:
        return ""
    lo, hi = min(finite), max(finite)
    out = "…" if start else ""
    for i, v in enumerate(shown, start):
        if i in steps and i > start:
            out += "│"
        if not math.isfinite(v):
            out += " "
        elif hi <= lo * (1 + 1e-9):
            out += SPARKS[3]
        else:
            out += SPARKS[min(len(SPARKS) - 1, int((v - lo) / (hi - lo) * len(SPARKS)))]
    return out


def where(point: TrendPoint) -> str:
    """A point for a sentence: ``run 5 (4f2a9c1, 2026-11-23 09:10)``."""
    rev = f"{point.revision}, " if point.revision not in ("-", point.label) else ""
    return f"{point.label} ({rev}{short_date(point.date)})"


def step_text(trend: Trend, step: Step) -> str:
    word = analysis.verdict_word(trend.metric.name, step.verdict)
    return (
        f"{step.ratio:.2f}x [{step.ci_low:.2f}-{step.ci_high:.2f}] {word} "
        f"at {where(trend.points[step.index])}"
    )


def step_sentence(trend: Trend, step: Step) -> str:
    return (
        f"{trend.label}: {trend.metric.label} {step_text(trend, step)}: the {step.after} "
        f"point(s) from there on against the {step.before} before (p={step.p_value:.2g})"
    )


def drift_sentence(trend: Trend) -> str:
    d = trend.drift
    assert d is not None
    word = analysis.verdict_word(trend.metric.name, d.verdict)
    return (
        f"{trend.label}: {trend.metric.label} drifts {word}, {(d.per_point - 1) * 100:+.1f} % "
        f"per point [{(d.low - 1) * 100:+.1f}, {(d.high - 1) * 100:+.1f}], {d.total:.2f}x from "
        f"first to last; no single step"
    )


def _verdict_mark(verdict: str, text: str) -> Mark:
    return Mark(text, "bad" if verdict == "slower" else "good")


def grids(trends: Sequence[Trend], by: str) -> list[tuple[Metric, Grid]]:
    """One table per metric: a row per case."""
    out: list[tuple[Metric, Grid]] = []
    for m in dict.fromkeys(t.metric for t in trends):
        rows: list[list[GridCell]] = []
        count = max(len(t.points) for t in trends if t.metric == m)
        for t in (t for t in trends if t.metric == m):
            unit, scale = unit_of(t)
            values = [p.value for p in t.points]
            if t.steps:
                last = t.steps[-1]
                more = f" (+{len(t.steps) - 1} more)" if len(t.steps) > 1 else ""
                word = analysis.verdict_word(m.name, last.verdict)
                at = t.points[last.index].label
                change: GridCell = _verdict_mark(
                    last.verdict, f"{last.ratio:.2f}x {word} at {at}{more}"
                )
            elif t.drift is not None:
                change = _verdict_mark(
                    t.drift.verdict,
                    f"drift {(t.drift.per_point - 1) * 100:+.1f} %/point",
                )
            else:
                change = Mark("no step", "dim")
            rows.append(
                [
                    t.label,
                    str(len(values)),
                    f"{fmt(values[0], scale)} {unit}",
                    f"{fmt(values[-1], scale)} {unit}",
                    sparkline(values, [s.index for s in t.steps]),
                    change,
                ]
            )
        title = f"{m.label} per {by}, oldest first ({count} points)"
        columns = ["case", "points", "first", "last", "trend", "last step"]
        out.append((m, Grid(title, columns, rows, left=1)))
    return out


def render(trends: Sequence[Trend], by: str, width: int = 120, color: bool = False) -> str:
    """The tables, then every step and drift as a sentence."""
    from rpcmeter.reporters.terminal import render_grid

    parts = []
    for _, grid in grids(trends, by):
        parts.append(render_grid(grid, width=width, color=color))
    sentences = [step_sentence(t, s) for t in trends for s in t.steps]
    sentences += [drift_sentence(t) for t in trends if t.drift is not None]
    if sentences:
        parts.append("steps:\n" + "".join(f"  {s}\n" for s in sentences))
    else:
        parts.append("no step in any series\n")
    return "\n".join(parts)


# ---- plots --------------------------------------------------------------------------------------


def tick_label(point: TrendPoint, by: str, one_day: bool = False) -> str:
    """Under a point: its label (a run's id alone), revision and date (those that add
    something; the time of day when every point is of one day)."""
    lines = [point.label.removeprefix("run ")]
    if point.revision not in ("-", point.label):
        lines.append(point.revision)
    if by != "date":
        lines.append(point.date[11:16] if one_day else point.date[5:10])
    return "\n".join(lines)


def plot(trend: Trend, by: str) -> Plot:
    """One case's series: a dot per point with its repetitions' range, the steps marked."""
    unit, scale = unit_of(trend)
    n = len(trend.points)
    every = max(1, math.ceil(n / MAX_TICK_LABELS))
    starts = {s.index for s in trend.steps}
    one_day = len({p.date[:10] for p in trend.points}) == 1
    labels = tuple(
        tick_label(p, by, one_day) if (i % every == 0 or i == n - 1 or i in starts) else ""
        for i, p in enumerate(trend.points)
    )
    series = Series(
        name=trend.variant,
        variant=trend.variant,
        x=labels,
        y=tuple(p.value / scale for p in trend.points),
        lo=tuple(p.low / scale for p in trend.points),
        hi=tuple(p.high / scale for p in trend.points),
    )
    marks = tuple(
        (
            s.index - 0.5,
            f"{s.ratio:.2f}x {analysis.verdict_word(trend.metric.name, s.verdict)}",
        )
        for s in trend.steps
    )
    note = "points: mean over the repetitions, bars: their range; dotted: steps"
    if trend.drift is not None:
        note = f"drift {(trend.drift.per_point - 1) * 100:+.1f} % per point; " + note
    return Plot(
        id=f"trend-{slug(trend.label)}-{trend.metric.name}",
        kind="trend",
        workload=trend.workload,
        title=f"{trend.label}: {trend.metric.label}",
        x_label=by,
        y_label=f"{trend.metric.label} ({unit})",
        series=(series,),
        style="line",
        categories=labels,
        marks=marks,
        note=note,
    )


def colors(trends: Sequence[Trend]) -> dict[str, str]:
    return palette(list(dict.fromkeys(t.variant for t in trends)))


def write_pngs(trends: Sequence[Trend], by: str, directory: str | Path) -> list[Path]:
    """One PNG per series, ``DIR/<plot id>.png``; returns the paths written."""
    from rpcmeter.reporters.figures import write_png

    out = Path(directory)
    paths = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for t in trends:
            p = plot(t, by)
            path = out / f"{p.id}.png"
            write_png(p, colors(trends), path)
            paths.append(path)
    except OSError as exc:
        raise StoreError(f"{directory}: cannot write plots: {exc.strerror or exc}") from None
    return paths


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def render_html(trends: Sequence[Trend], by: str, title: str) -> str:
    """One self-contained page (inline CSS and SVG, no script, no network): per metric the table,
    the steps in sentences and a plot per case."""
    from rpcmeter.reporters.figures import to_svg
    from rpcmeter.reporters.html import CSS

    palette_ = colors(trends)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{_e(title)}</h1></header>",
    ]
    for m, grid in grids(trends, by):
        series = [t for t in trends if t.metric == m]
        head = "".join(
            f'<th class="{"l" if i < grid.left else ""}">{_e(c)}</th>'
            for i, c in enumerate(grid.columns)
        )
        body = []
        for row in grid.rows:
            tds = []
            for i, cell in enumerate(row):
                cls = "l" if i < grid.left or i == len(row) - 1 else ""
                if isinstance(cell, Mark):
                    style = {"bad": "slower", "good": "faster"}.get(cell.style, "same")
                    tds.append(f'<td class="{cls} {style}">{_e(cell.text)}</td>')
                else:
                    tds.append(f'<td class="{cls}">{_e(cell)}</td>')
            body.append(f"<tr>{''.join(tds)}</tr>")
        sentences = [step_sentence(t, s) for t in series for s in t.steps]
        sentences += [drift_sentence(t) for t in series if t.drift is not None]
        items = "".join(f"<li>{_e(s)}</li>" for s in sentences) or "<li>no step</li>"
        figs = []
        for t in series:
            p = plot(t, by)
            figs.append(
                f'<figure class="plot" id="plot-{_e(p.id)}" data-plot="{_e(p.id)}" '
                f'data-kind="trend" data-series="1" data-steps="{len(t.steps)}">'
                f"{to_svg(p, palette_)}</figure>"
            )
        out.append(
            f'<section class="metric" id="m-{_e(m.name)}"><h2>{_e(grid.title)}</h2>'
            f'<div class="scroll"><table><tr>{head}</tr>{"".join(body)}</table></div>'
            f'<ul class="steps">{items}</ul><div class="plots">{"".join(figs)}</div></section>'
        )
    out.append("</body></html>\n")
    return "\n".join(out)


def write_html(trends: Sequence[Trend], by: str, title: str, path: str | Path) -> Path:
    from rpcmeter.reporters.html import write_page

    return write_page(render_html(trends, by, title), path)
