"""Command clients: a ``command`` variant in a suite whose target starts a server runs its command
against the server rpcmeter starts for it, beside the target's own variants, counted per request."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.cli import main
from rpcmeter.errors import SuiteError
from rpcmeter.execute import target_kind
from rpcmeter.model import Result
from rpcmeter.reporters import markdown
from rpcmeter.reporters.plots import all_plots
from rpcmeter.reporters.terminal import render
from rpcmeter.suite import load_suite

pytestmark = pytest.mark.timeout(180)

PER_RUN = 50
# a REQ client of the built-in ZeroMQ server: noop requests (op b"n"), every reply checked to
# carry the server's 8-byte compute time, {requests_per_run} of them
CLIENT = (
    "import zmq; s = zmq.Context().socket(zmq.REQ); s.connect('{address}'); "
    "[(s.send(b'n'), s.recv()) for _ in range({requests_per_run} - 1)]; "
    "s.send(b'n'); assert len(s.recv()) >= 8"
)

MIXED = f"""
name = "mixed"
baseline = "rpcmeter"
repeat = 1

[target]
driver = "zmq"

[variants.rpcmeter]

[variants."python client"]
driver = "command"
requests_per_run = {PER_RUN + 1}
command = ["{{python}}", "-c", "{CLIENT.replace("{address}", "tcp://{host}:{port}")}"]

[variants."python client ipc"]
driver = "command"
transport = "ipc"
requests_per_run = {PER_RUN + 1}
command = ["{{python}}", "-c", "{CLIENT.replace("{address}", "ipc://{socket}")}"]

[workloads.noop]
kind = "noop"

[load]
requests = 200

[runs]
warmup = 0
count = 3
timeout_s = 30

[resources]
idle_s = 0
"""


def write_suite(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(textwrap.dedent(body))
    return path


def test_mixed_suite_runs_a_command_client_against_the_server_it_starts(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, MIXED)
    out = tmp_path / "result.json"
    assert main(["run", str(suite), "--no-store", "-o", str(out), "--width", "160"]) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    by_variant = {c["variant"]: c for c in result["cases"]}
    assert set(by_variant) == {"rpcmeter", "python client", "python client ipc"}
    for name, transport in (("python client", "tcp"), ("python client ipc", "ipc")):
        case = by_variant[name]
        assert case["status"] == "ok", case["reason"]
        assert case["kind"] == "noop" and case["endpoint"].startswith(f"{transport}://")
        # the command was given the address of the server started for its case
        address = case["endpoint"].removeprefix("tcp://").removeprefix("ipc://")
        assert address.rpartition(":")[2] in case["command"]["argv"][-1]
        runs = case["runs"]
        assert len(runs) == 3 and all(r["exit_code"] == 0 for r in runs)
        # counted in requests: runs x requests_per_run, over the runs' own wall time
        assert case["requests"] == case["ok"] == 3 * (PER_RUN + 1)
        assert case["params"]["requests_per_run"] == PER_RUN + 1
        wall = sum(r["wall_s"] for r in runs)
        assert case["throughput_rps"] == pytest.approx(case["ok"] / wall)
        assert case["command"]["per_request_us"] == pytest.approx(wall / case["ok"] * 1e6)
        # a run's wall time is no request's latency: none recorded
        assert case["latency"] is None and case["histogram"] is None
        # the command is the client (its CPU per request); the server was watched as for any case
        cpu = sum(r["user_s"] + r["sys_s"] for r in runs)
        assert case["cpu"]["client_us_per_request"] == pytest.approx(cpu / case["ok"] * 1e6)
        assert case["cpu"]["server_us_per_request"] > 0
        assert case["memory"]["server_peak_rss_bytes"] > 0
        # placed as the clients of the other variants are
        assert case["placement"] == by_variant["rpcmeter"]["placement"]
    # a target kind of its own, placed as a server case: the run has one placement
    placement = result["environment"]["placement"]
    assert placement["target"] == "server" and "by_variant" not in placement
    # compared with rpcmeter's client in the same units only: no latency metric
    compared = {
        r["metric"] for r in result["comparisons"]["rows"] if r["variant"] == "python client"
    }
    assert compared == {"throughput", "server_cpu", "client_cpu"}
    typed = Result.from_json(result)
    # plotted as a request workload (its command clients without latency), not as whole commands
    kinds = {plot.kind for plot in all_plots(typed)["noop"]}
    assert "command" not in kinds and "spectrum" in kinds
    text = render(typed, width=160)
    table = text.split("noop · command clients", 1)[1].split("\n\n", 1)[0]
    row = next(line for line in table.splitlines() if line.strip().startswith("python client ipc"))
    assert row.split()[3:5] == ["3", f"{PER_RUN + 1:,}"]  # runs, requests per run
    assert "noop · command clients" in markdown.render(typed)  # a detail table there too


def test_a_command_client_that_cannot_reach_the_server_fails_its_case(tmp_path: Path) -> None:
    body = MIXED.replace("tcp://{host}:{port}", "tcp://{host}:1").replace(
        "timeout_s = 30", "timeout_s = 3"
    )
    suite = write_suite(tmp_path, body)
    out = tmp_path / "result.json"
    main(["run", str(suite), "--no-store", "-o", str(out)])
    case = next(c for c in json.loads(out.read_text())["cases"] if c["variant"] == "python client")
    assert case["status"] == "failed"
    assert "timed out after 3 s" in case["reason"]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            ("requests_per_run = 51\n", ""),
            r'variants\."python client"\.requests_per_run: a command run against the \'zmq\' '
            r"server needs the number of requests one run of it makes",
        ),
        (
            ("[variants.rpcmeter]\n", "[variants.rpcmeter]\nrequests_per_run = 5\n"),
            r"variants\.rpcmeter\.requests_per_run: only for a variant with driver = \"command\"",
        ),
        (
            ("tcp://{host}:{port}", "tcp://{hots}:{port}"),
            r"unknown placeholder \{hots\} \(known: host, port, python, requests_per_run, socket\)",
        ),
        (
            ('transport = "ipc"\n', 'transport = "udp"\n'),
            r"transport: driver 'zmq' has no transport 'udp'",
        ),
    ],
)
def test_command_client_suite_errors(tmp_path: Path, change: tuple[str, str], error: str) -> None:
    old, new = change
    assert old in MIXED
    with pytest.raises(SuiteError, match=error):
        load_suite(write_suite(tmp_path, MIXED.replace(old, new, 1)))


def test_a_command_client_takes_the_workloads_of_the_target(tmp_path: Path) -> None:
    """Workloads are the server's: a command client does not narrow them to ``command``."""
    suite = load_suite(write_suite(tmp_path, MIXED.replace('kind = "noop"', 'kind = "echo"')))
    assert suite.workloads["noop"].kind == "echo"
    assert suite.command_client("python client") and not suite.command_client("rpcmeter")
    assert suite.server_driver_of("python client") == "zmq"
    assert target_kind(suite, "python client") == "client"
    assert target_kind(suite, "rpcmeter") == "server"
