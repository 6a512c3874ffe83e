"""History, comparisons and the gate with real runs of the `rpcmeter` command: the rpyc example run
twice and compared, an A/A variant inside a real run, a run gated on a real regression, and a
database left by a run killed with SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rpcmeter.history.store import STORE_ENV, Store, resolve_run
from tests.support.marks import timing_sensitive
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parents[2]
SMALL = [
    "-w",
    "simple",
    "--set",
    "matrix.threads=[1]",
    "--set",
    "matrix.clients=[1]",
    "--set",
    "load.requests=150",
    "--set",
    "load.warmup=10",
]


def rpcmeter(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it in ``cwd``: the history in its default place there."""
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])  # this tree's package, and its tests
    env = {k: v for k, v in os.environ.items() if k != STORE_ENV} | {"PYTHONPATH": path}
    proc = subprocess.run(
        [sys.executable, "-m", "rpcmeter.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@timing_sensitive  # (an A/A comparison of 4 repetitions: its verdicts rest on timing noise)
def test_example_run_twice_then_compare_shows_verdicts(tmp_path: Path) -> None:
    demo = str(ROOT / "examples" / "rpyc-thread-binding.toml")
    # run 1: default, bind, their pinned copies and twin (an identical copy of default: an A/A
    # comparison)
    first = rpcmeter(
        "run", demo, *SMALL, "--set", "repeat=4", "--set", "variants.twin={}",
        "--baseline", "main", cwd=tmp_path,
    )  # fmt: skip
    assert "stored as run 1 in .rpcmeter/history.db" in first.stdout
    assert "tagged run 1 as baseline 'main'" in first.stdout
    assert "ratio with 95% interval and verdict (4 repetitions)" in first.stdout
    result = written(resolve_run("1", tmp_path / ".rpcmeter" / "history.db").result)
    twin = [r for r in result["comparisons"]["rows"] if r["variant"] == "twin"]
    assert {r["metric"] for r in twin} >= {"mean", "p50", "p99", "throughput"}
    # A/A: an identical copy comes out `same` on most metrics (mean latency and throughput move
    # together, so one chance separation of four repetitions can flip both; the statistics are
    # checked on 400 synthetic A/A pairs in test_analysis.py)
    assert sum(r["verdict"] == "same" for r in twin) >= len(twin) - 2, twin
    assert len(result["cases"]) == 5 * 4 and result["suite"]["repeat"] == 4

    # run 2 compares against the tagged baseline and is gated
    second = rpcmeter(
        "run", demo, *SMALL, "--set", "repeat=4", "--baseline", "main",
        "--fail-if-slower", "500", cwd=tmp_path,
    )  # fmt: skip
    assert "run 2 against baseline 'main'" in second.stdout
    assert "gate: no case's mean latency is significantly worse" in second.stdout

    compare = rpcmeter("compare", "main", "last", cwd=tmp_path)
    out = compare.stdout
    assert out.startswith("run 2 against run 1")
    table = out[out.index("simple: run 2 / run 1") :]
    rows = [line.split() for line in table.splitlines() if line.split()[:2] == ["1", "1"]]
    assert {row[2] for row in rows} == {"default", "bind"}  # per case (threads=1 clients=1)
    # a verdict in every row ("same?": a same on spread repetitions)
    assert all({"faster", "slower", "same"} & {w.rstrip("?") for w in row} for row in rows), out
    assert "twin" not in table  # only the cases both runs have

    history = rpcmeter("history", cwd=tmp_path).stdout
    assert "default, bind, default" in history and "twin" in history and "main" in history
    md = rpcmeter("show", "last~1", "--format", "markdown", cwd=tmp_path).stdout
    assert "| threads | clients | variant | mean | p50 | p99 | req/s |" in md


GATED_SUITE = """
name = "gate"
repeat = 4
[target]
driver = "tests.support.mock_driver:MockDriver"
transport = "tcp"
[target.server]
command = ["{python}", "-m", "http.server", "--bind", "127.0.0.1", "{{port}}"]
[variants.quick]
options = {{ sleep_us = 200 }}
[variants.sluggish]
options = {{ sleep_us = 3000 }}
[workloads.simple]
[load]
requests = 40
warmup = 2
"""


def test_run_gate_fails_on_a_real_regression(tmp_path: Path) -> None:
    suite = tmp_path / "gate.toml"
    suite.write_text(GATED_SUITE.format(python=sys.executable))
    proc = rpcmeter(
        "run", str(suite), "--fail-if-slower", "20", "--no-store", "--csv", "out.csv",
        cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gate: 1 case(s) mean latency worse than the baseline by more than 20 %" in proc.stdout
    assert "simple · sluggish: mean latency" in proc.stdout
    assert not (tmp_path / ".rpcmeter").exists()  # --no-store
    assert "latency.mean_us" in (tmp_path / "out.csv").read_text()


def test_database_left_by_a_killed_run_is_readable(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rpcmeter.cli", "run", *SMALL, "--set", "repeat=6",
         "--store", str(db)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        done = 0
        while time.monotonic() < deadline and done < 2:
            time.sleep(0.2)
            if db.exists():
                with Store(db, create=False) as store:
                    runs = store.runs()
                    done = runs[0].cases if runs else 0
        assert done >= 2, "the run stored no cases"
    finally:
        # freeze it so it starts nothing new, then SIGKILL it: its watchdog stops what it
        # started (the servers, their cgroups); whatever is left after that is killed here
        os.kill(proc.pid, signal.SIGSTOP)
        children = psutil.Process(proc.pid).children(recursive=True)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        _, alive = psutil.wait_procs(children, timeout=20)
        for child in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        psutil.wait_procs(alive, timeout=10)
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store(db, create=False) as store:
        info = store.runs()[0]
        assert info.status == "running" and info.cases >= 2 and info.planned_cases == 12
        result = written(store.load(info.id))
    assert len(result["cases"]) == info.cases
    assert all(c["status"] == "ok" and c["latency"]["mean_us"] > 0 for c in result["cases"])
    shown = rpcmeter("show", "last", "--format", "json", "--store", str(db), cwd=tmp_path)
    assert json.loads(shown.stdout)["status"] == "running"
    assert "running" in rpcmeter("history", "--store", str(db), cwd=tmp_path).stdout
