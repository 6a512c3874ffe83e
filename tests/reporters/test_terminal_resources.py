"""The terminal's CPU and memory table."""

from __future__ import annotations

from typing import Any

from rpcmeter.reporters.terminal import render
from tests.support.synthetic import view_of


def result(sources: tuple[str | None, ...] = (None,) * 4) -> dict[str, Any]:
    def case(
        variant: str,
        idle: float,
        kind: str = "simple",
        workload: str = "simple",
        source: str | None = None,
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
                **({"server_source": source} if source else {}),
            },
            "memory": {"server_peak_rss_bytes": 59_000_000, "client_peak_rss_bytes": None},
        }

    return {
        "schema_version": 2,
        "suite": {"name": "t", "variants": {"block": {}, "spin": {}}, "matrix_keys": []},
        "environment": {},
        "status": "complete",
        "cases": [
            case("block", 0.2, "idle", "idle", sources[0]),
            case("spin", 98.5, "idle", "idle", sources[1]),
            case("block", 0.3, source=sources[2]),
            case("spin", 97.0, source=sources[3]),
        ],
        "warnings": ["the server of variant 'spin' used 98 % of a core while idle"],
    }


def test_resource_table_per_workload() -> None:
    text = render(view_of(result()), width=140)
    assert "idle · CPU and memory" in text
    assert "simple · CPU and memory" in text
    # latency tables for simple, none for the idle workload
    assert text.count("seconds per case") == 1  # simple's summary table
    assert "simple: each variant / block, ratio" in text
    lines = [line.strip() for line in text.splitlines()]
    spin_row = next(line for line in lines if line.startswith("spin") and "1,234" in line)
    assert "56.7" in spin_row and "97.0" in spin_row and "59" in spin_row
    assert "warning: the server of variant 'spin'" in text


def test_resource_table_notes_where_the_server_cpu_came_from() -> None:
    old = render(view_of(result()), width=140)  # a document from before the field: no note
    assert "server CPU from" not in old
    mixed = render(view_of(result(("cgroup", "cgroup", "processes", "cgroup"))), width=140)
    words = " ".join(mixed.split())  # a long note wraps
    assert "idle · CPU and memory (server CPU from its cgroup)" in words
    assert (
        "simple · CPU and memory (server CPU from its cgroup in 1 of 2 cases, else its process "
        "tree)" in words
    )
    tree = " ".join(render(view_of(result(("processes",) * 4)), width=140).split())
    assert "simple · CPU and memory (server CPU from its process tree)" in tree
