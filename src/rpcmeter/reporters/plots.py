"""What the plots show: pure functions from a run's cells, comparisons and rate series (as the
view holds them, :attr:`rpcmeter.reporters.view.View.plots`) to plot data (which series, which
points), with no drawing. :mod:`rpcmeter.reporters.figures` draws them (PNG and SVG); the HTML
report embeds them.

Plot kinds, in report order for each workload:

- ``spectrum``: the latency percentile spectrum of one matrix point, variants overlaid. x is the
  percentile on a log scale of ``1 / (1 - p)`` (0 %, 90 %, 99 %, ... up to 99.99 %, never further
  than the sample count supports); y is latency from the merged histogram of the repetitions.
  Open-loop cases add each variant's uncorrected latency, dashed.
- ``throughput`` and ``p99``: requests/s and p99 latency against the load shape (clients x threads,
  connections, concurrency: whichever vary in the matrix), one line per variant; one pair per
  combination of the other matrix keys. Only when the load shape takes two or more values.
- ``ratio``: each variant against the baseline per matrix point (mean latency, or wall time for
  whole-command studies), with its confidence interval when the result carries comparisons.
- ``cpu-client`` / ``cpu-server``: CPU microseconds per request, user and system stacked, per
  matrix point and variant. Only when the cases carry those CPU figures.
- ``idle``: server CPU while idle (% of one CPU) per variant, when the cases carry it.
- ``command``: wall / user / system seconds per run, grouped bars per variant, for whole-command
  cases.
- ``rate``: open-loop latency against offered rate (a sweep or a rate search), one plot per
  variant and combination of the other matrix keys: corrected p50, p99 and p99.9 (from the
  intended send time) and the uncorrected p99 (dashed), the knee marked
  (:func:`rpcmeter.analysis.rates.rate_series`).
- ``time-latency`` and ``time-throughput``: one case over time (its series' intervals,
  :class:`Timeline`): p50, p99 and the maximum per interval, and requests/s (errors/s beside
  them when there are errors), with the case's stage boundaries marked.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

from rpcmeter.analysis import compare as analysis
from rpcmeter.analysis.rates import Series as RateSeries
from rpcmeter.analysis.rates import uncorrected_hist
from rpcmeter.result.cells import Cell, PointKey

Cells = Mapping[PointKey, Mapping[str, Cell]]  # one workload's cells: point -> variant -> cell

#: Colour-blind safe (Okabe-Ito, then Tableau), baseline first. Yellow is left out: unreadable on
#: white.
PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#D55E00",
    "#56B4E9",
    "#000000",
    "#8C564B",
    "#7F7F7F",
    "#BCBD22",
)

#: What the throughput and p99 plots put on x: the offered rate (open loop) and the closed-loop
#: shape, whichever vary in the matrix.
LOAD_SHAPE_KEYS = ("rate", "clients", "threads", "connections", "concurrency")
#: The percentile spectrum goes up to 99.99 % (1 / (1 - p) = 10**4), 8 points per decade.
SPECTRUM_MAX_NINES = 4
SPECTRUM_STEPS_PER_DECADE = 8


LineStyle = Literal["-", "--", ":"]
T = TypeVar("T")


@dataclass(frozen=True)
class Series:
    """One drawn series. ``variant`` picks the colour. For bar charts, series with the same
    ``stack`` are stacked (in order) into one bar per category; ``shade`` 1 draws the lighter,
    hatched part of a stack (system CPU)."""

    name: str
    variant: str
    x: tuple[Any, ...]
    y: tuple[float, ...]
    lo: tuple[float, ...] | None = None
    hi: tuple[float, ...] | None = None
    stack: str = ""
    shade: int = 0
    linestyle: LineStyle = (
        "-"  # ``rate`` plots tell a variant's statistics apart by line and marker
    )
    marker: str = "o"

    def finite_points(self) -> int:
        return sum(1 for v in self.y if math.isfinite(v))


@dataclass(frozen=True)
class Plot:
    """One chart. ``style`` is ``line`` (x numeric or categories), ``bar`` (categories), ``dot``
    (categories, markers with interval whiskers), ``rate`` or ``time`` (x numeric, statistics
    told apart by line style). ``x_scale`` ``nines`` is the percentile axis."""

    id: str
    kind: str
    workload: str
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    style: str = "line"
    x_scale: str = "linear"
    y_scale: str = "linear"
    categories: tuple[str, ...] = ()
    reference_y: float | None = None
    # marked x values with their labels: the knee of a ``rate`` plot, the steps of a ``trend`` plot
    marks: tuple[tuple[float, str], ...] = ()
    note: str = ""
    legend: tuple[tuple[str, int], ...] = field(default=())  # extra (label, shade) entries

    @property
    def variants(self) -> list[str]:
        return list(dict.fromkeys(s.variant for s in self.series))


def palette(variants: Sequence[str]) -> dict[str, str]:
    """The colour of each variant, stable across every plot and table of a report."""
    return {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(variants)}


def slug(text: str) -> str:
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-") or "x"


def format_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def point_label(point: PointKey) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in point) or "all"


def _where(workload: str, point: PointKey) -> str:
    return f"{workload} · {point_label(point)}" if point else workload


def latency_unit(max_us: float) -> tuple[str, float]:
    """Display unit for latencies up to ``max_us``: (name, microseconds per unit)."""
    if math.isfinite(max_us) and max_us >= 10_000_000:
        return "s", 1e6
    if math.isfinite(max_us) and max_us >= 2_000:
        return "ms", 1e3
    return "µs", 1.0


def _finite_max(values: Iterable[float]) -> float:
    vals = [v for v in values if math.isfinite(v)]
    return max(vals) if vals else math.nan


def spectrum_percentiles(count: int) -> list[float]:
    """Percentiles where 1 / (1 - p) = 10**(k / 8), up to 99.99 % and never beyond what ``count``
    samples can resolve (1 / (1 - p) <= count)."""
    out = []
    for k in range(SPECTRUM_MAX_NINES * SPECTRUM_STEPS_PER_DECADE + 1):
        inv = 10 ** (k / SPECTRUM_STEPS_PER_DECADE)
        if k and inv > count:
            break
        out.append(round(100.0 * (1.0 - 1.0 / inv), 6))
    return out


# command cases ---------------------------------------------------------------------------------
COMMAND_METRICS = (("wall", "wall_s"), ("user", "user_s"), ("system", "sys_s"))


def run_mean(cell: Cell, key: str) -> float:
    """Mean over every run of a whole-command cell of ``wall_s``, ``user_s`` or ``sys_s``."""
    return cell.mean(f"runs.{key}")


def is_command_cell(cell: Cell) -> bool:
    """A whole command's cell (a command client's counts requests and is plotted as the other
    variants beside it are)."""
    return bool(cell.values("runs.wall_s")) and cell.requests_per_run is None


# comparisons (from the statistics engine, when present) ------------------------------------------
@dataclass(frozen=True)
class Comparison:
    ratio: float
    ci_low: float
    ci_high: float
    verdict: str  # "" where there is none (too few repetitions)
    word: str  # as a table shows it (:attr:`rpcmeter.analysis.compare.Stats.word`)


def comparison(
    doc: analysis.Comparison, workload: str, point: PointKey, variant: str, metric: str
) -> Comparison | None:
    """The comparison of ``variant`` against the baseline on ``metric`` (``mean``, ``p99``,
    ``throughput``, ...: the statistics engine's metric names) in a comparison
    (:func:`rpcmeter.analysis.compare.compare_variants`), if it has one."""
    for row in doc.rows:
        if (
            row.workload == workload
            and row.variant == variant
            and row.metric == metric
            and tuple(row.point.items()) == point
        ):
            return Comparison(
                analysis.unrounded(row.ratio),
                analysis.unrounded(row.ci_low),
                analysis.unrounded(row.ci_high),
                "" if row.verdict == "unknown" else row.verdict,
                row.word,
            )
    return None


def _ratio(a: float, b: float) -> float:
    return a / b if math.isfinite(a) and math.isfinite(b) and b else math.nan


# the plots -------------------------------------------------------------------------------------
def spectrum_plot(workload: str, point: PointKey, row: Mapping[str, Cell]) -> Plot | None:
    hists = {v: c.hist for v, c in row.items() if c.hist.count}
    if not hists:
        return None
    # open loop: the uncorrected latency (from the actual send) beside the corrected one, dashed
    uncorrected = {v: uncorrected_hist(c.ok_cases) for v, c in row.items() if v in hists}
    uncorrected = {v: h for v, h in uncorrected.items() if h.count}
    unit, div = latency_unit(_finite_max(h.max / 1e3 for h in hists.values()))
    series = []
    for variant, h in hists.items():
        pcts = spectrum_percentiles(h.count)
        values = [v / 1e3 / div for v in h.percentiles(pcts)]
        series.append(Series(variant, variant, tuple(pcts), tuple(values)))
        u = uncorrected.get(variant)
        if u is not None:
            values = [v / 1e3 / div for v in u.percentiles(pcts)]
            series.append(
                Series(
                    f"{variant} uncorrected", variant, tuple(pcts), tuple(values), linestyle="--"
                )
            )
    return Plot(
        id=f"spectrum-{slug(workload)}-{slug(point_label(point))}",
        kind="spectrum",
        workload=workload,
        title=f"{_where(workload, point)}: latency by percentile",
        x_label="percentile",
        y_label=f"latency ({unit})",
        series=tuple(series),
        x_scale="nines",
        y_scale="log",
        note="solid: from the intended send time; dashed: from the actual send (uncorrected)"
        if uncorrected
        else "",
    )


Spread = tuple[float, float, float]  # a value and its whisker: (middle, low, high)
NO_SPREAD: Spread = (math.nan, math.nan, math.nan)


def _mean_min_max(values: Iterable[float]) -> Spread:
    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        return NO_SPREAD
    return statistics.fmean(vals), min(vals), max(vals)


def spread_series(
    variant: str, cats: tuple[str, ...], spreads: Iterable[Spread], stack: str = ""
) -> Series:
    """The series of one variant over categories, a value with whiskers at each."""
    ys, los, his = (tuple(col) for col in zip(*spreads, strict=True))
    return Series(variant, variant, cats, ys, los, his, stack=stack)


def at_points(
    grid: Cells,
    points: Iterable[PointKey],
    variant: str,
    measure: Callable[[Cell], T],
    missing: T,
) -> list[T]:
    """``measure`` of the variant's cell at each point; ``missing`` where it has no good case."""
    out = []
    for p in points:
        c = grid[p].get(variant)
        out.append(measure(c) if c is not None and c.ok_cases else missing)
    return out


def _load_shape(cell: Cell) -> dict[str, float]:
    params = cell.cases[0].params
    return {k: v for k in LOAD_SHAPE_KEYS if isinstance(v := params.get(k), int | float)}


def _shape_order(shape: dict[str, float]) -> tuple[float, float]:
    """Offered rate, then total loops (clients x concurrency or threads)."""
    loops = shape.get("clients", 1) * (shape.get("concurrency") or shape.get("threads", 1))
    return shape.get("rate", 0.0), loops


def _throughput(c: Cell) -> Spread:
    """Mean requests/s of the repetitions, whiskers from the lowest to the highest."""
    return _mean_min_max(c.values("throughput_rps"))


def _p99_spread(c: Cell, div: float) -> Spread:
    """p99 of all repetitions, whiskers from the lowest to the highest repetition's p99."""
    reps = [case.latency_histogram().percentile(99) / 1e3 / div for case in c.ok_cases]
    _, lo, hi = _mean_min_max(reps)
    return c.latency_us("p99") / div, lo, hi


def scaling_plots(workload: str, grid: Cells) -> list[Plot]:
    """Throughput and p99 against the load shape, one pair per value of the other matrix keys."""
    shapes = {p: _load_shape(next(iter(row.values()))) for p, row in grid.items() if row}
    varying = [k for k in LOAD_SHAPE_KEYS if len({s.get(k) for s in shapes.values()}) > 1]
    if not varying:
        return []
    groups: dict[PointKey, list[PointKey]] = {}
    for p in grid:
        groups.setdefault(tuple((k, v) for k, v in p if k not in LOAD_SHAPE_KEYS), []).append(p)
    plots = []
    for other, points in groups.items():
        points = sorted(
            points, key=lambda p: (_shape_order(shapes[p]), [shapes[p].get(k, 0) for k in varying])
        )
        if len(points) < 2:
            continue
        cats = tuple("×".join(f"{shapes[p].get(k, 0):g}" for k in varying) for p in points)
        x_label = " × ".join("offered rate (requests/s)" if k == "rate" else k for k in varying)
        suffix = f" · {point_label(other)}" if other else ""
        ident = slug(workload) + (f"-{slug(point_label(other))}" if other else "")
        variants = list(dict.fromkeys(v for p in points for v in grid[p]))
        tput: list[Series] = []
        p99: list[Series] = []
        p99_max = _finite_max(c.latency_us("p99") for p in points for c in grid[p].values())
        unit, div = latency_unit(p99_max)
        p99_of = partial(_p99_spread, div=div)
        for v in variants:
            tput.append(spread_series(v, cats, at_points(grid, points, v, _throughput, NO_SPREAD)))
            p99.append(spread_series(v, cats, at_points(grid, points, v, p99_of, NO_SPREAD)))
        plots.append(
            Plot(
                id=f"throughput-{ident}",
                kind="throughput",
                workload=workload,
                title=f"{workload}{suffix}: throughput",
                x_label=x_label,
                y_label="requests/s",
                series=tuple(tput),
                categories=cats,
                note="line: mean of repetitions; whiskers: min to max",
            )
        )
        plots.append(
            Plot(
                id=f"p99-{ident}",
                kind="p99",
                workload=workload,
                title=f"{workload}{suffix}: p99 latency",
                x_label=x_label,
                y_label=f"p99 latency ({unit})",
                series=tuple(p99),
                categories=cats,
                note="line: p99 of all repetitions; whiskers: min to max of repetitions",
            )
        )
    return plots


def ratio_plot(
    comparisons: analysis.Comparison,
    variants: Sequence[str],
    workload: str,
    grid: Cells,
    base: str,
) -> Plot | None:
    others = [v for v in variants if v != base]
    if not others or not grid:
        return None
    points = list(grid)
    cats = tuple(point_label(p) for p in points)
    command = any(is_command_cell(c) for row in grid.values() for c in row.values())
    metric = "mean"  # for whole commands: the mean wall time of the runs
    what = "wall time" if command else "mean latency"
    series = []
    any_ci = False
    for v in others:
        triples: list[Spread] = []
        for p in points:
            b, c = grid[p].get(base), grid[p].get(v)
            comp = comparison(comparisons, workload, p, v, metric)
            if comp is not None:
                triples.append((comp.ratio, comp.ci_low, comp.ci_high))
                any_ci = any_ci or math.isfinite(comp.ci_low)
            elif b is None or c is None or not b.ok_cases or not c.ok_cases:
                triples.append(NO_SPREAD)
            elif command:
                r = _ratio(run_mean(c, "wall_s"), run_mean(b, "wall_s"))
                triples.append((r, math.nan, math.nan))
            else:
                r = _ratio(c.latency_us("mean"), b.latency_us("mean"))
                triples.append((r, math.nan, math.nan))
        line = spread_series(v, cats, triples)
        if line.finite_points():
            series.append(line)
    if not series:
        return None
    return Plot(
        id=f"ratio-{slug(workload)}",
        kind="ratio",
        workload=workload,
        title=f"{workload}: {what} relative to {base}",
        x_label="matrix point",
        y_label=f"{what} / {base} (below 1: faster)",
        series=tuple(series),
        style="dot",
        y_scale="log",
        categories=cats,
        reference_y=1.0,
        note="whiskers: confidence interval" if any_ci else "plain ratios (no intervals)",
    )


def _cpu_per_request(cell: Cell, side: str) -> tuple[float, float] | None:
    """(user, system) CPU microseconds per request of one side, or None without data."""
    user = cell.values(f"cpu.{side}_user_s")
    system = cell.values(f"cpu.{side}_sys_s")
    if not user or not system:
        return None
    requests = sum(c.requests for c in cell.ok_cases)
    total = cell.values(f"cpu.{side}_us_per_request")
    if total and sum(user) + sum(system) > 0:
        frac = sum(user) / (sum(user) + sum(system))
        t = statistics.fmean(total)
        return t * frac, t * (1 - frac)
    if not requests:
        return None
    return sum(user) * 1e6 / requests, sum(system) * 1e6 / requests


def cpu_plots(workload: str, grid: Cells) -> list[Plot]:
    points = list(grid)
    cats = tuple(point_label(p) for p in points)
    variants = list(dict.fromkeys(v for row in grid.values() for v in row))
    plots = []
    for side in ("client", "server"):
        series = []
        for v in variants:
            cpu = at_points(grid, points, v, partial(_cpu_per_request, side=side), None)
            user = [got[0] if got else math.nan for got in cpu]
            system = [got[1] if got else math.nan for got in cpu]
            if any(math.isfinite(u) for u in user):
                series.append(Series(f"{v} user", v, cats, tuple(user), stack=v, shade=0))
                series.append(Series(f"{v} system", v, cats, tuple(system), stack=v, shade=1))
        if series:
            plots.append(
                Plot(
                    id=f"cpu-{side}-{slug(workload)}",
                    kind=f"cpu-{side}",
                    workload=workload,
                    title=f"{workload}: {side} CPU per request",
                    x_label="matrix point",
                    y_label=f"{side} CPU per request (µs)",
                    series=tuple(series),
                    style="bar",
                    categories=cats,
                    legend=(("user", 0), ("system", 1)),
                )
            )
    return plots


def idle_plot(variants: Sequence[str], grid_all: Mapping[str, Cells]) -> Plot | None:
    """Server CPU while idle per variant: per workload (the idle window before each case's load,
    or the whole case of an ``idle`` workload), mean over matrix points and repetitions, whiskers
    from the lowest to the highest case."""

    def idle_values(workload: str, variant: str) -> list[float]:
        return [
            v
            for row in grid_all[workload].values()
            if variant in row
            for v in row[variant].values("cpu.server_idle_pct")
        ]

    names = variants
    cats = tuple(w for w in grid_all if any(idle_values(w, v) for v in names))
    if not cats:
        return None
    series = []
    for v in names:
        bars = spread_series(v, cats, (_mean_min_max(idle_values(w, v)) for w in cats), stack=v)
        if bars.finite_points():
            series.append(bars)
    return Plot(
        id="idle-cpu",
        kind="idle",
        workload="",
        title="server CPU while idle",
        x_label="workload",
        y_label="server CPU (% of one CPU)",
        series=tuple(series),
        style="bar",
        categories=cats,
        note="bars: mean of the cases; whiskers: min to max",
    )


def command_plot(workload: str, point: PointKey, row: Mapping[str, Cell]) -> Plot | None:
    cats = tuple(name for name, _ in COMMAND_METRICS)
    series = []
    for v, cell in row.items():
        if not is_command_cell(cell):
            continue
        stats = (_mean_min_max(cell.values(f"runs.{key}")) for _, key in COMMAND_METRICS)
        series.append(spread_series(v, cats, stats, stack=v))
    if not series:
        return None
    counts = [len(c.runs or []) for cell in row.values() for c in cell.ok_cases]
    n_runs = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)} to {max(counts)}"
    return Plot(
        id=f"command-{slug(workload)}-{slug(point_label(point))}",
        kind="command",
        workload=workload,
        title=f"{_where(workload, point)}: wall, user and system time",
        x_label="time of all processes of the command",
        y_label="seconds per run",
        series=tuple(series),
        style="bar",
        categories=cats,
        note=f"bars: mean of the runs; whiskers: min to max ({n_runs} runs per case)",
    )


