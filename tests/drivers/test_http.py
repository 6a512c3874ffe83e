"""HTTP/1.1 driver against the built-in server (and the server against hand-written requests)."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.drivers.base import ReplyError, ReplyMismatch
from rpcmeter.drivers.http import build_request
from rpcmeter.drivers.http_connection import (
    HttpConnection,
    KeepAliveRequired,
    announces_close,
)
from rpcmeter.errors import SuiteError
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols.timing import ServerTime, parse_server_timing
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import factorial_digits, lift_int_digit_limit
from tests.drivers.streams import assert_clean, run_cases
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)


def test_parse_server_timing() -> None:
    assert parse_server_timing(b"app;dur=1.5") == (1_500_000, None)
    assert parse_server_timing(b"db;desc=x, app;dur=0.000250;x=1") == (250, None)
    assert parse_server_timing(b"queue;dur=2, app;dur=0.5") == (500_000, 2_000_000)
    assert parse_server_timing(b"APP;dur=3;desc=x,Queue;dur=0") == (3_000_000, 0)
    # another server's metric names: the first duration is the handling time, queue unknown
    assert parse_server_timing(b"total;dur=4, db;dur=1") == (4_000_000, None)
    assert parse_server_timing(b"queue;dur=1") is None  # no handling time: nothing known
    assert parse_server_timing(b"cache;desc=hit") is None
    assert parse_server_timing(b"app;dur=abc") is None


def test_build_request() -> None:
    get = build_request("GET", "/noop", "h:1", {}, b"")
    assert get == b"GET /noop HTTP/1.1\r\nHost: h:1\r\n\r\n"
    post = build_request("POST", "/echo", "h", {"X-A": "1"}, b"abc")
    assert post == b"POST /echo HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nContent-Length: 3\r\n\r\nabc"


def test_every_workload_validated() -> None:
    cases = run_cases(
        "http",
        {
            "noop": {},
            "echo": {"request_bytes": 1000},
            "payload": {"request_bytes": 10, "reply_bytes": 10_000},
            "sleep": {"ms": 5, "requests": 5},
            "factorial": {"n": 5000, "requests": 5},
        },
        load={"connections": 2, "concurrency": 3},
    )
    loops = 3
    for name in ("noop", "echo", "payload"):
        assert_clean(cases[name], 50 * loops)
    for name in ("sleep", "factorial"):
        assert_clean(cases[name], 5 * loops)
    # bytes per request: the body plus the HTTP head, both ways
    echo = cases["echo"]["bytes"]
    assert 1000 < echo["out_per_request"] < 1200 and 1000 < echo["in_per_request"] < 1200
    payload = cases["payload"]["bytes"]
    assert payload["out_per_request"] < 200 and 10_000 < payload["in_per_request"] < 10_200
    # the server's own time comes back in Server-Timing
    sleep = cases["sleep"]
    assert sleep["server_time"]["mean_us"] >= 4_500
    assert sleep["latency"]["mean_us"] >= sleep["server_time"]["mean_us"]
    assert cases["factorial"]["server_time"]["mean_us"] > cases["noop"]["server_time"]["mean_us"]


def test_unix_socket() -> None:
    cases = run_cases("http", {"echo": {"request_bytes": 10}}, transport="unix")
    assert_clean(cases["echo"], 50)
    assert cases["echo"]["endpoint"].startswith("unix://")


def test_loops_owning_their_connections() -> None:
    """Without validation and with a connection per loop, each loop owns its connection (replies
    go straight to the loop): the counts, bytes and server times are those of the queued path."""
    cases = run_cases(
        "http",
        {"noop": {}},
        transport="unix",
        validate=False,
        load={"connections": 3, "concurrency": 3, "requests": 400},
    )
    case = cases["noop"]
    assert_clean(case, 3 * 400)
    request = build_request("GET", "/noop", "localhost", {}, b"")
    assert case["bytes"]["out_per_request"] == len(request)
    assert case["server_time"]["histogram"]["count"] == 3 * 400
    assert 0 < case["server_time"]["mean_us"] < case["latency"]["mean_us"]


def test_mismatches_are_counted() -> None:
    cases = run_cases(
        "http",
        {"echo": {"request_bytes": 64}, "factorial": {"n": 50}},
        options={"corrupt_every": 5},
        load={"requests": 100, "warmup": 0},
    )
    for case in cases.values():
        assert case["status"] == "ok"
        assert case["errors"] == {"mismatch": 20}
        assert case["ok"] == 80
        assert "expected" in case["error_samples"]["mismatch"]


def test_without_validation_corruption_goes_unseen() -> None:
    cases = run_cases(
        "http",
        {"echo": {"request_bytes": 64}},
        options={"corrupt_every": 5},
        validate=False,
        load={"requests": 100, "warmup": 0},
    )
    assert_clean(cases["echo"], 100)


def test_non_2xx_counted_by_status() -> None:
    cases = run_cases(
        "http",
        {"noop": {}},
        options={"path": "/no-such-workload", "method": "POST"},
        load={"requests": 30, "warmup": 0, "concurrency": 2},
    )
    case = cases["noop"]
    assert case["status"] == "failed"  # most requests failed: its figures are not the server's
    assert case["reason"] == "60 of 60 requests failed (http_404: 60)"
    assert case["errors"] == {"http_404": 60}
    assert case["ok"] == 0


def _exchange(endpoint: Endpoint, data: bytes) -> bytes:
    """Send raw bytes (the last request says ``Connection: close``), read until the server closes."""
    assert endpoint.port is not None
    with socket.create_connection((endpoint.host, endpoint.port), timeout=10) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        return got


def _server() -> tuple[Endpoint, ServerProcess]:
    endpoint = new_endpoint("tcp")
    cmd = [sys.executable, "-m", "rpcmeter.servers.http_server", "--port", str(endpoint.port)]
    return endpoint, ServerProcess(cmd, endpoint)


def test_server_keeps_pipelined_replies_in_order() -> None:
    endpoint, server = _server()
    with server:
        got = _exchange(
            endpoint,
            b"GET /sleep?ms=30 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx",
        )
    first, second = got.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"200") and b"Content-Length: 0" in first
    times = parse_server_timing(first.split(b"Server-Timing: ")[1].split(b"\r\n")[0])
    assert times is not None and times[1] is not None  # queue time: known over TCP
    assert 25e6 <= times[0] < 5e9  # measured by the server
    assert second.startswith(b"200") and second.endswith(b"\r\n\r\nx")


def test_server_factorial_and_errors() -> None:
    endpoint, server = _server()
    with server:
        got = _exchange(
            endpoint,
            b"POST /factorial HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n5000"
            b"GET /payload?reply_bytes=zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
    fact, bad = got.split(b"HTTP/1.1 ")[1:]
    assert (
        fact.startswith(b"200") and b"Server-Timing: queue;dur=" in fact and b", app;dur=" in fact
    )
    lift_int_digit_limit()
    assert fact.endswith(b"\r\n\r\n" + factorial_digits(5000))  # more than 4,300 digits
    assert bad.startswith(b"400")


def _replies(
    stream: bytes, step: int, expects: list[bytes | None]
) -> list[tuple[ServerTime | None, BaseException | None]]:
    conn = HttpConnection()
    got: list[tuple[ServerTime | None, BaseException | None]] = []
    for expect in expects:
        conn.pending.append((b"", lambda s, e: got.append((s, e)), expect))
    for i in range(0, len(stream), step):
        conn.data_received(stream[i : i + step])
    assert conn.bytes_in == len(stream)
    return got


def test_reply_parsing_split_anywhere_any_spelling_and_chunked() -> None:
    stream = (
        b"HTTP/1.1 200 OK\r\nServer-Timing: app;dur=0.5\r\nContent-Length: 3\r\n\r\nabc"
        b"HTTP/1.1 503 Busy\r\ncontent-length: 0\r\nserver-timing: app;dur=1\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nCONTENT-LENGTH: 2\r\n\r\nxy"
        # chunked: the connection switches to httptools for good
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz"
        b"HTTP/1.1 200 OK\r\nserver-timing: queue;dur=2, app;dur=3\r\nContent-Length: 0\r\n\r\n"
    )
    for step in (1, 7, 64, len(stream)):
        got = _replies(stream, step, [b"abc", None, b"xz", b"hi", b"z", None])
        times = [s for s, _ in got]
        assert times == [(500_000, None), (1_000_000, None), None, None, None, (3e6, 2e6)]
        assert got[0][1] is None and got[3][1] is None and got[4][1] is None
        assert isinstance(got[1][1], ReplyError) and got[1][1].kind == "http_503"
        assert isinstance(got[2][1], ReplyMismatch)


def test_announced_close_detected() -> None:
    assert announces_close(b"HTTP/1.0 200 OK\r\nServer: SimpleHTTP/0.6")
    assert not announces_close(b"HTTP/1.0 200 OK\r\nConnection: keep-alive")
    assert announces_close(b"HTTP/1.1 200 OK\r\nconnection: Close")
    assert not announces_close(b"HTTP/1.1 200 OK\r\nContent-Length: 0")
    # fed a reply that announces the close, then the close: the pending request fails with
    # the error that says keep-alive is needed; without the announcement, the plain reset
    for head, plain in (
        (b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", False),
        (b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", True),
    ):
        conn = HttpConnection()
        got: list[BaseException | None] = []

        def done(
            server_ns: ServerTime | None, error: BaseException | None, got: list[Any] = got
        ) -> None:
            got.append(error)

        conn.pending.extend([(b"", done, None), (b"", done, None)])
        conn.data_received(head)
        conn.connection_lost(None)
        assert got[0] is None and isinstance(got[1], ConnectionResetError)
        assert isinstance(got[1], KeepAliveRequired) is not plain, head


def test_server_closing_after_each_reply(tmp_path: Path) -> None:
    """Python's http.server (HTTP/1.0, a connection per request): the case fails with one line
    saying keep-alive is needed; with load.reuse = false every request connects anew, counted."""
    (tmp_path / "index.html").write_text("hello\n")
    command = f"{sys.executable} -m http.server --bind 127.0.0.1 {{port}}"

    def run(reuse: bool) -> dict[str, Any]:
        suite = {
            "name": "http.server",
            "target": {
                "driver": "http",
                "options": {"path": "/index.html"},
                "server": {"command": command, "cwd": str(tmp_path)},
            },
            "load": {"requests": 20, "warmup": 2, "threads": 2, "reuse": reuse},
            "workloads": {"noop": {}},
            "resources": {"idle_s": 0},
        }
        return dict(written(run_suite(build_suite(suite)))["cases"][0])

    kept = run(True)
    assert kept["status"] == "failed"
    assert "keepalive_required" in kept["reason"] and "load.reuse = false" in kept["reason"]
    assert "\n" not in kept["reason"]
    fresh = run(False)
    assert_clean(fresh, 2 * 20)
    assert fresh["counters"]["connects"] == 2 * 20  # warmup's connects not counted
    assert fresh["bytes"]["in_per_request"] > len("hello\n")


def test_reuse_false_needs_a_driver_that_reconnects() -> None:
    suite = {"target": {"driver": "rpyc"}, "load": {"reuse": False}, "workloads": {"simple": {}}}
    with pytest.raises(SuiteError, match=r"load\.reuse: driver 'rpyc' cannot open a connection"):
        build_suite(suite)


def test_one_request_per_connection_unless_pipeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HTTP/1.1 with 6 loops over 2 connections, through the command line: a connection per loop
    (as wrk, oha and h2load: one request in flight per connection), said in one line; with
    ``pipeline = true`` the 2 connections pipeline, and the output says that too."""
    from rpcmeter.cli import main

    suite = tmp_path / "pipe.toml"
    suite.write_text(
        "\n".join(
            [
                'name = "pipe"',
                "repeat = 1",
                "[target]",
                'driver = "http"',
                'transport = "unix"',
                "[variants.default]",
                "[variants.piped]",
                "options = { pipeline = true }",
                "[workloads.noop]",
                "[load]",
                "concurrency = 6",
                "connections = 2",
                "requests = 50",
                "warmup = 2",
                "[resources]",
                "idle_s = 0",
            ]
        )
    )
    out = tmp_path / "pipe.json"
    assert main(["run", str(suite), "-o", str(out), "--no-store", "--width", "300"]) == 0
    shown = capsys.readouterr().out
    cases = {c["variant"]: c for c in json.loads(out.read_text())["cases"]}
    for case in cases.values():
        assert_clean(case, 6 * 50)
    assert cases["default"]["connections"]["opened"] == 6
    assert cases["piped"]["connections"]["opened"] == 2
    assert (
        "default · noop: 6 connections, one per loop, where load.connections gives 2 "
        "(all clients): HTTP/1.1 sends one request at a time per connection" in shown
    )
    assert "piped · noop: HTTP/1.1 pipelined (options.pipeline = true): 6 loops over 2" in shown


def test_pipeline_is_for_http1() -> None:
    with pytest.raises(SuiteError, match=r"options\.pipeline: HTTP/2 multiplexes"):
        build_suite(
            {
                "target": {"driver": "http", "options": {"http": "2", "pipeline": True}},
                "workloads": {"noop": {}},
            },
            "<suite>",
        )
