"""examples/bytewax (study 003 on bytewax itself) end to end: a released bytewax installed from
the package registry runs the smallest of the study's dataflows, a version without a wheel for
this Python fails alone in one line, and no bytewax process outlives the run, Ctrl-C included.

Marked ``registry``: skipped, with the reason, where the registry cannot be reached."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support import registry
from tests.support.interrupt import ctrl_c_default

SUITE = Path(__file__).resolve().parent.parent / "examples" / "bytewax" / "suite.toml"
VERSION = "0.21.1"  # a wheel for every CPython the project supports
PROCESSES = min(2, len(os.sched_getaffinity(0)))  # --quick: 2 CPUs, where there are 2
pytestmark = pytest.mark.registry
MARKER = "RPCMETER_TEST_MARKER"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    registry.require("bytewax")
    yield tmp_path_factory.mktemp("bytewax-cache")


def bytewax_processes(marker: str) -> list[psutil.Process]:
    """The processes started for this test (its marker in their environment) that run bytewax."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(MARKER) == marker and "bytewax" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.Error:
            continue
    return found


def workers(marker: str) -> list[psutil.Process]:
    """The worker processes (``bytewax.run ... -i N``) the dataflow's process started."""
    return [p for p in bytewax_processes(marker) if "-i" in p.cmdline()]


def rpcmeter(cache: Path, marker: str, out: Path, *args: str) -> subprocess.Popen[str]:
    """``rpcmeter run examples/bytewax/suite.toml --quick ARGS`` in a session of its own."""
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "rpcmeter.cli", "run", str(SUITE), "--quick", "--no-store"),
            *("--width", "200", "-o", str(out), *args),
        ],
        env={**os.environ, "RPCMETER_CACHE": str(cache), MARKER: marker},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=ctrl_c_default,  # Ctrl-C reaches it as from a terminal, however pytest runs
    )


@pytest.mark.timeout(300)
def test_the_smallest_dataflow_runs_on_a_released_bytewax(cache: Path, tmp_path: Path) -> None:
    """bytewax 0.21.1 from the registry: partitioned input, fast, light map, 2 processes, 2 runs;
    beside it 0.16.0 on this Python, which has no wheel for it: one line, that variant only."""
    marker = uuid.uuid4().hex
    out = tmp_path / "result.json"
    proc = rpcmeter(
        cache,
        marker,
        out,
        *("-V", "0.16.0", "-V", VERSION, "-w", "partitioned", "--set", "runs.count=2"),
        *("--set", "matrix.heavy_map=[false]", "--set", "matrix.long_input=[false]"),
        *("--set", f'variants."0.16.0".python="{sys.executable}"'),
    )
    stdout, stderr = proc.communicate(timeout=280)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 3, stdout + stderr  # the gate has no baseline to judge against
    assert "nothing to judge" in stdout
    doc = json.loads(out.read_text())
    cases = {c["variant"]: c for c in doc["cases"]}
    old, new = cases["0.16.0"], cases[VERSION]
    assert old["status"] == "failed"
    assert old["reason"].startswith("environment: install failed: error: No solution found")
    assert "\n" not in old["reason"] and "no wheels with a matching Python ABI tag" in old["reason"]
    assert new["status"] == "ok", new["reason"]
    assert new["command"]["argv"] == [
        *("python", "-m", "bytewax.testing"),
        "flow_v019:get_flow('partitioned', long_input='false', heavy_map='false', items=4, "
        "interval=0.25, partitions=16)",
        *("-p", str(PROCESSES), "-w", "1"),
    ]
    runs = new["runs"]
    assert len(runs) == 2 and all(r["exit_code"] == 0 for r in runs)
    # the process tree's CPU and the run's wall time: more than an interpreter start (about
    # 0.03 s here; the workers' CPU is in it). A run took 0.19-0.20 s on a quiet machine: with
    # long_input off its input waits no interval, so its wall time is bytewax's start-up
    assert all(r["user_s"] + r["sys_s"] > 0.1 and r["wall_s"] > 0.1 for r in runs)
    envs = doc["environment"]["variant_envs"]
    assert envs[VERSION]["packages"]["bytewax"] == VERSION
    assert bytewax_processes(marker) == []


@pytest.mark.timeout(300)
def test_ctrl_c_leaves_no_bytewax_process(cache: Path, tmp_path: Path) -> None:
    """Ctrl-C while the slow input's worker processes wait for items: rpcmeter stops, keeps what
    it had, and no process of the dataflow is left."""
    marker = uuid.uuid4().hex
    out = tmp_path / "result.json"
    proc = rpcmeter(
        cache,
        marker,
        out,
        *("-V", VERSION, "-w", "dynamic", "--set", "runs.count=1"),
        *("--set", "matrix.heavy_map=[false]", "--set", "matrix.long_input=[true]"),
        *("--set", "workloads.dynamic.items=120"),  # 30 s a run
    )
    try:
        deadline = time.monotonic() + 240  # the environment first (made once per session)
        while len(workers(marker)) < PROCESSES and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert len(workers(marker)) == PROCESSES, "the dataflow's worker processes run"
        running = bytewax_processes(marker)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert json.loads(out.read_text())["status"] == "interrupted"
    gone = psutil.wait_procs(running, timeout=5)[1] == []
    assert gone and bytewax_processes(marker) == []
