"""Terminal tables: per workload, one row per matrix point; the baseline's latency and throughput,
and every other variant as a ratio to the baseline; with repetitions, a comparison table per
workload (ratio, 95 % interval and verdict per metric) and the geometric means of the ratios.
A pure function from a result to text."""

from __future__ import annotations

import io
import math
import statistics
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rpcmeter import analysis
from rpcmeter.aggregate import Cell, PointKey, baseline, cells, variant_names
from rpcmeter.breakdown import overhead_cell
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.placement import describe as describe_placement
from rpcmeter.profile import summary_lines as profile_summary
from rpcmeter.rates import ACHIEVED_MIN, KNEE_FACTOR, Series, rate_series
from rpcmeter.reporters.fit import FitTable
from rpcmeter.reporters.format import (
    fmt_bytes,
    fmt_mb,
    fmt_ms,
    fmt_num,
    fmt_rate,
    fmt_ratio,
    ratio,
)
from rpcmeter.reporters.streams import stream_table
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
from rpcmeter.result import Result
from rpcmeter.text import printable

__all__ = [
    "comparison_tables",
    "environment_line",
    "grid_table",
    "render",
    "render_comparison",
    "render_grid",
    "workload_table",
]


def _point_value(value: Any) -> str:
    return str(value)


def environment_line(result: Result) -> str:
    env = result.get("environment", {})
    pkgs = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items() if v)
    placement = env.get("placement") or {}
    return (
        f"{env.get('cpu_model', '?')} ({env.get('cpu_count', '?')} CPUs) · {env.get('os', '?')} · "
        f"Python {env.get('python', '?')}"
        + (f" · {pkgs}" if pkgs else "")
        + f" · {placement_phrase(placement)}"
    )


def placement_phrase(placement: dict[str, Any]) -> str:
    """The placement as applied: one phrase, and each variant placed otherwise after it."""
    phrase = describe_placement(placement)
    for name, own in (placement.get("by_variant") or {}).items():
        if describe_placement(own) != phrase:
            phrase += f"; {name}: {describe_placement(own)}"
    return phrase


STYLES = {"bad": "red", "warn": "yellow", "dim": "dim", "good": "green"}
VERDICT_STYLES = {"faster": "green", "slower": "red", "same": "", "unknown": "dim"}


def _cell(cell: GridCell) -> str | Text:
    if isinstance(cell, Mark):
        return Text(cell.text, style=STYLES.get(cell.style, ""))
    if isinstance(cell, RatioCell):
        text = Text(fmt_ratio(cell.ratio))
        if cell.verdict != "unknown":
            text.append(f" {cell.word}", style=VERDICT_STYLES.get(cell.verdict, ""))
        if cell.low is not None and cell.high is not None:
            text.append(f"\n{fmt_ratio(cell.low)}-{fmt_ratio(cell.high)}", style="dim")
        return text
    return cell


