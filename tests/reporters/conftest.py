"""A real small run of the built-in demo suite, shared by the report tests."""

from __future__ import annotations

import pytest

from rpcmeter.plan.load import build_suite, builtin_suite_path, load_suite
from rpcmeter.result.document import Result
from rpcmeter.run.execute import run_suite

# 2 workloads x 2 matrix points (clients x threads 1x1, 1x2) x 2 variants, one repetition.
DEMO_OVERRIDES = [
    "repeat=1",
    "workloads.simple.requests=60",
    "load.warmup=2",
    'workloads."random wait".requests=10',
    "matrix.threads=[1, 2]",
    "matrix.clients=[1]",
    "resources.idle_s=0.2",  # a short idle window: the idle CPU plot, without the wait
]


@pytest.fixture(scope="session")
def demo_result() -> Result:
    suite = load_suite(builtin_suite_path("demo"), DEMO_OVERRIDES)
    result = run_suite(suite)
    assert all(c.status == "ok" for c in result.cases), [c.reason for c in result.cases]
    return result


@pytest.fixture(scope="session")
def spin_result() -> Result:
    """A real small run whose clients block and spin (``matrix.wait``), the spinning ones for at
    most 200 us after each reply (``load.spin_us``): the wait lines of every report."""
    suite = build_suite(
        {
            "name": "wait",
            "target": {"driver": "http", "transport": "tcp"},
            "load": {"requests": 100, "warmup": 5, "spin_us": 200},
            "matrix": {"wait": ["block", "spin"]},
            "workloads": {"noop": {}},
            "resources": {"idle_s": 0},
        }
    )
    result = run_suite(suite)
    assert all(c.status == "ok" for c in result.cases), [c.reason for c in result.cases]
    return result
