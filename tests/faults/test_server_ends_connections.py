"""Servers that end keep-alive connections, as stock servers do: nginx with its default
``keepalive_requests`` (1000) says ``Connection: close`` on the last reply of an HTTP/1.1
connection and sends ``GOAWAY`` on an HTTP/2 one, then closes it. rpcmeter reconnects and every
request of the case succeeds, over HTTP/1.1 (loops owning their connection and pipelined ones),
h2c, HTTP/2 over TLS and gRPC (rpcmeter's client and grpcio) through nginx's ``grpc_pass``.
The connections opened are counted in the case (``connections.opened``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from rpcmeter.servers import nginx
from rpcmeter.servers.process import ServerProcess, new_endpoint
from tests.support.synthetic import written

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        nginx.executable() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]
REQUESTS = 10_000
PER_CONNECTION = 1000  # nginx's default keepalive_requests


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, tuple[str, str]]:
    """The CA file and nginx's certificate chain and key, made for the test."""
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    (d / "ca.pem").write_bytes(ca.cert_pem.bytes())
    (d / "chain.pem").write_bytes(b"".join(p.bytes() for p in cert.cert_chain_pems))
    (d / "key.pem").write_bytes(cert.private_key_pem.bytes())
    return str(d / "ca.pem"), (str(d / "chain.pem"), str(d / "key.pem"))


def run(
    target: dict[str, Any],
    variants: dict[str, Any],
    connections: int,
    loops: int,
    requests: int = REQUESTS,
) -> Any:
    """One suite, ``requests`` requests a case over ``connections`` connections."""
    suite = {
        "name": "keepalive",
        "target": target,
        "variants": variants,
        "workloads": {"noop": {}},
        "load": {
            "requests": requests // loops,
            "warmup": 10,
            "connections": connections,
            "concurrency": loops,
            "timeout_s": 120,
        },
        "resources": {"idle_s": 0},
        "repeat": 1,
    }
    return written(run_suite(build_suite(suite)))


def check(case: dict[str, Any], requests: int = REQUESTS) -> None:
    assert case["status"] == "ok", case["reason"]
    assert case["errors"] == {} and case["ok"] == requests, case
    # each connection served at most nginx's limit: the case opened the ones it needed
    assert case["connections"]["opened"] > requests // PER_CONNECTION, case["connections"]


def test_http_over_connections_nginx_ends(tmp_path: Path, pki: tuple[str, Any]) -> None:
    ca, files = pki
    clear = nginx.prepare(tmp_path / "clear")
    h2c = nginx.prepare(tmp_path / "h2c", http2=True)
    h2 = nginx.prepare(tmp_path / "h2", tls=files, http2=True)
    variants = {
        "http1": {"server": {"command": clear}},
        "h2c": {"server": {"command": h2c}, "options": {"http": "2"}},
        "h2-tls": {"server": {"command": h2}, "options": {"http": "2"}, "tls": {"ca_file": ca}},
    }
    # four loops over two connections: HTTP/1.1 pipelines, HTTP/2 multiplexes
    result = run({"driver": "http", "transport": "tcp"}, variants, connections=2, loops=4)
    cases = {c["variant"]: c for c in result["cases"]}
    for name in variants:
        check(cases[name])
    # two loops owning their HTTP/1.1 connections (the loop writes its requests straight out)
    owned = run({"driver": "http", "transport": "tcp"}, {"http1": variants["http1"]}, 2, 2)
    check(owned["cases"][0])


@pytest.fixture(scope="module")
def grpc_backend() -> Iterator[str]:
    """rpcmeter's gRPC server (its own HTTP/2), which nginx proxies to."""
    endpoint = new_endpoint("tcp")
    command = [
        sys.executable,
        "-m",
        "rpcmeter.servers.grpc_server",
        "--transport",
        "tcp",
        "--host",
        endpoint.host,
        "--port",
        str(endpoint.port),
        "--options",
        '{"server_mode": "h2"}',
    ]
    with ServerProcess(command, endpoint):
        yield f"{endpoint.host}:{endpoint.port}"


def test_grpc_through_nginx_that_ends_connections(tmp_path: Path, grpc_backend: str) -> None:
    """Fewer calls (a Python gRPC server behind nginx is slow): each connection still ends."""
    command = nginx.prepare(tmp_path / "grpc", grpc_pass=grpc_backend)
    target = {"driver": "grpc", "transport": "tcp", "server": {"command": command}}
    variants = {"h2": {"options": {"client": "h2"}}, "grpcio": {"options": {"client": "grpcio"}}}
    calls = 2 * PER_CONNECTION + 400
    result = run(target, variants, connections=2, loops=4, requests=calls)
    cases = {c["variant"]: c for c in result["cases"]}
    check(cases["h2"], calls)
    grpcio = cases["grpcio"]  # grpcio reconnects by itself (it reports no connections)
    assert grpcio["status"] == "ok" and grpcio["errors"] == {}, grpcio
    assert grpcio["ok"] == calls
