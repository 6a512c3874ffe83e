"""examples/pclick.toml end to end: rpcmeter's ZeroMQ clients, and pClick's own demo client as a
command client, against pClick's own demo server, installed by the suite into a virtualenv of its
own (study 002)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pclick.toml"
PACKAGE = "pclick==0.5.15"

pytestmark = pytest.mark.timeout(300)


def pclick_available(tmp_path: Path) -> str | None:
    """None when the package can be installed here, else why not."""
    try:
        got = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "-d",
                str(tmp_path),
                PACKAGE,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        return f"pip download {PACKAGE} took over 60 s (no network?)"
    if got.returncode != 0:
        lines = (got.stderr or got.stdout).strip().splitlines()
        return f"pip download {PACKAGE} failed: {lines[-1] if lines else got.returncode}"
    return None


def test_pclick_example_drives_pclicks_own_server(tmp_path: Path) -> None:
    why = pclick_available(tmp_path / "dl")
    if why is not None:
        pytest.skip(why)
    out = tmp_path / "result.json"
    code = main(["run", str(EXAMPLE), "--quick", "--no-store", "-o", str(out), "--width", "160"])
    result = json.loads(out.read_text())
    assert code == 0
    by_client: dict[bool, list[dict[str, Any]]] = {
        True: [],
        False: [],
    }  # pClick's own client (a command client) or rpcmeter's
    for case in result["cases"]:
        by_client["pclick client" in case["variant"]].append(case)
    assert {c["variant"] for c in by_client[False]} == {
        f"{t} {m}" for t in ("tcp", "ipc") for m in ("block", "poll", "sleep 100us")
    }
    assert {c["variant"] for c in by_client[True]} == {"tcp pclick client", "ipc pclick client"}
    for case in by_client[True]:
        # pClick's demo client, from the suite's environment, against the server started for it
        assert case["status"] == "ok", case["reason"]
        assert case["endpoint"].startswith(case["variant"].split()[0] + "://")
        argv = case["command"]["argv"]
        assert argv[1:3] == ["-m", "pclick.demo.client"] and "/envs/" in argv[0]
        where = case["endpoint"].partition("://")[2]
        assert where.rpartition(":")[2] in argv or f"ipc://{where}" in argv
        assert case["ok"] == case["requests"] == len(case["runs"]) * 2000
        assert case["throughput_rps"] > 0 and case["latency"] is None
        assert case["cpu"]["server_us_per_request"] > 0
    for case in by_client[False]:
        assert case["status"] == "ok", case["reason"]
        assert case["errors"] == {} and case["ok"] == case["requests"] > 0
        assert case["endpoint"].startswith(case["variant"].split()[0] + "://")
        # the serialized HandshakeInit out, pClick's handshake message back
        assert case["bytes"]["out_per_request"] == 2
        assert case["bytes"]["in_per_request"] > 50
    # the servers ran pClick from the suite's own environment, not rpcmeter's
    envs = result["environment"]["variant_envs"]
    assert all(PACKAGE.split("==")[0] in json.dumps(e) for e in envs.values())
