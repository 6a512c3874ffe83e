"""Tidy CSV: one row per case and metric (``--csv``, ``show --format csv``); for a comparison,
one row per cell, compared variant and metric. Pure functions from a document to text."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from typing import Any

from rpcmeter.result import Result

SECTIONS = ("latency", "server_time", "bytes", "cpu", "memory")
# top-level figures of a case and their metric names (``ok``, the requests that succeeded, would
# read like the status column beside it)
TOP_LEVEL = (
    ("requests", "requests"),
    ("ok", "requests_ok"),
    ("wall_s", "wall_s"),
    ("throughput_rps", "throughput_rps"),
)
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


def case_metrics(case: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """Every numeric figure of a case, as (dotted name, value)."""
    for key, name in TOP_LEVEL:
        value = case.get(key)
        if isinstance(value, int | float):
            yield name, value
    yield "errors", sum(case.get("errors", {}).values())
    for section in SECTIONS:
        values = case.get(section) or {}
        for key, value in values.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                yield f"{section}.{key}", value


def _text(value: Any) -> Any:
    """A name as a cell no spreadsheet runs as a formula (``=``, ``+``, ``-``, ``@`` first)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _value(value: Any) -> Any:
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    return "" if value is None else value


def render(result: Result) -> str:
    """One row per case and metric: run, suite, case, variant, workload, matrix point,
    repetition, status, metric, value, unit."""
    keys = list(result["suite"].get("matrix_keys") or [])
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
    for case in result["cases"]:
        head = [
            result.get("run_id", ""),
            _text(result["suite"].get("name", "")),
            case["id"],
            _text(case["variant"]),
            _text(case["workload"]),
            *(_text(case["point"].get(k, "")) for k in keys),
            case["repetition"],
            case["status"],
        ]
        for name, value in case_metrics(case):
            out.writerow([*head, name, _value(value), unit_of(name.rsplit(".", 1)[-1])])
    return buf.getvalue()


def render_comparison(doc: dict[str, Any]) -> str:
    """One row per cell, compared variant and metric: ratio, interval, p-value, verdict."""
    rows = doc["rows"]
    keys = list(dict.fromkeys(k for r in rows for k in r["point"]))
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["workload", *keys, *COMPARISON_FIELDS])
    for r in rows:
        out.writerow(
            [
                _text(r["workload"]),
                *(_text(r["point"].get(k, "")) for k in keys),
                *(
                    _text(_value(r[f])) if isinstance(r[f], str) else _value(r[f])
                    for f in COMPARISON_FIELDS
                ),
            ]
        )
    return buf.getvalue()
