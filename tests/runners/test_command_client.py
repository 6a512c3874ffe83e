"""Command clients: a ``command`` variant in a suite whose target starts a server runs its command
against the server rpcmeter starts for it, beside the target's own variants, counted per request."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.cli import main
from rpcmeter.drivers import driver_class
from rpcmeter.errors import SuiteError
from rpcmeter.host.placement import Cgroup, resolve
from rpcmeter.model import Result
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.net.tls import RunCertificates, ServerTls
from rpcmeter.plan.cases import plan_variants
from rpcmeter.plan.load import load_suite
from rpcmeter.reporters import markdown
from rpcmeter.reporters.build import build
from rpcmeter.reporters.terminal import render
from rpcmeter.result.parts import placement_doc
from rpcmeter.runners.command import measure
from rpcmeter.servers.process import ServerProcess, new_endpoint
from rpcmeter.suite.model import Runs

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
    kinds = {plot.kind for plot in build(typed).plots["noop"]}
    assert "command" not in kinds and "spectrum" in kinds
    text = render(build(typed), width=160)
    table = text.split("noop · command clients", 1)[1].split("\n\n", 1)[0]
    row = next(line for line in table.splitlines() if line.strip().startswith("python client ipc"))
    assert row.split()[3:5] == ["3", f"{PER_RUN + 1:,}"]  # runs, requests per run
    assert "noop · command clients" in markdown.render(build(typed))  # a detail table there too


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
            r"server needs the number of requests one run of it makes \(or a client_report",
        ),
        (
            ("[variants.rpcmeter]\n", "[variants.rpcmeter]\nrequests_per_run = 5\n"),
            r"variants\.rpcmeter\.requests_per_run: only for a variant with driver = \"command\"",
        ),
        (
            ("tcp://{host}:{port}", "tcp://{hots}:{port}"),
            r"unknown placeholder \{hots\} \(known: concurrency, connections, cpus, duration_s, host, port, python, requests, requests_per_run, socket\)",
        ),
        (
            ('transport = "ipc"\n', 'transport = "udp"\n'),
            r"transport: driver 'zmq' has no transport 'udp'",
        ),
        (  # the ZeroMQ server has no URLs, and no TLS
            ("tcp://{host}:{port}", "{scheme}://{host}:{port}"),
            r"unknown placeholder \{scheme\} \(known: concurrency, connections, cpus, duration_s, host, port, python, requests, requests_per_run, socket\)",
        ),
        (
            ("tcp://{host}:{port}", "tcp://{host}:{port}{ca_file}"),
            r"variants\.python client\.command: unknown placeholder \{ca_file\} \(known: "
            r"concurrency, connections, cpus, duration_s, host, port, python, requests, requests_per_run, "
            r"socket; \{ca_file\} and \{server_name\} need tls\)",
        ),
        (
            ("[target]\n", "[target]\ntls = true\n"),
            r"target\.tls: driver 'zmq' has no TLS",
        ),
        (  # a command paces itself: no schedule to send on, for the suite or one workload
            ("[load]\n", '[load]\nmode = "open"\nrate = 100\n'),
            r"load\.mode: variant 'python client' is a command client: its command paces itself",
        ),
        (
            ('kind = "noop"\n', 'kind = "noop"\nmode = "open"\nrate = 100\n'),
            r"workloads\.noop\.mode: variant 'python client' is a command client",
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
    plans = plan_variants(suite, resolve(suite.placement))
    assert plans["python client"].target == "client" and plans["rpcmeter"].target == "server"


# ---- HTTP targets: placement, TLS placeholders, a server at an address -------------------------

# an HTTP client of the built-in server: {requests_per_run} noop requests, each reply read (with
# TLS it trusts CA only, and checks the certificate against HOST); then it appends where it ran
# (its CPUs and its cgroups) to the file named by its first argument
HTTP_CLIENT = (
    "import json, os, ssl, sys, urllib.request as u; "
    "handlers = [u.ProxyHandler({{}})] + ([u.HTTPSHandler("
    "context=ssl.create_default_context(cafile=CA))] if '{scheme}' == 'https' else []); "
    "get = u.build_opener(*handlers).open; "
    "[get('{scheme}://HOST:{port}/noop').read() for _ in range({requests_per_run})]; "
    "open(sys.argv[1], 'a').write(json.dumps([sorted(os.sched_getaffinity(0)), "
    "open('/proc/self/cgroup').read()]) + '\\n')"
)
CLEARTEXT = HTTP_CLIENT.replace("HOST", "{host}").replace("CA", "None")
TRUSTING = HTTP_CLIENT.replace("HOST", "{server_name}").replace("CA", "'{ca_file}'")


def http_suite(tmp_path: Path, target: str, client: str, more: str = "") -> Path:
    """A suite of a command client (``client``, python -c) against an HTTP target (``target``:
    more target keys; ``more``: more variants)."""
    command = json.dumps(["{python}", "-c", client, str(tmp_path / "placed.jsonl")])
    return write_suite(
        tmp_path,
        f"""
