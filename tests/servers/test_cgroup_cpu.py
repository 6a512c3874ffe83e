"""The server's CPU comes from its cgroup's accounting where it has one: a process that leaves the
server's tree (double fork, reparented to init) and burns CPU there is counted, which the process
tree walk cannot see."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from rpcmeter.metrics.resources import TreeMonitor
from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import ServerProcess, new_endpoint
from tests.servers.test_cgroup import needs_cgroups
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)

SPIN_S = 0.5  # CPU seconds the detached worker burns
# an HTTP server whose first request double-forks a worker out of its tree that burns SPIN_S
SERVER = Path(__file__).parents[2] / "examples" / "detached_worker_server.py"


def server_command(port: str, done: Path) -> list[str]:
    return [
        sys.executable,
        str(SERVER),
        "--port",
        port,
        "--spin-s",
        str(SPIN_S),
        "--done",
        str(done),
    ]


def wait_for(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


@needs_cgroups
def test_cgroup_counts_a_detached_worker_the_tree_walk_misses(tmp_path: Path) -> None:
    done = tmp_path / "done"
    endpoint = new_endpoint("tcp")
    with ServerProcess(
        server_command(str(endpoint.port), done), endpoint, stop_timeout_s=2.0
    ) as server:
        assert server.accounting is not None, "no cgroup with CPU accounting for the server"
        monitor = TreeMonitor(server.tree, 0.05, server.cpu_times).start()
        try:
            monitor.mark("go")
            with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert s.recv(100).startswith(b"HTTP/1.1 200")
            wait_for(done)
            time.sleep(0.1)  # the worker exits right after writing the file
            monitor.mark("end")
        finally:
            monitor.stop()
    cgroup = monitor.between("go", "end")
    tree = monitor.marks["end"] - monitor.marks["go"]
    assert cgroup is not None and cgroup.source == "cgroup"
    assert tree.source == "processes"
    assert cgroup.total_s >= 0.8 * SPIN_S, (cgroup, tree)
    # the worker was never below the server: the tree walk never saw its CPU
    assert tree.total_s < 0.5 * SPIN_S, (cgroup, tree)
    assert cgroup.total_s - tree.total_s >= 0.6 * SPIN_S, (cgroup, tree)


@needs_cgroups
def test_a_case_reports_the_cpu_of_its_servers_detached_worker(tmp_path: Path) -> None:
    done = tmp_path / "done"
    command = server_command("{port}", done)
    suite = build_suite(
        {
            "target": {"driver": "http", "transport": "tcp", "server": {"command": command}},
            "repeat": 1,
            "workloads": {"noop": {}},
            "resources": {"idle_s": 0},
            "load": {"requests": 10**9, "duration_s": 4.0, "warmup": 0, "clients": 1},
        }
    )
    [case] = written(run_suite(suite))["cases"]
    assert case["status"] == "ok", case.get("reason")
    assert done.exists(), "the worker did not finish its spin within the case"
    cpu = case["cpu"]
    assert cpu["server_source"] == "cgroup"
    assert cpu["server_user_s"] + cpu["server_sys_s"] >= 0.8 * SPIN_S, cpu