def grid_table(grid: Grid, title: bool = True) -> Table:
    """A :class:`~rpcmeter.reporters.tables.Grid` as a rich table (``title=False``: the caller
    prints the title, which then does not wrap to the table's width)."""
    note = f"  [dim]({grid.note})[/dim]" if grid.note else ""
    table = FitTable(
        title=f"[bold]{grid.title}[/bold]{note}" if title else None,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for i, column in enumerate(grid.columns):
        table.add_column(column, justify="left" if i < grid.left else "right")
    for row in grid.rows:
        table.add_row(*(_cell(c) for c in row))
    return table


def workload_table(result: Result, workload: str) -> Table:
    # beside three variants' ratios, three wall times no longer fit 120 columns: the ranking
    # table below gives them
    return grid_table(workload_grid(result, workload, walls=len(variant_names(result)) <= 2))


def comparison_tables(doc: dict[str, Any]) -> list[Text | Table]:
    """Ratio, interval and verdict tables for a comparison document, then the geometric means;
    each table after its title line."""
    grids = comparison_grids(doc)
    summary = summary_grid(doc)
    out: list[Text | Table] = []
    for grid in [*grids, *([summary] if summary else [])]:
        out += [Text(grid.title, style="bold"), grid_table(grid, title=False)]
    return out


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


def render_comparison(
    doc: dict[str, Any], header: list[str], width: int = 120, color: bool = False
) -> str:
    """A comparison of two runs (``rpcmeter compare``) as text."""
    doc, header = shown(doc), [printable(line) for line in header]
    buf, console = _console(width, color)
    for i, line in enumerate(header):
        console.print(Text(line, style="bold" if i == 0 else "dim"))
    if not doc["rows"]:
        console.print(Text("no case in common", style="yellow"))
    for item in comparison_tables(doc):
        if isinstance(item, Text):
            console.print()
        console.print(item)
    if doc["warnings"]:
        console.print()
    for w in doc["warnings"]:
        console.print(Text(f"warning: {w}", style="yellow"))
    return buf.getvalue()


def _mean_sd(cell: Cell, key: str) -> str:
    mean, sd = cell.mean(f"{key}.mean"), cell.mean(f"{key}.stdev")
    return "-" if not math.isfinite(mean) else f"{fmt_ms(mean)} ± {fmt_ms(sd)}"


def _round_trip(cell: Cell) -> str:
    """The round trip's median (p99) in a version-2 document, mean ± sd in a version-1 one."""
    p50 = cell.mean("breakdown.rtt_us.p50")
    if not math.isfinite(p50):
        return _mean_sd(cell, "breakdown.rtt_us")
    return f"{fmt_ms(p50)} (p99 {fmt_ms(cell.mean('breakdown.rtt_us.p99'))})"


def _queue(cell: Cell) -> str:
    """The queue time, or ``unknown`` when the replies carried no queue time (a version-1
    document has no such column: ``-``)."""
    docs = [c.get("breakdown") or {} for c in cell.ok_cases]
    if docs and all("queue_us" in b and b.get("server_us") and not b["queue_us"] for b in docs):
        return "unknown"
    return _mean_sd(cell, "breakdown.queue_us")


def _overhead(cell: Cell) -> str | Text:
    """The overhead: mean ± half its 95 % interval, or ``~0 (within noise)`` when the interval
    includes 0 (in any repetition); a version-1 document's mean ± sd."""
    shown = [s for c in cell.ok_cases if (s := overhead_cell(c.get("breakdown") or {}))]
    if not shown:
        return "-"
    if any(kind == "noise" for kind, _, _ in shown):
        return Text("~0 (within noise)", style="dim")
    mean = sum(m for _, m, _ in shown) / len(shown)
    half = max(h for _, _, h in shown)
    text = f"{fmt_ms(mean)} ± {fmt_ms(half)}"
    return Text(text, style="red") if mean < 0 else text


def breakdown_table(result: Result, workload: str) -> Table | None:
    """Where the time goes (study 004's table): per matrix point and variant, latency, server
    compute, round trip and overhead (mean ± sd, ms; means over repetitions), and bytes sent and
    received per request. None when the workload's cases have neither breakdown nor bytes."""
    grid = cells(result)[workload]
    all_cells = [c for row in grid.values() for c in row.values()]
    with_breakdown = any(c.values("breakdown.rtt_us.mean") for c in all_cells)
    with_bytes = any(c.values("bytes.out_per_request") for c in all_cells)
    if not (with_breakdown or with_bytes):
        return None
    keys = list(result["suite"].get("matrix_keys") or [])
    several = len(variant_names(result)) > 1
    title = (
        "where the time goes; ms: mean ± sd; round trip: median; overhead: mean ± 95 % interval"
        if with_breakdown
        else "bytes per request; ms: mean ± sd"
    )
    table = FitTable(
        title=f"[bold]{workload}[/bold]  [dim]({title})[/dim]",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for key in keys:
        table.add_column(key, justify="right")
    if several:
        table.add_column("variant")
    table.add_column("req/s", justify="right")
    table.add_column("latency", justify="right")
    if with_breakdown:
        table.add_column("round trip", justify="right")
        table.add_column("queue", justify="right")
        table.add_column("server compute", justify="right")
        table.add_column("overhead", justify="right")
    if with_bytes:
        table.add_column("bytes out", justify="right")
        table.add_column("bytes in", justify="right")
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            cols: list[str | Text] = [_point_value(pd.get(k, "")) for k in keys]
            if several:
                cols.append(variant)
            if not cell.ok_cases:
                table.add_row(*cols, Text("failed", style="red"))
                continue
            cols.append(fmt_rate(cell.mean("throughput_rps")))
            cols.append(f"{fmt_ms(cell.latency_us('mean'))} ± {fmt_ms(cell.latency_us('stdev'))}")
            if with_breakdown:
                cols += [
                    _round_trip(cell),
                    _queue(cell),
                    _mean_sd(cell, "breakdown.server_us"),
                    _overhead(cell),
                ]
            if with_bytes:
                cols += [
                    fmt_bytes(cell.mean("bytes.out_per_request")),
                    fmt_bytes(cell.mean("bytes.in_per_request")),
                ]
            table.add_row(*cols)
    return table


def spread_lines(result: Result) -> list[str]:
    """For load from a cluster: how evenly the workers carried it (per-worker throughput, lowest
    over highest; median over the cases and the worst case)."""
    cluster = result.get("environment", {}).get("cluster")
    spread = [
        (c["spread"]["min_max_ratio"], c)
        for c in result["cases"]
        if c.get("spread") and c["spread"]["min_max_ratio"] is not None
    ]
    if not cluster or not spread:
        return []
    spread.sort(key=lambda rc: rc[0])
    worst, case = spread[0]
    median = spread[len(spread) // 2][0]
    point = " ".join(f"{k}={v}" for k, v in case["point"].items())
    lost = sum(c["spread"]["lost"] for c in result["cases"] if c.get("spread"))
    return [
        f"load spread over {cluster['workers']} Dask workers ({cluster['spec']}): per-worker "
        f"req/s min/max median {fmt_ratio(median)}, worst {fmt_ratio(worst)}"
        + (f"; {lost} worker(s) lost" if lost else ""),
        f"  worst: {case['variant']} · {case['workload']}" + (f" · {point}" if point else ""),
    ]


def is_command_workload(result: Result, workload: str) -> bool:
    return any(c["workload"] == workload and c.get("kind") == "command" for c in result["cases"])


def command_table(result: Result, workload: str) -> Table:
    """A whole-command workload: one row per matrix point and variant, with means over runs (wall
    time, user, system and total CPU of the process tree, CPUs kept busy, peak memory of the
    largest process) and, for every variant but the baseline, the wall and CPU ratios to the
    baseline with the verdicts of the run's comparisons (rpcmeter.analysis: run by run)."""
    rows = {
        (r["workload"], tuple(r["point"].items()), r["variant"], r["metric"]): r
        for r in comparisons_of(result).get("rows", [])
    }
    grid = cells(result)[workload]
    base = baseline(result)
    compared = len(variant_names(result)) > 1
    keys = list(result["suite"].get("matrix_keys") or [])
    table = FitTable(
        title=f"[bold]{workload}[/bold]  [dim](means over runs"
        + (f"; ratios to {base}, verdicts over runs)[/dim]" if compared else ")[/dim]"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for key in keys:
        table.add_column(key, justify="right")
    table.add_column("variant")
    for name in ("runs", "wall s", "± s", "user s", "sys s", "CPU s", "CPUs", "peak MB"):
        table.add_column(name, justify="right")
    if compared:
        table.add_column("wall ratio", justify="right")
        table.add_column("CPU ratio", justify="right")
    for point, row in grid.items():
        pd = dict(point)
        base_cell = row.get(base)
        for name, cell in row.items():
            cols: list[str | Text] = [*(_point_value(pd.get(k, "")) for k in keys), name]
            wall = cell.values("runs.wall_s")
            if not wall:
                cols += [Text("failed", style="red")] + [""] * (9 if compared else 7)
                table.add_row(*cols)
                continue
            user, sys_, cpu = (cell.values(f"runs.{m}_s") for m in ("user", "sys", "cpu"))
            mean_wall, mean_cpu = statistics.fmean(wall), statistics.fmean(cpu)
            peak = max(r["max_rss_bytes"] for c in cell.ok_cases for r in c.get("runs") or [])
            cols += [
                str(len(wall)),
                f"{mean_wall:.3f}",
                f"{statistics.stdev(wall):.3f}" if len(wall) > 1 else "-",
                f"{statistics.fmean(user):.3f}",
                f"{statistics.fmean(sys_):.3f}",
                f"{mean_cpu:.3f}",
                f"{mean_cpu / mean_wall:.2f}" if mean_wall > 0 else "-",
                f"{peak / 1e6:.0f}",
            ]
            if compared and (name == base or base_cell is None):
                cols += ["", ""]
            elif compared and base_cell is not None:
                for metric, path in (("mean", "runs.wall_s"), ("server_cpu", "runs.cpu_s")):
                    found = rows.get((workload, point, name, metric))
                    verdict = found["verdict"] if found else "-"
                    style = {"faster": "green", "slower": "red"}.get(verdict, "")
                    r = ratio(statistics.fmean(cell.values(path)), base_cell.mean(path))
                    text = fmt_ratio(r)  # no verdict word where none was reached
                    if verdict not in ("unknown", "-"):
                        text += f" {analysis.verdict_word(metric, verdict)}"
                    cols.append(Text(text, style=style))
            table.add_row(*cols)
    return table


RESOURCE_COLUMNS = (  # header, case metric, formatter
    ("server\nus/req", "cpu.server_us_per_request", fmt_num),
    ("client\nus/req", "cpu.client_us_per_request", fmt_num),
    ("server\nCPU %", "cpu.server_util_pct", fmt_num),
    ("client\nCPU %", "cpu.client_util_pct", fmt_num),
    ("idle\n% core", "cpu.server_idle_pct", fmt_num),
    ("server\nRSS MB", "memory.server_peak_rss_bytes", fmt_mb),
    ("client\nRSS MB", "memory.client_peak_rss_bytes", fmt_mb),
)


def point_table(title: str, keys: list[str]) -> Table:
    """A titled table whose rows start with the matrix point's values and the variant."""
    table = FitTable(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for key in [*keys, "variant"]:
        table.add_column(key, justify="right" if key != "variant" else "left")
    return table


def resource_table(result: Result, workload: str) -> Table | None:
    """CPU per request (user + system) of server and clients, each side's CPU use as a share of
    the CPUs it was given, the server's idle CPU and peak memory; one row per point and variant
    (means over repetitions; ``-``: not measured)."""
    grid = cells(result)[workload]
    keys = list(result["suite"].get("matrix_keys") or [])
    table = point_table(f"[bold]{workload}[/bold] · CPU and memory", keys)
    for header, _, _ in RESOURCE_COLUMNS:
        table.add_column(header, justify="right")
    rows = 0
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            if not cell.ok_cases:
                continue
            values = [fmt(cell.mean(metric)) for _, metric, fmt in RESOURCE_COLUMNS]
            table.add_row(*[_point_value(pd.get(k, "")) for k in keys], variant, *values)
            rows += 1
    return table if rows else None


CONNECTION_PARTS = (
    ("connect", "connect"),
    ("handshake", "TLS handshake"),
    ("handshake_resumed", "resumed handshake"),
    ("request", "request"),
)


def connection_table(result: Result, workload: str) -> Table | None:
    """What connections cost (cases whose driver timed them): connections opened per case, TCP
    connect, TLS handshake (full and resumed apart) and, with a new connection per request
    (``load.reuse = false``), the request's own time; p50 and p99 of the histograms merged over
    repetitions. None when no case of the workload has them."""
    grid = cells(result)[workload]
    rows: list[tuple[PointKey, str, dict[str, Histogram], float]] = []
    present: set[str] = set()
    for point, row in grid.items():
        for variant, cell in row.items():
            docs = [c["connections"] for c in cell.ok_cases if c.get("connections")]
            if not docs:
                continue
            hists = {
                part: Histogram.merged(
                    Histogram.from_dict(d[part]["histogram"]) for d in docs if d.get(part)
                )
                for part, _ in CONNECTION_PARTS
            }
            present |= {part for part, h in hists.items() if h.count}
            rows.append((point, variant, hists, statistics.fmean(d["opened"] for d in docs)))
    if not rows:
        return None
    keys = list(result["suite"].get("matrix_keys") or [])
    table = point_table(f"[bold]{workload}[/bold] · connections  [dim](ms: p50 / p99)[/dim]", keys)
    table.add_column("opened", justify="right")
    parts = [(part, label) for part, label in CONNECTION_PARTS if part in present]
    for _, label in parts:
        table.add_column(label, justify="right")
    for point, variant, hists, opened in rows:
        pd = dict(point)
        values = [
            f"{fmt_ms(hists[part].percentile(50) / 1e3)} / "
            f"{fmt_ms(hists[part].percentile(99) / 1e3)}"
            if hists[part].count
            else "-"
            for part, _ in parts
        ]
        table.add_row(
            *[_point_value(pd.get(k, "")) for k in keys], variant, f"{opened:,.0f}", *values
        )
    return table


def tls_lines(result: Result) -> list[str]:
    """One line per variant that does not verify the server's certificate (``tls.verify =
    false``): its figures are of a connection nobody authenticated."""
    tls = result.get("environment", {}).get("tls") or {}
    off = [v for v, t in tls.items() if not t.get("verify", True)]
    if not off:
        return []
    return [f"TLS certificate verification OFF (tls.verify = false): {', '.join(off)}"]


def profile_lines(result: Result, workload: str) -> list[str]:
    """The top frames by self time of every profiled case of ``workload``."""
    out: list[str] = []
    for case in result["cases"]:
        if case["workload"] == workload and case.get("profiles"):
            point = ",".join(f"{k}={v}" for k, v in (case.get("point") or {}).items())
            label = " · ".join(x for x in (workload, case["variant"], point) if x)
            out += profile_summary(case, label)
    return out


def _is_idle(result: Result, workload: str) -> bool:
    kinds = {c.get("kind") for c in result["cases"] if c["workload"] == workload}
    return kinds == {"idle"}


def shown(value: Any) -> Any:
    """A copy of a document whose strings (keys too) cannot drive the terminal: control
    characters escaped (:func:`rpcmeter.text.printable`) and rich markup escaped."""
    if isinstance(value, str):
        return escape(printable(value))
    if isinstance(value, dict):
        return {shown(k) if isinstance(k, str) else k: shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v) for v in value]
    return value


def render(result: Result, width: int = 120, color: bool = False) -> str:
    """The run's tables as text (names from the document shown escaped: :func:`shown`)."""
    result = shown(result)
    buf, console = _console(width, color)
    suite = result["suite"]
    status = result.get("status", "?")
    n_cases = len(result["cases"])
    header = f"{suite.get('name', 'suite')} · {n_cases} cases"
    if status != "complete":
        header += f" · {status}"
    console.print(Text(header, style="bold"))
    console.print(Text(environment_line(result), style="dim"))
    for line in tls_lines(result):
        console.print(Text(line, style="yellow"))
    from rpcmeter.reporters.ranking import MAX_RATIO_VARIANTS, ranking_table

    n_variants = len(variant_names(result))
    for workload in cells(result):
        if is_command_workload(result, workload):  # its own table: runs, wall and CPU
            console.print()
            console.print(command_table(result, workload))
            continue
        idle = _is_idle(result, workload)  # an idle workload has no latency to show
        if n_variants <= MAX_RATIO_VARIANTS and not idle:  # wider comparisons: ranking only
            console.print()
            console.print(workload_table(result, workload))
        if n_variants > 1 and not idle:
            console.print()
            console.print(ranking_table(result, workload))
        where = breakdown_table(result, workload)
        if where is not None:
            console.print()
            console.print(where)
        profiled = profile_lines(result, workload)
        if profiled:
            console.print()
            console.print(Text("\n".join(profiled)))
        per_message = stream_table(result, workload)
        if per_message is not None:
            console.print()
            console.print(per_message)
        resources = resource_table(result, workload)
        if resources is not None:
            console.print()
            console.print(resources)
        connections = connection_table(result, workload)
        if connections is not None:
            console.print()
            console.print(connections)
    comparisons = comparisons_of(result)
    if analysis.has_verdicts(comparisons):
        for item in comparison_tables(comparisons):
            if isinstance(item, Text):
                console.print()
            console.print(item)
    render_rates(console, result)
    spread = spread_lines(result)
    if spread:
        console.print()
    for line in spread:
        console.print(Text(line))
    failed = [c for c in result["cases"] if c["status"] != "ok"]
    errors = [c for c in result["cases"] if c["errors"]]
    if failed or errors:
        console.print()
    for c in failed:
        point = " ".join(f"{k}={v}" for k, v in c["point"].items())
        console.print(
            Text(
                f"{c['status']}: {c['variant']} · {c['workload']} · {point} (rep {c['repetition']}): {c['reason']}",
                style="red",
            )
        )
        tail = c.get("server_output_tail")
        if tail:
            console.print(Text("  server output: " + tail.splitlines()[-1][:200], style="dim"))
    for c in errors:
        if c["status"] != "ok":
            continue
        point = " ".join(f"{k}={v}" for k, v in c["point"].items())
        kinds = ", ".join(f"{k}: {n}" for k, n in c["errors"].items())
        sample = next(iter(c.get("error_samples", {}).values()), "")
        console.print(
            Text(
                f"errors: {c['variant']} · {c['workload']} · {point}: {kinds} ({sample})",
                style="yellow",
            )
        )
    if result.get("warnings"):
        console.print()
    for w in result.get("warnings", []):
        console.print(Text(f"warning: {w}", style="yellow"))
    return buf.getvalue()


# ---- open loop: latency against offered rate, the rate search --------------------------------


def rate_table(series: Series) -> Table:
    """Latency (corrected, and p99 uncorrected) against offered rate; the knee marked."""
    point = " ".join(f"{k}={v}" for k, v in series.point)
    title = f"[bold]{series.workload}[/bold] · {series.variant}" + (f" · {point}" if point else "")
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


def max_rate_table(result: Result) -> Table:
    """One row per search: the highest rate meeting the objective and the latency there."""
    entries = result.get("max_rate") or []
    keys = list(dict.fromkeys(k for e in entries for k in e["point"]))
    table = FitTable(
        title=f"[bold]highest rate meeting {entries[0]['slo']}[/bold]",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for name in ("workload", "variant", *keys):
        table.add_column(name)
    for name in ("max req/s", "achieved req/s", "p50 ms", "p99 ms", "p99.9 ms", "steps"):
        table.add_column(name, justify="right")
    for e in entries:
        lat = e["latency_us"] or {}
        steps = f"{len(e['steps'])}" + ("" if e["converged"] else " (not converged)")
        table.add_row(
            e["workload"],
            e["variant"],
            *[str(e["point"].get(k, "")) for k in keys],
            Text("none", style="red") if e["max_rate_rps"] is None else fmt_rate(e["max_rate_rps"]),
            fmt_rate(e["achieved_rps"] if e["achieved_rps"] is not None else math.nan),
            *[fmt_ms(lat.get(k, math.nan)) for k in ("p50", "p99", "p999")],
            steps,
        )
    return table


def render_rates(console: Console, result: Result) -> None:
    """The open-loop tables, when the run has a rate dimension or a rate search."""
    all_series = rate_series(result)
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
    if result.get("max_rate"):
        console.print()
        console.print(max_rate_table(result))
