"""The table of a mix's calls (``kind = "mix"``): each call apart, beside the mix as a whole.

One row per matrix point, variant and call: its share of the case's requests, requests/s, errors
and latency (mean, p50, p99 from its histograms merged over repetitions), and the mix's own row
first (``(all)``). Comparisons of the calls against the baseline, with their verdicts, are in the
comparison tables (:mod:`rpcmeter.reporters.tables`; :mod:`rpcmeter.analysis.compare` compares each
call as it compares whole cases).
"""

from __future__ import annotations

import math
import statistics

from rpcmeter.reporters.format import fmt_ms, fmt_rate
from rpcmeter.reporters.tables import Grid, GridCell
from rpcmeter.result.cells import Cell, PointKey

ALL = "(all)"  # the row of the mix as a whole


def _pct(values: list[float]) -> str:
    return f"{statistics.fmean(values) * 100:.1f}" if values else "-"


def _latency(hist_us: list[float]) -> list[str]:
    return [fmt_ms(v) if math.isfinite(v) else "-" for v in hist_us]


def calls_grid(
    workload: str, grid: dict[PointKey, dict[str, Cell]], keys: list[str]
) -> Grid | None:
    """The calls of a mix workload (None when its cases have no calls)."""
    if not any(c.call_names() for row in grid.values() for c in row.values()):
        return None
    out = Grid(
        f"{workload} · calls",
        [*keys, "variant", "call", "share %", "req/s", "errors", "mean ms", "p50 ms", "p99 ms"],
        note="each call of the mix apart",
        left_at=frozenset([len(keys), len(keys) + 1]),
    )
    for point, row in grid.items():
        pd = dict(point)
        for variant, cell in row.items():
            names = cell.call_names()
            if not names:
                continue
            lead: list[GridCell] = [*(str(pd.get(k, "")) for k in keys), variant]
            errors = sum(sum(c.errors.values()) for c in cell.ok_cases)
            out.rows.append(
                [
                    *lead,
                    ALL,
                    "100.0",
                    fmt_rate(cell.mean("throughput_rps")),
                    f"{errors:,}",
                    *_latency([cell.latency_us(s) for s in ("mean", "p50", "p99")]),
                ]
            )
            for name in names:
                h = cell.call_hist(name)
                figures = (
                    [h.mean / 1e3, h.percentile(50) / 1e3, h.percentile(99) / 1e3]
                    if h.count
                    else [math.nan] * 3
                )
                rps = cell.call_values(name, "throughput_rps")
                errs = sum(
                    sum(c.errors.values())
                    for case in cell.ok_cases
                    for c in case.calls or []
                    if c.name == name
                )
                out.rows.append(
                    [
                        *lead,
                        name,
                        _pct(cell.call_values(name, "share")),
                        fmt_rate(statistics.fmean(rps)) if rps else "-",
                        f"{errs:,}",
                        *_latency(figures),
                    ]
                )
    return out
