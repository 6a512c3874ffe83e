"""CPU and memory figures: the process-tree monitor on real processes, the case arithmetic, and
whole cases against real rpyc servers (busy-polling vs blocking, a known CPU cost per request, a
saturated client)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import psutil
import pytest

from rpcmeter.analysis.checks import OTHER_WORK_PCT, warnings_for
from rpcmeter.metrics.resources import CpuTimes, TreeMonitor, busy_pct
from rpcmeter.model import Client, Worker
from rpcmeter.plan.load import build_suite
from rpcmeter.result.parts import case_figures
from rpcmeter.run.execute import run_suite
from tests.support.marks import timing_sensitive
from tests.support.synthetic import parsed, written

BURN = "import time\nend = time.thread_time_ns() + int({s} * 1e9)\nwhile time.thread_time_ns() < end: pass\n"


def tree_of(proc: subprocess.Popen[bytes]) -> Any:
    def tree() -> list[psutil.Process]:
        try:
            root = psutil.Process(proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    return tree


@pytest.mark.timeout(30)
def test_tree_counts_children_that_exit_before_the_end() -> None:
    # the root starts a child that burns 0.3 s of CPU and exits (reaped by the root), then a
    # second one that burns 0.2 s and is still alive at the end mark
    script = textwrap.dedent(
        f"""
        import subprocess, sys, time
        subprocess.run([sys.executable, "-c", {BURN.format(s=0.3)!r}], check=True)
        child = subprocess.Popen([sys.executable, "-c", {BURN.format(s=0.2)!r} + "time.sleep(30)"])
        print("done", flush=True)
        time.sleep(30)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        monitor = TreeMonitor(tree_of(proc), interval_s=0.05).start()
        monitor.mark("go")
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"done"
        # wait until the second child has burned its CPU
        import time

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            monitor.mark("end")
            delta = monitor.between("go", "end")
            assert delta is not None
            if delta.total_s >= 0.5:
                break
            time.sleep(0.05)
        monitor.stop()
        delta = monitor.between("go", "end")
        assert delta is not None
        # 0.5 s burned by the children, plus interpreter start-ups (a few tens of ms each)
        assert 0.5 <= delta.total_s < 1.2
        assert monitor.peak_rss_bytes() > 5_000_000
    finally:
        for p in tree_of(proc)()[::-1]:
            p.kill()
        proc.wait()


def test_case_figures_per_request_and_utilisation() -> None:
    clients = [
        Client(cpu_user_s=0.3, cpu_sys_s=0.1, max_rss_bytes=1000),
        Client(cpu_user_s=0.2, cpu_sys_s=0.0, max_rss_bytes=2000),
    ]
    cpu, memory = case_figures(
        requests=1000,
        server=CpuTimes(0.8, 0.2, 2.0),
        server_peak_rss=5000,
        server_idle=CpuTimes(0.01, 0.0, 0.5),
        server_cpus=1.0,
        clients=clients,
        client_cpus=0.5,
        interval_s=2.0,
    )
    assert cpu.server_us_per_request == pytest.approx(1000.0)
    assert cpu.client_us_per_request == pytest.approx(600.0)
    assert cpu.server_util_pct == pytest.approx(50.0)
    assert cpu.client_util_pct == pytest.approx(60.0)
    assert cpu.server_idle_pct == pytest.approx(2.0)
    assert memory.dump() == {"server_peak_rss_bytes": 5000, "client_peak_rss_bytes": 3000}


def test_a_server_not_started_by_rpcmeter_is_unknown_not_zero() -> None:
    cpu, memory = case_figures(
        requests=100,
        server=None,
        server_peak_rss=None,
        server_idle=None,
        server_cpus=1.0,
        clients=[Client(cpu_user_s=0.1, cpu_sys_s=0.0, max_rss_bytes=10)],
        client_cpus=1.0,
        interval_s=1.0,
    )
    doc = cpu.dump()
    for key in ("server_user_s", "server_sys_s", "server_us_per_request", "server_idle_pct"):
        assert key in doc and doc[key] is None
    assert memory.server_peak_rss_bytes is None
    assert cpu.client_us_per_request == pytest.approx(1000.0)


def test_busy_pct_of_chosen_cpus() -> None:
    start = [(10.0, 100.0), (50.0, 100.0)]
    end = [(10.5, 101.0), (51.0, 101.0)]
    assert busy_pct(start, end, [0]) == pytest.approx(50.0)
    assert busy_pct(start, end, [1]) == pytest.approx(100.0)
    assert busy_pct(start, end, None) == pytest.approx(75.0)
    assert busy_pct(start, [(10.0, 100.1), (50.0, 100.0)], [0]) is None  # too short to tell


def run(raw: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "target": {"driver": "rpyc", "transport": "unix"},
        "load": {"requests": 100, "warmup": 5, "timeout_s": 60},
        "resources": {"idle_s": 0},
    }
    for key, value in raw.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and key in base else value
    return written(run_suite(build_suite(base)))


