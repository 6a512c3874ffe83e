"""The command line end to end: `rpcmeter run` prints tables and writes the result document."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rpcmeter.cli.options import width as _width
from rpcmeter.cli.progress import Progress, case_fraction, fmt_eta
from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import build_suite

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).parents[2]


def rpcmeter(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rpcmeter.cli", *args],
        capture_output=True,
        text=True,
        timeout=220,
        cwd=cwd,
    )


def test_demo_with_output_document(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = rpcmeter(
        "run",
        "--quick",
        "--set",
        "workloads.simple.requests=50",  # the demo sets each workload's own count
        "--set",
        'workloads."random wait".requests=50',
        "--set",
        "matrix.clients=[1, 2]",
        "--set",
        "matrix.threads=[2]",
        "--output",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    # the study's table: per workload, rows by matrix point, baseline figures and ratios
    assert "simple" in proc.stdout and "random wait" in proc.stdout
    assert "default" in proc.stdout and "bind" in proc.stdout and "p99 ms" in proc.stdout
    assert "[1/8]" in proc.stderr and "[8/8]" in proc.stderr  # progress, case k of n
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 2 and doc["status"] == "complete"
    env = doc["environment"]
    for key in (
        "host",
        "cpu_model",
        "cpu_count",
        "os",
        "kernel",
        "python",
        "rpcmeter",
        "packages",
        "placement",
    ):
        assert key in env, key
    assert env["packages"]["rpyc"].startswith("6.")
    assert {"server_cpus", "client_cpus", "server_cgroup", "client_cgroup"} <= set(env["placement"])
    assert len(doc["cases"]) == 8
    for case in doc["cases"]:
        assert case["status"] == "ok"
        assert {
            "variant",
            "workload",
            "params",
            "repetition",
            "requests",
            "errors",
            "wall_s",
            "throughput_rps",
            "latency",
            "histogram",
        } <= set(case)
        assert case["params"]["threads"] == 2 and case["params"]["clients"] in (1, 2)
        assert case["requests"] == 50 * 2 * case["params"]["clients"]
        assert set(case["latency"]) >= {
            "mean_us",
            "stdev_us",
            "min_us",
            "p50_us",
            "p90_us",
            "p99_us",
            "p999_us",
            "max_us",
        }
        assert case["histogram"]["count"] == case["ok"]


GO_EXAMPLES = ("grpc-fast-server.toml", "grpc-routeguide.toml", "grpc-unique-requests.toml")


def test_quick_demo_never_saturates_its_load_generator(tmp_path: Path) -> None:
    """`rpcmeter run --quick` as a new user types it: the demo's clients leave CPU to spare
    (one thread in a ping-pong, or threads that mostly wait), so its figures measure rpyc. A busy
    machine lowers the clients' own share (they wait longer), so this holds on any machine."""
    out = tmp_path / "quick.json"
    proc = rpcmeter("run", "--quick", "--no-store", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "saturated" not in proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    assert len(doc["cases"]) == 4
    for case in doc["cases"]:
        assert case["status"] == "ok" and case["cpu"]["client_util_pct"] < 90.0, case["cpu"]


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.toml")))
def test_every_example_runs_quick(example: str, tmp_path: Path) -> None:
    if example in GO_EXAMPLES and shutil.which("go") is None:
        pytest.skip("its server is built with Go")
    proc = rpcmeter(
        "run",
        str(ROOT / "examples" / example),
        "--quick",
        "--set",
        "load.requests=20",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "failed:" not in proc.stdout, proc.stdout[-2000:]


def test_usage_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    proc = rpcmeter("run", str(tmp_path / "missing.toml"), cwd=tmp_path)
    assert (
        proc.returncode == 2
        and "no such suite file" in proc.stderr
        and "Traceback" not in proc.stderr
    )
    proc = rpcmeter("run", "--set", "nonsense", cwd=tmp_path)
    assert proc.returncode == 2 and "expected KEY=VALUE" in proc.stderr
    proc = rpcmeter("show", "--width", "10", cwd=tmp_path)
    assert proc.returncode == 2 and "--width: 10: at least 40 columns" in proc.stderr


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tables_take_the_terminals_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "87")
    assert _width(argparse.Namespace(width=None), _Tty()) == 87
    assert _width(argparse.Namespace(width=None), io.StringIO()) == 120  # a file or a pipe
    assert _width(argparse.Namespace(width=100), _Tty()) == 100


def test_live_line_has_an_eta() -> None:
    suite = build_suite(
        {"load": {"requests": 100, "threads": 2}, "workloads": {"simple": {}}, "repeat": 4}
    )
    cases = expand(suite)
    now = [0.0]
    stream = _Tty()
    progress = Progress(stream, clock=lambda: now[0])
    progress.case_started(cases[0], 4)
    assert "ETA" not in stream.getvalue()  # nothing done yet: no estimate
    now[0] = 10.0
    progress.progress(cases[0], 4, 100, 9.0)  # half of 2 x 100 requests in 10 s
    line = stream.getvalue().split("\r")[-1]
    assert line.startswith("[1/4] default · simple") and "100 requests" in line
    assert line.rstrip().endswith("ETA 1 min 10 s")  # 10 s a half case, 3.5 cases left
    now[0] = 20.0
    progress.case_started(cases[1], 4)  # one case in 20 s, three left
    assert stream.getvalue().split("\r")[-1].rstrip().endswith("ETA 1 min 00 s")
    # a duration counts by time
    timed = expand(build_suite({"load": {"duration_s": 4}, "workloads": {"simple": {}}}))[0]
    assert case_fraction(timed, 10, 1.0) == 0.25
    assert fmt_eta(3725) == "1 h 02 min"
