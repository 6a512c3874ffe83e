"""The tls module alone: suite validation of ``tls`` and ``load.reuse``, run certificates and
fingerprints, handshake errors as one line, resumption, connection-cost histograms."""

from __future__ import annotations

import pickle
import socket
import ssl
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from rpcmeter.errors import SuiteError
from rpcmeter.metrics.connections import ConnectionCosts
from rpcmeter.net.tls import (
    ClientTls,
    ResumingContext,
    RunCertificates,
    TlsError,
    TlsSettings,
    client_context,
    for_case,
    probe_handshake,
    tls_error,
)
from rpcmeter.plan.load import build_suite
from rpcmeter.result.parts import connections_of, tls_of


def suite_error(raw: dict[str, Any], where: str = "s.toml") -> str:
    with pytest.raises(SuiteError) as info:
        build_suite({"workloads": {"noop": {}}, **raw}, where)
    return str(info.value)


def test_tls_true_a_table_and_false_per_variant() -> None:
    suite = build_suite(
        {
            "target": {"driver": "http", "tls": True},
            "variants": {"a": {}, "b": {"tls": False}, "c": {"tls": {"resume": True}}},
            "load": {"reuse": False},
            "workloads": {"noop": {}},
        }
    )
    a, b, c = (suite.tls_of(v) for v in "abc")
    assert a is not None and a.verify and not a.resume
    assert b is None
    assert c is not None and c.resume and c.verify
    assert suite.load.reuse is False


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"target": {"driver": "http", "tls": "yes"}}, "s.toml: target.tls: expected true, false"),
        ({"target": {"driver": "http", "tls": {"verfy": False}}}, "target.tls: verfy: unknown key"),
        (
            {"target": {"driver": "http", "tls": {"verify": "maybe"}}},
            "target.tls: verify: Input should be a valid boolean (got 'maybe')",
        ),
        (
            {"target": {"driver": "http", "tls": {"cert_file": "c.pem"}}},
            "cert_file and key_file go together",
        ),
        ({"target": {"driver": "http", "tls": {"alpn": []}}}, "alpn: expected a non-empty list"),
        (
            {"target": {"driver": "http", "tls": {"ca_file": "/no/such/ca.pem"}}},
            "s.toml: target.tls.ca_file: no readable file '/no/such/ca.pem'",
        ),
        (
            {"target": {"driver": "http"}, "variants": {"x": {"driver": "rpyc", "tls": True}}},
            "variants.x.tls: driver 'rpyc' has no TLS",
        ),
        (
            {"target": {"driver": "grpc"}, "load": {"reuse": False}},
            "load.reuse: driver 'grpc' cannot open a connection per request",
        ),
        (
            {"target": {"driver": "grpc", "tls": {"verify": False}}},
            "tls.verify: the grpc driver (grpcio) cannot skip verification",
        ),
    ],
)
def test_tls_errors_are_one_line_naming_key_and_value(raw: dict[str, Any], expected: str) -> None:
    message = suite_error(raw)
    assert expected in message and "\n" not in message


def test_run_certificates_files_fingerprints_and_cleanup(tmp_path: Path) -> None:
    run = RunCertificates()
    try:
        key = Path(run.key_file)
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert stat.S_IMODE(Path(run.ca_file).parent.stat().st_mode) == 0o700
        cert = x509.load_pem_x509_certificate(Path(run.cert_file).read_bytes())
        assert cert.fingerprint(hashes.SHA256()).hex() == run.cert_fingerprint
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "localhost" in names.get_values_for_type(x509.DNSName)
        settings = TlsSettings(resume=True)
        client, server = for_case(settings, run, managed=True)
        assert client.ca_file == run.ca_file and server is not None
        assert server.option() == {"cert_file": run.cert_file, "key_file": run.key_file}
        # mutual TLS: the server requires client certificates issued by the run's CA
        mutual = TlsSettings(cert_file=run.cert_file, key_file=run.key_file)
        _, server = for_case(mutual, run, managed=True)
        assert server is not None and server.option()["client_ca_files"] == [run.ca_file]
        # a remote server: the system's CAs, no server side
        remote, none = for_case(settings, run, managed=False)
        assert remote.ca_file is None and none is None
        doc = tls_of(settings, run, managed=True).dump()
        assert doc["server_cert_sha256"] == run.cert_fingerprint and doc["resume"] is True
        assert not any("key" in str(v).lower() for v in doc.values())
    finally:
        run.close()
    assert not key.exists()


