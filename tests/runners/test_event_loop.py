"""The event-loop runner with a mock event driver: counts, warmup, duration, errors, server time."""

from __future__ import annotations

from typing import Any

import pytest

from rpcmeter.drivers.base import DriverContext
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.recording import LoadOutcome
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.suite.workloads import NoopParams

MOCK = "tests.support.mock_event_driver:MockEventDriver"
pytestmark = pytest.mark.timeout(60)


def run(clients: int = 1, loops: int = 1, **kw: Any) -> LoadOutcome:
    return run_closed_loop(
        LoadSpec(
            MOCK,
            DriverContext(Endpoint("tcp"), NoopParams(), kw.pop("options", {}), threads=loops),
            clients=clients,
            requests=kw.pop("requests", 100),
            duration_s=kw.pop("duration_s", None),
            warmup=kw.pop("warmup", 0),
            timeout_s=30,
        )
    )


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_counts_per_loop_and_client_warmup_excluded(event_loop: str) -> None:
    out = run(
        clients=2,
        loops=3,
        requests=500,
        warmup=7,
        options={"event_loop": event_loop, "server_ns": 300, "queue_ns": 100},
    )
    assert out.failure is None
    assert out.ok == 2 * 3 * 500 == out.hist.count == out.requests
    assert [c.requests for c in out.clients] == [1500, 1500]
    # bytes counted over the measured requests only (the mock counts 10 out, 20 in per request)
    assert out.counters == {"bytes_out": 30_000, "bytes_in": 60_000}
    assert out.server_hist.count == 3000 and out.server_hist.min == out.server_hist.max == 300
    assert out.queue_hist.count == 3000 and out.queue_hist.min == out.queue_hist.max == 100
    # latency - compute - queue, per request (server times below any mock round trip: a
    # round trip shorter than them would count as 0, which the mean then shows)
    assert out.net_hist.count == 3000
    assert out.net_hist.mean == pytest.approx(out.hist.mean - 400, rel=1e-3, abs=5)


def test_duration_bounds_the_run() -> None:
    out = run(loops=4, requests=10**9, duration_s=0.4, options={"delay_us": 2000})
    assert out.failure is None
    assert 0.35 < out.wall_s < 3.0
    assert 0 < out.ok <= 4 * (0.4 / 2e-3 + 1)  # every request took at least 2 ms (timer: 1 ms)
    assert out.hist.min >= 1_000_000


def test_errors_counted_by_kind_and_the_loop_goes_on() -> None:
    out = run(loops=2, requests=100, options={"fail_every": 10, "mismatch_every": 25})
    assert out.failure is None
    # per loop: 10 failures (10, 20, ..., 100), mismatches at 25 and 75 (50, 100 are failures)
    assert out.errors == {"http_503": 20, "mismatch": 4}
    assert out.ok == 200 - 24
    assert "planned" in out.first_error["http_503"]


def test_lost_connection_stops_the_loop_and_fails_the_case() -> None:
    out = run(loops=2, requests=100, options={"fatal_after": 30})
    assert out.failure is not None and "connection_closed" in out.failure
    assert out.ok == 2 * 29
    assert out.errors == {"connection_closed": 2}


def test_fatal_during_warmup_reported_before_the_gate() -> None:
    out = run(loops=1, warmup=10, options={"fatal_after": 3})
    assert out.failure is not None and "during warmup" in out.failure
    assert out.ok == 0
