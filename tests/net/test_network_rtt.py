"""The network's round trip (TCP handshakes) to a remote target across a hop with a delay line
of 0, 1 and 5 ms between two hosts: ``network_rtt_us`` grows by the delay (within 10 %) and the
breakdown's overhead, which takes it out, stays where it was without the delay."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.hosts import Hosts
from tests.support.marks import timing_sensitive

pytestmark = pytest.mark.timeout(120)

PORT = 8080
DELAYS_MS = (0, 1, 5)


def suite(path: Path, addresses: list[str]) -> Path:
    variants = "".join(
        f'[variants."{ms}ms"]\naddress = "{a}:{PORT}"\n'
        for ms, a in zip(DELAYS_MS, addresses, strict=True)
    )
    path.write_text(
        '[target]\ndriver = "http"\n'
        + variants
        + '[workloads.small]\nkind = "factorial"\nn = 5\nrequests = 200\n'
        "[load]\nthreads = 1\nconnections = 1\nwarmup = 5\n[breakdown]\n"
    )
    return path


@timing_sensitive
def test_network_rtt_tracks_a_delay_on_the_hop(
    hosts: Callable[[int], Hosts], tmp_path: Path
) -> None:
    if not os.path.exists("/dev/net/tun"):
        pytest.skip("a delay line needs TUN devices (/dev/net/tun), which this machine lacks")
    h = hosts(2)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    far = [h.delay(0, 1, ms / 1e3)[1] for ms in DELAYS_MS]
    h.start(
        1,
        [
            sys.executable,
            "-m",
            "rpcmeter.servers.http_server",
            "--host",
            "0.0.0.0",
            "--port",
            str(PORT),
        ],
        env=env,
    )
    h.wait_listening(1, PORT)
    out = tmp_path / "r.json"
    done = h.run(
        0,
        [
            sys.executable,
            "-m",
            "rpcmeter",
            "run",
            str(suite(tmp_path / "s.toml", far)),
            "-o",
            str(out),
            "--no-store",
        ],
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    cases: dict[str, Any] = {c["variant"]: c for c in json.loads(out.read_text())["cases"]}
    assert all(c["status"] == "ok" for c in cases.values()), cases
    rtt = {v: c["network_rtt_us"]["p50"] for v, c in cases.items()}
    print({v: c["network_rtt_us"] for v, c in cases.items()})
    overhead = {v: c["breakdown"]["overhead_us"]["p50"] for v, c in cases.items()}
    report = f"network RTT p50 {rtt} us; overhead p50 {overhead} us"
    print(report)
    for ms in DELAYS_MS[1:]:
        added = rtt[f"{ms}ms"] - rtt["0ms"]
        assert abs(added - ms * 1e3) <= 0.1 * ms * 1e3, report
        # the delay is in the round trip taken out, not in the overhead
        assert abs(overhead[f"{ms}ms"] - overhead["0ms"]) <= 0.1 * ms * 1e3, report
    for c in cases.values():
        b = c["breakdown"]
        assert b["rtt_basis"] == "network" and b["rtt_us"]["p50"] == c["network_rtt_us"]["p50"]
