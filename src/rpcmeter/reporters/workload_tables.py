"""The tables of a workload that the reports show, as :class:`~rpcmeter.reporters.tables.Grid`
data built from its cells: the summary per matrix point, the ranking of variants, where the time
goes, streaming per message, CPU and memory, connection costs, whole commands and command
clients. :func:`rpcmeter.reporters.build.build` puts them into the view."""

from __future__ import annotations

import math
import statistics

from rpcmeter.analysis import compare as analysis
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import Connections
from rpcmeter.reporters.format import (
    fmt_bytes,
    fmt_mb,
    fmt_ms,
    fmt_num,
    fmt_rate,
    fmt_ratio,
    fmt_s,
    ratio,
)
from rpcmeter.reporters.plots import Cells
from rpcmeter.reporters.tables import Grid, GridCell, Mark
from rpcmeter.result.breakdown import overhead_cell
from rpcmeter.result.cells import Cell, PointKey


def workload_grid(
    workload: str,
    grid: Cells,
    keys: list[str],
    names: list[str],
    base: str,
    compared: bool,
    walls: bool = True,
) -> Grid:
    """Per matrix point: the baseline's latency and throughput; every other variant as ratios to
    the baseline (left out when the comparison tables give them, with intervals and verdicts:
    ``compared``); with ``walls``, each variant's mean time a case took."""
    others = [] if compared else [v for v in names if v != base]
    columns = [*keys, f"{base}\nmean ms", "\nsd ms", "\np50 ms", "\np99 ms", "\nreq/s"]
    for v in others:
        columns += [f"{v}\nmean", "\np99", "\nreq/s"]
    if walls:
        columns.append("seconds per case\n" + " / ".join(names))
    any_errors = any(c.errors for row in grid.values() for c in row.values())
    if any_errors:
        columns.append("errors")
    note = f"baseline {base}; other variants as ratios to it" if others else ""
    out = Grid(workload, columns, note=note)
    for point, row in grid.items():
        pd = dict(point)
        b: Cell | None = row.get(base)
        cols: list[GridCell] = [str(pd.get(k, "")) for k in keys]
        if b is None or not b.ok_cases:
            cols += [Mark("failed", "bad"), "", "", "", ""]
        else:
            cols += [
                fmt_ms(b.latency_us("mean")),
                fmt_ms(b.latency_us("stdev")),
                fmt_ms(b.latency_us("p50")),
                fmt_ms(b.latency_us("p99")),
                fmt_rate(b.mean("throughput_rps")),
            ]
        for v in others:
            c = row.get(v)
            if c is None or not c.ok_cases or b is None or not b.ok_cases:
                cols += [Mark("failed", "bad") if c is not None else "-", "", ""]
                continue
            cols += [
                fmt_ratio(ratio(c.latency_us("mean"), b.latency_us("mean"))),
                fmt_ratio(ratio(c.latency_us("p99"), b.latency_us("p99"))),
                fmt_ratio(ratio(c.mean("throughput_rps"), b.mean("throughput_rps"))),
            ]
        if walls:
            cols.append(
                " / ".join(fmt_s(row[v].mean("wall_s")) if v in row else "-" for v in names)
            )
        if any_errors:
            cols.append(str(sum(c.errors for c in row.values())))
        out.rows.append(cols)
    return out


def _point_grid(title: str, keys: list[str], note: str = "", variant: bool = True) -> Grid:
    """A grid whose rows start with the matrix point's values (right-aligned) and the variant
    (left-aligned)."""
    return Grid(
        title,
        [*keys, *(["variant"] if variant else [])],
        note=note,
        left_at=frozenset([len(keys)] if variant else []),
    )


def per_request(cell: Cell, counter: str) -> float:
    """A driver counter divided by the requests of the cases that have it."""
    total = n = 0
    for case in cell.ok_cases:
        value = (case.counters or {}).get(counter)
        if value is not None and case.requests:
            total += value
            n += case.requests
    return total / n if n else math.nan


