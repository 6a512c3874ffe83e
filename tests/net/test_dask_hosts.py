"""Dask across hosts: the scheduler in one host, two workers in two others, the server in a
fourth and ``rpcmeter run --cluster`` beside the scheduler. The result names each worker's host,
the workers' histograms merge exactly into the case's and count what a run without Dask counts,
a worker killed mid-case is reported as in the local Dask case, and nothing is left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.runners.distributed import LOAD_WORKER_CONFIG
from tests.support.hosts import Hosts, pids_in

pytest.importorskip("distributed")
pytestmark = pytest.mark.timeout(180)

PORT = 8080
SCHEDULER = 8786
REQUESTS = 300  # per client


def dask_env() -> dict[str, str]:
    """The environment of a load worker: rpcmeter's code, and the settings ``local:N`` uses."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for key, value in LOAD_WORKER_CONFIG.items():
        env["DASK_" + key.upper().replace(".", "__").replace("-", "_")] = str(value)
    return env


def suite(tmp: Path, address: str, **load: Any) -> Path:
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in load.items())
    path = tmp / "suite.toml"
    path.write_text(
        f'[target]\ndriver = "http"\naddress = "{address}"\n'
        f'[workloads.small]\nkind = "factorial"\nn = 5\n'
        f"[load]\nclients = 2\nwarmup = 2\n{body}\n"
    )
    return path


def rpcmeter(h: Hosts, i: int, args: list[str], out: Path) -> dict[str, Any]:
    done = h.run(
        i,
        [sys.executable, "-m", "rpcmeter", "run", *args, "-o", str(out), "--no-store"],
        env=dask_env(),
        timeout=150,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def loading(h: Hosts, i: int) -> bool:
    """Whether the server (host 3) has a connection from host ``i`` (its client is past its
    warmup, or in it)."""
    out = h.run(3, ["ss", "-Htn", "state", "established", f"sport = :{PORT}"]).stdout
    return f"{h.addresses[i]}:" in out


def test_load_from_workers_on_two_hosts(hosts: Callable[[int], Hosts], tmp_path: Path) -> None:
    h = hosts(4)  # 0: scheduler and rpcmeter, 1 and 2: workers, 3: the server
    sched = f"tcp://{h.addresses[0]}:{SCHEDULER}"
    env = dask_env()
    h.start(
        0,
        [
            sys.executable,
            "-m",
            "dask",
            "scheduler",
            "--host",
            h.addresses[0],
            "--port",
            str(SCHEDULER),
            "--no-dashboard",
        ],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    workers = [
        h.start(
            i,
            [
                "dask",
                "worker",
                sched,
                "--host",
                h.addresses[i],
                "--nthreads",
                "1",
                "--no-nanny",
                "--no-dashboard",
            ],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        for i in (1, 2)
    ]
    h.start(
        3,
        [
            sys.executable,
            "-m",
            "rpcmeter.servers.http_server",
            "--host",
            h.addresses[3],
            "--port",
            str(PORT),
        ],
        env=env,
    )
    h.wait_listening(0, SCHEDULER)
    h.wait_listening(3, PORT)
    target = f"{h.addresses[3]}:{PORT}"

    spread = rpcmeter(
        h,
        0,
        [str(suite(tmp_path, target, requests=REQUESTS)), "--cluster", sched],
        tmp_path / "d.json",
    )
    local = rpcmeter(h, 0, [str(suite(tmp_path, target, requests=REQUESTS))], tmp_path / "l.json")
    (case,) = spread["cases"]
    assert case["status"] == "ok", case["reason"]
    hosts_seen = sorted(w["host"] for w in case["workers"])
    assert hosts_seen == sorted(h.addresses[1:3])  # each worker at its own host's address
    assert all(w["worker"].startswith(f"tcp://{w['host']}:") for w in case["workers"])
    merged = Histogram.merged(Histogram.from_dict(w["histogram"]) for w in case["workers"])
    whole = Histogram.from_dict(case["histogram"])
    assert merged.to_dict() == whole.to_dict()  # bucket counts add: an exact merge
    assert whole.count == case["ok"] == local["cases"][0]["ok"] == 2 * REQUESTS
    assert spread["environment"]["cluster"]["hosts"] == hosts_seen

    # a worker killed mid-case: reported, the other stopped, what it measured kept
    path = suite(tmp_path, target, duration_s=20)
    run = subprocess.Popen(
        h.argv(
            0,
            [
                sys.executable,
                "-m",
                "rpcmeter",
                "run",
                str(path),
                "--cluster",
                sched,
                "-o",
                str(tmp_path / "k.json"),
                "--no-store",
            ],
        ),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        victim = workers[0]
        deadline = time.monotonic() + 60
        while not all(loading(h, i) for i in (1, 2)):
            assert time.monotonic() < deadline and run.poll() is None, "the load never started"
            time.sleep(0.1)
        time.sleep(0.5)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        run.wait(60)
    finally:
        if run.poll() is None:
            run.kill()
        run.wait(10)
    (case,) = json.loads((tmp_path / "k.json").read_text())["cases"]
    assert case["status"] == "incomplete", case["reason"]
    assert f"tcp://{h.addresses[1]}:" in case["reason"]
    lost = [w for w in case["workers"] if w["status"] == "lost"]
    assert [w["host"] for w in lost] == [h.addresses[1]]
    (survivor,) = [w for w in case["workers"] if w["status"] == "ok"]
    assert survivor["requests"] > 0 and case["wall_s"] < 15
    # nothing of the case runs any more: the killed worker's client died with it, the other's
    # was stopped; only the surviving worker is left, for the teardown
    assert pids_in(h.names[1]) == []
    assert pids_in(h.names[2]) == [workers[1].pid]
