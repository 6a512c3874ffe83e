"""Tables as plain data, shared by the terminal, Markdown and HTML reporters.

A :class:`Grid` is a title, column headers and rows of cells; a cell is text, :class:`Mark` (text
with a style hint) or :class:`RatioCell` (a ratio with its interval and verdict). Each reporter
decides how to draw them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rpcmeter.analysis import compare as analysis
from rpcmeter.names import COMMAND_SHORT
from rpcmeter.reporters.format import fmt_ratio


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
    left_at: frozenset[int] = frozenset()  # further left-aligned columns, by index
    no_wrap: frozenset[int] = frozenset()  # columns never wrapped

    def is_left(self, column: int) -> bool:
        return column < self.left or column in self.left_at


def _metrics_in(rows: Sequence[analysis.ComparisonRow]) -> list[analysis.Metric]:
    present = {r.metric for r in rows}
    return [m for m in analysis.METRICS if m.name in present]


def _versus(doc: analysis.Comparison) -> str:
    return f"{doc.against} / {doc.baseline}" if doc.against else f"each variant / {doc.baseline}"


def comparison_title(doc: analysis.Comparison, workload: str, commands: bool = False) -> str:
    rows = [r for r in doc.rows if r.workload == workload]
    reps = sorted({r.n for r in rows} | {r.n_baseline for r in rows})
    shown = f"{reps[0]}" if len(reps) == 1 else f"{reps[0]}-{reps[-1]}"
    plural = "" if shown == "1" else "s"
    what = "run" if commands else "repetition"
    return (
        f"{workload}: {_versus(doc)}, ratio with {doc.confidence:.0%} interval and verdict "
        f"({shown} {what}{plural})"
    )


def undecided_note(rows: Sequence[analysis.ComparisonRow]) -> str:
    """Why some of ``rows`` have no verdict and how many repetitions one needs (empty when every
    row could reach one): the test cannot reach 5 % with fewer than
    :data:`~rpcmeter.analysis.compare.GATE_MIN_REPEAT` repetitions a side."""
    few = [r for r in rows if not analysis.can_decide(r.n, r.n_baseline)]
    if not few:
        return ""
    fewest = min(min(r.n, r.n_baseline) for r in few)
    plural = "" if fewest == 1 else "s"
    some = "" if len(few) == len(rows) else f"{len(few)} of {len(rows)} ratios: "
    return (
        f"{some}no verdict with {fewest} repetition{plural} a side: the test needs at least "
        f"{analysis.GATE_MIN_REPEAT} a side to reach {analysis.ALPHA:.0%}; "
        f"use repeat >= {analysis.MIN_REPEAT}"
    )


def weak_note(rows: Sequence[analysis.ComparisonRow]) -> str:
    """What ``same?`` means, when some of ``rows`` have one (empty when none does): a ``same``
    resting on repetitions spread by over 10 % (:attr:`~rpcmeter.analysis.compare.Stats.weak`),
    the worst named, and what to do."""
    weak = [r for r in rows if r.weak]
    if not weak:
        return ""
    # each side's spread: (CV, the side, the metric); the worst named
    spreads = [
        (cv, side, r.metric)
        for r in weak
        for cv, side in ((r.cv, r.variant), (r.cv_baseline, r.baseline))
        if cv is not None
    ]
    cv, side, metric = max(spreads)
    label = analysis.METRIC_BY_NAME[metric].short
    return (
        f"same?: the repetitions vary by over {analysis.MAX_CV:.0%} (worst: {label} of "
        f"{side}, CV {cv:.0%}), so a difference could hide in the noise; run more "
        "repetitions, or on a quieter machine"
    )


def table_note(rows: Sequence[analysis.ComparisonRow]) -> str:
    """The note under a comparison table: why some ratios have no verdict
    (:func:`undecided_note`) and what ``same?`` means (:func:`weak_note`)."""
    return "; ".join(n for n in (undecided_note(rows), weak_note(rows)) if n)


def _short(m: analysis.Metric, commands: bool) -> str:
    """A metric's column header; for whole commands, in their words (runs/s, CPU/run)."""
    return COMMAND_SHORT.get(m.name, m.short) if commands else m.short


