"""How long each probe of a rate search runs (rpcmeter.run.maxrate.probe_duration_s)."""

from __future__ import annotations

import pytest

from rpcmeter.run.maxrate import PROBE_MAX_S, PROBE_MIN_S, probe_duration_s
from rpcmeter.suite.model import Load


def test_a_duration_is_kept() -> None:
    assert probe_duration_s(Load(mode="open", rate=50, duration_s=3.0), 100.0) == 3.0


@pytest.mark.parametrize(
    ("load", "start", "expected"),
    [
        # 500 requests per loop, 2 loops in each of 2 clients: 2,000 requests at 400 req/s
        (Load(requests=500, threads=2, clients=2), 400.0, 5.0),
        (Load(requests=500, concurrency=4, connections=2), 400.0, 5.0),  # concurrency counts
        (Load(requests=1000), 10.0, PROBE_MAX_S),  # 100 s: every probe would take that long
        (Load(requests=200), 1000.0, PROBE_MIN_S),  # 0.2 s: too short to say anything
    ],
)
def test_a_request_count_becomes_the_time_it_takes_at_the_start(
    load: Load, start: float, expected: float
) -> None:
    """The same for every probe: halving the rate with a fixed count would double each probe."""
    assert probe_duration_s(load, start) == pytest.approx(expected)