@pytest.mark.timeout(60)
def test_busy_polling_server_burns_cpu_while_idle_and_a_blocking_one_does_not() -> None:
    result = run(
        {
            "repeat": 1,
            "variants": {
                "block": {"options": {"wait": "block"}},
                "spin": {"options": {"wait": "spin"}},
            },
            "workloads": {"idle": {"kind": "idle", "duration_s": 0.6}},
            "placement": {"server_cpus": "none", "client_cpus": "none"},
        }
    )
    idle = {c["variant"]: c["cpu"]["server_idle_pct"] for c in result["cases"]}
    assert all(c["status"] == "ok" and c["requests"] == 0 for c in result["cases"])
    # a spinning server uses a core whenever it gets one: on a shared, busy machine (load average
    # above 10 on two cores) that may be only a tenth of one, still far above a server that
    # sleeps in select(), and above the warning's 5 %
    assert idle["spin"] > 5.0
    assert idle["block"] < 3.0
    assert idle["spin"] > 5 * idle["block"]
    assert any("'spin' used" in w and "idle" in w for w in result["warnings"])
    assert not any("'block' used" in w for w in result["warnings"])


@timing_sensitive
@pytest.mark.timeout(90)
def test_server_cpu_per_request_matches_known_spin() -> None:
    spin_us = 4000.0
    result = run(
        {
            "variants": {"default": {"options": {"spin_us": spin_us}}},
            "workloads": {"simple": {}},
            "load": {"requests": 80, "warmup": 3},
            "resources": {"idle_s": 0.2},
        }
    )
    (case,) = result["cases"]
    assert case["status"] == "ok", case["reason"]
    cpu = case["cpu"]
    assert cpu["server_us_per_request"] == pytest.approx(spin_us, rel=0.2)
    assert cpu["server_user_s"] > cpu["server_sys_s"]  # the spin is user time
    assert 0 < cpu["client_us_per_request"] < spin_us / 4
    assert cpu["server_idle_pct"] is not None and cpu["server_idle_pct"] < 5.0
    assert case["memory"]["server_peak_rss_bytes"] > 5_000_000
    assert case["memory"]["client_peak_rss_bytes"] > 5_000_000


@timing_sensitive
@pytest.mark.timeout(90)
def test_a_filled_client_cpu_triggers_a_load_generator_warning() -> None:
    cpus = sorted(psutil.Process().cpu_affinity() or [0])
    result = run(
        {
            "variants": {"default": {}},
            "workloads": {"simple": {}},
            "load": {"clients": 3, "threads": 4, "duration_s": 1.5, "requests": 1_000_000},
            # the server on the clients' CPU too: they fill it whatever else the machine runs
            # (on a CPU of its own, a server slowed by other work would leave the clients idle)
            "placement": {"server_cpus": [cpus[-1]], "client_cpus": [cpus[-1]]},
        }
    )
    (case,) = result["cases"]
    assert case["status"] == "ok", case["reason"]
    assert case["cpu"]["client_cpus_given"] == 1.0
    own = case["cpu"]["client_util_pct"]
    busiest = max(own, case["cpu"]["client_cpus_busy_pct"] or 0.0)
    assert busiest > 90.0, case["cpu"]
    # which warning rests on the measured figures: the clients' own use, or the CPU busy with
    # other work (here the server beside them, or other jobs on the machine)
    # (or neither, where the CPU was busy mostly with the clients themselves)
    found = warnings_for(parsed(result))
    other = (case["cpu"]["client_cpus_busy_pct"] or 0.0) - own
    if own > 90.0:
        assert any("load generator was saturated" in w for w in found), (case["cpu"], found)
    elif other >= OTHER_WORK_PCT:
        assert any("busy with other work" in w for w in found), (case["cpu"], found)
    else:
        assert not any("saturated" in w or "other work" in w for w in found), (case["cpu"], found)


def test_a_load_process_that_did_not_report_makes_the_client_totals_unknown() -> None:
    cpu, memory = case_figures(
        requests=100,
        server=CpuTimes(0.1, 0.0, 1.0),
        server_peak_rss=100,
        server_idle=None,
        server_cpus=1.0,
        clients=[
            Worker(cpu_user_s=0.1, cpu_sys_s=0.0, max_rss_bytes=10, status="ok"),
            Worker(cpu_user_s=None, cpu_sys_s=None, max_rss_bytes=None, status="lost"),
        ],
        client_cpus=2.0,
        interval_s=1.0,
    )
    assert cpu.client_user_s is None and cpu.client_us_per_request is None
    assert cpu.client_cpus_given == 2.0 and memory.client_peak_rss_bytes is None
    assert cpu.server_us_per_request == pytest.approx(1000.0)


def test_spans_between_readings_sum_to_the_whole_when_the_split_shifts() -> None:
    # a process's total is exact and its user/system split sampled at ticks, so one part can
    # shrink between readings while the total grows: the spans must still add up to the whole
    go, middle, end = CpuTimes(0.5, 0.5, 0.0), CpuTimes(0.45, 0.6, 1.0), CpuTimes(0.6, 0.6, 2.0)
    whole, first, second = end - go, middle - go, end - middle
    assert whole.total_s == pytest.approx(0.2)
    assert first.total_s == pytest.approx(0.05) and first.user_s == 0.0
    assert first.sys_s == pytest.approx(0.05)
    assert second.total_s == pytest.approx(0.15) and second.sys_s == 0.0
    assert first.total_s + second.total_s == pytest.approx(whole.total_s)
    assert (first.at, second.at) == (1.0, 1.0)
    # nothing spent reads as nothing, never less
    assert (go - middle).total_s == 0.0