name = "http command client"
repeat = 1

[target]
driver = "http"
{target}

[variants."python client"]
driver = "command"
requests_per_run = {PER_RUN}
command = {command}
{more}

[workloads.noop]
kind = "noop"

[runs]
warmup = 1
count = 2
timeout_s = 30

[placement]
client_cpus = 1   # a count: one CPU, and a cgroup quota of one CPU

[resources]
idle_s = 0
""",
    )


def run_result(suite: Path, tmp_path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The run's result document and its cases by variant."""
    out = tmp_path / "result.json"
    main(["run", str(suite), "--no-store", "-o", str(out)])
    result: dict[str, Any] = json.loads(out.read_text())
    return result, {c["variant"]: c for c in result["cases"]}


def placed(tmp_path: Path) -> list[tuple[list[int], str]]:
    """Where each run of the client ran: its CPUs and its /proc/self/cgroup."""
    lines = (tmp_path / "placed.jsonl").read_text().splitlines()
    return [(cpus, cgroups) for cpus, cgroups in map(json.loads, lines)]


def test_a_command_client_runs_on_the_client_cpus_and_in_the_client_cgroup(
    tmp_path: Path,
) -> None:
    suite = http_suite(tmp_path, "", CLEARTEXT)
    result, cases = run_result(suite, tmp_path)
    case = cases["python client"]
    assert case["status"] == "ok", case["reason"]
    assert case["requests"] == case["ok"] == 2 * PER_RUN
    assert "'http://127.0.0.1:" in case["command"]["argv"][2]
    placement = result["environment"]["placement"]
    assert placement["target"] == "client" and "by_variant" not in placement
    client_cpus = resolve(load_suite(suite).placement).client
    assert placement["client_cpus"] == case["placement"]["client_cpus"] == client_cpus
    runs = placed(tmp_path)
    assert len(runs) == 3  # the warmup run too
    assert all(cpus == client_cpus for cpus, _ in runs)
    group = placement["client_cgroup"]
    if group is None:  # no writable cgroup here: the quota is skipped, and the reason recorded
        assert placement["cgroup_notes"][0].startswith("client CPU quota of 1 CPUs not applied")
        return
    # every run started inside the clients' quota cgroup (v1: the cpu hierarchy; v2: unified)
    assert group["cpus"] == 1.0
    name = os.path.basename(group["path"])
    for _, cgroups in runs:
        where = [
            path
            for _, controllers, path in (line.split(":", 2) for line in cgroups.splitlines())
            if (controllers == "" if group["version"] == 2 else "cpu" in controllers.split(","))
        ]
        assert where and where[0].endswith("/" + name), cgroups
    assert not case["placement"].get("notes")


def test_a_command_client_of_a_tls_server_gets_the_run_ca_and_the_server_name(
    tmp_path: Path,
) -> None:
    untrusting = TRUSTING.replace("cafile='{ca_file}'", "")  # the system's CAs only
    suite = http_suite(
        tmp_path,
        "tls = true",
        TRUSTING,
        f"""
[variants."no ca"]
driver = "command"
requests_per_run = {PER_RUN}
command = {json.dumps(["{python}", "-c", untrusting, str(tmp_path / "other.jsonl")])}
""",
    )
    result, cases = run_result(suite, tmp_path)
    case = cases["python client"]
    assert case["status"] == "ok", case["reason"]
    assert case["ok"] == 2 * PER_RUN
    argv = case["command"]["argv"][2]
    # the run's CA (made for it, deleted with it) and the name its certificate carries
    ca_file = argv.split("cafile='", 1)[1].split("'", 1)[0]
    assert ca_file.endswith("/ca.pem") and not os.path.exists(ca_file)
    assert "'https://127.0.0.1:" in argv
    assert result["environment"]["tls"]["python client"]["ca"] == "made for the run"
    # the same client trusting only the system's CAs fails: the server did speak TLS
    refused = cases["no ca"]
    assert refused["status"] == "failed"
    assert "CERTIFICATE_VERIFY_FAILED" in refused["reason"]


