"""Servers that break HTTP/2 under the gRPC driver's own client and the HTTP driver's HTTP/2:
each case fails with a one-line reason naming what went wrong, the other cases still run, and
no process is left behind."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from tests.support.synthetic import written

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


def hostile(mode: str, driver: str = "grpc") -> dict[str, Any]:
    options = {"method": "/x.Y/Z", "request_hex": ""} if driver == "grpc" else {"http": "2"}
    return {
        "driver": driver,
        "options": options,
        "server": {
            "command": [sys.executable, "-m", "tests.h2.hostile", "{port}", mode],
            "cwd": str(ROOT),
        },
    }


@pytest.mark.parametrize("driver", ["grpc", "http"])
def test_each_fault_fails_its_case_with_a_reason(driver: str) -> None:
    modes = {
        "http1": "http1_reply: the server answered HTTP/1.x",
        "malformed": "protocol_error: DATA on stream 0",
        "big_headers": "header_too_large",
        "settings_flood": "settings_flood",
    }
    variants: dict[str, Any] = {mode: hostile(mode, driver) for mode in [*modes, "goaway"]}
    variants["healthy"] = {"driver": "http", "options": {"http": "2"}}
    result = written(
        run_suite(
            build_suite(
                {
                    "name": "faults",
                    "target": {"driver": "http", "transport": "tcp"},
                    "variants": variants,
                    "workloads": {"noop": {}},
                    "load": {
                        "requests": 200,
                        "warmup": 0,
                        "connections": 1,
                        "concurrency": 4,
                        "timeout_s": 30,
                    },
                    "repeat": 1,
                }
            )
        )
    )
    cases = {c["variant"]: c for c in result["cases"]}
    goaway_case = cases["goaway"]
    for name in ("healthy", "goaway"):
        case = cases.pop(name)
        assert case["status"] == "ok" and case["ok"] == 800, case["reason"]
        assert case["errors"] == {}, case["errors"]
    # a graceful GOAWAY every 20 requests: the streams above its last id went to new connections
    assert goaway_case["connections"]["opened"] >= 800 // 20
    for mode, reason in modes.items():
        case = cases[mode]
        assert case["status"] == "failed", (mode, case)
        assert reason in (case["reason"] or ""), (mode, case["reason"])
        assert "\n" not in case["reason"]
    left = [
        p for p in psutil.Process().children(recursive=True) if "tests.h2.hostile" in p.cmdline()
    ]
    assert left == []
