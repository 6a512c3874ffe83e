"""Helpers for the tests of drivers with a blocking caller (gRPC, ZeroMQ)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar, cast

import pytest

from rpcmeter.drivers.base import Driver, DriverContext, EventDriver
from rpcmeter.errors import SuiteError
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.plan.load import build_suite
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import (
    WorkloadParams,
    factorial_digits,
    lift_int_digit_limit,
    parse_params,
)
from tests.support.blocking import BlockingCalls

D = TypeVar("D", bound=Driver)

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


def three_timed_calls(
    driver: type[D],
    endpoint: Endpoint,
    kind: str,
    params: dict[str, Any],
    *,
    reports_queue: bool = False,
    **options: Any,
) -> tuple[D, dict[str, int]]:
    """Connect a ``driver`` for workload ``kind`` with ``params`` and make three calls through
    thread 0's caller; each must report the server's compute time (a sleep of 20 ms at least
    18 ms of it) and no queue time (most of these built-in servers cannot see when a request
    arrived: unknown, not zero), or with ``reports_queue`` a queue time (0 or more). Returns
    the (closed) driver and its counters."""
    d = connected(driver, endpoint, parse_params(kind, params), **options)
    try:
        call = d.caller(0)
        times = [call() for _ in range(3)]
        server_ns = [
            t[0]
            for t in times
            if isinstance(t, tuple)
            and t[0] > 0
            and (t[1] is None if not reports_queue else t[1] is not None and t[1] >= 0)
        ]
        assert len(server_ns) == 3, times
        if kind == "sleep":
            assert min(server_ns) >= 20e6 * 0.9
        return d, d.counters()
    finally:
        d.close()


def server_fixture(
    driver: type[Driver], transports: tuple[str, ...], options: dict[str, Any] | None = None
) -> Any:
    """A module-scoped fixture: the driver's built-in server (with server ``options``), once per
    transport."""

    @pytest.fixture(scope="module", params=transports)
    def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
        endpoint = new_endpoint(request.param)
        with ServerProcess(driver.server_command(endpoint, options or {}), endpoint) as proc:
            yield proc

    return server


def grpc_client_fixture() -> Any:
    """A fixture: the test once with each gRPC client (``h2``: rpcmeter's, ``grpcio``)."""

    @pytest.fixture(params=["h2", "grpcio"])
    def client(request: pytest.FixtureRequest) -> str:
        return str(request.param)

    return client


def connected(
    driver: type[D],
    endpoint: Endpoint,
    workload: WorkloadParams,
    *,
    threads: int = 1,
    connections: int = 1,
    validate: bool = True,
    **options: Any,
) -> D:
    """A driver of ``driver``'s class, connected to ``endpoint`` (replies validated). An event
    driver comes opened on an event loop of its own, with blocking callers
    (:class:`~tests.support.blocking.BlockingCalls`, which passes other attributes through)."""
    d = driver(
        DriverContext(
            endpoint=endpoint,
            workload=workload,
            options=options,
            validate=validate,
            threads=threads,
            connections=connections,
        )
    )
    if isinstance(d, EventDriver) and d.uses_event_loop():
        return cast(D, BlockingCalls(d))
    d.connect()
    return d


def suite_error(raw: dict[str, Any]) -> str:
    """The message of the SuiteError that loading ``raw`` (as ``s.toml``) raises."""
    with pytest.raises(SuiteError) as info:
        build_suite(raw, "s.toml")
    return str(info.value)