@pytest.fixture
def tls_server() -> Iterator[tuple[Endpoint, RunCertificates]]:
    """The built-in HTTP server serving TLS, started here (not by rpcmeter), and its CA."""
    certs = RunCertificates()
    endpoint = new_endpoint("tcp")
    tls = ServerTls(certs.cert_file, certs.key_file).option()
    try:
        with ServerProcess(driver_class("http").server_command(endpoint, {"tls": tls}), endpoint):
            yield endpoint, certs
    finally:
        certs.close()


def test_a_command_client_of_a_server_at_an_address(
    tmp_path: Path, tls_server: tuple[Endpoint, RunCertificates]
) -> None:
    endpoint, certs = tls_server
    target = f'address = "127.0.0.1:{endpoint.port}"\ntls = {{ ca_file = "{certs.ca_file}" }}'
    result, cases = run_result(http_suite(tmp_path, target, TRUSTING), tmp_path)
    case = cases["python client"]
    assert case["status"] == "ok", case["reason"]
    assert case["server_managed"] is False and case["endpoint"] == endpoint.describe()
    # the command was given the address and the suite's own CA file
    argv = case["command"]["argv"][2]
    assert f"'https://127.0.0.1:{endpoint.port}/noop'" in argv
    assert f"cafile='{certs.ca_file}'" in argv
    assert case["requests"] == case["ok"] == 2 * PER_RUN
    # the server is nobody's to measure here: unknown, not zero; the command is the client
    assert case["cpu"]["server_us_per_request"] is None
    assert case["cpu"]["client_us_per_request"] > 0
    # placed as a remote case: the client side only
    placement = result["environment"]["placement"]
    assert placement["target"] == "remote" and placement["server_cpus"] is None
    assert placement["client_cpus"] == case["placement"]["client_cpus"]
    assert all(cpus == placement["client_cpus"] for cpus, _ in placed(tmp_path))
    assert "· remote server, client CPUs [" in render(build(Result.from_json(result)), width=300)


def test_ca_file_for_a_server_at_an_address_is_the_suites_own(tmp_path: Path) -> None:
    suite = http_suite(tmp_path, 'address = "127.0.0.1:9"\ntls = true', TRUSTING)
    with pytest.raises(SuiteError) as err:
        load_suite(suite)
    assert str(err.value) == (
        f"{suite}: variants.python client.command: {{ca_file}}: rpcmeter makes no CA for the "
        "server at 127.0.0.1:9 (not started by it): set tls.ca_file to the CA that issued its "
        "certificate"
    )
    cleartext = load_suite(http_suite(tmp_path, 'address = "127.0.0.1:9"', CLEARTEXT))
    placement = placement_doc(plan_variants(cleartext, resolve(cleartext.placement)), None)
    assert placement.target == "remote" and placement.server_cpus is None


def test_a_run_that_cannot_join_its_cgroup_runs_and_says_why(tmp_path: Path) -> None:
    """A cgroup the command cannot join (here: one that does not exist) is no failure: the runs
    go on, pinned, and the outcome says why they are not in it."""
    missing = Cgroup(tmp_path / "no-such-cgroup", 2, 1.0)
    cpus = sorted(os.sched_getaffinity(0))[-1:]
    out = tmp_path / "cpus.txt"
    outcome = measure(
        [
            sys.executable,
            "-c",
            f"import os; open({str(out)!r}, 'a').write(str(sorted(os.sched_getaffinity(0))))",
        ],
        env=dict(os.environ),
        cwd=None,
        runs=Runs(warmup=0, count=2, timeout_s=30),
        cpus=cpus,
        cgroup=missing,
    )
    assert outcome.failure is None and len(outcome.runs) == 2
    assert out.read_text() == str(cpus) * 2
    note = outcome.placement_note
    assert note is not None and note.startswith("cannot move process ")
    assert note.endswith(f"into {missing.path}: No such file or directory")