#: (statistic, RatePoint attribute, line style, marker) of a ``rate`` plot
RATE_LINES: tuple[tuple[str, str, LineStyle, str], ...] = (
    ("p50", "p50_us", "-", "o"),
    ("p99", "p99_us", "-", "s"),
    ("p99.9", "p999_us", "-", "^"),
    ("p99 uncorrected", "p99_uncorrected_us", "--", "x"),
)


def rate_plots(rates: Sequence[RateSeries], workload: str) -> list[Plot]:
    """Latency against offered rate, one plot per open-loop series of ``workload``
    (:func:`rpcmeter.analysis.rates.rate_series`)."""
    plots = []
    for series in rates:
        if series.workload != workload or len(series.points) < 2:
            continue
        xs = tuple(p.offered_rps for p in series.points)
        unit, div = latency_unit(
            _finite_max(getattr(p, attr) for p in series.points for _, attr, _, _ in RATE_LINES)
        )
        lines = tuple(
            Series(
                name,
                series.variant,
                xs,
                tuple(getattr(p, attr) / div for p in series.points),
                linestyle=style,
                marker=marker,
            )
            for name, attr, style, marker in RATE_LINES
        )
        where = point_label(series.point) if series.point else ""
        ident = "-".join(slug(x) for x in (workload, series.variant, where) if x)
        knee = series.knee
        plots.append(
            Plot(
                id=f"rate-{ident}",
                kind="rate",
                workload=workload,
                title=f"{workload} · {series.variant}"
                + (f" · {where}" if where else "")
                + ": latency vs offered rate",
                x_label="offered rate (requests/s)",
                y_label=f"latency ({unit})",
                series=lines,
                style="rate",
                y_scale="log",
                marks=((knee.offered_rps, "knee"),) if knee else (),
                note="corrected: from the intended send time; uncorrected: from the actual send",
            )
        )
    return plots