def ranking_grid(workload: str, grid: Cells, keys: list[str], base: str) -> Grid:
    """Rows: matrix point x variant, sorted by requests/s (highest first) within each point."""
    all_cells = [c for row in grid.values() for c in row.values()]
    has_server = any(c.values("server_time.mean_us") for c in all_cells)
    has_bytes = any(c.values("bytes.out_per_request") for c in all_cells)
    has_block = any(math.isfinite(per_request(c, "would_block_ns")) for c in all_cells)
    out = _point_grid(f"{workload} · ranked by requests/s", keys)
    out.no_wrap = frozenset([len(keys)])
    out.columns += ["req/s", f"req/s ÷\n{base}", "mean ms", "p90 ms", "p95 ms", "p99 ms", "wall s"]
    if has_server:
        out.columns.append("server ms")
    if has_block:
        out.columns.append("would block ms")
    if has_bytes:
        out.columns += ["B out", "B in"]
    for point, row in grid.items():
        pd = dict(point)
        ranked = sorted(
            row.values(),
            key=lambda c: -c.mean("throughput_rps") if c.ok_cases else math.inf,
        )
        b = row.get(base)
        base_rps = b.mean("throughput_rps") if b is not None else math.nan
        for i, c in enumerate(ranked):
            cols: list[GridCell] = [str(pd.get(k, "")) if i == 0 else "" for k in keys]
            cols.append(c.variant)
            if not c.ok_cases:
                cols.append(Mark("failed", "bad"))
                cols += [""] * (len(out.columns) - len(cols))
                out.rows.append(cols)
                continue
            cols += [
                fmt_rate(c.mean("throughput_rps")),
                fmt_ratio(ratio(c.mean("throughput_rps"), base_rps)),
                fmt_ms(c.latency_us("mean")),
                fmt_ms(c.latency_us("p90")),
                fmt_ms(c.latency_us("p95")),
                fmt_ms(c.latency_us("p99")),
                fmt_s(c.mean("wall_s")),
            ]
            if has_server:
                cols.append(fmt_ms(c.mean("server_time.mean_us")))
            if has_block:
                cols.append(fmt_ms(per_request(c, "would_block_ns") / 1e3))
            if has_bytes:
                cols += [fmt_bytes(c.mean(f"bytes.{d}_per_request")) for d in ("out", "in")]
            out.rows.append(cols)
    return out


def _mean_sd(cell: Cell, key: str) -> str:
    mean, sd = cell.mean(f"{key}.mean"), cell.mean(f"{key}.stdev")
    return "-" if not math.isfinite(mean) else f"{fmt_ms(mean)} ± {fmt_ms(sd)}"


def _round_trip(cell: Cell) -> GridCell:
    """The round trip's median (p99) in a version-2 document, mean ± sd in a version-1 one;
    ``network RTT`` for a remote target's breakdown, whose round trip is the network's."""
    if cell.ok_cases and all(
        c.breakdown is not None and c.breakdown.rtt_basis == "network" for c in cell.ok_cases
    ):
        return Mark("network RTT", "dim")
    p50 = cell.mean("breakdown.rtt_us.p50")
    if not math.isfinite(p50):
        return _mean_sd(cell, "breakdown.rtt_us")
    return f"{fmt_ms(p50)} (p99 {fmt_ms(cell.mean('breakdown.rtt_us.p99'))})"


def _queue(cell: Cell) -> str:
    """The queue time, or ``unknown`` when the replies carried no queue time (a version-1
    document has no such column: ``-``)."""
    parts = [c.breakdown for c in cell.ok_cases]
    if parts and all(
        b is not None and "queue_us" in b.model_fields_set and b.server_us and not b.queue_us
        for b in parts
    ):
        return "unknown"
    return _mean_sd(cell, "breakdown.queue_us")


def _overhead(cell: Cell) -> GridCell:
    """The overhead: mean ± half its 95 % interval, or ``~0 (within noise)`` when the interval
    includes 0 (in any repetition); a version-1 document's mean ± sd."""
    shown = [s for c in cell.ok_cases if (s := overhead_cell(c.breakdown))]
    if not shown:
        return "-"
    if any(kind == "noise" for kind, _, _ in shown):
        return Mark("~0 (within noise)", "dim")
    mean = sum(m for _, m, _ in shown) / len(shown)
    half = max(h for _, _, h in shown)
    text = f"{fmt_ms(mean)} ± {fmt_ms(half)}"
    return Mark(text, "bad") if mean < 0 else text


