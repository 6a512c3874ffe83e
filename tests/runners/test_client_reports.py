"""A command client's own report (``client_report``, rpcmeter.runners.client_reports): ghz's JSON
read into the case (requests, statuses, requests/s, latencies), and the run's load shape handed
to the command (``{connections}``, ``{concurrency}``, ``{duration_s}``, ``{requests}``).

The "ghz" here is a ZeroMQ client of the built-in server that prints its report in ghz's JSON
layout: the tests need neither Go nor ghz."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.errors import SuiteError
from rpcmeter.plan.load import load_suite
from rpcmeter.reporters.build import build
from rpcmeter.reporters.columns import grpc_bench
from rpcmeter.run.execute import run_suite
from rpcmeter.runners.client_reports import ReportError, parse_ghz

pytestmark = pytest.mark.timeout(120)


def ghz_report(latencies_ns: list[int], failed: int = 0, **more: Any) -> dict[str, Any]:
    details = [{"latency": v, "status": "OK", "error": ""} for v in latencies_ns]
    details += [{"latency": 7, "status": "Unavailable", "error": "closing"}] * failed
    return {
        "count": len(details),
        "total": 2_000_000_000,
        "rps": len(details) / 2,
        "statusCodeDistribution": {
            "OK": len(latencies_ns),
            **({"Unavailable": failed} if failed else {}),
        },
        "errorDistribution": {"rpc error: code = Unavailable desc = transport is closing": failed}
        if failed
        else {},
        "details": details,
        **more,
    }


def test_a_ghz_report_gives_requests_statuses_and_every_latency() -> None:
    text = "Summary:\n  Count: 5\n" + json.dumps(ghz_report([1_000, 2_000, 3_000, 4_000], 1))
    report = parse_ghz(text)
    assert (report.requests, report.ok) == (5, 4)
    assert report.errors == {"grpc:UNAVAILABLE": 1}
    assert report.error_sample.startswith("rpc error: code = Unavailable")
    assert report.elapsed_s == 2.0
    assert report.hist.count == 4 and report.hist.mean == pytest.approx(2_500, rel=1e-3)


def test_a_status_in_two_words_is_counted_as_rpcmeter_names_it() -> None:
    doc = ghz_report([1_000])
    doc["statusCodeDistribution"]["DeadlineExceeded"] = 2
    doc["count"] = 3
    assert parse_ghz(json.dumps(doc)).errors == {"grpc:DEADLINE_EXCEEDED": 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Error: connection refused\n", "no JSON report in the output"),
        ('{"count": 1}', "not a ghz JSON report"),
        (json.dumps({**ghz_report([1_000]), "details": []}), "has no details"),
    ],
)
def test_output_without_a_report_is_an_error(text: str, message: str) -> None:
    with pytest.raises(ReportError, match=message):
        parse_ghz(text)


# a ZeroMQ client of the built-in server making {requests} requests over {concurrency} sockets
# for at most {duration_s} s, its report in ghz's JSON layout (one request failed, as ghz counts
# the calls cut off at its deadline)
FAKE_GHZ = """
import json, sys, time, zmq
address, count, sockets, duration = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
assert sockets == 3 and duration == 0.5, (sockets, duration)
context = zmq.Context()
pool = [context.socket(zmq.REQ) for _ in range(sockets)]
for s in pool:
    s.connect(address)
details, start = [], time.perf_counter_ns()
for i in range(count):
    s, t = pool[i % sockets], time.perf_counter_ns()
    s.send(b"n"); s.recv()
    details.append({"latency": time.perf_counter_ns() - t, "status": "OK", "error": ""})
total = time.perf_counter_ns() - start
details.append({"latency": 1, "status": "Unavailable", "error": "closing"})
print("ghz summary lines before the report")
print(json.dumps({"count": count + 1, "total": total, "details": details,
                  "statusCodeDistribution": {"OK": count, "Unavailable": 1},
                  "errorDistribution": {"transport is closing": 1}}))
"""

SUITE = """
name = "reported"
repeat = 1

[target]
driver = "zmq"

[variants.rpcmeter]

[variants."rpcmeter (ghz)"]
driver = "command"
client_report = "ghz"
command = ["{python}", "fake_ghz.py", "tcp://{host}:{port}", "{requests}", "{concurrency}", "{duration_s}"]

[workloads.noop]
kind = "noop"

[load]
requests = 40
concurrency = 3
connections = 3
duration_s = 0.5

[runs]
warmup = 1
count = 2
timeout_s = 30

[resources]
idle_s = 0
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "fake_ghz.py").write_text(FAKE_GHZ)
    path = tmp_path / "suite.toml"
    path.write_text(text)
    return path


def test_a_reported_command_client_stands_beside_rpcmeter_s_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_suite(load_suite(write(tmp_path, SUITE)))
    own, reported = result.cases
    assert own.status == "ok" and reported.status == "ok", reported.reason
    assert (reported.requests, reported.ok) == (82, 80)  # 2 measured runs of 40 (+1 cut off)
    assert reported.errors == {"grpc:UNAVAILABLE": 2}
    assert reported.histogram is not None and reported.histogram.count == 80
    assert reported.latency is not None and reported.latency.p99_us is not None
    assert reported.command is not None and reported.command.client_report == "ghz"
    assert reported.command.requests_per_run is None
    assert reported.runs is not None and len(reported.runs) == 2
    assert (reported.throughput_rps or 0) > 0 and reported.cpu is not None
    assert reported.cpu.server_user_s is not None  # the server was watched through its runs

    grids = grpc_bench(build(result))
    table, check = grids
    assert {row[0] for row in table.rows} == {"rpcmeter", "rpcmeter (ghz)"}
    assert [row[:2] for row in check.rows] == [["rpcmeter", "rpcmeter"], ["", "ghz"]]


def test_a_reported_client_whose_requests_mostly_failed_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    fails = FAKE_GHZ.replace('"status": "OK"', '"status": "Canceled"').replace(
        '"statusCodeDistribution": {"OK": count, "Unavailable": 1}',
        '"statusCodeDistribution": {"Canceled": count, "Unavailable": 1}',
    )
    path = write(tmp_path, SUITE)
    (tmp_path / "fake_ghz.py").write_text(fails)
    reported = run_suite(load_suite(path)).cases[1]
    assert reported.status == "failed"
    assert reported.reason == "82 of 82 requests failed (grpc:CANCELED: 80, grpc:UNAVAILABLE: 2)"


def test_duration_s_needs_a_duration(tmp_path: Path) -> None:
    text = SUITE.replace("duration_s = 0.5\n", "")
    with pytest.raises(SuiteError, match=r"\{duration_s\}: workload 'noop' runs a count"):
        load_suite(write(tmp_path, text))


def test_client_report_is_for_command_clients(tmp_path: Path) -> None:
    text = SUITE.replace("[variants.rpcmeter]\n", '[variants.rpcmeter]\nclient_report = "ghz"\n')
    with pytest.raises(SuiteError, match=r"variants\.rpcmeter\.client_report: only for a variant"):
        load_suite(write(tmp_path, text))