@dataclass(frozen=True)
class Timeline:
    """One cell over time (its repetitions merged), as its plots take it: where it runs
    (``title``: workload and point), the middle of each interval (seconds from the case's
    start), its p50, p99 and maximum latency (µs; NaN: no reply), its requests/s and errors/s,
    and where each stage starts (seconds, label). The variants of a point share a plot."""

    workload: str
    variant: str
    case_id: int
    title: str
    x: tuple[float, ...]
    p50_us: tuple[float, ...]
    p99_us: tuple[float, ...]
    max_us: tuple[float, ...]
    rps: tuple[float, ...]
    errors_ps: tuple[float, ...]
    stages: tuple[tuple[float, str], ...] = ()
    point: str = ""
    repetitions: str = ""  # "5 repetitions" where merged, else empty


TIME_LINES: tuple[tuple[str, str, LineStyle], ...] = (
    ("p50", "p50_us", "-"),
    ("p99", "p99_us", "--"),
    ("max", "max_us", ":"),
)


def time_plots(timelines: Sequence[Timeline], workload: str) -> list[Plot]:
    """Latency and throughput over time, a pair per matrix point of ``workload`` whose cells
    have two intervals or more: a series per variant (its repetitions merged), the stage
    boundaries marked."""
    plots: list[Plot] = []
    points: dict[str, list[Timeline]] = {}
    for t in timelines:
        if t.workload == workload and len(t.x) >= 2:
            points.setdefault(t.title, []).append(t)
    for group in points.values():
        t = group[0]
        unit, div = latency_unit(
            _finite_max(v for g in group for _, a, _ in TIME_LINES for v in getattr(g, a))
        )
        marks = t.stages[1:] if len(t.stages) > 1 else ()  # the first starts with the case
        ident = f"{slug(workload)}-case-{t.case_id}"
        lines = tuple(
            Series(name, g.variant, g.x, tuple(v / div for v in getattr(g, attr)), linestyle=ls)
            for g in group
            for name, attr, ls in TIME_LINES
        )
        throughput = [Series("requests/s", g.variant, g.x, g.rps) for g in group]
        for g in group:
            if any(e > 0 for e in g.errors_ps):
                throughput.append(Series("errors/s", g.variant, g.x, g.errors_ps, linestyle="--"))
        x_label = "seconds from the case's start" + (
            f" ({t.repetitions} merged)" if t.repetitions else ""
        )
        plots.append(
            Plot(
                id=f"time-latency-{ident}",
                kind="time-latency",
                title=f"{t.title}: latency over time",
                y_label=f"latency ({unit})",
                series=lines,
                style="time",
                y_scale="log",
                marks=marks,
                workload=workload,
                x_label=x_label,
            )
        )
        plots.append(
            Plot(
                id=f"time-throughput-{ident}",
                kind="time-throughput",
                title=f"{t.title}: throughput over time",
                y_label="requests/s",
                series=tuple(throughput),
                style="time",
                marks=marks,
                workload=workload,
                x_label=x_label,
            )
        )
    return plots


