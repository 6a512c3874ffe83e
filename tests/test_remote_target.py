"""Remote targets: ``address`` instead of a server command; rpcmeter starts no server, measures
the one already listening, and reports the server's resources as unknown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rpcmeter.drivers import driver_class
from rpcmeter.errors import SuiteError
from rpcmeter.metrics.network_rtt import HANDSHAKES, NetworkRtt, measurable
from rpcmeter.net.endpoints import Endpoint, remote_endpoint
from rpcmeter.plan.load import build_suite
from rpcmeter.reporters.build import build
from rpcmeter.reporters.terminal import render
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import ServerProcess, free_port, new_endpoint
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module", params=["tcp", "unix"])
def running(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    ep = new_endpoint(request.param)
    with ServerProcess(driver_class("rpyc").server_command(ep, {}), ep):
        yield ep


def suite(address: str, **target: Any) -> Any:
    return build_suite(
        {
            "target": {"driver": "rpyc", "address": address, **target},
            "workloads": {"simple": {}},
            "load": {"clients": 2, "requests": 100, "warmup": 2},
        }
    )


def address_of(ep: Endpoint) -> str:
    return ep.path if ep.path is not None else f"{ep.host}:{ep.port}"


def test_remote_endpoint_forms() -> None:
    assert remote_endpoint("10.1.2.3:8080") == Endpoint("tcp", "10.1.2.3", 8080)
    assert remote_endpoint("tcp://example.org:80") == Endpoint("tcp", "example.org", 80)
    assert remote_endpoint("[::1]:9000") == Endpoint("tcp", "::1", 9000)
    assert remote_endpoint("/run/app.sock") == Endpoint("unix", path="/run/app.sock")
    assert remote_endpoint("unix:/run/app.sock", "ipc") == Endpoint("ipc", path="/run/app.sock")
    for bad in ("example.org", "host:http", "host:0", ":80", "unix:"):
        with pytest.raises(ValueError):
            remote_endpoint(bad)


def test_suite_rejects_bad_addresses() -> None:
    with pytest.raises(SuiteError, match=r"target\.address: expected 'host:port'"):
        suite("nowhere")
    with pytest.raises(SuiteError, match=r"target\.address: .*no server command"):
        suite("127.0.0.1:9", server={"command": "sleep 1"})
    with pytest.raises(SuiteError, match=r"variants\.v\.address"):
        build_suite(
            {
                "variants": {"v": {"address": "h:99999"}},
                "workloads": {"simple": {}},
            }
        )


def test_measures_a_server_it_did_not_start(running: Endpoint) -> None:
    result = written(run_suite(suite(address_of(running))))
    (case,) = result["cases"]
    assert case["status"] == "ok", case["reason"]
    assert case["requests"] == case["ok"] == 200
    assert case["server_managed"] is False
    assert case["endpoint"] == running.describe()
    # rpcmeter cannot see a server it did not start: its CPU and memory are unknown, not zero
    for key in ("server_user_s", "server_sys_s", "server_us_per_request", "server_idle_pct"):
        assert case["cpu"][key] is None, key
    assert case["memory"]["server_peak_rss_bytes"] is None
    assert case["cpu"]["client_us_per_request"] > 0


def test_no_server_at_the_address_fails_the_case() -> None:
    result = written(run_suite(suite(f"127.0.0.1:{free_port()}")))
    (case,) = result["cases"]
    assert case["status"] == "failed"
    assert "no server answers at tcp://127.0.0.1:" in case["reason"]


def test_network_round_trip_and_breakdown_of_a_remote_target() -> None:
    """A remote TCP target: the network's round trip from TCP handshakes before and after the
    case, and a breakdown whose round trip is that one (no no-op requests are sent)."""
    ep = new_endpoint("tcp")
    with ServerProcess(driver_class("http").server_command(ep, {}), ep):
        s = build_suite(
            {
                "target": {"driver": "http", "address": f"{ep.host}:{ep.port}"},
                "workloads": {"small": {"kind": "factorial", "n": 5}},
                "load": {"requests": 200, "warmup": 2},
                "breakdown": {},
            }
        )
        result = run_suite(s)
    (case,) = written(result)["cases"]
    assert case["status"] == "ok", case["reason"]
    net = case["network_rtt_us"]
    assert net["count"] == 2 * HANDSHAKES and 0 < net["p50"] < case["latency"]["p50_us"]
    assert net["before"] > 0 and net["after"] > 0
    b = case["breakdown"]
    assert b["rtt_basis"] == "network" and b["rtt_requests"] == 0
    assert b["rtt_us"]["p50"] == net["p50"]
    assert b["server_us"]["count"] == b["overhead_us"]["count"] == 200
    # latency = network round trip + queue + server compute + overhead, in means
    parts = net["p50"] + b["queue_us"]["mean"] + b["server_us"]["mean"] + b["overhead_us"]["mean"]
    assert parts == pytest.approx(case["latency"]["mean_us"], rel=0.02)
    text = render(build(result), width=200)
    assert "network RTT" in text and "latency -" in text


def test_handshakes_with_a_closed_port_give_a_reason() -> None:
    network = NetworkRtt(Endpoint("tcp", "127.0.0.1", free_port()), count=3)
    reason = network.measure("before")
    assert reason is not None and reason.startswith("network round trip (before the case) to ")
    assert network.before.count == 0
    assert not measurable(Endpoint("unix", path="/tmp/x.sock"))
