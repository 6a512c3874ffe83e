"""The reference servers sleep what they are told, and stop on the first SIGTERM, even in a stall."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from functools import partial

import pytest
import uvloop

from rpcmeter.net.endpoints import Endpoint
from rpcmeter.servers.aio import call_later_precisely, sleep_precisely
from rpcmeter.servers.common import precise_sleep
from rpcmeter.servers.process import ServerProcess, new_endpoint
from tests.support.marks import timing_sensitive

pytestmark = pytest.mark.timeout(120)

MS = 1e-3


def within_2_percent(waits_s: list[float], target_s: float) -> None:
    # never short, and the median within 2 % over. Not the mean: a busy machine preempts the
    # process for milliseconds now and then (measured here, with 2 cores for 8 busy processes:
    # 1-3 % of 1 ms waits took 5-12 ms), which no way of waiting avoids
    assert min(waits_s) >= target_s * 0.999
    assert statistics.median(waits_s) <= target_s * 1.02


@timing_sensitive
def test_thread_sleep_is_precise_at_one_millisecond() -> None:
    waits = []
    for _ in range(200):
        t0 = time.perf_counter()
        precise_sleep(MS)
        waits.append(time.perf_counter() - t0)
    within_2_percent(waits, MS)


def _stamp(done: asyncio.Future[float]) -> None:
    done.set_result(time.perf_counter())


@timing_sensitive
def test_loop_waits_are_precise() -> None:
    for target_ms in (1.0, 5.0):
        _loop_waits_are_precise(target_ms)


def _loop_waits_are_precise(target_ms: float) -> None:
    async def measure() -> tuple[list[float], list[float]]:
        loop = asyncio.get_running_loop()
        called: list[float] = []  # when the callback ran (a server writes its reply there)
        for _ in range(100):
            done: asyncio.Future[float] = loop.create_future()
            t0 = time.perf_counter()
            call_later_precisely(loop, target_ms * MS, partial(_stamp, done))
            called.append(await done - t0)
        resumed: list[float] = []  # a coroutine resumes one loop iteration after that
        for _ in range(20):
            t0 = time.perf_counter()
            await sleep_precisely(target_ms * MS)
            resumed.append(time.perf_counter() - t0)
        return called, resumed

    called, resumed = uvloop.run(measure())
    within_2_percent(called, target_ms * MS)
    assert target_ms * MS <= statistics.median(resumed) < target_ms * MS * 1.1


def test_the_loop_keeps_serving_during_a_precise_wait() -> None:
    async def measure() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0)
                ticks += 1

        task = asyncio.get_running_loop().create_task(ticker())
        await sleep_precisely(2 * MS)
        task.cancel()
        return ticks

    assert uvloop.run(measure()) > 10


def _http_sleeps(endpoint: Endpoint, count: int) -> list[float]:
    """Server-Timing durations (seconds) of ``count`` 1 ms sleeps on one keep-alive connection."""
    assert endpoint.port is not None
    durations = []
    with socket.create_connection((endpoint.host, endpoint.port), timeout=10) as s:
        for _ in range(count):
            s.sendall(b"GET /sleep?ms=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = b""
            while b"\r\n\r\n" not in reply:
                reply += s.recv(4096)
            durations.append(float(reply.split(b"app;dur=")[1].split(b"\r\n")[0]) * MS)
    return durations


@timing_sensitive
def test_http_server_sleeps_one_millisecond_within_2_percent() -> None:
    endpoint = new_endpoint("tcp")
    cmd = [sys.executable, "-m", "rpcmeter.servers.http_server", "--port", str(endpoint.port)]
    with ServerProcess(cmd, endpoint):
        within_2_percent(_http_sleeps(endpoint, 200), MS)


def _server(name: str, transport: str, options: dict[str, object]) -> ServerProcess:
    endpoint = new_endpoint(transport)
    where = ["--socket", str(endpoint.path)] if endpoint.path else ["--port", str(endpoint.port)]
    cmd = [
        sys.executable,
        "-m",
        f"rpcmeter.servers.{name}",
        "--transport",
        transport,
        *where,
        "--options",
        json.dumps(options),
    ]
    return ServerProcess(cmd, endpoint)


def _stops_on_one_sigterm(server: ServerProcess, within_s: float = 5.0) -> None:
    assert server.proc is not None
    os.kill(server.pid, signal.SIGTERM)
    t0 = time.monotonic()
    code = server.proc.wait(timeout=within_s)
    assert code == 0, server.output_tail()
    assert time.monotonic() - t0 < within_s
    if server.endpoint.path:
        assert not os.path.exists(server.endpoint.path)  # finally blocks ran


@pytest.mark.parametrize(
    ("name", "transport", "options"),
    [
        ("http_server", "tcp", {}),
        ("raw_server", "unix", {}),
        ("rpyc_server", "unix", {}),
        ("rpyc_server", "tcp", {"wait": "block"}),
        ("zmq_server", "tcp", {}),
        ("zmq_server", "ipc", {"server_workers": 2}),
        ("zmq_server", "tcp", {"server_mode": "zmtp"}),
        ("zmq_server", "ipc", {"server_mode": "zmtp"}),
        ("grpc_server", "tcp", {}),
        ("grpc_server", "tcp", {"server_mode": "sync"}),
        ("grpc_server", "unix", {"server_mode": "h2"}),
    ],
)
def test_idle_servers_stop_on_the_first_sigterm(
    name: str, transport: str, options: dict[str, object]
) -> None:
    with _server(name, transport, options) as server:
        _stops_on_one_sigterm(server)


def _send_http(endpoint: Endpoint) -> None:
    assert endpoint.port is not None
    with socket.create_connection((endpoint.host, endpoint.port), timeout=10) as s:
        s.sendall(b"GET /noop HTTP/1.1\r\nHost: x\r\n\r\n")
        s.recv(4096)  # the stall ends when the server stops


def _call_rpyc(endpoint: Endpoint) -> None:
    import rpyc

    try:
        conn = rpyc.utils.factory.unix_connect(str(endpoint.path))
        conn.root.simple()
    except BaseException:  # the server stops during the call (rpyc may pass on its SystemExit)
        pass


STALL = {"stall_ms": 60_000, "stall_after_s": 0.0}


@pytest.mark.parametrize(
    ("name", "transport", "options", "request_"),
    [
        ("http_server", "tcp", STALL, _send_http),
        ("rpyc_server", "unix", STALL, _call_rpyc),
        ("rpyc_server", "unix", {**STALL, "wait": "block"}, _call_rpyc),
    ],
    ids=["http", "rpyc", "rpyc-select"],
)
def test_servers_stop_on_the_first_sigterm_during_a_stall(
    name: str,
    transport: str,
    options: dict[str, object],
    request_: Callable[[Endpoint], None],
) -> None:
    for _ in range(3 if name == "http_server" else 1):  # every time, not now and then
        with _server(name, transport, options) as server:
            client = threading.Thread(target=request_, args=(server.endpoint,), daemon=True)
            client.start()
            time.sleep(0.5)  # the request is in its minute-long stall now
            assert server.alive()
            _stops_on_one_sigterm(server)
            client.join(timeout=10)
            assert not client.is_alive()
