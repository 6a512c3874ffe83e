"""The protocol libraries are extras (pyproject.toml): only the driver that needs one imports it,
and a suite whose driver's library is missing stops at its check with one line that says what to
install. The libraries are blocked in the subprocesses (a ``sitecustomize`` that sets
``sys.modules[name] = None``), never uninstalled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rpcmeter.drivers import EXTRAS, REGISTRY

pytestmark = pytest.mark.timeout(240)

BLOCKER = """\
import os, sys
for name in os.environ["RPCMETER_TEST_BLOCK"].split(","):
    sys.modules[name] = None  # importing it raises ModuleNotFoundError, as when not installed
"""


def run_blocked(
    blocked: list[str], args: list[str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """``rpcmeter ARGS`` with ``blocked`` modules unimportable, in it and every process it
    starts (their ``PYTHONPATH`` carries the blocking ``sitecustomize``)."""
    site = tmp_path / "blocker"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "RPCMETER_TEST_BLOCK": ",".join(blocked)}
    return subprocess.run(
        [sys.executable, "-m", "rpcmeter", *args],
        capture_output=True,
        text=True,
        timeout=200,
        env=env,
        cwd=tmp_path,
    )


def test_every_extra_names_a_registered_driver() -> None:
    assert set(EXTRAS) <= set(REGISTRY)


@pytest.mark.parametrize(
    ("driver", "line"),
    [
        ("zmq", "driver \"zmq\" needs pyzmq: pip install 'rpcmeter[zmq]'"),
        ("grpc", "driver \"grpc\" needs grpcio: pip install 'rpcmeter[grpc]'"),
        ("rpyc", "driver \"rpyc\" needs rpyc: pip install 'rpcmeter[rpyc]'"),
    ],
)
def test_missing_library_is_one_line_before_any_server(
    tmp_path: Path, driver: str, line: str
) -> None:
    started = tmp_path / "server-started"
    suite = tmp_path / "suite.toml"
    suite.write_text(
        f'[target]\ndriver = "{driver}"\n'
        f"server = {{ command = \"sh -c 'touch {started}; sleep 30'\" }}\n"
        '[workloads.noop]\nkind = "noop"\n'
    )
    proc = run_blocked([driver], ["run", str(suite), "--quick", "--no-store"], tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [f"rpcmeter: error: {suite}: target.driver: {line}"]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not started.exists(), "the server started before the suite was checked"


def test_http_suite_runs_without_any_protocol_library(tmp_path: Path) -> None:
    blocked = [*EXTRAS, "dask", "distributed"]
    help_ = run_blocked(blocked, ["--help"], tmp_path)
    assert help_.returncode == 0 and "usage: rpcmeter" in help_.stdout
    suite = tmp_path / "http.toml"
    suite.write_text('[target]\ndriver = "http"\n[workloads.noop]\nkind = "noop"\n')
    out = tmp_path / "result.json"
    proc = run_blocked(
        blocked,
        ["run", str(suite), "--quick", "--no-store", "--set", "load.requests=50", "-o", str(out)],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"status": "complete"' in out.read_text()


def test_importing_the_package_imports_no_protocol_library() -> None:
    code = (
        "import sys, rpcmeter, rpcmeter.cli, rpcmeter.run.execute, rpcmeter.plan.load;"
        "import rpcmeter.drivers.http, rpcmeter.drivers.raw, rpcmeter.runners.client;"
        f"print(sorted(m for m in {sorted(EXTRAS)!r} if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "[]"
