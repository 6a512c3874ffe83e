"""An external, non-Python server: Debian's nginx, started by a suite's server.command and driven
by rpcmeter's HTTP driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from rpcmeter.plan.load import build_suite
from rpcmeter.run.execute import run_suite
from rpcmeter.servers import nginx
from tests.support.synthetic import written

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        nginx.executable() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]


def test_http_driver_against_nginx(tmp_path: Path) -> None:
    command = nginx.prepare(tmp_path / "nginx")
    result = written(
        run_suite(
            build_suite(
                {
                    "name": "nginx",
                    "target": {"driver": "http", "server": {"command": command}},
                    "variants": {
                        "noop": {},
                        "hello": {"options": {"path": "/"}},
                        "unavailable": {"options": {"path": "/unavailable"}},
                    },
                    "workloads": {"noop": {}},
                    "load": {"requests": 200, "warmup": 5, "connections": 2, "concurrency": 4},
                }
            )
        )
    )
    cases = {c["variant"]: c for c in result["cases"]}
    for name in ("noop", "hello"):
        case = cases[name]
        assert case["status"] == "ok", case["reason"]
        assert case["errors"] == {} and case["ok"] == 800
        assert case["server_time"] is None  # nginx sends no Server-Timing
        # a GET of ~45 bytes out; nginx's reply head (Server: nginx/..., Date, ...) back
        assert 30 < case["bytes"]["out_per_request"] < 80
        assert 100 < case["bytes"]["in_per_request"] < 400
    assert cases["hello"]["bytes"]["in_per_request"] == pytest.approx(
        cases["noop"]["bytes"]["in_per_request"] + len("hello"), abs=1.5
    )
    unavailable = cases["unavailable"]
    assert unavailable["status"] == "failed"  # every request failed: not nginx's figures
    assert unavailable["reason"] == "800 of 800 requests failed (http_503: 800)"
    assert unavailable["errors"] == {"http_503": 800} and unavailable["ok"] == 0
    assert not (tmp_path / "nginx" / "nginx.pid").exists()  # stopped
