"""The live line's ETA of a staged case rests on its stages' durations (it said 31 s left 9 s
into a 20 s staged case): what is left of the running case, then a case's time for each case
after it."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from rpcmeter.cli import main
from rpcmeter.cli.progress import Progress, case_fraction, case_seconds
from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import build_suite

pytestmark = pytest.mark.timeout(120)

STAGES = [{"duration_s": 5.0, "rate": 100}, {"duration_s": 15.0, "rate": 400}]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _eta(stream: _Tty) -> str:
    line = stream.getvalue().split("\r")[-1].rstrip()
    return line.rpartition(" · ETA ")[2]


def test_eta_of_a_staged_case_is_what_its_stages_have_left() -> None:
    suite = build_suite(
        {"load": {"stages": STAGES, "concurrency": 8}, "workloads": {"simple": {}}, "repeat": 2}
    )
    first, second = expand(suite)
    assert case_seconds(first) == 20.0
    assert case_fraction(first, 2_000, 9.0) == pytest.approx(0.45)
    now = [0.0]
    stream = _Tty()
    progress = Progress(stream, clock=lambda: now[0])
    progress.case_started(first, 2)
    now[0] = 11.0  # the server's start and the warmup took 2 s
    progress.progress(first, 2, 2_000, 9.0)
    assert _eta(stream) == "33 s"  # 11 s left of this case, then a case of 22 s
    now[0] = 22.5
    progress.case_started(second, 2)
    now[0] = 34.0
    progress.progress(second, 2, 2_000, 9.5)
    assert _eta(stream) == "10 s"  # the last case: what its stages have left


def test_run_shows_the_staged_case_eta_counting_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real staged case of 1.5 s: every ETA the line shows is at most what its stages have
    left (whole seconds), never more than the case's planned length."""
    suite = tmp_path / "s.toml"
    suite.write_text(
        """
name = "staged"
[target]
driver = "http"
transport = "tcp"
[workloads.noop]
[load]
concurrency = 2
warmup = 5
[[load.stages]]
duration_s = 0.5
rate = 100
[[load.stages]]
duration_s = 1.0
rate = 200
[resources]
idle_s = 0
""",
        encoding="utf-8",
    )
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["run", str(suite), "--no-store", "--no-live"]) == 0
    shown = [
        (int(m.group(1)), int(m.group(2)))
        for m in re.finditer(r"([\d,]+) requests · [\d,]+ req/s · ETA (\d+) s", err.getvalue())
        if (m.group(1).isdigit())
    ]
    assert shown, err.getvalue()
    assert all(eta <= 2 for _, eta in shown), shown