class TlsEchoServer:
    """A blocking TLS server in a thread: each connection reads one line, writes it back, closes.
    Records whether each handshake resumed a session."""

    def __init__(self, run: RunCertificates) -> None:
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(run.cert_file, run.key_file)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.resumed: list[bool] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            try:
                with self.ctx.wrap_socket(raw, server_side=True) as conn:
                    self.resumed.append(bool(conn.session_reused))
                    conn.sendall(conn.recv(100))
            except (OSError, ssl.SSLError):
                continue

    def close(self) -> None:
        self.sock.close()


def test_resuming_context_offers_the_last_session() -> None:
    run = RunCertificates()
    server = TlsEchoServer(run)
    try:
        tls = ClientTls(TlsSettings(resume=True), run.ca_file, None)
        ctx = client_context(tls, ["http/1.1"])
        assert isinstance(ctx, ResumingContext)
        for _ in range(3):
            with ctx.wrap_socket(
                socket.create_connection(("127.0.0.1", server.port)), server_hostname="127.0.0.1"
            ) as s:
                s.sendall(b"hi")
                assert s.recv(100) == b"hi"  # the session ticket arrived before the reply
                ctx.remember(s)
        assert server.resumed == [False, True, True]
        # without resume, a plain context: every handshake is a full one
        assert type(client_context(ClientTls(TlsSettings(), run.ca_file, None))) is ssl.SSLContext
    finally:
        server.close()
        run.close()


def test_handshake_errors_name_their_cause(tmp_path: Path) -> None:
    run = RunCertificates()
    server = TlsEchoServer(run)
    other = tmp_path / "other.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    try:
        wrong_ca = ClientTls(TlsSettings(), str(other), None)
        err = probe_handshake(wrong_ca, "127.0.0.1", server.port)
        assert isinstance(err, TlsError) and type(err).__name__ == "tls"
        assert str(err).startswith("certificate verify failed: unable to get local issuer")
        mismatch = ClientTls(TlsSettings(), run.ca_file, "other.example")
        assert "Hostname mismatch" in str(probe_handshake(mismatch, "127.0.0.1", server.port))
        assert (
            probe_handshake(ClientTls(TlsSettings(), run.ca_file, None), "127.0.0.1", server.port)
            is None
        )
        unverified = ClientTls(TlsSettings(verify=False), None, "other.example")
        assert probe_handshake(unverified, "127.0.0.1", server.port) is None
    finally:
        server.close()
        run.close()
    assert str(tls_error(TimeoutError(), 2.0)).startswith("handshake timed out after 2 s")
    wrong = ssl.SSLError(1, "x")
    wrong.reason = "WRONG_VERSION_NUMBER"
    assert str(tls_error(wrong)) == "wrong version number: the server does not speak TLS"


def test_connection_costs_merge_reset_and_round_trip() -> None:
    a = ConnectionCosts(per_request=True)
    for ns in (1_000, 2_000, 3_000):
        a.record("connect", ns)
        a.record("handshake", ns * 10)
    a.record("handshake_resumed", 5_000)
    b = pickle.loads(pickle.dumps(a))  # as a client's report crosses its pipe
    assert b.per_request and b.connections == 3
    b.merge(a)
    doc = connections_of(b)
    handshake, resumed, connect = doc.handshake, doc.handshake_resumed, doc.connect
    assert handshake is not None and resumed is not None and connect is not None
    assert doc.opened == 6 and handshake.histogram is not None
    assert handshake.histogram.count == 6 and doc.timing("handshake") is handshake
    assert resumed.histogram is not None and resumed.histogram.count == 2
    assert connect.mean_us == pytest.approx(2.0, rel=0.01)
    assert doc.request is None and "request" not in doc.dump()
    assert doc.dump()["handshake"]["histogram"] == handshake.histogram.to_dict()  # type: ignore[index, call-overload]
    b.reset()
    assert b.connections == 0 and connections_of(b).dump() == {"per_request": True, "opened": 0}
