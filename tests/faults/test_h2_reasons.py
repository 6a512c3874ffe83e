"""HTTP/2 and gRPC (rpcmeter's own client) against servers that end or break connections: each
case's reason names the cause, once, in words, with no Python object in it. A server that ends
every connection with GOAWAY before the warmup's first request (it was ``RuntimeError: no running
event loop``); a handshake that never completes, reported at ``tls.handshake_timeout_s`` (it was
reported after 10 s as no SETTINGS); a header block hpack cannot decode (it showed
``<memory at 0x...>``); a malformed frame (``protocol_error: protocol_error:``); a reply without
``:status`` (``http_None`` under gRPC)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
HANG = (
    "import socket, sys\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(16); held = []\n"
    "while True: held.append(s.accept())\n"
)


def variant(driver: str, command: list[str], **extra: Any) -> dict[str, Any]:
    options = {"method": "/x.Y/Z", "request_hex": ""} if driver == "grpc" else {"http": "2"}
    return {"driver": driver, "options": options, "server": {"command": command}, **extra}


def hostile(driver: str, mode: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.h2.hostile", "{port}", mode]
    spec = variant(driver, command)
    spec["server"]["cwd"] = str(ROOT)
    return spec


@pytest.fixture(scope="module")
def cases() -> dict[str, dict[str, Any]]:
    """One run: each mode of the hostile server and a TLS server that never answers, under the
    gRPC driver's own client and the HTTP driver's HTTP/2 (variants named ``DRIVER MODE``)."""
    variants = {
        f"{driver} {mode}": hostile(driver, mode)
        for driver in ("grpc", "http")
        for mode in ("goaway_at_once", "bad_hpack", "malformed", "no_status")
    }
    hang = [sys.executable, "-c", HANG, "{port}"]
    for driver in ("grpc", "http"):
        variants[f"{driver} tls_hangs"] = variant(driver, hang, tls={"handshake_timeout_s": 1})
    suite = {
        "name": "reasons",
        "target": {"driver": "http", "transport": "tcp"},
        "variants": variants,
        "workloads": {"noop": {}},
        "load": {"requests": 20, "warmup": 5, "concurrency": 2, "timeout_s": 60},
        "resources": {"idle_s": 0},
        "repeat": 1,
    }
    found = {c["variant"]: c for c in written(run_suite(build_suite(suite)))["cases"]}
    for name, case in found.items():  # every reason one line, no Python object in it
        reason = case["reason"] or ""
        assert case["status"] == "failed", (name, case)
        assert "\n" not in reason and "<memory at" not in reason and "Error:" not in reason
    return found


def reasons(cases: dict[str, dict[str, Any]], mode: str) -> list[str]:
    return [cases[f"{driver} {mode}"]["reason"] or "" for driver in ("grpc", "http")]


def test_a_server_that_ends_every_connection_at_once(cases: dict[str, dict[str, Any]]) -> None:
    for reason in reasons(cases, "goaway_at_once"):  # from the warmup's first request
        assert (
            "UNAVAILABLE: the server ended a new connection (GOAWAY (NO_ERROR)) before any "
            "stream" in reason.replace("unavailable:", "UNAVAILABLE:")
        ), reason


def test_a_stalled_handshake_ends_at_the_handshake_timeout(
    cases: dict[str, dict[str, Any]],
) -> None:
    for reason in reasons(cases, "tls_hangs"):
        assert "cannot connect: tls: handshake timed out after 1 s" in reason, reason


def test_an_undecodable_header_block_is_shown_as_bytes(cases: dict[str, dict[str, Any]]) -> None:
    for reason in reasons(cases, "bad_hpack"):
        assert (
            "compression_error: bad header block of 1 bytes (3f): Unable to decode HPACK integer "
            "representation" in reason
        ), reason


def test_the_kind_is_said_once(cases: dict[str, dict[str, Any]]) -> None:
    for reason in reasons(cases, "malformed"):
        assert reason.endswith(": protocol_error: DATA on stream 0, which is not open"), reason
        assert "protocol_error: protocol_error" not in reason


def test_a_reply_without_status(cases: dict[str, dict[str, Any]]) -> None:
    for driver, kind in (("grpc", "grpc_malformed"), ("http", "http2_malformed")):
        case = cases[f"{driver} no_status"]
        assert case["errors"] == {kind: 40}, (driver, case["errors"])  # not http_None, http_0
        assert case["error_samples"][kind].startswith("a reply without"), case["error_samples"]