def breakdown_grid(workload: str, grid: Cells, keys: list[str], several: bool) -> Grid | None:
    """Where the time goes (study 004's table): per matrix point and variant, latency, server
    compute, round trip and overhead (mean ± sd, ms; means over repetitions), and bytes sent and
    received per request. None when the workload's cases have neither breakdown nor bytes."""
    all_cells = [c for row in grid.values() for c in row.values()]
    with_breakdown = any(c.values("breakdown.rtt_us.mean") for c in all_cells)
    with_bytes = any(c.values("bytes.out_per_request") for c in all_cells)
    with_network = any(c.values("network_rtt_us.p50") for c in all_cells)
    if not (with_breakdown or with_bytes or with_network):
        return None
    title, note = (
        (
            "where the time goes",
            "ms: mean ± sd; round trips: median; overhead: mean ± 95 % interval",
        )
        if with_breakdown or with_network
        else ("bytes per request", "ms: mean ± sd")
    )
    out = _point_grid(f"{workload} · {title}", keys, note, variant=several)
    out.columns += ["req/s", "latency"]
    if with_network:
        out.columns += ["network RTT", "latency -\nnetwork RTT"]
    if with_breakdown:
        out.columns += ["round trip", "queue", "server compute", "overhead"]
    if with_bytes:
        out.columns += ["bytes out", "bytes in"]
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            cols: list[GridCell] = [str(pd.get(k, "")) for k in keys]
            if several:
                cols.append(variant)
            if not cell.ok_cases:
                out.rows.append([*cols, Mark("failed", "bad")])
                continue
            cols.append(fmt_rate(cell.mean("throughput_rps")))
            cols.append(f"{fmt_ms(cell.latency_us('mean'))} ± {fmt_ms(cell.latency_us('stdev'))}")
            if with_network:
                network = cell.mean("network_rtt_us.p50")
                cols += [fmt_ms(network), fmt_ms(cell.latency_us("mean") - network)]
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
            out.rows.append(cols)
    return out


def merged(cell: Cell, key: str) -> Histogram:
    """The ``stream.{key}`` histograms of the cell's good repetitions, merged."""
    out = Histogram()
    for case in cell.ok_cases:
        h = getattr(case.stream, key) if case.stream is not None else None
        if h is not None and h.count:
            out.merge(h)
    return out


def _us(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.1f}"


def stream_grid(workload: str, grid: Cells, keys: list[str]) -> Grid | None:
    """Streaming cases (workload ``stream``): per point and variant, streams and messages per
    second, time to the first message, per-message latency, whole-stream duration, bytes and CPU
    per message. Percentiles come from the repetitions' histograms merged (exactly); rates, bytes
    and CPU are means over the repetitions. None when the workload's cases have no stream
    figures."""
    if not any(c.stream for row in grid.values() for cell in row.values() for c in cell.ok_cases):
        return None
    out = _point_grid(f"{workload} · per message", keys, "ms; CPU: us per message")
    out.columns += [
        "streams/s",
        "msgs/s",
        "first msg\np50",
        "per msg\np50",
        "per msg\np99",
        "stream\np50",
        "bytes/msg\nout",
        "bytes/msg\nin",
        "client\nCPU/msg",
        "server\nCPU/msg",
    ]
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            cols: list[GridCell] = [*(str(pd.get(k, "")) for k in keys), variant]
            if not cell.ok_cases:
                out.rows.append([*cols, Mark("failed", "bad")])
                continue
            first, each = merged(cell, "first_message_histogram"), merged(cell, "message_histogram")
            cols += [
                fmt_rate(cell.mean("stream.streams_per_s")),
                fmt_rate(cell.mean("stream.messages_per_s")),
                fmt_ms(first.percentile(50) / 1e3),
                fmt_ms(each.percentile(50) / 1e3),
                fmt_ms(each.percentile(99) / 1e3),
                fmt_ms(cell.hist.percentile(50) / 1e3),
                f"{cell.mean('stream.bytes_out_per_message'):,.0f}",
                f"{cell.mean('stream.bytes_in_per_message'):,.0f}",
                _us(cell.mean("stream.cpu_us_per_message.client")),
                _us(cell.mean("stream.cpu_us_per_message.server")),
            ]
            out.rows.append(cols)
    return out


