"""Column sets: a run's cells in the layout of another tool's table (``rpcmeter report RUN
--columns NAME``, ``rpcmeter show RUN --columns NAME``), drawn by the terminal and Markdown
reporters like any other :class:`~rpcmeter.reporters.tables.Grid`.

``grpc-bench``: grpc_bench's results table (LesnyRumcajs/grpc_bench), one per workload and matrix
point: name, requests/s, average latency, the 90th, 95th and 99th percentiles, the server's
average CPU (percent of one core, as ``docker stats`` shows it), its average and peak memory
(MiB, the resident set of its process tree), sorted by requests/s; then, where command clients
with a report of their own (``client_report``, e.g. ghz) ran against the same servers as
rpcmeter's clients, the two side by side per server: the cross-check of one load tool by
another.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable

from rpcmeter.model import Case, Json
from rpcmeter.reporters.format import fmt_num, fmt_rate, fmt_ratio, ratio
from rpcmeter.reporters.tables import Grid, GridCell, Mark
from rpcmeter.reporters.view import View, WorkloadView
from rpcmeter.result.cells import Cell, PointKey

MIB = float(1 << 20)
RPCMETER = "rpcmeter"  # the client of a variant that is not a command client


def _ms(us: float) -> str:
    return "-" if not math.isfinite(us) else f"{us / 1e3:.2f} ms"


def _pct(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.2f}%"


def _mib(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value / MIB:.2f} MiB"


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def server_cpu_pct(case: Case) -> float | None:
    """The server's CPU over the case's measured interval, in percent of one core."""
    cpu = case.cpu
    if cpu is None or cpu.server_user_s is None or cpu.server_sys_s is None:
        return None
    if not cpu.interval_s:
        return None
    return 100.0 * (cpu.server_user_s + cpu.server_sys_s) / cpu.interval_s


def _figures(cell: Cell) -> tuple[float, float, float]:
    """Mean server CPU %, mean of the cases' average memory, and the peak memory (bytes)."""
    cpu = [v for c in cell.ok_cases if (v := server_cpu_pct(c)) is not None]
    mean_mem = [
        float(c.memory.server_mean_rss_bytes)
        for c in cell.ok_cases
        if c.memory is not None and c.memory.server_mean_rss_bytes is not None
    ]
    peak = [
        float(c.memory.server_peak_rss_bytes)
        for c in cell.ok_cases
        if c.memory is not None and c.memory.server_peak_rss_bytes is not None
    ]
    return _mean(cpu), _mean(mean_mem), max(peak) if peak else math.nan


def _title(workload: str, point: PointKey) -> str:
    shown = " ".join(f"{k}={v}" for k, v in point)
    return f"{workload}" + (f" · {shown}" if shown else "")


def grpc_bench_grid(workload: str, point: PointKey, row: dict[str, Cell]) -> Grid:
    """grpc_bench's table for one workload and point (see the module documentation)."""
    grid = Grid(
        f"{_title(workload, point)} · grpc_bench's table, ranked by requests/s",
        [
            "name",
            "req/s",
            "avg. latency",
            "90 % in",
            "95 % in",
            "99 % in",
            "avg. cpu",
            "avg. memory",
            "peak memory",
        ],
        left=1,
        note="server CPU in % of one core; memory: the server's resident set",
    )
    ranked = sorted(
        row.values(), key=lambda c: -c.mean("throughput_rps") if c.ok_cases else math.inf
    )
    for cell in ranked:
        cols: list[GridCell] = [cell.variant]
        if not cell.ok_cases:
            cols.append(Mark("failed", "bad"))
            grid.rows.append(cols + [""] * (len(grid.columns) - len(cols)))
            continue
        cpu, mean_mem, peak = _figures(cell)
        cols += [
            fmt_rate(cell.mean("throughput_rps")),
            _ms(cell.latency_us("mean")),
            _ms(cell.latency_us("p90")),
            _ms(cell.latency_us("p95")),
            _ms(cell.latency_us("p99")),
            _pct(cpu),
            _mib(mean_mem),
            _mib(peak),
        ]
        grid.rows.append(cols)
    return grid


def client_of(settings: Json) -> str | None:
    """Which client a variant's cases ran: rpcmeter's, or a command client's report name (None:
    a command client without a report, whose runs have no latencies)."""
    if settings.get("driver") == "command":
        report = settings.get("client_report")
        return str(report) if report else None
    return RPCMETER


def _server_key(settings: Json) -> str:
    return json.dumps(settings.get("server"), sort_keys=True)


def cross_check_grid(
    workload: str, point: PointKey, row: dict[str, Cell], settings: dict[str, Json]
) -> Grid | None:
    """Per server (variants with the same ``server``), rpcmeter's client and each reported
    command client side by side: requests/s, average and 99th percentile latency, the
    requests/s ratio to rpcmeter's, and what each client and the server spent per request (a
    client that runs out of CPU before the server does measures itself). None without such a
    pair."""
    groups: dict[str, list[tuple[str, Cell]]] = {}
    for variant, cell in row.items():
        client = client_of(settings.get(variant, {}))
        if client is not None:
            groups.setdefault(_server_key(settings.get(variant, {})), []).append((client, cell))
    pairs = [g for g in groups.values() if len({c for c, _ in g}) > 1 and RPCMETER in dict(g)]
    if not pairs:
        return None
    grid = Grid(
        f"{_title(workload, point)} · each server under two load tools",
        [
            "server",
            "client",
            "req/s",
            "avg. latency",
            "99 % in",
            f"req/s ÷ {RPCMETER}",
            "client CPU/req",
            "server CPU/req",
        ],
        left=2,
        note="CPU per request in microseconds (user + system)",
    )
    for group in pairs:
        own = dict(group)[RPCMETER]
        base = own.mean("throughput_rps") if own.ok_cases else math.nan
        ordered = sorted(group, key=lambda g: g[0] != RPCMETER)
        for i, (client, cell) in enumerate(ordered):
            cols: list[GridCell] = [own.variant if i == 0 else "", client]
            if not cell.ok_cases:
                grid.rows.append([*cols, Mark("failed", "bad"), *[""] * 5])
                continue
            rps = cell.mean("throughput_rps")
            grid.rows.append(
                [
                    *cols,
                    fmt_rate(rps),
                    _ms(cell.latency_us("mean")),
                    _ms(cell.latency_us("p99")),
                    fmt_ratio(ratio(rps, base)),
                    fmt_num(cell.mean("cpu.client_us_per_request")),
                    fmt_num(cell.mean("cpu.server_us_per_request")),
                ]
            )
    return grid


def grpc_bench(view: View) -> list[Grid]:
    """The ``grpc-bench`` column set: see the module documentation."""
    settings = {k: dict(v) for k, v in view.run.variant_settings.items()}
    grids: list[Grid] = []
    for w in view.workloads:
        grids += _workload_grids(w, settings)
    return grids


def _workload_grids(w: WorkloadView, settings: dict[str, Json]) -> list[Grid]:
    out: list[Grid] = []
    for point, row in w.cells.items():
        cells = dict(row)
        out.append(grpc_bench_grid(w.name, point, cells))
        check = cross_check_grid(w.name, point, cells, settings)
        if check is not None:
            out.append(check)
    return out


#: The column sets by the name ``--columns`` takes.
COLUMN_SETS: dict[str, Callable[[View], list[Grid]]] = {"grpc-bench": grpc_bench}
