"""CPU placement: counts, lists, fractions, validation, and cgroup quotas where allowed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from rpcmeter import model
from rpcmeter.errors import SuiteError
from rpcmeter.host.placement import (
    Cpus,
    apply_quotas,
    cpus_given,
    create_cgroup,
    format_cpus,
    join_cgroup,
    resolve,
)
from rpcmeter.plan.cases import plan_variants
from rpcmeter.plan.load import build_suite
from rpcmeter.result.parts import placement_doc, with_cgroups
from rpcmeter.suite.model import Placement
from tests.support.synthetic import written


def test_auto_keeps_server_and_clients_apart() -> None:
    cpus = resolve(Placement(), [0, 1, 2, 3])
    assert cpus.server == [0] and cpus.client == [1, 2, 3]
    assert cpus.server_quota is None and cpus.client_quota is None


def test_counts_pin_and_ask_for_a_quota() -> None:
    cpus = resolve(Placement(server_cpus=1, client_cpus=0.5), [0, 1, 2, 3])
    assert cpus.server == [0] and cpus.client == [3]
    assert cpus.server_quota == 1.0 and cpus.client_quota == 0.5
    assert cpus_given(cpus.client, cpus.client_quota) == 0.5
    assert cpus_given([2, 3], None) == 2.0


def test_explicit_lists_are_checked_against_available_cpus() -> None:
    assert resolve(Placement(server_cpus=[1], client_cpus=[0]), [0, 1]).server == [1]
    with pytest.raises(
        SuiteError, match=r"placement.client_cpus: CPU 7 is not available \(available: 0-1\)"
    ):
        resolve(Placement(server_cpus=[0], client_cpus=[1, 7]), [0, 1])


def test_bad_counts_are_suite_errors() -> None:
    with pytest.raises(SuiteError, match=r"placement\.server_cpus"):
        build_suite({"workloads": {"simple": {}}, "placement": {"server_cpus": 0}})


def test_format_cpus() -> None:
    assert format_cpus([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert format_cpus([3]) == "3"


def test_quota_disabled_is_recorded() -> None:
    quotas = apply_quotas(Cpus([0], [1], 1.0, None), enabled=False)
    assert quotas.server is None
    assert with_cgroups(model.Placement(), quotas).cgroup_notes == [
        "server CPU quota not applied: resources.cgroup is false"
    ]
    assert apply_quotas(Cpus([0], [1])).notes == []  # lists ask for no quota


@pytest.mark.timeout(30)
def test_cgroup_quota_limits_a_spinning_process() -> None:
    group, reason = create_cgroup(f"rpcmeter-test-{os.getpid()}", 0.3)
    if group is None:
        pytest.skip(f"no writable cgroup here: {reason}")
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 60: pass"]
    )
    try:
        assert join_cgroup(group, [proc.pid]) is None
        clock = ((~proc.pid) << 3) | 2
        c0, t0 = time.clock_gettime(clock), time.monotonic()
        time.sleep(1.0)
        share = (time.clock_gettime(clock) - c0) / (time.monotonic() - t0)
        assert share < 0.4  # 0.3 CPUs allowed (less when the machine is busy)
    finally:
        proc.kill()
        proc.wait()
        group.remove()
    assert not group.path.exists()


def test_the_placement_shown_is_the_one_applied_for_each_target_kind() -> None:
    from rpcmeter.host.placement import resolve
    from rpcmeter.reporters.build import placement_phrase

    def placed(raw: dict[str, Any]) -> dict[str, Any]:
        suite = build_suite(raw)
        return placement_doc(plan_variants(suite, resolve(suite.placement)), None).dump()

    two_cpus = {"placement": {"server_cpus": [0], "client_cpus": [1]}}
    rpyc = {"target": {"driver": "rpyc"}, "workloads": {"simple": {}}}
    command = {"target": {"driver": "command", "command": "true"}}
    # a server and its clients: pinned as resolved
    doc = placed({**rpyc, **two_cpus})
    assert doc["target"] == "server" and "by_variant" not in doc
    assert (
        placement_phrase(model.Placement.model_validate(doc)) == "server CPUs [0], client CPUs [1]"
    )
    # a whole command: unpinned unless server_cpus is set explicitly, and no clients
    doc = placed(command)
    assert doc["server_cpus"] is None and doc["client_cpus"] is None
    assert placement_phrase(model.Placement.model_validate(doc)) == "commands unpinned"
    assert (
        placement_phrase(model.Placement.model_validate(placed({**command, **two_cpus})))
        == "commands on CPUs [0]"
    )
    # a remote server: only the clients are placed
    remote = {**rpyc, "target": {"driver": "rpyc", "address": "127.0.0.1:1"}, **two_cpus}
    assert (
        placement_phrase(model.Placement.model_validate(placed(remote)))
        == "remote server, client CPUs [1]"
    )
    # a remote variant beside a local one: each as applied
    mixed = placed(
        {**rpyc, "variants": {"here": {}, "far": {"address": "127.0.0.1:1"}}, **two_cpus}
    )
    assert mixed["by_variant"]["far"] == {
        "target": "remote",
        "server_cpus": None,
        "client_cpus": [1],
        "server_quota_cpus": None,
        "client_quota_cpus": None,
    }
    assert placement_phrase(model.Placement.model_validate(mixed)) == (
        "server CPUs [0], client CPUs [1]; far: remote server, client CPUs [1]"
    )


def test_a_variant_may_have_its_own_placement() -> None:
    from rpcmeter.host.placement import resolve
    from rpcmeter.reporters.build import placement_phrase
    from rpcmeter.run.execute import run_suite

    suite = build_suite(
        {
            "target": {"driver": "rpyc", "transport": "unix"},
            "workloads": {"simple": {"requests": 20, "warmup": 0}},
            "placement": {"server_cpus": "none", "client_cpus": "none"},
            "variants": {
                "unpinned": {},
                "pinned": {"placement": {"server_cpus": [0], "client_cpus": [1]}},
            },
        }
    )
    doc = placement_doc(plan_variants(suite, resolve(suite.placement)), None)
    assert placement_phrase(doc) == (
        "server CPUs any, client CPUs any; pinned: server CPUs [0], client CPUs [1]"
    )
    result = written(run_suite(suite))
    placed = {c["variant"]: c["placement"] for c in result["cases"]}
    assert all(c["status"] == "ok" for c in result["cases"])
    assert placed["unpinned"]["server_cpus"] is None and placed["unpinned"]["client_cpus"] is None
    assert placed["pinned"]["server_cpus"] == [0] and placed["pinned"]["client_cpus"] == [1]
    bad = build_suite(
        {
            "target": {"driver": "rpyc"},
            "workloads": {"simple": {}},
            "variants": {"pinned": {"placement": {"server_cpus": [99]}}},
        }
    )
    with pytest.raises(SuiteError, match=r"variants\.pinned: placement\.server_cpus: CPU 99"):
        placement_doc(plan_variants(bad, resolve(bad.placement)), None)
