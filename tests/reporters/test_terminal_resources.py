"""The terminal's CPU and memory table."""

from __future__ import annotations

from typing import Any

from rpcmeter.reporters.terminal import render
from tests.support.synthetic import parsed


def result() -> dict[str, Any]:
    def case(
        variant: str, idle: float, kind: str = "simple", workload: str = "simple"
    ) -> dict[str, Any]:
        return {
            "id": 0,
            "variant": variant,
            "workload": workload,
            "kind": kind,
            "point": {},
            "repetition": 0,
            "status": "ok",
            "reason": None,
            "requests": 0,
            "errors": {},
            "wall_s": 1.0,
            "throughput_rps": 0.0,
            "histogram": None,
            "cpu": {
                "server_us_per_request": 1234.0 if kind != "idle" else None,
                "client_us_per_request": 56.7 if kind != "idle" else None,
                "server_util_pct": 12.0,
                "client_util_pct": None,
                "server_idle_pct": idle,
            },
            "memory": {"server_peak_rss_bytes": 59_000_000, "client_peak_rss_bytes": None},
        }

    return {
        "schema_version": 2,
        "suite": {"name": "t", "variants": {"block": {}, "spin": {}}, "matrix_keys": []},
        "environment": {},
        "status": "complete",
        "cases": [
            case("block", 0.2, "idle", "idle"),
            case("spin", 98.5, "idle", "idle"),
            case("block", 0.3),
            case("spin", 97.0),
        ],
        "warnings": ["the server of variant 'spin' used 98 % of a core while idle"],
    }


def test_resource_table_per_workload() -> None:
    text = render(parsed(result()), width=140)
    assert "idle · CPU and memory" in text
    assert "simple · CPU and memory" in text
    # latency tables for simple, none for the idle workload
    assert "simple  (baseline block" in text and "idle  (baseline" not in text
    lines = [line.strip() for line in text.splitlines()]
    spin_row = next(line for line in lines if line.startswith("spin") and "1,234" in line)
    assert "56.7" in spin_row and "97.0" in spin_row and "59" in spin_row
    assert "warning: the server of variant 'spin'" in text
