"""A large reply message on a gRPC stream: rpcmeter's HTTP/2 client reassembles it from its DATA
frames in time linear in its size (it rebuilt its buffer on every 16 KB frame: 32 MB took 16 s
where grpcio took 0.2 s), so a case of large messages measures the server, not the client's
copying. Each stream is one server-streaming call answered by one 32 MB message, every byte
checked, on the built-in gRPC server; the two clients run in turn."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rpcmeter.drivers.base import DriverContext
from rpcmeter.drivers.grpc import GrpcDriver
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.runners.closed_loop import run_closed_loop
from rpcmeter.runners.spec import LoadSpec
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.workloads import StreamParams
from tests.support.marks import timing_sensitive

pytestmark = pytest.mark.timeout(300)
SIZE = 32 * 1024 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[Endpoint]:
    endpoint = new_endpoint("tcp")
    with ServerProcess(GrpcDriver.server_command(endpoint, {}), endpoint):
        yield endpoint


def fastest_stream_s(endpoint: Endpoint, client: str) -> float:
    """The quickest of three streams (after one of warmup), each its message checked."""
    params = StreamParams(mode="server", messages=1, request_bytes=10, reply_bytes=SIZE)
    options = {"client": client, "max_message_bytes": SIZE + 1024}
    ctx = DriverContext(endpoint, params, options, validate=True, threads=1, connections=1)
    out = run_closed_loop(
        LoadSpec("grpc", ctx, clients=1, requests=3, duration_s=None, warmup=1, timeout_s=60)
    )
    assert out.failure is None and out.errors == {}, (client, out.failure, out.errors)
    assert out.counters["stream.bytes_in"] == 3 * SIZE
    return float(out.hist.min) / 1e9


@timing_sensitive
def test_a_32_mb_message_takes_under_twice_grpcios_time(server: Endpoint) -> None:
    h2 = min(fastest_stream_s(server, "h2") for _ in range(2))
    grpcio = min(fastest_stream_s(server, "grpcio") for _ in range(2))
    assert h2 < 2 * grpcio, f"rpcmeter's client {h2 * 1e3:.0f} ms, grpcio {grpcio * 1e3:.0f} ms"
