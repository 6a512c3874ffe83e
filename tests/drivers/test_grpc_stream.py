"""gRPC streaming calls (workload ``stream``): every mode against the built-in server with both
clients (rpcmeter's HTTP/2 client and grpcio's as the cross-check: same messages, same counts),
the open loop, bad suites, and servers that break streams (counted by kind, nothing left)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from rpcmeter.drivers.base import DriverContext
from rpcmeter.drivers.grpc import GrpcUnavailable, error_for
from rpcmeter.drivers.grpc_stream import Call, GrpcStreamH2
from rpcmeter.errors import SuiteError
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols.grpc import frame
from rpcmeter.protocols.h2.connection import new_stream
from rpcmeter.reporters.terminal import render
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import new_endpoint
from rpcmeter.suite.workloads import StreamParams
from tests.support.marks import timing_sensitive
from tests.support.synthetic import view_of, written

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 6
LOOPS, STREAMS = 3, 8  # concurrency, streams per loop
MODES: dict[str, dict[str, Any]] = {
    "server": {"mode": "server"},
    "client": {"mode": "client"},
    "ping_pong": {"mode": "bidi", "pattern": "ping-pong"},
    "flood": {"mode": "bidi", "pattern": "flood"},
}


def stream_suite(
    variants: dict[str, Any], workloads: dict[str, Any], **load: Any
) -> dict[str, Any]:
    settings = {
        "requests": STREAMS,
        "warmup": 2,
        "connections": 1,
        "concurrency": LOOPS,
        "timeout_s": 60,
        **load,
    }
    return {
        "name": "streams",
        "target": {"driver": "grpc", "transport": "tcp"},
        "variants": variants,
        "workloads": workloads,
        "load": {k: v for k, v in settings.items() if v is not None},
        "repeat": 1,
        "validate": True,
    }


def leftover(name: str) -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if name in " ".join(p.cmdline())]


def test_every_mode_with_both_clients_same_messages_and_figures() -> None:
    workloads = {
        name: {"kind": "stream", "messages": MESSAGES, "request_bytes": 30, "reply_bytes": 70, **p}
        for name, p in MODES.items()
    }
    variants = {"h2": {"options": {"client": "h2"}}, "grpcio": {"options": {"client": "grpcio"}}}
    result = written(run_suite(build_suite(stream_suite(variants, workloads))))
    streams = LOOPS * STREAMS
    seen: dict[str, dict[str, Any]] = {}
    for case in result["cases"]:
        assert case["status"] == "ok", case["reason"]
        assert case["errors"] == {}, case["errors"]
        assert case["ok"] == streams
        s = case["stream"]
        mode = case["workload"]
        out_n, in_n = {"server": (1, MESSAGES), "client": (MESSAGES, 1)}.get(
            mode, (MESSAGES, MESSAGES)
        )
        assert (s["messages_out"], s["messages_in"]) == (out_n * streams, in_n * streams)
        assert s["messages"] == MESSAGES * streams
        assert s["bytes_out_per_message"] == 30 and s["bytes_in_per_message"] == 70
        first = Histogram.from_dict(s["first_message_histogram"])
        each = Histogram.from_dict(s["message_histogram"])
        assert first.count == streams
        samples = {"server": MESSAGES - 1, "client": 1, "ping_pong": MESSAGES}
        assert each.count == samples.get(mode, MESSAGES - 1) * streams
        # the first message comes before the stream ends; a gap or round trip fits in a stream
        whole = Histogram.from_dict(case["histogram"])
        assert first.max <= whole.max * 1.001 and each.max <= whole.max * 1.001
        assert s["messages_per_s"] == pytest.approx(s["streams_per_s"] * MESSAGES)
        assert s["cpu_us_per_message"]["client"] > 0
        assert s["cpu_us_per_message"]["server"] > 0
        key = (mode, s["messages_out"], s["messages_in"], each.count, first.count)
        seen.setdefault(mode, {})[case["variant"]] = key
    assert len(seen) == 4
    for mode, by_client in seen.items():  # the two clients agree on every count
        assert by_client["h2"] == by_client["grpcio"], mode
    text = render(view_of(result), width=200)
    for mode in MODES:
        assert f"{mode} · per message" in text


def test_large_messages_span_frames_and_windows() -> None:
    # 200 kB messages: each spans many DATA frames, and a stream's requests (2 MB) exceed the
    # server's flow-control window, so the connection sends them as the window opens
    big = {"messages": 10, "request_bytes": 200_000, "reply_bytes": 200_000}
    workloads = {
        "server": {"kind": "stream", "mode": "server", **big, "request_bytes": 10},
        "client": {"kind": "stream", "mode": "client", **big, "reply_bytes": 10},
        "ping_pong": {"kind": "stream", "mode": "bidi", **big},
    }
    result = written(
        run_suite(build_suite(stream_suite({"h2": {}}, workloads, requests=3, warmup=0)))
    )
    for case in result["cases"]:
        assert case["status"] == "ok" and case["errors"] == {}, (case["reason"], case["errors"])
        s = case["stream"]
        assert s["messages"] == 10 * LOOPS * 3
        assert s["bytes_in_per_message"] == (10 if case["workload"] == "client" else 200_000)


@timing_sensitive
def test_open_loop_starts_streams_at_the_rate() -> None:
    workloads = {"server": {"kind": "stream", "messages": 4, "mode": "server"}}
    result = written(
        run_suite(
            build_suite(
                stream_suite(
                    {"h2": {}},
                    workloads,
                    requests=None,
                    duration_s=1.0,
                    mode="open",
                    rate=100,
                    late_ms=50,
                )
            )
        )
    )
    (case,) = result["cases"]
    assert case["status"] == "ok", case["reason"]
    loop = case["open_loop"]
    assert loop["sent"] == loop["scheduled"] == 100
    assert loop["achieved_rps"] == pytest.approx(100, rel=0.1)
    assert case["stream"]["messages_in"] == 4 * case["ok"]
    assert case["latency_uncorrected"] is not None


def test_bad_stream_suites_are_one_line_errors() -> None:
    bad = [
        ({"kind": "stream", "mode": "server", "pattern": "flood"}, "for mode"),
        ({"kind": "stream", "mode": "sideways"}, "mode"),
        ({"kind": "stream", "messages": 0}, "messages"),
    ]
    for workload, words in bad:
        with pytest.raises(SuiteError, match=words) as info:
            build_suite(stream_suite({"h2": {}}, {"w": workload}))
        assert "\n" not in str(info.value)
    suite = stream_suite({"h2": {}}, {"w": {"kind": "stream"}})
    suite["target"]["driver"] = "http"
    with pytest.raises(SuiteError, match="stream"):
        build_suite(suite)


def test_broken_streams_are_counted_by_kind_and_nothing_is_left() -> None:
    def hostile(mode: str) -> dict[str, Any]:
        return {
            "options": {"method": "/x.Y/Stream", "request_hex": "", "call_timeout_s": 0.3},
            "server": {
                "command": [sys.executable, "-m", "tests.drivers.hostile_stream", "{port}", mode],
                "cwd": str(ROOT),
            },
        }

    kinds = {
        "silent": "grpc:DEADLINE_EXCEEDED",
        "reset": "rst_stream:INTERNAL_ERROR",
        "big": "message_too_large",
    }
    suite = stream_suite(
        {mode: hostile(mode) for mode in kinds},
        {"server": {"kind": "stream", "mode": "server", "messages": 5}},
        requests=3,
        warmup=0,
        concurrency=2,
    )
    suite["validate"] = False
    result = written(run_suite(build_suite(suite)))
    for case in result["cases"]:
        kind = kinds[case["variant"]]
        # counted, and the loops went on to the end: every stream failed, so the case did too
        assert case["errors"] == {kind: 6}, (case["variant"], case["errors"])
        assert case["status"] == "failed" and kind in case["reason"], case["reason"]
        assert case["ok"] == 0
        assert "\n" not in case["error_samples"][kind]
    assert leftover("tests.drivers.hostile_stream") == []


def test_figures_merge_exactly_across_client_processes() -> None:
    workloads = {"server": {"kind": "stream", "mode": "server", "messages": 5}}
    result = written(
        run_suite(build_suite(stream_suite({"h2": {}}, workloads, clients=2, requests=4, warmup=1)))
    )
    (case,) = result["cases"]
    assert case["status"] == "ok", case["reason"]
    streams = 2 * LOOPS * 4  # the warmup's streams are not counted
    s = case["stream"]
    assert case["ok"] == s["streams"] == streams
    assert s["messages_in"] == 5 * streams
    assert Histogram.from_dict(s["first_message_histogram"]).count == streams
    assert Histogram.from_dict(s["message_histogram"]).count == 4 * streams
    assert not any(k.startswith("stream.") for k in case.get("counters", {}))


@pytest.mark.parametrize("piece", [1, 2, 4, 5, 7, 16_384])
def test_reply_messages_split_anywhere_are_reassembled(piece: int) -> None:
    """Reply messages fed to the HTTP/2 client in DATA payloads of ``piece`` bytes (prefixes and
    bodies split anywhere): each message is counted once, whole, and nothing is left over."""
    params = StreamParams(mode="server", messages=4)
    ctx = DriverContext(new_endpoint("tcp"), params)
    client = GrpcStreamH2(
        ctx, "/x.Y/Z", b"", None, (), None, error_for, GrpcUnavailable, params=params
    )
    sizes = [0, 3, 70_000, 5]
    wire = b"".join(frame(bytes([i]) * n) for i, n in enumerate(sizes))
    ended: list[BaseException | None] = []
    call = Call(lambda server_ns, error: ended.append(error), None, 0)  # type: ignore[arg-type]
    stream = new_stream(client.on_end, call)
    for i in range(0, len(wire), piece):
        client.on_data(stream, wire[i : i + piece])
    assert ended == [] and call.got == 4 and call.parts == []
    assert client.figures.counts["bytes_in"] == sum(sizes)


@pytest.mark.parametrize("client", ["h2", "grpcio"])
def test_a_stream_is_read_to_its_end_and_messages_is_an_expectation(
    client: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that ends every stream after 2 replies, through the command line: without
    ``messages`` every stream is read to its end and measured; with ``messages = 5`` too, and
    the mismatch is counted and said in one line, not a failure of every stream."""
    from rpcmeter.cli import main

    command = [sys.executable, "-m", "tests.drivers.hostile_stream", "{port}", "short"]
    suite = tmp_path / "short.toml"
    suite.write_text(
        f"""
name = "short streams"
repeat = 1
[target]
driver = "grpc"
transport = "tcp"
options = {{ method = "/x.Y/Stream", request_hex = "", client = "{client}" }}
[target.server]
command = {json.dumps(command)}
cwd = {json.dumps(str(ROOT))}
[workloads.any]
kind = "stream"
mode = "server"
[workloads.five]
kind = "stream"
mode = "server"
messages = 5
[load]
requests = 3
warmup = 1
concurrency = 2
connections = 1
[resources]
idle_s = 0
"""
    )
    out = tmp_path / "short.json"
    assert main(["run", str(suite), "-o", str(out), "--no-store", "--width", "300"]) == 0
    shown = capsys.readouterr().out
    cases = {c["workload"]: c for c in json.loads(out.read_text())["cases"]}
    for case in cases.values():
        assert case["status"] == "ok" and case["errors"] == {}, case["reason"]
        assert case["ok"] == 6 and case["stream"]["messages_in"] == 2 * 6
    assert cases["any"]["stream"]["count_mismatch"] == 0
    assert cases["five"]["stream"]["count_mismatch"] == 6
    assert (
        "default · five: 6 of 6 streams ended with another number of replies than messages = 5 "
        "expected (2 per stream on average)" in shown
    )
    assert "default · any: 6 of 6 streams" not in shown
    assert leftover("tests.drivers.hostile_stream") == []
