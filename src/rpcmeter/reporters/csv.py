"""Tidy CSV: one row per case and metric (``--csv``, ``show --format csv``); for a comparison,
one row per cell, compared variant and metric. Pure functions from a view to text."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from rpcmeter.reporters.view import ComparisonView, View

COMPARISON_FIELDS = (
    "variant",
    "baseline",
    "metric",
    "unit",
    "n",
    "n_baseline",
    "mean",
    "mean_baseline",
    "cv",
    "cv_baseline",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "verdict",
)


def unit_of(name: str) -> str:
    for suffix, unit in (
        ("_us_per_request", "us"),
        ("_us", "us"),
        ("_ns", "ns"),
        ("_s", "s"),
        ("_rps", "1/s"),
        ("_bytes", "bytes"),
        ("_per_request", "bytes"),
        ("_percent", "%"),
        ("_pct", "%"),
    ):
        if name.endswith(suffix):
            return unit
    return "count"


def _text(value: Any) -> Any:
    """A name as a cell no spreadsheet runs as a formula (``=``, ``+``, ``-``, ``@`` first)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _value(value: Any) -> Any:
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    return "" if value is None else value


def render(view: View) -> str:
    """One row per case and metric: run, suite, case, variant, workload, matrix point,
    repetition, status, metric, value, unit."""
    keys = list(view.run.matrix_keys)
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(
        [
            "run_id",
            "suite",
            "case",
            "variant",
            "workload",
            *keys,
            "repetition",
            "status",
            "metric",
            "value",
            "unit",
        ]
    )
    for case in view.cases:
        head = [
            view.run.run_id,
            _text(view.run.name),
            case.id,
            _text(case.variant),
            _text(case.workload),
            *(_text(v) for _, v in case.point),
            case.repetition,
            case.status,
        ]
        for name, figure in case.metrics:
            out.writerow([*head, name, _value(figure), unit_of(name.rsplit(".", 1)[-1])])
    return buf.getvalue()


def render_comparison(view: ComparisonView) -> str:
    """One row per cell, compared variant and metric: ratio, interval, p-value, verdict."""
    rows = view.comparison.rows
    keys = list(dict.fromkeys(k for r in rows for k in r.point))
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["workload", *keys, *COMPARISON_FIELDS])
    for r in rows:
        out.writerow(
            [
                _text(r.workload),
                *(_text(r.point.get(k, "")) for k in keys),
                *(
                    _text(_value(v)) if isinstance(v, str) else _value(v)
                    for v in (getattr(r, f) for f in COMPARISON_FIELDS)
                ),
            ]
        )
    return buf.getvalue()
