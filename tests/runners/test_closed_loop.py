"""The closed-loop runner with a mock driver: counts, warmup, duration, start gate, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rpcmeter.drivers.base import DriverContext
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.recording import LoadOutcome
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.suite.workloads import SimpleParams
from tests.support.load import spec_and_hooks

MOCK = "tests.support.mock_driver:MockDriver"
pytestmark = pytest.mark.timeout(60)


def run(clients: int = 1, threads: int = 1, **kw: Any) -> LoadOutcome:
    options = kw.pop("options", {})
    return run_closed_loop(
        *spec_and_hooks(
            MOCK,
            DriverContext(Endpoint("tcp"), SimpleParams(), options, threads=threads),
            clients=clients,
            requests=kw.pop("requests", 100),
            duration_s=kw.pop("duration_s", None),
            warmup=kw.pop("warmup", 0),
            timeout_s=kw.pop("timeout_s", 30),
            **kw,
        )
    )


def read_logs(log_dir: Path) -> dict[str, list[int]]:
    return {p.stem: [int(x) for x in p.read_text().split()] for p in sorted(log_dir.glob("*.log"))}


def test_counts_per_thread_and_client(tmp_path: Path) -> None:
    out = run(clients=2, threads=3, requests=500, warmup=7, options={"log_dir": str(tmp_path)})
    assert out.failure is None
    assert out.ok == 2 * 3 * 500 == out.hist.count == out.requests
    logs = read_logs(tmp_path)
    assert len(logs) == 6
    assert all(len(calls) == 507 for calls in logs.values())  # warmup calls are made, not counted
    assert [c.requests for c in out.clients] == [1500, 1500]
    assert out.wall_s > 0 and out.hist.min > 0


def test_all_threads_start_together_after_every_warmup(tmp_path: Path) -> None:
    out = run(
        clients=3,
        threads=2,
        requests=20,
        warmup=5,
        options={"log_dir": str(tmp_path), "sleep_us": 200},
    )
    assert out.failure is None
    logs = read_logs(tmp_path)
    last_warmup = max(calls[4] for calls in logs.values())
    first_measured = min(calls[5] for calls in logs.values())
    assert first_measured > last_warmup  # nobody is measured before everybody has warmed up
    starts = [calls[5] for calls in logs.values()]
    assert max(starts) - min(starts) < 0.25e9  # released together by one gate


def test_duration_mode_runs_for_the_duration() -> None:
    out = run(clients=1, threads=2, requests=None, duration_s=0.6, options={"sleep_us": 100})
    assert out.failure is None
    assert 0.55 <= out.wall_s < 1.2
    assert out.ok > 100


def test_errors_are_counted_by_kind_not_timed() -> None:
    out = run(threads=2, requests=100, options={"fail_every": 10, "mismatch_every": 25})
    assert out.failure is None
    # per thread: calls 10,20,...,100 fail (10); 25, 75 mismatch (50 and 100 already failed)
    assert out.errors == {"ValueError": 20, "mismatch": 4}
    assert out.ok == 200 - 24 == out.hist.count
    assert "planned failure" in out.first_error["ValueError"]


def test_lost_connection_stops_the_thread_and_fails_the_case() -> None:
    out = run(threads=2, requests=1000, options={"fatal_after": 50})
    assert out.failure is not None and "lost connection" in out.failure
    assert out.errors == {"connection_closed": 2}
    assert out.ok == 2 * 49


def test_fatal_error_during_warmup_is_reported() -> None:
    out = run(requests=10, warmup=20, options={"fatal_after": 3})
    assert out.failure is not None and "during warmup" in out.failure


def test_bad_driver_fails_cleanly() -> None:
    out = run_closed_loop(
        LoadSpec(
            "tests.support.mock_driver:Nope",
            DriverContext(Endpoint("tcp"), SimpleParams(), {}, threads=1),
            requests=1,
            timeout_s=10,
        )
    )
    assert out.failure is not None and "cannot connect" in out.failure


def test_timeout_stops_a_hung_case() -> None:
    out = run(requests=1000, timeout_s=1.0, options={"sleep_us": 100_000})
    assert out.failure is not None and out.failure.startswith("timed out")


def test_progress_and_hooks_are_called() -> None:
    seen: list[tuple[int, float]] = []
    pids: list[int] = []
    out = run(
        requests=None,
        duration_s=0.5,
        options={"sleep_us": 500},
        on_progress=lambda n, s: seen.append((n, s)),
        on_start=pids.extend,
    )
    assert out.failure is None and pids == out.client_pids
    assert seen and seen[-1][0] == out.requests
