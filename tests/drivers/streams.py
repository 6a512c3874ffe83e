"""Helpers for the stream-socket driver tests (HTTP, raw frames): run a small suite for real."""

from __future__ import annotations

from typing import Any

from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from tests.support.synthetic import written


def run_cases(
    driver: str,
    workloads: dict[str, dict[str, Any]],
    *,
    transport: str = "tcp",
    options: dict[str, Any] | None = None,
    load: dict[str, Any] | None = None,
    validate: bool = True,
    **extra: Any,
) -> dict[str, dict[str, Any]]:
    """Run one case per workload against the driver's built-in server; cases by workload name."""
    raw: dict[str, Any] = {
        "name": f"{driver} test",
        "validate": validate,
        "target": {"driver": driver, "transport": transport, "options": options or {}},
        "load": {"requests": 50, "warmup": 2, "timeout_s": 60, **(load or {})},
        "workloads": workloads,
        **extra,
    }
    result = written(run_suite(build_suite(raw)))
    return {c["workload"]: c for c in result["cases"]}


def assert_clean(case: dict[str, Any], requests: int) -> None:
    """The case ran ``requests`` requests, all ok."""
    assert case["status"] == "ok", case["reason"]
    assert case["errors"] == {}, case["error_samples"]
    assert case["ok"] == requests
