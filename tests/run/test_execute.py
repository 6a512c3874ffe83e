"""Case-level failure handling with real processes: a server that fails to start, one that dies
mid-case, one that hangs; every later case still runs, and no process is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from rpcmeter.plan.load import build_suite
from rpcmeter.result.document import read_json
from rpcmeter.run.execute import run_suite
from tests.support.interrupt import ctrl_c_default
from tests.support.marks import timing_sensitive
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)
BUILTIN = [
    sys.executable,
    "-m",
    "rpcmeter.servers.rpyc_server",
    "--transport",
    "unix",
    "--socket",
    "{socket}",
]
HANG = (
    "import socket, sys, time\n"
    "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()\n"
    "conns = []\n"
    "while True:\n"
    "    c, _ = s.accept(); conns.append(c)\n"
)


def leftovers() -> list[str]:
    """Descendants of this test process other than multiprocessing's helpers."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if "multiprocessing" not in cmd and p.status() != psutil.STATUS_ZOMBIE:
            out.append(f"{p.pid} {cmd}")
    return out


def suite(variants: dict[str, Any], **load: Any) -> Any:
    return build_suite(
        {
            "target": {"driver": "rpyc", "transport": "unix", "server": {"ready_timeout_s": 10}},
            "variants": variants,
            "repeat": 1,
            "workloads": {"simple": {}},
            "load": {"requests": 200, "warmup": 2, **load},
        }
    )


def test_server_that_fails_to_start_fails_only_its_case() -> None:
    bad = {
        "command": [sys.executable, "-c", "import sys; print('boom: no such config'); sys.exit(3)"]
    }
    result = written(run_suite(suite({"broken": {"server": bad}, "good": {}})))
    broken, good = result["cases"]
    assert broken["status"] == "failed"
    assert "exited with status 3 before it was ready" in broken["reason"]
    assert "boom: no such config" in broken["server_output_tail"]
    assert good["status"] == "ok" and good["ok"] == 200
    assert leftovers() == []


def test_server_that_dies_mid_case() -> None:
    dying = {"command": ["timeout", "4", *BUILTIN]}
    result = written(
        run_suite(suite({"dying": {"server": dying}, "good": {}}, requests=10**9, duration_s=12.0))
    )
    # the good variant runs its full 12 s: this test is the slowest of the file
    dying_case, good = result["cases"]
    assert dying_case["status"] == "failed"
    assert (
        "server exited with status 124" in dying_case["reason"]
        or "lost connection" in dying_case["reason"]
    )
    assert dying_case["ok"] > 0  # what was measured before the death is kept
    assert good["status"] == "ok"
    assert dying_case["wall_s"] < 8  # it ended with its server, long before its 12 s
    assert leftovers() == []


def test_server_that_hangs_is_timed_out() -> None:
    hung = {"command": [sys.executable, "-c", HANG, "{socket}"]}
    t0 = time.monotonic()
    result = written(run_suite(suite({"hung": {"server": hung}}, timeout_s=2.0)))
    case = result["cases"][0]
    assert case["status"] == "failed" and case["reason"].startswith("timed out")
    assert time.monotonic() - t0 < 20
    assert leftovers() == []


def _processes_with(marker: str) -> list[int]:
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("RPCMETER_TEST_MARKER") == marker:
                found.append(p.pid)
        except psutil.Error:
            continue
    return found


def start_run(tmp_path: Path, marker: str) -> tuple[subprocess.Popen[bytes], Path]:
    """Start `rpcmeter run` on a suite of six one-second cases; return once the first is done."""
    suite_file = tmp_path / "s.toml"
    suite_file.write_text(
        '[target]\ndriver = "rpyc"\ntransport = "unix"\n[workloads.simple]\n'
        "[load]\nduration_s = 1.0\nwarmup = 1\n[matrix]\nthreads = [1, 2, 3, 4, 5, 6]\n"
    )
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rpcmeter.cli", "run", str(suite_file), "--output", str(out)],
        env={**os.environ, "RPCMETER_TEST_MARKER": marker},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=ctrl_c_default,  # Ctrl-C reaches it even when this test's SIGINT is ignored
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if out.exists() and json.loads(out.read_text())["cases"]:
            break
        time.sleep(0.1)
    time.sleep(0.3)  # in the middle of the second case
    return proc, out


@timing_sensitive
def test_ctrl_c_keeps_finished_cases_and_leaves_no_process(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    proc, out = start_run(tmp_path, marker)
    try:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert b"Traceback" not in err, err.decode(errors="replace")
    assert proc.returncode == 130, err.decode(errors="replace")
    assert b"interrupted" in err
    doc = written(read_json(out))
    assert doc["status"] == "interrupted"
    assert 1 <= len(doc["cases"]) < 6 and all(c["status"] == "ok" for c in doc["cases"])
    time.sleep(0.5)
    assert _processes_with(marker) == []


def test_a_killed_rpcmeter_takes_its_servers_and_clients_along(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    proc, _ = start_run(tmp_path, marker)
    assert len(_processes_with(marker)) > 2  # rpcmeter, its server, its clients
    proc.kill()  # SIGKILL: no chance to clean up
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(marker) == []