def workload_plots(
    workload: str,
    grid: Cells,
    variants: Sequence[str],
    base: str,
    comparisons: analysis.Comparison,
    rates: Sequence[RateSeries],
    timelines: Sequence[Timeline] = (),
) -> list[Plot]:
    """Every plot of one workload (its cells: ``grid``), in report order."""
    plots: list[Plot] = []
    command = any(is_command_cell(c) for row in grid.values() for c in row.values())
    if command:
        # whole commands: what a run costs, and the ratio of wall times; a spectrum of a few run
        # times or "CPU per request" would mislead
        for point, row in grid.items():
            plot = command_plot(workload, point, row)
            if plot:
                plots.append(plot)
    else:
        for point, row in grid.items():
            plot = spectrum_plot(workload, point, row)
            if plot:
                plots.append(plot)
        if any(c.hist.count for row in grid.values() for c in row.values()):
            plots += scaling_plots(workload, grid)
    ratio = ratio_plot(comparisons, variants, workload, grid, base)
    if ratio:
        plots.append(ratio)
    if not command:
        plots += cpu_plots(workload, grid)
    plots += rate_plots(rates, workload)
    plots += time_plots(timelines, workload)
    return plots


def all_plots(
    grid_all: Mapping[str, Cells],
    variants: Sequence[str],
    base: str,
    comparisons: analysis.Comparison,
    rates: Sequence[RateSeries],
    timelines: Sequence[Timeline] = (),
) -> dict[str, list[Plot]]:
    """Workload -> its plots; the key ``""`` holds plots across workloads (idle CPU). From a
    run's cells by workload, its variants, baseline, comparisons, open-loop rate series and its
    cases over time."""
    out = {
        w: workload_plots(w, g, variants, base, comparisons, rates, timelines)
        for w, g in grid_all.items()
    }
    idle = idle_plot(variants, grid_all)
    if idle:
        out[""] = [idle]
    return out
