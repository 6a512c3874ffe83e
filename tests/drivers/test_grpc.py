"""The gRPC driver against the real built-in gRPC server, and against a service that is not
rpcmeter's (grpcio's health checking) by its method path with a raw payload; every test with
both clients (rpcmeter's HTTP/2 client and grpcio's), and a test that they agree."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from concurrent import futures
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import psutil
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from rpcmeter.drivers.base import ReplyMismatch
from rpcmeter.drivers.grpc import GrpcDriver, GrpcError, GrpcUnavailable
from rpcmeter.errors import RequestLost, SuiteError
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols.bodies import raw_bytes
from rpcmeter.run.execute import run_suite
from rpcmeter.runners.recording import is_fatal
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import parse_params
from tests.drivers import calls
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]
server = calls.server_fixture(GrpcDriver, ("tcp", "unix"))
driver = partial(calls.connected, GrpcDriver)
client = calls.grpc_client_fixture()


@pytest.mark.parametrize(("kind", "params", "reply_len"), calls.WORKLOAD_CASES)
def test_workloads_validated_with_server_time(
    server: ServerProcess, kind: str, params: dict[str, Any], reply_len: int, client: str
) -> None:
    d, counters = calls.three_timed_calls(GrpcDriver, server.endpoint, kind, params, client=client)
    assert counters["bytes_in"] == 3 * reply_len
    assert counters["bytes_out"] == 3 * len(d.request)


def test_wrong_reply_is_a_mismatch(server: ServerProcess, client: str) -> None:
    # checked against what a wrong server would return
    wrong = str(math.factorial(21))
    d = driver(
        server.endpoint, parse_params("factorial", {"n": 20}), expect_text=wrong, client=client
    )
    try:
        with pytest.raises(ReplyMismatch):
            d.caller(0)()
    finally:
        d.close()
    d = driver(
        server.endpoint, parse_params("echo", {}), expect_text="something else", client=client
    )
    try:
        with pytest.raises(ReplyMismatch):
            d.caller(0)()
    finally:
        d.close()


def test_channels_are_distinct_connections(client: str) -> None:
    endpoint = new_endpoint("tcp")
    with ServerProcess(GrpcDriver.server_command(endpoint, {}), endpoint) as proc:
        d = driver(endpoint, parse_params("noop", {}), threads=6, connections=3, client=client)
        try:
            for t in range(6):
                d.caller(t)()
            conns = [
                c
                for c in psutil.Process(proc.pid).net_connections("tcp")
                if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == endpoint.port
            ]
            assert len({c.raddr for c in conns}) == 3
        finally:
            d.close()


def test_raw_bytes_formats(tmp_path: Any) -> None:
    f = tmp_path / "body.bin"
    f.write_bytes(b"\x08\x01")
    assert raw_bytes({"request_hex": "0801"}, "request") == b"\x08\x01"
    assert raw_bytes({"request_base64": "CAE="}, "request") == b"\x08\x01"
    assert raw_bytes({"request_text": "hi"}, "request") == b"hi"
    assert raw_bytes({"request_file": str(f)}, "request") == b"\x08\x01"
    assert raw_bytes({}, "request") is None
    with pytest.raises(SuiteError, match="only one of"):
        raw_bytes({"request_hex": "00", "request_text": "x"}, "request")
    with pytest.raises(SuiteError, match="request_hex"):
        raw_bytes({"request_hex": "zz"}, "request")


@pytest.fixture(scope="module")
def health_server() -> Iterator[Endpoint]:
    """grpcio's own health-checking service, in this process: not rpcmeter's implementation."""
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    servicer.set("down", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    yield Endpoint("tcp", port=port)
    srv.stop(None)


def test_any_method_by_path_with_raw_payload(health_server: Endpoint, client: str) -> None:
    serving = health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
    down = health_pb2.HealthCheckRequest(service="down").SerializeToString()
    d = driver(
        health_server,
        parse_params("noop", {}),
        method="/grpc.health.v1.Health/Check",
        client=client,
        request_hex="",  # HealthCheckRequest(service=""): every field at its default
        expect_hex=serving.SerializeToString().hex(),
    )
    try:
        assert d.caller(0)() is None  # validated; this server reports no compute time
    finally:
        d.close()
    d = driver(
        health_server,
        parse_params("noop", {}),
        method="/grpc.health.v1.Health/Check",
        client=client,
        request_hex=down.hex(),
        expect_hex=serving.SerializeToString().hex(),
    )
    try:
        with pytest.raises(ReplyMismatch):  # the reply says NOT_SERVING
            d.caller(0)()
    finally:
        d.close()


def test_error_status_is_counted_by_code(health_server: Endpoint, client: str) -> None:
    d = driver(
        health_server, parse_params("noop", {}), method="/grpc.health.v1.Health/Nope", client=client
    )
    try:
        with pytest.raises(GrpcError) as info:
            d.caller(0)()
        assert type(info.value).__name__ == "grpc:UNIMPLEMENTED"
        assert not isinstance(info.value, GrpcDriver.fatal_errors)
    finally:
        d.close()


def test_server_gone_is_fatal(client: str) -> None:
    endpoint = new_endpoint("tcp")
    proc = ServerProcess(GrpcDriver.server_command(endpoint, {}), endpoint)
    with proc:
        d = driver(endpoint, parse_params("noop", {}), call_timeout_s=5, client=client)
        call = d.caller(0)
        call()
    try:
        # the h2 client may first learn that its connection broke under the call (a request
        # lost in flight: counted, not fatal); then it cannot open the next one
        with pytest.raises(GrpcUnavailable) as info:
            try:
                call()
            except RequestLost:
                call()
        assert is_fatal(info.value, GrpcDriver.fatal_errors)
    finally:
        d.close()


def test_nobody_listening_is_a_connection_error(client: str) -> None:
    endpoint = new_endpoint("tcp")
    with pytest.raises(ConnectionError, match=r"no gRPC connection to 127\.0\.0\.1:"):
        driver(endpoint, parse_params("noop", {}), connect_timeout_s=0.3, client=client)


def test_suite_end_to_end_records_server_time_and_bytes(client: str) -> None:
    result = written(
        run_suite(
            build_suite(
                {
                    "target": {
                        "driver": "grpc",
                        "transport": "unix",
                        "options": {"client": client},
                    },
                    "workloads": {"echo": {"request_bytes": 100}},
                    "load": {"requests": 50, "warmup": 5, "connections": 2, "concurrency": 4},
                    "validate": True,
                }
            )
        )
    )
    (case,) = result["cases"]
    assert case["status"] == "ok", case["reason"]
    assert case["ok"] == case["requests"] == 200 and case["errors"] == {}
    assert case["server_time"]["mean_us"] > 0
    assert case["server_time"]["mean_us"] < case["latency"]["mean_us"]
    assert case["bytes"] == {"out_per_request": 100.0, "in_per_request": 100.0}
    assert result["environment"]["packages"]["grpcio"]


def test_a_call_past_its_deadline_fails_even_if_the_server_never_answers(client: str) -> None:
    silent = {  # a hand-made HTTP/2 server that answers no call (it ignores grpc-timeout)
        "command": [sys.executable, "-m", "tests.drivers.hostile_stream", "{port}", "silent"],
        "cwd": str(ROOT),
    }
    timeout = {"client": client, "call_timeout_s": 0.3}
    raw_call = {"method": "/x.Y/Unary", "request_hex": ""}
    variants = {
        "silent": {"options": {**timeout, **raw_call}, "server": silent},
        "answered": {"options": {**timeout, "call_timeout_s": 10}},  # the built-in server
    }
    result = run_suite(
        build_suite(
            {
                "target": {"driver": "grpc", "transport": "tcp"},
                "variants": variants,
                "workloads": {"noop": {}},
                "load": {"requests": 2, "warmup": 0, "connections": 1, "concurrency": 2},
                "validate": False,
            }
        )
    )
    cases = {case.variant: case for case in result.cases}
    silent_case, answered = cases["silent"], cases["answered"]
    # every call counted when its deadline passed, and the loops went on to the end
    assert silent_case.errors == {"grpc:DEADLINE_EXCEEDED": 4}, silent_case.reason
    assert silent_case.ok == 0 and silent_case.status == "failed"
    assert "\n" not in silent_case.error_samples["grpc:DEADLINE_EXCEEDED"]
    assert answered.status == "ok" and answered.errors == {}, answered.reason
    assert answered.ok == 4
    assert [
        p for p in psutil.Process().children(recursive=True) if "hostile" in str(p.cmdline())
    ] == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"method": "Check"}, "options.method: expected /package.Service/Method"),
        ({"server_mode": "fast"}, "options.server_mode: expected aio, sync or h2"),
        ({"client": "grpc-go"}, "options.client: expected h2 or grpcio"),
        ({"request_text": "a", "request_hex": "00"}, "options: give only one of"),
        ({"expect_base64": "!!"}, "options.expect_base64: cannot read"),
    ],
)
def test_bad_options_fail_when_the_suite_loads(options: dict[str, Any], message: str) -> None:
    raw = {"target": {"driver": "grpc", "options": options}, "workloads": {"noop": {}}}
    assert calls.suite_error(raw).startswith(f"s.toml: variants.default: {message}")


def test_both_clients_agree_on_replies_and_statuses(health_server: Endpoint) -> None:
    """The same calls to grpcio's own server through each client: the same replies (checked
    against the same expectation) and the same status codes."""
    serving = health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
    check = "/grpc.health.v1.Health/Check"
    calls_ = [
        (check, b""),  # SERVING
        (check, health_pb2.HealthCheckRequest(service="down").SerializeToString()),
        (check, health_pb2.HealthCheckRequest(service="nobody").SerializeToString()),
        ("/grpc.health.v1.Health/Nope", b""),
        (check, b"\xff\xff"),  # not a message: the server says so
    ]
    outcomes: dict[str, list[str]] = {}
    for client in ("h2", "grpcio"):
        seen = []
        for method, request in calls_:
            d = driver(
                health_server,
                parse_params("noop", {}),
                method=method,
                client=client,
                request_hex=request.hex(),
                expect_hex=serving.SerializeToString().hex(),
            )
            try:
                d.caller(0)()
                seen.append("OK, as expected")
            except Exception as exc:
                seen.append(type(exc).__name__)
            finally:
                d.close()
        outcomes[client] = seen
    assert outcomes["h2"] == outcomes["grpcio"]
    assert outcomes["h2"][:4] == [
        "OK, as expected",
        "ReplyMismatch",
        "grpc:NOT_FOUND",
        "grpc:UNIMPLEMENTED",
    ]


def test_queue_time_of_another_server_is_read(client: str) -> None:
    """A service of one's own sending both trailers: the driver reads compute and queue time
    (the health service above sends neither: its calls report no times, unknown)."""

    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        context.set_trailing_metadata((("rpcmeter-server-ns", "1234"), ("rpcmeter-queue-ns", "77")))
        return request

    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    srv.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "mine.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
            ),
        )
    )
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        d = driver(
            Endpoint("tcp", port=port),
            parse_params("echo", {"request_bytes": 10}),
            method="/mine.Echo/Echo",
            client=client,
        )
        try:
            assert d.caller(0)() == (1234, 77)
        finally:
            d.close()
    finally:
        srv.stop(None)
