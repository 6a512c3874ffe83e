"""TLS end to end: HTTP/1.1, raw frames and gRPC over TLS against the built-in servers with a
certificate made for the run, resumption, a connection per request, and the failures a user meets
(wrong CA, expired or mismatched certificate, a server that is not TLS, a refused client
certificate, a handshake that hangs), each one line naming its cause."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
import trustme

from rpcmeter.plan.load import build_suite
from rpcmeter.reporters.terminal import render
from rpcmeter.run.execute import run_suite
from tests.support.marks import timing_sensitive
from tests.support.synthetic import view_of, written

pytestmark = pytest.mark.timeout(180)


class Pki:
    """A CA of the test's own (not the run's) with a client certificate and an expired server
    certificate, as files."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        ca = trustme.CA()
        self.ca_file = self._write("ca.pem", ca.cert_pem.bytes())
        client = ca.issue_cert("client.example")
        self.client_cert = self._write("client.pem", client.cert_chain_pems[0].bytes())
        self.client_key = self._write("client.key", client.private_key_pem.bytes())
        past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
        expired = ca.issue_cert(
            "127.0.0.1", "localhost", not_before=past, not_after=past + datetime.timedelta(days=1)
        )
        self.expired_cert = self._write(
            "expired.pem", b"".join(p.bytes() for p in expired.cert_chain_pems)
        )
        self.expired_key = self._write("expired.key", expired.private_key_pem.bytes())

    def _write(self, name: str, data: bytes) -> str:
        path = self.dir / name
        path.write_bytes(data)
        return str(path)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def http_server(tls: dict[str, Any] | None) -> list[str]:
    """The built-in HTTP server as an external command (its own certificate, or cleartext)."""
    options = json.dumps({"tls": tls} if tls else {})
    return [
        sys.executable,
        "-m",
        "rpcmeter.servers.http_server",
        "--port",
        "{port}",
        "--options",
        options,
    ]


HANG = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(16); held = []\n"
    "while True: held.append(s.accept())\n"
)


