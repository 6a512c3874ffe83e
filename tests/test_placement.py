"""CPU placement: counts, lists, fractions, validation, and cgroup quotas where allowed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rpcmeter.errors import SuiteError
from rpcmeter.placement import (
    Cpus,
    apply_quotas,
    cpus_given,
    create_cgroup,
    format_cpus,
    join_cgroup,
    resolve,
)
from rpcmeter.suite import Placement, build_suite


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
    assert quotas.as_dict()["cgroup_notes"] == [
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
