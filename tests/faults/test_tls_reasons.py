"""TLS failures named for what they are, not for what they led to."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rpcmeter.drivers import driver_class
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import ServerProcess, new_endpoint

pytestmark = pytest.mark.timeout(120)


def test_alpn_the_http1_driver_does_not_speak_is_named() -> None:
    # the built-in server offers h2 and http/1.1: offered only h2, it chooses h2, and an HTTP/1.1
    # request on that connection would be answered by closing it (connection_closed)
    suite = build_suite(
        {
            "target": {"driver": "http", "tls": {"alpn": ["h2"]}},
            "workloads": {"noop": {}},
            "load": {"requests": 5, "warmup": 1, "timeout_s": 60},
            "resources": {"idle_s": 0},
        }
    )
    (case,) = run_suite(suite).cases
    assert case.status == "failed"
    assert case.reason is not None and "tls: the server chose h2 by ALPN" in case.reason, (
        case.reason
    )
    assert "tls.alpn offered h2" in case.reason


@pytest.fixture(scope="module")
def expired(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Endpoint, Path]]:
    """A built-in gRPC server whose certificate expired yesterday; its CA's file."""
    import trustme

    where = tmp_path_factory.mktemp("expired")
    ca = trustme.CA()
    now = datetime.datetime.now(datetime.UTC)
    leaf = ca.issue_cert(
        "localhost",
        "127.0.0.1",
        not_before=now - datetime.timedelta(days=30),
        not_after=now - datetime.timedelta(days=1),
    )
    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    leaf.private_key_pem.write_to_path(str(where / "key.pem"))
    leaf.cert_chain_pems[0].write_to_path(str(where / "cert.pem"))
    tls = {"cert_file": str(where / "cert.pem"), "key_file": str(where / "key.pem")}
    ep = new_endpoint("tcp")
    with ServerProcess(driver_class("grpc").server_command(ep, {"tls": tls}), ep):
        yield ep, where / "ca.pem"


def test_grpcio_names_an_expired_certificate_and_logs_nothing(
    expired: tuple[Endpoint, Path], tmp_path: Path
) -> None:
    ep, ca = expired
    suite = tmp_path / "s.toml"
    suite.write_text(
        'name = "x"\nrepeat = 1\n[target]\ndriver = "grpc"\n'
        f'address = "{ep.host}:{ep.port}"\noptions = {{ client = "grpcio" }}\n'
        f'tls = {{ ca_file = "{ca}" }}\n[workloads.noop]\nkind = "noop"\n'
        # shorter than the channel's connect_timeout_s (10 s): the case's own timeout came first
        "[load]\nrequests = 5\nwarmup = 1\ntimeout_s = 5\n[resources]\nidle_s = 0\n"
    )
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "rpcmeter.cli", "run", str(suite), "--no-store", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    (case,) = json.loads(out.read_text())["cases"]
    assert case["status"] == "failed"
    assert "tls: certificate verify failed: certificate has expired" in case["reason"], case
    assert "ssl_transport_security" not in proc.stderr, proc.stderr  # grpcio's own log lines
    assert "Handshake failed" not in proc.stderr, proc.stderr
