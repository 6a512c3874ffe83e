"""The terminal table of streaming cases (workload ``stream``): per point and variant, streams and
messages per second, time to the first message, per-message latency, whole-stream duration,
bytes and CPU per message. Percentiles come from the repetitions' histograms merged (exactly);
rates, bytes and CPU are means over the repetitions."""

from __future__ import annotations

import math

from rich import box
from rich.table import Table
from rich.text import Text

from rpcmeter.aggregate import Cell, cells
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.reporters.format import fmt_ms, fmt_rate
from rpcmeter.result import Result


def merged(cell: Cell, key: str) -> Histogram:
    """The ``stream.{key}`` histograms of the cell's good repetitions, merged."""
    out = Histogram()
    for case in cell.ok_cases:
        data = (case.get("stream") or {}).get(key)
        if data:
            out.merge(Histogram.from_dict(data))
    return out


def _us(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.1f}"


def stream_table(result: Result, workload: str) -> Table | None:
    """None when the workload's cases have no stream figures."""
    grid = cells(result)[workload]
    if not any(
        c.get("stream") for row in grid.values() for cell in row.values() for c in cell.ok_cases
    ):
        return None
    keys = list(result["suite"].get("matrix_keys") or [])
    table = Table(
        title=f"[bold]{workload}[/bold] · per message  [dim](ms; CPU: us per message)[/dim]",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for key in [*keys, "variant"]:
        table.add_column(key, justify="right" if key != "variant" else "left")
    for header in (
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
    ):
        table.add_column(header, justify="right")
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            cols: list[str | Text] = [str(pd.get(k, "")) for k in keys]
            cols.append(variant)
            if not cell.ok_cases:
                table.add_row(*cols, Text("failed", style="red"))
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
            table.add_row(*cols)
    return table