RESOURCE_COLUMNS = (  # header, case metric, formatter
    ("server\nus/req", "cpu.server_us_per_request", fmt_num),
    ("client\nus/req", "cpu.client_us_per_request", fmt_num),
    ("server\nCPU %", "cpu.server_util_pct", fmt_num),
    ("client\nCPU %", "cpu.client_util_pct", fmt_num),
    ("idle\n% core", "cpu.server_idle_pct", fmt_num),
    ("server\nRSS MB", "memory.server_peak_rss_bytes", fmt_mb),
    ("client\nRSS MB", "memory.client_peak_rss_bytes", fmt_mb),
)


def server_cpu_note(grid: Cells) -> str:
    """Where the server CPU figures of the good cases came from (``cpu.server_source``): its
    cgroup's accounting or the sum over its process tree; empty when no case says."""
    sources = [
        c.cpu.server_source
        for row in grid.values()
        for cell in row.values()
        for c in cell.ok_cases
        if c.cpu is not None and c.cpu.server_source is not None
    ]
    cgroup = sources.count("cgroup")
    if not sources:
        return ""
    if cgroup == len(sources):
        return "server CPU from its cgroup"
    if cgroup == 0:
        return "server CPU from its process tree"
    return f"server CPU from its cgroup in {cgroup} of {len(sources)} cases, else its process tree"


def resource_grid(workload: str, grid: Cells, keys: list[str]) -> Grid | None:
    """CPU per request (user + system) of server and clients, each side's CPU use as a share of
    the CPUs it was given, the server's idle CPU and peak memory; one row per point and variant
    (means over repetitions; ``-``: not measured), noting where the server CPU came from. None
    without a good case."""
    out = _point_grid(f"{workload} · CPU and memory", keys, server_cpu_note(grid))
    out.columns += [header for header, _, _ in RESOURCE_COLUMNS]
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            if cell.ok_cases:
                values = [fmt(cell.mean(metric)) for _, metric, fmt in RESOURCE_COLUMNS]
                out.rows.append([*(str(pd.get(k, "")) for k in keys), variant, *values])
    return out if out.rows else None


CONNECTION_PARTS = (
    ("connect", "connect"),
    ("handshake", "TLS handshake"),
    ("handshake_resumed", "resumed handshake"),
    ("request", "request"),
)


def connection_histogram(connections: Connections, part: str) -> Histogram | None:
    """The histogram of one part of a case's connection costs (``connect``, ``handshake``,
    ...), None when the case has no such part."""
    timing = connections.timing(part)
    return timing.histogram if timing is not None else None


def connection_grid(workload: str, grid: Cells, keys: list[str]) -> Grid | None:
    """What connections cost (cases whose driver timed them): connections opened per case, TCP
    connect, TLS handshake (full and resumed apart) and, with a new connection per request
    (``load.reuse = false``), the request's own time; p50 and p99 of the histograms merged over
    repetitions. None when no case of the workload has them."""
    rows: list[tuple[PointKey, str, dict[str, Histogram], float]] = []
    present: set[str] = set()
    for point, row in grid.items():
        for variant, cell in row.items():
            docs = [c.connections for c in cell.ok_cases if c.connections]
            if not docs:
                continue
            hists = {
                part: Histogram.merged(h for d in docs if (h := connection_histogram(d, part)))
                for part, _ in CONNECTION_PARTS
            }
            present |= {part for part, h in hists.items() if h.count}
            rows.append((point, variant, hists, statistics.fmean(d.opened or 0 for d in docs)))
    if not rows:
        return None
    out = _point_grid(f"{workload} · connections", keys, "ms: p50 / p99")
    parts = [(part, label) for part, label in CONNECTION_PARTS if part in present]
    out.columns += ["opened", *(label for _, label in parts)]
    for point, variant, hists, opened in rows:
        pd = dict(point)
        values = [
            f"{fmt_ms(hists[part].percentile(50) / 1e3)} / "
            f"{fmt_ms(hists[part].percentile(99) / 1e3)}"
            if hists[part].count
            else "-"
            for part, _ in parts
        ]
        out.rows.append([*(str(pd.get(k, "")) for k in keys), variant, f"{opened:,.0f}", *values])
    return out