def run(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    result = written(run_suite(build_suite(raw)))
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for case in result["cases"]:
        by_variant.setdefault(case["variant"], []).append(case)
    return result, by_variant


@timing_sensitive
def test_http_and_raw_over_tls_with_resumption_and_a_connection_per_request() -> None:
    result, cases = run(
        {
            "validate": True,
            "target": {"driver": "http", "tls": True},
            "variants": {
                "clear": {"tls": False},
                "https": {},
                "resumed": {"tls": {"resume": True}},
                "raw-blocking": {"driver": "raw", "options": {"io": "blocking"}},
            },
            "workloads": {"echo": {"request_bytes": 300}},
            "load": {"requests": 40, "warmup": 3, "connections": 2, "threads": 2},
            "matrix": {"reuse": [True, False]},
            "repeat": 1,
        }
    )
    for variant, docs in cases.items():
        for doc in docs:
            assert doc["status"] == "ok", (variant, doc["reason"])
            assert doc["errors"] == {} and doc["ok"] == 80, (variant, doc["error_samples"])
    by_reuse = {(d["variant"], d["point"]["reuse"]): d["connections"] for d in result["cases"]}
    # keep-alive: the two connections, each connected and (with TLS) handshaken once
    keep = by_reuse["https", True]
    assert keep["opened"] == 2 and keep["handshake"]["histogram"]["count"] == 2
    assert "handshake" not in by_reuse["clear", True]
    assert by_reuse["raw-blocking", True]["handshake"]["histogram"]["count"] == 2
    # a connection per request: connect, handshake and request for every measured request
    fresh = by_reuse["https", False]
    assert fresh["per_request"] and fresh["opened"] == 80
    assert fresh["handshake"]["histogram"]["count"] == 80 and "handshake_resumed" not in fresh
    assert fresh["request"]["histogram"]["count"] == 80
    # its latency is all three: connect + handshake + request
    latency = next(d for d in cases["https"] if not d["point"]["reuse"])["latency"]["mean_us"]
    parts = sum(fresh[p]["mean_us"] for p in ("connect", "handshake", "request"))
    assert latency >= parts * 0.95
    # resumption: after the warmup, every new connection resumes the session
    resumed = by_reuse["resumed", False]
    assert resumed["handshake_resumed"]["histogram"]["count"] >= 72
    assert "handshake" not in by_reuse["clear", False]
    # the result names the CA and certificate by fingerprint, never a private key
    tls = result["environment"]["tls"]
    assert set(tls) == {"https", "resumed", "raw-blocking"}
    assert tls["https"]["verify"] is True and len(tls["https"]["server_cert_sha256"]) == 64
    assert "PRIVATE KEY" not in json.dumps(result)
    # the terminal shows every part, and says when verification is off
    text = render(view_of(result), width=160)
    assert "noop" not in text and "echo · connections" in text
    for column in ("connect", "TLS handshake", "resumed handshake", "request"):
        assert column in text
    assert "verification OFF" not in text
    tls["resumed"]["verify"] = False
    assert "TLS certificate verification OFF (tls.verify = false): resumed" in render(
        view_of(result)
    )


def test_grpc_over_tls_and_mutual_tls(pki: Pki) -> None:
    grpc_opts = {"connect_timeout_s": 3}
    _, cases = run(
        {
            "target": {"driver": "grpc", "tls": True, "options": grpc_opts},
            "variants": {
                "tls": {},
                "mutual": {
                    "tls": {
                        "cert_file": pki.client_cert,
                        "key_file": pki.client_key,
                        "client_ca_file": pki.ca_file,
                    }
                },
                "wrong-ca": {"tls": {"ca_file": pki.ca_file}},
            },
            "workloads": {"echo": {"request_bytes": 100}},
            "load": {"requests": 20, "warmup": 2},
            "repeat": 1,
        }
    )
    for name in ("tls", "mutual"):
        doc = cases[name][0]
        assert doc["status"] == "ok" and doc["ok"] == 20, (name, doc["reason"])
    reason = cases["wrong-ca"][0]["reason"]
    assert "tls: certificate verify failed: " in reason, reason


def test_each_tls_failure_is_one_line_naming_its_cause(pki: Pki) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    hang = [sys.executable, "-c", HANG, "{port}"]
    expired = {"cert_file": pki.expired_cert, "key_file": pki.expired_key}
    result, cases = run(
        {
            "target": {"driver": "http", "tls": True},
            "variants": {
                "wrong-ca": {"tls": {"ca_file": pki.ca_file}},
                "mismatch": {"tls": {"server_name": "wrong.example"}},
                "expired": {
                    "tls": {"ca_file": pki.ca_file},
                    "server": {"command": http_server(expired)},
                },
                "not-tls": {"server": {"command": http_server(None)}},
                "client-refused": {
                    "tls": {"cert_file": pki.client_cert, "key_file": pki.client_key}
                },
                "hangs": {"tls": {"handshake_timeout_s": 1}, "server": {"command": hang}},
                "fine": {},
            },
            "workloads": {"noop": {}},
            "load": {"requests": 20, "warmup": 2, "timeout_s": 30},
            "repeat": 1,
        }
    )
    expected = {
        "wrong-ca": "tls: certificate verify failed: unable to get local issuer certificate",
        "mismatch": "tls: certificate verify failed: Hostname mismatch",
        "expired": "tls: certificate verify failed: certificate has expired",
        "not-tls": "the server does not speak TLS",
        "client-refused": "(did it refuse the client certificate?)",
        "hangs": "tls: handshake timed out after 1 s",
    }
    for variant, text in expected.items():
        doc = cases[variant][0]
        assert doc["status"] == "failed", variant
        assert text in doc["reason"] and "\n" not in doc["reason"], (variant, doc["reason"])
    assert cases["fine"][0]["status"] == "ok" and cases["fine"][0]["ok"] == 20
    # no server left behind (multiprocessing's own helpers stay, as they do for every run)
    leftover = [
        " ".join(p.cmdline())
        for p in psutil.Process().children(recursive=True)
        if p.pid not in before and p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    ]
    assert not [c for c in leftover if "rpcmeter.servers" in c or "held.append" in c], leftover
    assert "PRIVATE KEY" not in json.dumps(result)


@pytest.mark.parametrize("driver", ["http2", "grpc"])
def test_http2_and_grpc_over_tls_fail_as_http11_does(driver: str, pki: Pki) -> None:
    """HTTP/2 and gRPC run on the same TLS transport as HTTP/1.1: the same failures, each one
    line naming the same cause (``tls.handshake_timeout_s`` obeyed, not the connect timeout)."""
    hang = [sys.executable, "-c", HANG, "{port}"]
    target: dict[str, Any] = {"driver": "http", "tls": True, "options": {"http": "2"}}
    if driver == "grpc":
        target = {"driver": "grpc", "tls": True}
    _, cases = run(
        {
            "target": target,
            "variants": {
                "wrong-ca": {"tls": {"ca_file": pki.ca_file}},
                "mismatch": {"tls": {"server_name": "wrong.example"}},
                "not-tls": {"server": {"command": http_server(None)}},
                "hangs": {"tls": {"handshake_timeout_s": 1}, "server": {"command": hang}},
                "fine": {},
            },
            "workloads": {"echo": {"request_bytes": 10}},
            "load": {"requests": 20, "warmup": 2, "timeout_s": 30},
            "repeat": 1,
        }
    )
    expected = {
        "wrong-ca": "tls: certificate verify failed: unable to get local issuer certificate",
        "mismatch": "tls: certificate verify failed: Hostname mismatch",
        "not-tls": "the server does not speak TLS",
        "hangs": "tls: handshake timed out after 1 s",
    }
    for variant, text in expected.items():
        doc = cases[variant][0]
        assert doc["status"] == "failed", variant
        assert text in doc["reason"] and "\n" not in doc["reason"], (variant, doc["reason"])
    assert cases["fine"][0]["status"] == "ok" and cases["fine"][0]["ok"] == 20


def test_large_bodies_over_tls_both_ways() -> None:
    """Bodies far larger than a TLS record and than the socket's buffer: writes that do not go
    out at once wait for the socket, reads gather many records (replies validated)."""
    _, cases = run(
        {
            "validate": True,
            "target": {"driver": "http", "tls": True},
            "workloads": {
                "echo": {"request_bytes": 1_000_000},
                "payload": {"request_bytes": 10, "reply_bytes": 1_000_000},
            },
            "load": {"requests": 2, "warmup": 1, "connections": 2, "concurrency": 3},
        }
    )
    assert [doc["workload"] for doc in cases["default"]] == ["echo", "payload"]
    for doc in cases["default"]:
        assert doc["status"] == "ok", doc["reason"]
        assert doc["errors"] == {} and doc["ok"] == 6, doc["error_samples"]


HTTP11_ONLY = (
    "import socket, ssl, sys\n"
    "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[2], sys.argv[3])\n"
    "ctx.set_alpn_protocols(['http/1.1'])\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(16); held = []\n"
    "while True:\n"
    "    c, _ = s.accept(); c.settimeout(5)\n"
    "    try: held.append(ctx.wrap_socket(c, server_side=True))\n"
    "    except OSError: c.close()\n"
)


def test_http2_over_tls_by_alpn() -> None:
    """HTTP/2 over TLS: ALPN h2 with the built-in server (replies validated, connect and handshake
    timed per connection); a server offering only http/1.1 fails the case with reason alpn."""
    h1_only = [sys.executable, "-c", HTTP11_ONLY, "{port}", "{cert_file}", "{key_file}"]
    result, cases = run(
        {
            "validate": True,
            "target": {"driver": "http", "tls": True, "options": {"http": "2"}},
            "variants": {"h2": {}, "http11-only": {"server": {"command": h1_only}}},
            "workloads": {"echo": {"request_bytes": 300}},
            "load": {"requests": 40, "warmup": 3, "connections": 2, "concurrency": 4},
            "repeat": 1,
        }
    )
    doc = cases["h2"][0]
    assert doc["status"] == "ok", doc["reason"]
    assert doc["errors"] == {} and doc["ok"] == 160, doc["error_samples"]
    costs = doc["connections"]
    assert costs["opened"] == 2 and costs["handshake"]["histogram"]["count"] == 2
    assert costs["connect"]["mean_us"] > 0 and costs["handshake"]["mean_us"] > 0
    reason = cases["http11-only"][0]["reason"]
    assert cases["http11-only"][0]["status"] == "failed"
    assert "alpn: the server did not agree to h2 (ALPN: None)" in reason, reason
    assert "\n" not in reason
    assert "PRIVATE KEY" not in json.dumps(result)


@timing_sensitive
def test_http2_with_a_connection_per_request_over_tls_and_resumed() -> None:
    """HTTP/2 with load.reuse = false: every request opens a connection of its own (connect,
    handshake, request timed; counted as connects), over h2c, TLS and TLS with resumption."""
    result, _ = run(
        {
            "validate": True,
            "target": {"driver": "http", "tls": True, "options": {"http": "2"}},
            "variants": {"h2c": {"tls": False}, "tls": {}, "resumed": {"tls": {"resume": True}}},
            "workloads": {"echo": {"request_bytes": 300}},
            "load": {"requests": 30, "warmup": 3, "connections": 2, "concurrency": 2},
            "matrix": {"reuse": [True, False]},
            "repeat": 1,
        }
    )
    by_reuse = {(d["variant"], d["point"]["reuse"]): d for d in result["cases"]}
    for (variant, reuse), doc in by_reuse.items():
        assert doc["status"] == "ok", (variant, reuse, doc["reason"])
        assert doc["errors"] == {} and doc["ok"] == 60, (variant, reuse, doc["error_samples"])
    keep = by_reuse["tls", True]["connections"]
    assert keep["opened"] == 2 and not keep.get("per_request")
    fresh = by_reuse["tls", False]
    costs = fresh["connections"]
    assert costs["per_request"] and costs["opened"] == 60
    assert costs["handshake"]["histogram"]["count"] == 60 and "handshake_resumed" not in costs
    assert costs["request"]["histogram"]["count"] == 60
    assert fresh["counters"]["connects"] == 60
    assert "handshake" not in by_reuse["h2c", False]["connections"]
    resumed = by_reuse["resumed", False]["connections"]
    assert resumed["handshake_resumed"]["histogram"]["count"] >= 55
