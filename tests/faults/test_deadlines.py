"""Every wait of a case has a deadline, and a client's own fault is a reason, not a traceback.

With the mock driver (no server): a server that dies while every client sits in a call that never
returns, a timeout while the first failure's grace runs, and loads a client cannot run."""

from __future__ import annotations

import asyncio
import math
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rpcmeter.drivers.base import DriverContext
from rpcmeter.drivers.stream_connection import StreamConnection
from rpcmeter.errors import ConnectionClosed, ProtocolError
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.runners import closed_loop
from rpcmeter.runners.closed_loop import GRACE_S, run_closed_loop
from rpcmeter.runners.recording import LoadOutcome
from rpcmeter.suite.workloads import NoopParams, SimpleParams
from tests.support.load import spec_and_hooks
from tests.support.slow_start import SlowToArrive

MOCK = "tests.support.mock_driver:MockDriver"
pytestmark = pytest.mark.timeout(60)


def run(**kw: Any) -> LoadOutcome:
    return run_closed_loop(
        *spec_and_hooks(
            MOCK,
            DriverContext(Endpoint("tcp"), SimpleParams(), kw.pop("options", {})),
            clients=kw.pop("clients", 1),
            requests=kw.pop("requests", 5),
            duration_s=kw.pop("duration_s", None),
            warmup=0,
            timeout_s=kw.pop("timeout_s", 30),
            **kw,
        )
    )


def test_dead_server_ends_case_while_clients_are_stuck_in_a_call() -> None:
    # every call takes 60 s: the clients never see the stop flag; the server is gone at once
    went: list[float] = []  # the server dies 0.5 s after the gate opened: clients are in a call

    def server_problem() -> str | None:
        if went and time.monotonic() > went[0] + 0.5:
            return "server exited with status 9 during the case"
        return None

    t0 = time.monotonic()
    out = run(
        clients=2,
        options={"sleep_us": 60e6},
        timeout_s=30,
        on_go=lambda: went.append(time.monotonic()),
        server_problem=server_problem,
    )
    took = time.monotonic() - t0
    assert out.failure is not None and out.failure.startswith("server exited with status 9")
    # the grace for clients to report, then one to stop them: far below the 60 s call
    assert took < 3 * GRACE_S + 5, took


def test_timeout_ends_case_while_clients_are_stuck_in_a_call() -> None:
    t0 = time.monotonic()
    out = run(options={"sleep_us": 60e6}, timeout_s=1.0)
    assert out.failure == "timed out while running (load.timeout_s)"
    assert time.monotonic() - t0 < 1.0 + 3 * GRACE_S + 5


def test_a_load_the_client_cannot_run_is_its_reason() -> None:
    # not a valid suite value (the loader refuses it); the client still reports, never crashes
    out = run(duration_s=math.inf)
    assert out.failure is not None and "OverflowError" in out.failure, out.failure


def test_lost_connection_fails_a_request_sent_before_the_loop_runs() -> None:
    # the measurement's first request goes out before its event loop runs again: a connection
    # lost at the gate must fail it through that loop, not raise "no running event loop"
    loop = asyncio.new_event_loop()
    try:
        conn = loop.run_until_complete(_make_connection())
        conn.connection_lost(None)
        got: list[BaseException | None] = []
        conn.send(b"request", lambda ns, err: got.append(err))
        assert got == []  # never from inside send
        loop.run_until_complete(asyncio.sleep(0))
        assert len(got) == 1 and isinstance(got[0], ConnectionClosed)
    finally:
        loop.close()


def test_a_reply_to_no_request_is_a_protocol_error() -> None:
    loop = asyncio.new_event_loop()
    try:
        conn = loop.run_until_complete(_make_connection())
        conn.reply(None, b"", None)
        assert isinstance(conn.lost, ProtocolError)
    finally:
        loop.close()


async def _make_connection() -> StreamConnection:
    return StreamConnection()


@pytest.fixture
def silent_server() -> Iterator[Endpoint]:
    """A server that accepts every connection and reads what comes, but never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    conns: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conns.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield Endpoint("tcp", "127.0.0.1", listener.getsockname()[1])
    done.set()
    thread.join()
    for conn in [*conns, listener]:
        conn.close()


@pytest.mark.parametrize("io", ["blocking", "auto"])  # a thread loop, an event loop
def test_a_server_that_takes_connections_and_answers_nothing_times_out_warming_up(
    silent_server: Endpoint, io: str
) -> None:
    out = run_closed_loop(
        *spec_and_hooks(
            "raw",
            DriverContext(silent_server, NoopParams(), {"io": io}),
            requests=5,
            duration_s=None,
            warmup=2,
            timeout_s=1.5,
        )
    )
    assert out.failure is not None and out.failure.startswith(
        "timed out while warming up (load.timeout_s): the clients connected"
    ), out.failure


def test_a_slow_client_start_is_not_counted_against_the_load_timeout() -> None:
    # the client process runs 2 s after it was started; load.timeout_s (1.5 s) counts from then
    out = run(options={"slow": SlowToArrive(2.0)}, timeout_s=1.5)
    assert out.failure is None and out.ok == 5, out.failure


def test_a_client_start_past_its_bound_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(closed_loop, "START_S", 0.5)
    out = run(options={"slow": SlowToArrive(3.0)}, timeout_s=0.5)
    assert out.failure is not None
    assert out.failure.startswith("timed out while starting the client processes"), out.failure
