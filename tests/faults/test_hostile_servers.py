"""Hostile servers end to end: every case ends within its deadline with a named error and a clear
reason, and no process prints a traceback.

One ``rpcmeter run`` per protocol: each variant is :mod:`tests.faults.hostile` in one mode, so a
protocol's modes cost one start of rpcmeter, and the three runs overlap."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(170)
HOSTILE = Path(__file__).with_name("hostile.py")
TIMEOUT_S = 3.0


def suite_text(driver: str, modes: list[str], options: dict[str, str] | None = None) -> str:
    """A suite whose variant ``NAME`` runs the hostile server in mode ``NAME`` (a name with a
    suffix, ``close.blocking``, the mode before the dot with ``options[suffix]`` as options)."""
    lines = ['name = "hostile"', "repeat = 1", "[target]", f'driver = "{driver}"']
    lines.append('transport = "tcp"')
    if driver == "raw":  # the plain modes on the event loop; ``.blocking`` on the other path
        lines.append('options = { io = "event" }')
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


class Run:
    """One ``rpcmeter run`` of a suite of hostile variants, started at once (the three protocols'
    runs overlap: most of their time is spent waiting for deadlines)."""

    def __init__(
        self, root: Path, driver: str, modes: list[str], options: dict[str, str] | None, *extra: str
    ) -> None:
        self.dir = root / driver
        self.dir.mkdir()
        self.modes = modes
        suite = self.dir / "hostile.toml"
        suite.write_text(suite_text(driver, modes, options))
        self.out = self.dir / "out.json"
        command = [sys.executable, "-m", "rpcmeter.cli", "run", str(suite), "-o", str(self.out)]
        self.proc = subprocess.Popen(
            [*command, "--no-store", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.dir,
        )

    def finish(self) -> tuple[int, str, dict[str, dict[str, Any]]]:
        """Exit status, stderr, the cases by variant."""
        out, err = self.proc.communicate(timeout=150)
        assert "Traceback" not in err, err
        assert "Traceback" not in out, out
        doc = json.loads(self.out.read_text())
        cases = {c["variant"]: c for c in doc["cases"]}
        assert set(cases) == set(self.modes), err
        return self.proc.returncode, err, cases


STREAM_MODES = ["ok", "hang", "die", "close", "fail", "twice", "negative", "garbage"]
# raw's blocking client (io = "auto" picks it for one loop per client) reads replies on its own
# path; the plain modes run on the event loop (io = "event")
BLOCKING = ["close.blocking", "twice.blocking", "negative.blocking", "garbage.blocking"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    root = tmp_path_factory.mktemp("hostile")
    started = {
        "http": Run(root, "http", [*STREAM_MODES, "bad400"], None),
        "raw": Run(root, "raw", STREAM_MODES + BLOCKING, {"blocking": 'io = "blocking"'}),
        "zmq": Run(root, "zmq", ["ok", "hang", "die", "garbage"], None, "--max-error-rate", "0.01"),
    }
    yield started
    for run in started.values():
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.communicate()


def failed_with(case: dict[str, Any], *words: str) -> None:
    assert case["status"] == "failed", case
    assert any(w in (case["reason"] or "") for w in words), case["reason"]


def check_common(cases: dict[str, dict[str, Any]]) -> None:
    # every case ended by its deadline, as its result says: the hang at load.timeout_s, every
    # other mode before it, by what its server did (not by the run's wall time, which a busy
    # machine stretches; a run that hangs is caught by finish's timeout)
    for name, case in cases.items():
        reason = case["reason"] or ""
        if name == "hang":
            assert reason.startswith("timed out while") and "(load.timeout_s)" in reason, reason
        else:
            assert "timed out" not in reason, (name, reason)
        if case.get("wall_s") is not None:  # the measured load stayed within its deadline
            assert case["wall_s"] <= TIMEOUT_S, (name, case["wall_s"])
    assert cases["ok"]["status"] == "ok" and cases["ok"]["ok"] == 40, cases["ok"]
    failed_with(cases["hang"], "timed out while warming up")  # connected: no warmup reply
    failed_with(cases["die"], "server exited with status 3")
    if "close" in cases:  # stream clients report what was answered before the server died
        assert cases["die"]["ok"] == 5, cases["die"]
    if "fail" in cases:  # every reply an error: the case fails, and says why
        failed_with(cases["fail"], "requests failed")
        assert cases["fail"]["ok"] == 0 and sum(cases["fail"]["errors"].values()) == 40


@pytest.mark.parametrize("driver", ["http", "raw"])
def test_stream_servers(runs: dict[str, Run], driver: str) -> None:
    status, err, cases = runs[driver].finish()
    assert status == 0, err  # some cases failed, not all
    check_common(cases)
    for name, case in cases.items():
        mode = name.partition(".")[0]
        if mode == "close":  # each connection closed after 10 replies: the loop reconnects
            # (the event loop's and the blocking client alike); the request sent before the close
            # was seen is lost, counted (about 1 in 11)
            assert case["status"] == "ok", case
            assert set(case["errors"]) == {"connection_closed"} and case["ok"] >= 30, case
            assert case["ok"] + case["errors"]["connection_closed"] == 40, case
        if mode in ("twice", "negative", "garbage"):  # the warmup stops at the first, named
            failed_with(case, "protocol_error: ")
            assert case["ok"] == 0, case
        if mode == "twice":  # a reply sent twice is never a second success
            assert "answers no request" in case["reason"]
    if "bad400" in cases:
        failed_with(cases["bad400"], "requests failed", "connection closed", "keepalive_required")


def test_zmq_servers(runs: dict[str, Run]) -> None:
    status, err, cases = runs["zmq"].finish()
    assert status == 1, err  # cases over the error rate given
    assert "--max-error-rate" in err, err
    check_common(cases)
    failed_with(cases["garbage"], "protocol_error: ")
