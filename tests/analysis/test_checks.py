"""Measurement warnings: each rule fires on the result that calls for it, and stays quiet on a
clean one."""

from __future__ import annotations

import copy
from typing import Any

from rpcmeter.analysis.checks import min_requests, warnings_for
from rpcmeter.metrics.histogram import Histogram
from tests.support.synthetic import completed


def case(variant: str = "a", rps: float = 1000.0, n: int = 5000, **cpu: Any) -> dict[str, Any]:
    h = Histogram()
    for i in range(n):
        h.record(100_000 + i)
    return {
        "variant": variant,
        "workload": "simple",
        "kind": "simple",
        "point": {"threads": 1},
        "status": "ok",
        "requests": n,
        "errors": {},
        "throughput_rps": rps,
        "latency": h.summary_us(),
        "histogram": h.to_dict(),
        "cpu": {"client_util_pct": 40.0, "server_idle_pct": 0.5, "client_cpus_given": 1.0, **cpu},
        "memory": {},
    }


def clean() -> dict[str, Any]:
    return {
        "suite": {"variants": {"a": {}}, "matrix_keys": ["threads"]},
        "environment": {
            "cpus_available": [0, 1],
            "cpu_governor": {"performance": [0, 1]},
            "placement": {"server_cpus": [0], "client_cpus": [1]},
            "resolved_hosts": {"localhost": ["127.0.0.1"]},
        },
        "cases": [case(), case()],
        "warnings": [],
    }


def with_changes(**env: Any) -> dict[str, Any]:
    r = clean()
    r["environment"].update(env)
    return r


def test_a_clean_result_has_no_warnings() -> None:
    assert warnings_for(completed(clean())) == []


def test_saturated_load_generator() -> None:
    r = clean()
    r["cases"][1]["cpu"]["client_util_pct"] = 97.0
    (w,) = warnings_for(completed(r))
    assert "load generator was saturated in 1 of 2 cases" in w
    assert "97 %" in w and "placement.client_cpus" in w


def test_a_spinning_client_using_its_cpu_up_is_not_called_saturated() -> None:
    # load.wait = "spin": the clients poll without sleeping, so they use their CPU up anyway
    r = clean()
    r["cases"][1]["cpu"]["client_util_pct"] = 99.0
    r["suite"]["load"] = {"wait": "spin"}
    assert warnings_for(completed(r)) == []
    # set per matrix point (over the suite's load) or per workload table
    r["suite"]["load"] = {"wait": "block"}
    r["cases"][1]["point"]["wait"] = "spin"
    assert warnings_for(completed(r)) == []
    r["cases"][1]["point"]["wait"] = "block"
    assert "load generator was saturated in 1 of 2 cases" in warnings_for(completed(r))[0]
    del r["cases"][1]["point"]["wait"]
    r["suite"]["workloads"] = {"simple": {"kind": "simple", "wait": "spin"}}
    assert warnings_for(completed(r)) == []


def test_client_cpus_busy_with_other_work_are_told_from_a_saturated_client() -> None:
    r = clean()
    r["cases"][0]["cpu"]["client_cpus_busy_pct"] = 99.0
    r["cases"][0]["cpu"]["client_util_pct"] = 6.0
    (w,) = warnings_for(completed(r))
    assert w.startswith("the clients' CPUs were busy with other work in 1 of 2 cases")
    assert "99 % busy, the clients' own share 6 %" in w and "saturated" not in w
    # a client that used its CPU up is the load generator's limit, whatever else ran
    r["cases"][0]["cpu"]["client_util_pct"] = 95.0
    (w,) = warnings_for(completed(r))
    assert "load generator was saturated in 1 of 2 cases" in w and "95 %" in w
    assert "other work" not in w


def test_client_cpus_busy_mostly_with_the_clients_themselves_are_not_busy_with_other_work() -> None:
    # 93 % busy, 87 % of it the clients' own: 6 points of other work is not a crowded CPU
    r = clean()
    r["cases"][0]["cpu"]["client_cpus_busy_pct"] = 93.0
    r["cases"][0]["cpu"]["client_util_pct"] = 87.0
    assert warnings_for(completed(r)) == []
    r["cases"][0]["cpu"]["client_cpus_busy_pct"] = 97.0  # 10 points: other work
    (w,) = warnings_for(completed(r))
    assert w.startswith("the clients' CPUs were busy with other work in 1 of 2 cases")


def test_governor_not_performance() -> None:
    (w,) = warnings_for(completed(with_changes(cpu_governor={"powersave": [0, 1]})))
    assert "'powersave'" in w and "CPUs 0-1" in w and "performance" in w
    assert (
        warnings_for(completed(with_changes(cpu_governor=None))) == []
    )  # unreadable: nothing to say


def test_not_pinned_and_shared_cpus() -> None:
    (w,) = warnings_for(
        completed(with_changes(placement={"server_cpus": [0], "client_cpus": None}))
    )
    assert w.startswith("the clients ran without CPU pinning")
    (w,) = warnings_for(
        completed(with_changes(placement={"server_cpus": [0, 1], "client_cpus": [1]}))
    )
    assert "share CPU(s) 1" in w


def test_localhost_resolving_to_ipv6_first() -> None:
    (w,) = warnings_for(completed(with_changes(resolved_hosts={"localhost": ["::1", "127.0.0.1"]})))
    assert "'localhost' resolves to ::1 (IPv6) first" in w and "127.0.0.1" in w


def test_spread_between_repetitions() -> None:
    r = clean()
    r["cases"][1]["throughput_rps"] = 1300.0  # CV ~ 18 %
    (w,) = warnings_for(completed(r))
    assert "vary by more than 10 %" in w and "throughput CV" in w
    r["cases"][1]["throughput_rps"] = 1050.0  # CV ~ 3.4 %
    assert warnings_for(completed(r)) == []


def test_too_few_requests_for_p99() -> None:
    assert min_requests(99.0) == 1000
    assert min_requests(99.9) == 10000
    assert min_requests(50.0) == 20
    r = clean()
    r["cases"] = [case(n=400), case(n=500)]  # 900 in the cell
    (w,) = warnings_for(completed(r))
    assert "fewer than 1,000 requests" in w and "900" in w
    r["cases"] = [case(n=400), case(n=600)]
    assert warnings_for(completed(r)) == []


def test_idle_burn() -> None:
    r = clean()
    r["cases"].append(copy.deepcopy(r["cases"][0]) | {"variant": "b"})
    r["cases"][-1]["cpu"]["server_idle_pct"] = 97.0
    warnings = warnings_for(completed(r))
    assert any("variant 'b' used 97 % of a core while idle" in w for w in warnings)
    assert not any("variant 'a'" in w for w in warnings)


def test_failed_cases_are_ignored() -> None:
    r = clean()
    r["cases"][1]["cpu"]["server_idle_pct"] = 97.0
    r["cases"][1]["status"] = "failed"
    assert warnings_for(completed(r)) == []