def command_grid(
    workload: str,
    grid: Cells,
    keys: list[str],
    names: list[str],
    base: str,
    comparisons: analysis.Comparison,
) -> Grid:
    """A whole-command workload: one row per matrix point and variant, with means over runs (wall
    time, user, system and total CPU of the process tree, CPUs kept busy, peak memory of the
    largest process) and, for every variant but the baseline, the wall and CPU ratios to the
    baseline with the verdicts of the run's comparisons (rpcmeter.analysis.compare: run by run)."""
    rows = {(r.workload, tuple(r.point.items()), r.variant, r.metric): r for r in comparisons.rows}
    compared = len(names) > 1
    note = "means over runs" + (f"; ratios to {base}, verdicts over runs" if compared else "")
    out = _point_grid(workload, keys, note)
    out.columns += ["runs", "wall s", "± s", "user s", "sys s", "CPU s", "CPUs", "peak MB"]
    if compared:
        out.columns += ["wall ratio", "CPU ratio"]
    for point, row in grid.items():
        pd = dict(point)
        base_cell = row.get(base)
        for name, cell in row.items():
            cols: list[GridCell] = [*(str(pd.get(k, "")) for k in keys), name]
            wall = cell.values("runs.wall_s")
            if not wall:
                out.rows.append([*cols, Mark("failed", "bad"), *[""] * (9 if compared else 7)])
                continue
            user, sys_, cpu = (cell.values(f"runs.{m}_s") for m in ("user", "sys", "cpu"))
            mean_wall, mean_cpu = statistics.fmean(wall), statistics.fmean(cpu)
            peak = max(r.max_rss_bytes for c in cell.ok_cases for r in c.runs or [])
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
                    verdict = found.verdict if found else "-"
                    r = ratio(statistics.fmean(cell.values(path)), base_cell.mean(path))
                    text = fmt_ratio(r)  # no verdict word where none was reached
                    if found is not None and verdict != "unknown":
                        text += f" {found.word}"
                    style = {"faster": "good", "slower": "bad"}.get(verdict)
                    cols.append(Mark(text, style) if style else text)
            out.rows.append(cols)
    return out


def client_command_grid(workload: str, grid: Cells, keys: list[str]) -> Grid | None:
    """The command clients of a workload (a command run against the suite's server,
    ``requests_per_run`` requests a run; runners/command.py): their runs (means over them, start
    included) and the wall time per request and requests/s those give, the figures that stand
    beside the other variants' (a run's wall time is no latency: no percentiles). None without
    command clients."""
    out = _point_grid(
        f"{workload} · command clients", keys, "means over runs, each run's start included"
    )
    out.columns += ["runs", "req/run", "wall s", "± s", "ms/req", "req/s", "CPU s", "peak MB"]
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            per_run = cell.requests_per_run
            if per_run is None:
                continue
            cols: list[GridCell] = [*(str(pd.get(k, "")) for k in keys), variant]
            wall = cell.values("runs.wall_s")
            if not wall:
                out.rows.append([*cols, Mark("failed", "bad"), *[""] * 7])
                continue
            mean_wall = statistics.fmean(wall)
            peak = max(r.max_rss_bytes for c in cell.ok_cases for r in c.runs or [])
            out.rows.append(
                [
                    *cols,
                    str(len(wall)),
                    f"{per_run:,}",
                    f"{mean_wall:.3f}",
                    f"{statistics.stdev(wall):.3f}" if len(wall) > 1 else "-",
                    fmt_ms(mean_wall / per_run * 1e6),
                    fmt_rate(per_run / mean_wall),
                    f"{statistics.fmean(cell.values('runs.cpu_s')):.3f}",
                    f"{peak / 1e6:.0f}",
                ]
            )
    return out if out.rows else None
