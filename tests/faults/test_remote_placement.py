"""A server at an ``address`` is one rpcmeter neither started nor placed: no warning about its CPU
pinning, while the clients' own placement is still checked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rpcmeter.analysis.checks import placement
from rpcmeter.analysis.derived import derive
from rpcmeter.drivers import driver_class
from rpcmeter.model import Placement
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import ServerProcess, new_endpoint
from tests.support.synthetic import completed

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def running() -> Iterator[Endpoint]:
    ep = new_endpoint("tcp")
    with ServerProcess(driver_class("rpyc").server_command(ep, {}), ep):
        yield ep


def test_no_pinning_warning_for_a_server_rpcmeter_did_not_start(running: Endpoint) -> None:
    suite = build_suite(
        {
            "target": {"driver": "rpyc", "address": f"{running.host}:{running.port}"},
            "workloads": {"simple": {}},
            "load": {"requests": 50, "warmup": 2},
            "placement": {"client_cpus": [0]},  # pinned clients, whatever the machine
            "resources": {"idle_s": 0},
        }
    )
    result = run_suite(suite)
    (case,) = result.cases
    assert case.status == "ok", case.reason
    assert result.environment.placement is not None
    assert result.environment.placement.target == "remote"
    warnings = derive(result).warnings
    assert not [w for w in warnings if "pinning" in w or "share CPU" in w], warnings


def test_unpinned_clients_of_a_remote_server_are_still_named() -> None:
    remote = Placement(target="remote", server_cpus=None, client_cpus=None)
    doc = {"environment": {"placement": remote.model_dump()}, "cases": [{}]}
    (w,) = placement(completed(doc))
    assert w.startswith("the clients ran without CPU pinning") and "server" not in w
    pinned = {"environment": {"placement": {**remote.model_dump(), "client_cpus": [1]}}}
    assert placement(completed({**pinned, "cases": [{}]})) == []
