"""``[[load.stages]]``: what a suite may give, and the one-line errors for what it may not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rpcmeter.errors import SuiteError
from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import load_suite
from rpcmeter.runners.spec import Pacing, stages_of

HEAD = """
name = "t"
[target]
driver = "http"
transport = "tcp"
[workloads.echo]
kind = "echo"
[load]
concurrency = 8
"""

RAMP = """
[[load.stages]]
duration_s = 2
rate = 100
[[load.stages]]
duration_s = 4
rate = 300
ramp = true
[[load.stages]]
duration_s = 1
rate = 50
name = "cool"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "suite.toml"
    p.write_text(text)
    return p


def error_of(tmp_path: Path, text: str) -> str:
    p = write(tmp_path, text)
    with pytest.raises(SuiteError) as info:
        load_suite(p)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(p))
    return message


def test_rate_stages_make_an_open_loop_with_ramps_from_the_previous_rate(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, HEAD + RAMP))
    assert suite.load.mode == "open"
    stages = stages_of(suite.load)
    assert [s.rates for s in stages] == [(100, 100), (100, 300), (50, 50)]
    assert [s.label(i) for i, s in enumerate(stages)] == ["1", "2", "cool"]
    pacing = Pacing.of(suite.load)
    assert pacing is not None  # the mean of the stages: (200 + 800 + 50) / 7 s
    assert pacing.rate_rps == pytest.approx(1050 / 7)
    (case,) = expand(suite)
    assert case.params_dict()["duration_s"] == 7 and case.params_dict()["stages"] == 3


def test_concurrency_stages_are_a_closed_loop(tmp_path: Path) -> None:
    text = HEAD.replace("concurrency = 8\n", "") + (
        "[[load.stages]]\nduration_s = 1\nconcurrency = 10\n"
        "[[load.stages]]\nduration_s = 1\nconcurrency = 100\n"
    )
    suite = load_suite(write(tmp_path, text))
    assert suite.load.mode == "closed" and Pacing.of(suite.load) is None
    assert [s.concurrency for s in stages_of(suite.load)] == [10, 100]


@pytest.mark.parametrize(
    ("stages", "expected"),
    [
        (
            "[[load.stages]]\nduration_s = 1\nrate = 10\nconcurrency = 4\n",
            "load.stages[0]: give rate (open loop) or concurrency (closed loop), not both",
        ),
        (
            "[[load.stages]]\nduration_s = 0\nrate = 10\n",
            "load.stages[0].duration_s: Input should be greater than 0 (got 0)",
        ),
        (
            "[[load.stages]]\nduration_s = -2\nrate = 10\n",
            "load.stages[0].duration_s: Input should be greater than 0 (got -2)",
        ),
        (
            "[[load.stages]]\nduration_s = 1\nrate = 10\nramp = true\n",
            "load.stages: stage 1 ramps (ramp = true) from the previous stage's "
            "rate, and there is none: give its start_rate",
        ),
        (
            "[[load.stages]]\nduration_s = 1\nrate = 10\n"
            "[[load.stages]]\nduration_s = 1\nconcurrency = 3\n",
            "load.stages: stage 2 gives concurrency, stage 1 rate",
        ),
        (
            "[[load.stages]]\nduration_s = 1\nconcurrency = 3\nramp = true\n",
            "ramp and start_rate are for a stage with a rate",
        ),
    ],
)
def test_bad_stages_are_one_line_errors(tmp_path: Path, stages: str, expected: str) -> None:
    assert expected in error_of(tmp_path, HEAD + stages)


def test_stages_with_a_duration_or_rate_of_their_own(tmp_path: Path) -> None:
    msg = error_of(tmp_path, HEAD.replace("[load]\n", "[load]\nduration_s = 3\n") + RAMP)
    assert "duration_s: the stages give the durations" in msg
    msg = error_of(tmp_path, HEAD.replace("[load]\n", '[load]\nmode = "open"\nrate = 5\n') + RAMP)
    assert "rate: the stages give the rates" in msg


def test_stages_on_a_command_target(tmp_path: Path) -> None:
    text = (
        '[target]\ndriver = "command"\ncommand = "true"\n[workloads.w]\n'
        "[[load.stages]]\nduration_s = 1\nconcurrency = 2\n"
    )
    msg = error_of(tmp_path, text)
    assert 'load.stages: the target runs whole commands (driver = "command")' in msg


def test_cli_stage_error_is_one_line_exit_2(tmp_path: Path) -> None:
    p = write(tmp_path, HEAD + "[[load.stages]]\nduration_s = 1\nrate = 10\nconcurrency = 4\n")
    proc = subprocess.run(
        [sys.executable, "-m", "rpcmeter.cli", "run", str(p)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert "not both" in proc.stderr


CLOSED = "[[load.stages]]\nduration_s = 1\nconcurrency = 10\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEAD + RAMP + "[matrix]\nrate = [10, 20]\n", "matrix.rate: load.stages give the rates"),
        (
            HEAD.replace("concurrency = 8\n", "") + CLOSED + "[matrix]\nrate = [10, 20]\n",
            "matrix.rate: load.stages give the rates",
        ),
        (
            HEAD.replace("concurrency = 8\n", "") + CLOSED + "[matrix]\nconcurrency = [1, 2]\n",
            "matrix.concurrency: load.stages give the concurrency",
        ),
        (HEAD + RAMP + "[matrix]\nduration_s = [1]\n", "matrix.duration_s: load.stages give"),
        (  # a workload's own stages (these made a traceback when the cases were expanded)
            HEAD.replace(
                'kind = "echo"\n', 'kind = "echo"\nstages = [{duration_s = 1, rate = 5}]\n'
            )
            + "[matrix]\nrate = [10, 20]\n",
            "matrix.rate: workloads.echo.stages give the rates",
        ),
        (
            HEAD.replace("concurrency = 8\n", "").replace(
                'kind = "echo"\n', 'kind = "echo"\nstages = [{duration_s = 1, concurrency = 2}]\n'
            )
            + "[matrix]\nconcurrency = [1, 2]\n",
            "matrix.concurrency: workloads.echo.stages give the concurrency",
        ),
    ],
)
def test_a_matrix_may_not_give_what_the_stages_give(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert expected in error_of(tmp_path, text)


def test_a_matrix_of_concurrency_beside_rate_stages_is_the_loops_that_send(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, HEAD + RAMP + "[matrix]\nconcurrency = [4, 16]\n"))
    cases = expand(suite)
    assert [c.load.concurrency for c in cases] == [4, 16]
    assert all(c.load.mode == "open" and len(c.load.stages or ()) == 3 for c in cases)
