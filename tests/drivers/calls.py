"""Helpers for the tests of drivers with a blocking caller (gRPC, ZeroMQ)."""

from __future__ import annotations

from typing import Any

from rpcmeter.drivers.base import Driver
from rpcmeter.workloads import factorial_digits, lift_int_digit_limit

lift_int_digit_limit()  # 3000! has more digits than str() allows by default

# (workload, parameters, reply body length): every workload, small and large bodies both ways
WORKLOAD_CASES: list[tuple[str, dict[str, Any], int]] = [
    ("noop", {}, 0),
    ("echo", {"request_bytes": 10}, 10),
    ("echo", {"request_bytes": 200}, 200),
    ("echo", {"request_bytes": 10_000}, 10_000),
    ("payload", {"request_bytes": 200, "reply_bytes": 900}, 900),
    ("payload", {"request_bytes": 10, "reply_bytes": 10_000}, 10_000),
    ("payload", {"request_bytes": 10_000, "reply_bytes": 10}, 10),
    ("sleep", {"ms": 20}, 0),
    ("factorial", {"n": 5}, 3),
    ("factorial", {"n": 3000}, len(factorial_digits(3000))),
]


def three_timed_calls(d: Driver, kind: str) -> dict[str, int]:
    """Make three calls through thread 0's caller; each must report the server's time (a sleep
    of 20 ms at least 18 ms of it). Returns the driver's counters; closes the driver."""
    try:
        call = d.caller(0)
        times = [call() for _ in range(3)]
        server_ns = [t for t in times if isinstance(t, int) and t > 0]
        assert len(server_ns) == 3, times
        if kind == "sleep":
            assert min(server_ns) >= 20e6 * 0.9
        return d.counters()
    finally:
        d.close()
