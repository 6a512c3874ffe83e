"""Hostile servers end to end: every case ends within its deadline with a named error and a clear
reason, and no process prints a traceback.

One ``rpcmeter run`` per protocol: each variant is :mod:`tests.faults.hostile` in one mode, so a
protocol's modes cost one start of rpcmeter."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)
HOSTILE = Path(__file__).with_name("hostile.py")
TIMEOUT_S = 3.0
GRACE_S = 6.0  # stopping clients (2 s), the server, process starts on a busy machine


def suite_text(driver: str, modes: list[str], options: dict[str, str] | None = None) -> str:
    """A suite whose variant ``NAME`` runs the hostile server in mode ``NAME`` (a name with a
    suffix, ``close.blocking``, the mode before the dot with ``options[suffix]`` as options)."""
    lines = ['name = "hostile"', "repeat = 1", "[target]", f'driver = "{driver}"']
    lines.append('transport = "tcp"')
    for name in modes:
        mode, _, suffix = name.partition(".")
        command = [sys.executable, str(HOSTILE), driver, mode, "--port", "{port}"]
        lines.append(f'[variants."{name}"]')
        if suffix:
            lines.append(f"options = {{ {(options or {})[suffix]} }}")
        lines += [f'[variants."{name}".server]', f"command = {json.dumps(command)}"]
    lines += [
        "[workloads.noop]",
        'kind = "noop"',
        "[load]",
        "requests = 40",
        "warmup = 10",
        f"timeout_s = {TIMEOUT_S}",
        "[resources]",
        "idle_s = 0",
    ]
    return "\n".join(lines) + "\n"


def run_modes(
    tmp_path: Path, driver: str, modes: list[str], options: dict[str, str] | None, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, Any]], float]:
    suite = tmp_path / "hostile.toml"
    suite.write_text(suite_text(driver, modes, options))
    out = tmp_path / "out.json"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rpcmeter.cli",
            "run",
            str(suite),
            "-o",
            str(out),
            "--no-store",
            *list(extra),
        ],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=tmp_path,
    )
    took = time.monotonic() - t0
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout
    doc = json.loads(out.read_text())
    cases = {c["variant"]: c for c in doc["cases"]}
    assert set(cases) == set(modes), proc.stderr
    return proc, cases, took


def failed_with(case: dict[str, Any], *words: str) -> None:
    assert case["status"] == "failed", case
    assert any(w in (case["reason"] or "") for w in words), case["reason"]


def check_common(cases: dict[str, dict[str, Any]], took: float) -> None:
    # every hang ends at load.timeout_s, every other mode sooner
    hangs = sum(1 for m in cases if m == "hang")
    assert took < len(cases) * 2.0 + hangs * (TIMEOUT_S + GRACE_S) + 10.0
    assert cases["ok"]["status"] == "ok" and cases["ok"]["ok"] == 40, cases["ok"]
    failed_with(cases["hang"], "timed out")
    failed_with(cases["die"], "server exited with status 3")
    if "close" in cases:  # stream clients report what was answered before the server died
        assert cases["die"]["ok"] == 5, cases["die"]
    if "fail" in cases:  # every reply an error: the case fails, and says why
        failed_with(cases["fail"], "requests failed")
        assert cases["fail"]["ok"] == 0 and sum(cases["fail"]["errors"].values()) == 40


STREAM_MODES = ["ok", "hang", "die", "close", "fail", "twice", "negative", "garbage"]
# raw's blocking client (one loop per client picks it) reads replies on its own path
BLOCKING = ["close.blocking", "twice.blocking", "negative.blocking", "garbage.blocking"]


@pytest.mark.parametrize(
    ("driver", "modes"),
    [("http", [*STREAM_MODES, "bad400"]), ("raw", STREAM_MODES + BLOCKING)],
)
def test_stream_servers(tmp_path: Path, driver: str, modes: list[str]) -> None:
    proc, cases, took = run_modes(tmp_path, driver, modes, {"blocking": 'io = "blocking"'})
    assert proc.returncode == 0, proc.stderr  # some cases failed, not all
    check_common(cases, took)
    for name, case in cases.items():
        mode = name.partition(".")[0]
        if mode == "close":  # lost after the warmup: counted and named, the case says so
            failed_with(case, "connection closed")
            assert case["errors"] == {"connection_closed": 1} and case["ok"] == 0, case
        if mode in ("twice", "negative", "garbage"):  # the warmup stops at the first, named
            failed_with(case, "protocol_error: ")
            assert case["ok"] == 0, case
        if mode == "twice":  # a reply sent twice is never a second success
            assert "answers no request" in case["reason"]
    if "bad400" in cases:
        failed_with(cases["bad400"], "requests failed", "connection closed", "connection_closed")


def test_zmq_servers(tmp_path: Path) -> None:
    modes = ["ok", "hang", "die", "garbage"]
    proc, cases, took = run_modes(tmp_path, "zmq", modes, None, "--max-error-rate", "0.01")
    assert proc.returncode == 1, proc.stderr  # cases over the error rate given
    assert "--max-error-rate" in proc.stderr, proc.stderr
    check_common(cases, took)
    failed_with(cases["garbage"], "protocol_error: ")