def comparison_grids(doc: analysis.Comparison, commands: bool = False) -> list[Grid]:
    """One grid per workload: a row per matrix point and compared variant, a column per metric
    with the ratio, its interval and the verdict; its note says why a ratio has no verdict
    and what ``same?`` means (:func:`table_note`). ``commands``: every case is a whole command
    (its columns say runs/s and CPU/run)."""
    by_workload: dict[str, list[analysis.ComparisonRow]] = {}
    for row in doc.rows:
        by_workload.setdefault(row.workload, []).append(row)
    grids = []
    for workload, rows in by_workload.items():
        keys = list(dict.fromkeys(k for r in rows for k in r.point))
        metrics = _metrics_in(rows)
        calls = any(r.call is not None for r in rows)  # a mix: a row per call too
        grid = Grid(
            comparison_title(doc, workload, commands),
            [
                *keys,
                "variant",
                *(["call"] if calls else []),
                *(_short(m, commands) for m in metrics),
            ],
            left=0,
            note=table_note(rows),
        )
        index: dict[tuple[str, ...], dict[str, analysis.ComparisonRow]] = {}
        for r in rows:
            key = (*(str(r.point.get(k, "")) for k in keys), r.variant)
            if calls:
                key = (*key, r.call if r.call is not None else "(all)")
            index.setdefault(key, {})[r.metric] = r
        for key, by_metric in index.items():
            cols: list[GridCell] = list(key)
            for m in metrics:
                got = by_metric.get(m.name)
                cols.append(
                    RatioCell(
                        got.ratio,
                        got.ci_low,
                        got.ci_high,
                        got.verdict,
                        got.word,
                    )
                    if got
                    else "-"
                )
            grid.rows.append(cols)
        grids.append(grid)
    return grids


def environment_grid(doc: analysis.Comparison) -> Grid | None:
    """Two runs compared: what differed between their environments, a row each, each of which
    may explain a difference in the figures (:mod:`rpcmeter.analysis.run_differences`). None when
    nothing did."""
    if not doc.environment:
        return None
    grid = Grid(
        f"what differed between the runs' environments ({_versus(doc)}): it may explain "
        "differences",
        ["what", doc.baseline, doc.against or ""],
        left=1,
    )
    for d in doc.environment:
        grid.rows.append([d.what, Mark(d.baseline, "warn"), Mark(d.other, "warn")])
    return grid


def summary_grid(doc: analysis.Comparison, commands: bool = False) -> Grid | None:
    """Per compared variant: the geometric mean of its ratios across cases, per metric, with how
    many cases were faster, slower and the same."""
    if not doc.summary:
        return None
    metrics = _metrics_in(doc.rows)
    grid = Grid(
        f"geometric mean of ratios {_versus(doc)} across cases (cases faster/slower/same)",
        ["variant", *(_short(m, commands) for m in metrics)],
        left=1,
    )
    by_variant: dict[str, dict[str, analysis.SummaryRow]] = {}
    for s in doc.summary:
        by_variant.setdefault(s.variant, {})[s.metric] = s
    for variant, by_metric in by_variant.items():
        cols: list[GridCell] = [variant]
        for m in metrics:
            got = by_metric.get(m.name)
            if got is None:
                cols.append("-")
                continue
            unknown = f", {got.unknown} unknown" if got.unknown else ""
            cols.append(f"{fmt_ratio(got.geomean)} ({got.faster}/{got.slower}/{got.same}{unknown})")
        grid.rows.append(cols)
    return grid


def regression_lines(
    doc: analysis.Comparison, rows: Sequence[analysis.ComparisonRow], pct: float
) -> list[str]:
    """One line per regression (rows from :func:`rpcmeter.analysis.compare.regressions` of ``doc``)."""
    out = []
    for r in rows:
        m = analysis.METRIC_BY_NAME[r.metric]
        base = r.baseline if doc.kind == "variants" else doc.baseline
        out.append(
            f"{analysis.row_label(r)}: {m.label} {fmt_ratio(r.ratio)}x "
            f"[{fmt_ratio(r.ci_low)}-{fmt_ratio(r.ci_high)}] of {base} "
            f"(p={r.p_value:.3g}), worse by more than {pct:g} %"
        )
    return out


def undecided_lines(doc: analysis.Comparison, rows: Sequence[analysis.ComparisonRow]) -> list[str]:
    """One line per case a gate cannot settle (rows from :func:`rpcmeter.analysis.compare.undecided`)."""
    out = []
    for r in rows:
        m = analysis.METRIC_BY_NAME[r.metric]
        base = r.baseline if doc.kind == "variants" else doc.baseline
        if r.ratio is None or not math.isfinite(r.ratio):
            why = "not measured on both sides"
        elif r.verdict == "unknown":
            why = f"{r.n} and {r.n_baseline} repetitions cannot reach significance"
        else:
            why = f"not significant (p={r.p_value:.3g}, {r.n} and {r.n_baseline} repetitions)"
        ratio = (
            f"{fmt_ratio(r.ratio)}x [{fmt_ratio(r.ci_low)}-{fmt_ratio(r.ci_high)}]"
            if r.ratio is not None
            else "unknown"
        )
        out.append(f"{analysis.row_label(r)}: {m.label} {ratio} of {base}: {why}")
    return out
