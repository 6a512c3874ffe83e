"""Tables as plain data, shared by the terminal and Markdown reporters.

A :class:`Grid` is a title, column headers and rows of cells; a cell is text, :class:`Mark` (text
with a style hint) or :class:`RatioCell` (a ratio with its interval and verdict). Each reporter
decides how to draw them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rpcmeter import analysis
from rpcmeter.aggregate import Cell, baseline, cells, variant_names
from rpcmeter.reporters.format import fmt_ms, fmt_rate, fmt_ratio, fmt_s, ratio
from rpcmeter.result import Result


@dataclass(frozen=True)
class Mark:
    text: str
    style: str  # "bad", "warn", "dim", "good"


@dataclass(frozen=True)
class RatioCell:
    ratio: float | None
    low: float | None
    high: float | None
    verdict: str  # as stored: faster, slower, same, unknown (styles key on it)
    word: str  # as shown: the verdict in the metric's words (analysis.verdict_word)


GridCell = str | Mark | RatioCell


@dataclass
class Grid:
    title: str
    columns: list[str]
    rows: list[list[GridCell]] = field(default_factory=list)
    left: int = 0  # how many leading columns are left-aligned
    note: str = ""  # shown after the title, less prominently


def comparisons_of(result: Result) -> dict[str, Any]:
    """The run's comparison of variants: stored with the run, or computed now."""
    stored = result.get("comparisons")
    return stored if stored is not None else analysis.compare_variants(result)


def workload_grid(result: Result, workload: str, walls: bool = True) -> Grid:
    """Per matrix point: the baseline's latency and throughput; every other variant as ratios to
    the baseline (left out when the comparison table gives them with intervals and verdicts);
    with ``walls``, each variant's wall time."""
    grid = cells(result)[workload]
    names = variant_names(result)
    base = baseline(result)
    others = (
        [] if analysis.has_verdicts(comparisons_of(result)) else [v for v in names if v != base]
    )
    keys = list(result["suite"].get("matrix_keys") or [])
    columns = [*keys, f"{base}\nmean ms", "\nsd ms", "\np50 ms", "\np99 ms", "\nreq/s"]
    for v in others:
        columns += [f"{v}\nmean", "\np99", "\nreq/s"]
    if walls:
        columns.append("wall s\n" + " / ".join(names))
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


def _metrics_in(rows: list[dict[str, Any]]) -> list[analysis.Metric]:
    present = {r["metric"] for r in rows}
    return [m for m in analysis.METRICS if m.name in present]


def _versus(doc: dict[str, Any]) -> str:
    return (
        f"{doc['against']} / {doc['baseline']}"
        if doc["against"]
        else f"each variant / {doc['baseline']}"
    )


def comparison_title(doc: dict[str, Any], workload: str) -> str:
    rows = [r for r in doc["rows"] if r["workload"] == workload]
    reps = sorted({r["n"] for r in rows} | {r["n_baseline"] for r in rows})
    shown = f"{reps[0]}" if len(reps) == 1 else f"{reps[0]}-{reps[-1]}"
    plural = "" if shown == "1" else "s"
    return (
        f"{workload}: {_versus(doc)}, ratio with {doc['confidence']:.0%} interval and verdict "
        f"({shown} repetition{plural})"
    )


def comparison_grids(doc: dict[str, Any]) -> list[Grid]:
    """One grid per workload: a row per matrix point and compared variant, a column per metric
    with the ratio, its interval and the verdict."""
    by_workload: dict[str, list[dict[str, Any]]] = {}
    for row in doc["rows"]:
        by_workload.setdefault(row["workload"], []).append(row)
    grids = []
    for workload, rows in by_workload.items():
        keys = list(dict.fromkeys(k for r in rows for k in r["point"]))
        metrics = _metrics_in(rows)
        grid = Grid(
            comparison_title(doc, workload),
            [*keys, "variant", *(m.short for m in metrics)],
            left=0,
        )
        index: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
        for r in rows:
            key = (*(str(r["point"].get(k, "")) for k in keys), r["variant"])
            index.setdefault(key, {})[r["metric"]] = r
        for key, by_metric in index.items():
            cols: list[GridCell] = list(key)
            for m in metrics:
                got = by_metric.get(m.name)
                cols.append(
                    RatioCell(
                        got["ratio"],
                        got["ci_low"],
                        got["ci_high"],
                        got["verdict"],
                        analysis.verdict_word(m.name, got["verdict"]),
                    )
                    if got
                    else "-"
                )
            grid.rows.append(cols)
        grids.append(grid)
    return grids


def summary_grid(doc: dict[str, Any]) -> Grid | None:
    """Per compared variant: the geometric mean of its ratios across cases, per metric, with how
    many cases were faster, slower and the same."""
    if not doc["summary"]:
        return None
    metrics = _metrics_in(doc["rows"])
    grid = Grid(
        f"geometric mean of ratios {_versus(doc)} across cases (cases faster/slower/same)",
        ["variant", *(m.short for m in metrics)],
        left=1,
    )
    by_variant: dict[str, dict[str, dict[str, Any]]] = {}
    for s in doc["summary"]:
        by_variant.setdefault(s["variant"], {})[s["metric"]] = s
    for variant, by_metric in by_variant.items():
        cols: list[GridCell] = [variant]
        for m in metrics:
            s = by_metric.get(m.name)
            if s is None:
                cols.append("-")
                continue
            unknown = f", {s['unknown']} unknown" if s["unknown"] else ""
            cols.append(
                f"{fmt_ratio(s['geomean'])} ({s['faster']}/{s['slower']}/{s['same']}{unknown})"
            )
        grid.rows.append(cols)
    return grid


def regression_lines(doc: dict[str, Any], rows: list[dict[str, Any]], pct: float) -> list[str]:
    """One line per regression (rows from :func:`rpcmeter.analysis.regressions` of ``doc``)."""
    out = []
    for r in rows:
        m = analysis.METRIC_BY_NAME[r["metric"]]
        base = r["baseline"] if doc["kind"] == "variants" else doc["baseline"]
        out.append(
            f"{analysis.row_label(r)}: {m.label} {fmt_ratio(r['ratio'])}x "
            f"[{fmt_ratio(r['ci_low'])}-{fmt_ratio(r['ci_high'])}] of {base} "
            f"(p={r['p_value']:.3g}), worse by more than {pct:g} %"
        )
    return out


def undecided_lines(doc: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """One line per case a gate cannot settle (rows from :func:`rpcmeter.analysis.undecided`)."""
    out = []
    for r in rows:
        m = analysis.METRIC_BY_NAME[r["metric"]]
        base = r["baseline"] if doc["kind"] == "variants" else doc["baseline"]
        if r["ratio"] is None or not math.isfinite(r["ratio"]):
            why = "not measured on both sides"
        elif r["verdict"] == "unknown":
            why = f"{r['n']} and {r['n_baseline']} repetitions cannot reach significance"
        else:
            why = (
                f"not significant (p={r['p_value']:.3g}, {r['n']} and {r['n_baseline']} "
                "repetitions)"
            )
        ratio = (
            f"{fmt_ratio(r['ratio'])}x [{fmt_ratio(r['ci_low'])}-{fmt_ratio(r['ci_high'])}]"
            if r["ratio"] is not None
            else "unknown"
        )
        out.append(f"{analysis.row_label(r)}: {m.label} {ratio} of {base}: {why}")
    return out
