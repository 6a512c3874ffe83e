"""The ranking table: per workload and matrix point, every variant's own figures, fastest first.

Where the comparison table shows the baseline and ratios, this one shows each implementation in
absolute terms, sorted by requests/s (study 001's table): requests/s, mean, p90, p95 and p99
latency, wall time, and, when the cases have them, the server's own compute time, bytes per
request out and in (study 002's --trace-sizes) and the time a polling client would have blocked
per request (``would_block_ns``), and each variant's requests/s as a ratio to the baseline's.
With more than :data:`MAX_RATIO_VARIANTS` variants the terminal shows this table alone (the
comparison table's ratio columns no longer fit). A pure function from a result to a rich Table.
"""

from __future__ import annotations

import math

from rich import box
from rich.table import Table
from rich.text import Text

from rpcmeter.aggregate import Cell, baseline, cells
from rpcmeter.reporters.fit import FitTable
from rpcmeter.reporters.format import fmt_bytes, fmt_ms, fmt_rate, fmt_ratio, fmt_s, ratio
from rpcmeter.result import Result

MAX_RATIO_VARIANTS = 3


def _per_request(cell: Cell, counter: str) -> float:
    """A driver counter divided by the requests of the cases that have it."""
    total = n = 0
    for case in cell.ok_cases:
        value = (case.get("counters") or {}).get(counter)
        if value is not None and case["requests"]:
            total += value
            n += case["requests"]
    return total / n if n else math.nan


def ranking_table(result: Result, workload: str) -> Table:
    """Rows: matrix point x variant, sorted by requests/s (highest first) within each point."""
    grid = cells(result)[workload]
    keys = list(result["suite"].get("matrix_keys") or [])
    base = baseline(result)
    all_cells = [c for row in grid.values() for c in row.values()]
    has_server = any(c.values("server_time.mean_us") for c in all_cells)
    has_bytes = any(c.values("bytes.out_per_request") for c in all_cells)
    has_block = any(math.isfinite(_per_request(c, "would_block_ns")) for c in all_cells)
    table = FitTable(
        title=f"[bold]{workload}[/bold] · ranked by requests/s",
        title_justify="left",
        box=box.SIMPLE_HEAD,  # the style of the results and comparison tables
        pad_edge=False,
    )
    for key in keys:
        table.add_column(key, justify="right")
    table.add_column("variant", no_wrap=True)
    for name in ("req/s", f"req/s ÷\n{base}", "mean ms", "p90 ms", "p95 ms", "p99 ms", "wall s"):
        table.add_column(name, justify="right")
    if has_server:
        table.add_column("server ms", justify="right")
    if has_block:
        table.add_column("would block ms", justify="right")
    if has_bytes:
        table.add_column("B out", justify="right")
        table.add_column("B in", justify="right")
    for point, row in grid.items():
        pd = dict(point)
        ranked = sorted(
            row.values(),
            key=lambda c: -c.mean("throughput_rps") if c.ok_cases else math.inf,
        )
        b = row.get(base)
        base_rps = b.mean("throughput_rps") if b is not None else math.nan
        for i, c in enumerate(ranked):
            cols: list[str | Text] = [str(pd.get(k, "")) if i == 0 else "" for k in keys]
            cols.append(c.variant)
            if not c.ok_cases:
                cols.append(Text("failed", style="red"))
                cols += [""] * (len(table.columns) - len(cols))
                table.add_row(*cols)
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
                cols.append(fmt_ms(_per_request(c, "would_block_ns") / 1e3))
            if has_bytes:
                cols += [fmt_bytes(c.mean(f"bytes.{d}_per_request")) for d in ("out", "in")]
            table.add_row(*cols)
    return table
