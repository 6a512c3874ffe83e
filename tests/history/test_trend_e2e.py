"""`rpcmeter trend` on ten real stored runs: a server option makes the fifth and later runs
slower, and trend finds that step at the fifth run and gates on it; the variant whose
configuration never changed shows no step that makes it worse, and passes the gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from rpcmeter.cli import main
from rpcmeter.history.store import Store
from tests.support.marks import timing_sensitive

# Two variants in every run: `changed` spins 2 ms of server CPU per call from the fifth run on
# (the rpyc server's spin_us, some 10x its usual cost per call), `steady` never changes.
SUITE = """
name = "trend check"
seed = 1
repeat = 1
[target]
driver = "rpyc"
transport = "unix"
[variants.steady]
[variants.changed]
options = { spin_us = 0 }
[workloads.simple]
[load]
requests = 30
warmup = 3
[resources]
idle_s = 0
"""
RUNS, FIRST_SLOW = 10, 5


@timing_sensitive
@pytest.mark.timeout(240)
def test_trend_finds_the_run_that_made_a_case_slower(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, store = tmp_path / "s.toml", str(tmp_path / "h.db")
    suite.write_text(SUITE, encoding="utf-8")
    for run in range(1, RUNS + 1):
        spin = ["--set", "variants.changed.options.spin_us=2000"] if run >= FIRST_SLOW else []
        assert main(["run", str(suite), "--store", store, *spin]) == 0
    capsys.readouterr()

    png, page = tmp_path / "png", tmp_path / "trend.html"
    argv = ["trend", "--store", store, "--metric", "mean,server_cpu", "--fail-on-step"]
    assert main([*argv, "--png", str(png), "--html", str(page)]) == 1
    out = capsys.readouterr().out
    assert f"{RUNS} runs in {store}, 4 series" in out
    # the step is where the option changed, slower, in both metrics
    steps = [
        line for line in out.splitlines() if line.startswith("  trend check") and "(p=" in line
    ]
    changed = [line for line in steps if " · changed: " in line]
    assert len(changed) == 2, out
    # the variant that never changed: no step that makes it worse (a VM can drift faster over
    # ten runs, and trend says so: its first runs are often the slowest)
    steady = [line for line in steps if " · steady: " in line]
    assert len(changed) + len(steady) == len(steps), out
    assert not any(" slower " in line or " more " in line for line in steady), out
    for line, words in zip(changed, ("mean latency", "server CPU per request"), strict=True):
        assert line.startswith(f"  trend check · simple · changed: {words} ")
        assert f"at run {FIRST_SLOW} (" in line and ("slower" in line or "more" in line)
        ratio = float(line.split(f"{words} ")[1].split("x")[0])
        assert ratio > 3, line
    assert "gate: 2 series' newest runs sit after a step worse than 1.05x" in out
    assert len(list(png.glob("*.png"))) == 4
    assert page.read_text(encoding="utf-8").count('data-kind="trend"') == 4

    # the variant that never changed: ten identical configurations, no step worse, the gate
    # passes
    assert main([*argv, "steady"]) == 0
    out = capsys.readouterr().out
    assert "2 series" in out
    assert "gate: no series' newest runs sit after a step" in out

    # the revisions are queryable columns; with one revision for all runs, --by revision pools
    # them into one point, and one point has no steps
    with Store(store) as db:
        assert db.db.execute("SELECT COUNT(*) FROM runs WHERE git_commit IS NULL").fetchone() == (
            RUNS,
        )  # the suite lives outside git
    assert main(["trend", "--store", store, "--by", "revision", "--fail-on-step"]) == 0
    assert "1 points" in capsys.readouterr().out


def test_trend_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trend", "--store", str(tmp_path / "missing.db")]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no history database" in err
    assert main(["trend", "--metric", "speed", "--store", str(tmp_path / "missing.db")]) == 2
    assert "--metric speed: unknown metric" in capsys.readouterr().err
    with Store(tmp_path / "empty.db"):
        pass
    assert main(["trend", "--store", str(tmp_path / "empty.db")]) == 0
    assert "no runs in" in capsys.readouterr().out
