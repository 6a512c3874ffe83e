"""``rpcmeter run --find-max-rate --slo ...`` end to end against the rpyc reference server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rpcmeter.analysis.rates import RateSearch, Step
from rpcmeter.cli import main

SUITE = """
name = "search"
[target]
driver = "rpyc"
transport = "unix"
[placement]
server_cpus = "none"
client_cpus = "none"
[workloads.simple]
[workloads.quiet]
kind = "idle"
[load]
mode = "open"
rate = 100
duration_s = 0.5
warmup = 5
"""


@pytest.mark.timeout(120)
def test_find_max_rate_records_its_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(SUITE)
    out = tmp_path / "r.json"
    argv = [
        "run", str(suite), "--find-max-rate", "--slo", "p99=200ms", "--search-steps", "3",
        "-o", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(out.read_text())
    (entry,) = result["max_rate"]  # the idle workload sends nothing: it is not searched
    assert entry["workload"] == "simple"
    steps = entry["steps"]
    # a trivial call keeps up with 400 req/s, so the search grows 100, 200, 400 (on a machine
    # too busy for that, it turns back at the first failing rate: the steps say which)
    assert len(steps) == 3 and steps[0]["rate"] == 100
    passed = {s["rate"]: s["passed"] for s in steps}
    replay = RateSearch(100, max_steps=3)
    while replay.rate is not None:
        replay.told(Step(replay.rate, passed[replay.rate], ""))
    assert [st.rate for st in replay.result.steps] == [s["rate"] for s in steps]
    passing = [s["rate"] for s in steps if s["passed"]]
    assert entry["max_rate_rps"] == (max(passing) if passing else None)
    if passing:
        assert entry["latency_us"]["p99"] <= 200_000
    for s in steps:
        assert s["passed"] == (
            s["p99_us"] is not None and s["p99_us"] <= 200_000 and not s["reason"]
        )
    assert entry["objectives"] == [{"stat": "p99", "bound_us": 200_000}]
    assert [c["point"]["rate"] for c in result["cases"]] == [s["rate"] for s in steps]
    assert [s["case"] for s in entry["steps"]] == [c["id"] for c in result["cases"]]
    assert "rate" in result["suite"]["matrix_keys"]
    text = capsys.readouterr().out
    assert "highest rate meeting p99=200ms" in text
    assert "latency vs offered rate" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--find-max-rate"], "--find-max-rate needs a latency objective"),
        (["--slo", "p99=5ms"], "--slo is the objective of --find-max-rate"),
        (["--find-max-rate", "--slo", "p99"], "--slo p99: cannot read 'p99'"),
    ],
)
def test_rate_search_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(SUITE)
    assert main(["run", str(suite), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rpcmeter: error: ") and message in err
    assert "\n" not in err


@pytest.mark.parametrize(
    ("suite_text", "message"),
    [
        (
            '[target]\ndriver = "command"\ncommand = "true"\n',
            "--find-max-rate: driver 'command' cannot send requests on a schedule (open loop)",
        ),
        (
            '[target]\ndriver = "rpyc"\n[workloads.quiet]\nkind = "idle"\n',
            "--find-max-rate: no workload sends requests (idle ones are not searched)",
        ),
    ],
)
def test_suites_with_nothing_to_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suite_text: str, message: str
) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(suite_text)
    assert main(["run", str(suite), "--no-store", "--find-max-rate", "--slo", "p99=5ms"]) == 2
    err = capsys.readouterr().err
    assert err == f"rpcmeter: error: {message}\n"
