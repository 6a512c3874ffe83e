"""Stages under hostile input, through the command line: a rate search over a staged suite is
refused (every probe would send the stages' rates, not the rate it judges); a thousand stages
of 2 ms each are all in the result, the last one too (no request fell in it); a stage named
with a line break is shown on one table row, escaped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rpcmeter.cli import main

HEAD = """\
name = "t"
repeat = 1
[target]
driver = "http"
transport = "tcp"
[workloads.noop]
kind = "noop"
[load]
warmup = 2
"""


def stage(duration_s: float, rate: float, name: str = "") -> str:
    named = f"name = {json.dumps(name)}\n" if name else ""
    return f"[[load.stages]]\nduration_s = {duration_s}\nrate = {rate}\n{named}"


def run(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rpcmeter", "run", str(path), "--no-store", "--no-live", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_rate_search_over_stages_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # every probe would send the stages' 100/s whatever rate it "probed"
    path = tmp_path / "staged.toml"
    path.write_text(HEAD + stage(1, 100) + stage(1, 100))
    out = tmp_path / "result.json"
    argv = ["run", str(path), "--no-store", "--find-max-rate", "--slo", "p99=50ms", "-o", str(out)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("rpcmeter: error: --find-max-rate: ")
    assert "stages" in captured.err
    # no figure reported: no max_rate_rps of rates never sent
    assert not out.exists() and "max_rate" not in captured.out


def test_every_stage_that_ran_is_in_the_result(tmp_path: Path) -> None:
    # the last stage offers no request (1/s for 2 ms): no client ships a window for it
    path = tmp_path / "thousand.toml"
    path.write_text(HEAD + stage(0.002, 200) * 999 + stage(0.002, 1))
    out = tmp_path / "result.json"
    done = run(path, "-o", str(out))
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    stages = case["stages"]
    assert [s["index"] for s in stages] == list(range(1000))
    assert all(s["complete"] for s in stages)
    assert stages[-1]["start_s"] == pytest.approx(1.998)
    # the stages' figures add up to the case's: none were dropped with a stage
    assert sum(s["requests"] for s in stages) == case["requests"]
    assert sum(s["ok"] for s in stages) == case["ok"]


def test_a_stage_name_with_a_line_break_is_one_escaped_row(tmp_path: Path) -> None:
    path = tmp_path / "named.toml"
    path.write_text(HEAD + stage(0.1, 50, "a\nb") + stage(0.1, 50, "c"))
    done = run(path, "--width", "200")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if "50/s" in line]
    assert len(rows) == 2, done.stdout
    assert rows[0].lstrip().startswith("a\\nb "), rows
    assert not any(line.strip() == "b" or line.lstrip().startswith("b ") for line in rows)
