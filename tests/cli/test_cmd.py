"""``rpcmeter cmd``: whole commands measured and compared from the command line, with hyperfine's
flags, through ``rpcmeter``'s entry point and real commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.cli import main


def cmd(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any] | None]:
    """``rpcmeter cmd ARGS`` in this process, its result document when it wrote one."""
    out = tmp_path / "result.json"
    out.unlink(missing_ok=True)
    code = main(["cmd", "--no-store", "--no-live", "-o", str(out), *args])
    return code, json.loads(out.read_text()) if out.exists() else None


def runs_of(result: dict[str, Any], variant: str) -> list[dict[str, Any]]:
    return [r for c in result["cases"] if c["variant"] == variant for r in c["runs"]]


@pytest.mark.timeout(120)
def test_two_commands_compare_interleaved_with_a_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result = cmd(
        tmp_path, "--tables", "-r", "6", "-n", "fast", "-n", "slow", "sleep 0.01", "sleep 0.05"
    )
    out = capsys.readouterr().out
    assert code == 0 and result is not None
    # three rounds, the commands alternating, six runs of each in all
    assert [c["variant"] for c in result["cases"]] == ["fast", "slow"] * 3
    assert len(runs_of(result, "fast")) == len(runs_of(result, "slow")) == 6
    assert "Benchmark 1: fast" in out and "Benchmark 2: slow" in out
    assert "Time (mean ± σ):" in out and "[User:" in out and "Range (min … max):" in out
    assert "6 runs" in out and "peak RSS" in out
    assert "fast ran" in out and "times faster than slow" in out
    assert "rpcmeter: slow / fast = " in out and "95 % interval" in out and ": slower" in out
    # rpcmeter's tables follow (--tables), in a command's words: runs, not requests
    assert "ratio with 95% interval and verdict (6 runs)" in out
    assert "runs/s" not in out and "CPU/run" in out and "wall" in out
    assert "req/s" not in out and "server CPU" not in out


@pytest.mark.timeout(120)
def test_parameter_lists_and_scans_make_a_command_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result = cmd(tmp_path, "-N", "-r", "2", "-L", "s", "0.01,0.02", "sleep {s}")
    assert code == 0 and result is not None
    argvs = {c["variant"]: c["command"]["argv"] for c in result["cases"]}
    assert argvs == {"sleep 0.01": ["sleep", "0.01"], "sleep 0.02": ["sleep", "0.02"]}
    code, result = cmd(
        tmp_path, "-r", "1", "-P", "n", "1", "2", "-D", "0.5", "-n", "n={n}", "exit 0 # {n}"
    )
    assert code == 0 and result is not None
    assert list(result["suite"]["variants"]) == ["n=1.0", "n=1.5", "n=2.0"]
    assert "Benchmark 3: n=2.0" in capsys.readouterr().out


@pytest.mark.timeout(120)
def test_setup_prepare_and_cleanup_run_in_hyperfines_order(tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    code, result = cmd(
        tmp_path,
        "-w",
        "1",
        "-r",
        "2",
        "--setup",
        f"echo setup >> {log}",
        "--prepare",
        f"echo prepare >> {log}",
        "--cleanup",
        f"echo cleanup >> {log}",
        f"echo run >> {log}",
    )
    assert code == 0 and result is not None
    assert log.read_text().split() == [
        "setup",
        *["prepare", "run"] * 3,  # the warmup run, then the two measured ones
        "cleanup",
    ]
    assert len(runs_of(result, f"echo run >> {log}")) == 2


@pytest.mark.timeout(120)
def test_commands_run_by_a_shell_unless_N(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # /bin/sh runs "true && false": it fails; without a shell, true gets two arguments
    code, _ = cmd(tmp_path, "-r", "1", "true && false")
    assert code == 1 and "command exited with status 1" in capsys.readouterr().out
    code, result = cmd(tmp_path, "-N", "-r", "1", "true && false")
    assert code == 0 and result is not None
    assert result["cases"][0]["command"]["argv"] == ["true", "&&", "false"]


@pytest.mark.timeout(120)
def test_the_saved_suite_plans_the_same_cases(tmp_path: Path) -> None:
    saved = tmp_path / "cmd.toml"
    first = tmp_path / "first.json"
    code = main(
        [
            "cmd",
            "--no-store",
            "--no-live",
            "-o",
            str(first),
            "-r",
            "2",
            "-w",
            "0",
            "-L",
            "x",
            "a,b",
            "--prepare",
            "true",
            "--save-suite",
            str(saved),
            "echo {x} '{not a parameter}'",
            "true",
        ]
    )
    assert code == 0
    again = tmp_path / "again.json"
    assert main(["run", str(saved), "--no-store", "--no-live", "-o", str(again)]) == 0

    def planned(path: Path) -> list[tuple[str, list[str], int]]:
        doc = json.loads(path.read_text())
        return [(c["variant"], c["command"]["argv"], len(c["runs"])) for c in doc["cases"]]

    assert planned(first) == planned(again)
    assert planned(first)[0] == ("echo a '{not a parameter}'", ["echo a '{not a parameter}'"], 1)


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    def rpcmeter(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rpcmeter", "cmd", "--no-store", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )

    proc = rpcmeter("-n", "a", "-n", "b", "true")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "rpcmeter: error: 2 --command-name for 1 command(s)\n"
    proc = rpcmeter("--runs", "x", "true")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "rpcmeter: error: cmd: argument -r/--runs: not a whole number: 'x' "
        "(see rpcmeter cmd --help)\n"
    )


@pytest.mark.timeout(120)
def test_the_minimum_time_counts_the_commands_own_time(tmp_path: Path) -> None:
    code, result = cmd(tmp_path, "-N", "-w", "0", "-m", "2", "--min-time", "0.5", "sleep 0.01")
    assert code == 0 and result is not None
    walls = [r["wall_s"] for r in runs_of(result, "sleep 0.01")]
    # it ran until the runs' own time reached 0.5 s and it made as many runs as hyperfine would
    # (0.5 s over the first run's time), and stopped at the first run where both held:
    # rpcmeter's own time around the runs is not counted
    hyperfines = int(0.5 / walls[0])
    assert sum(walls) >= 0.5 and len(walls) >= hyperfines
    assert sum(walls[:-1]) < 0.5 or len(walls) - 1 < hyperfines


@pytest.mark.timeout(120)
def test_a_suites_minimum_time_counts_the_commands_own_time(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(
        '[target]\ndriver = "command"\ncommand = "sleep 0.01"\n'
        "[runs]\nwarmup = 0\nmin_runs = 1\nmin_time_s = 0.3\n"
    )
    out = tmp_path / "result.json"
    assert main(["run", str(suite), "--no-store", "--no-live", "-o", str(out)]) == 0
    walls = [r["wall_s"] for r in json.loads(out.read_text())["cases"][0]["runs"]]
    # with rpcmeter's time between runs counted (about 100 ms a run), 0.3 s made 3 runs
    assert sum(walls) >= 0.3 and len(walls) >= int(0.3 / walls[0])


@pytest.mark.timeout(120)
def test_hyperfines_export_flags_write_rpcmeters_files(tmp_path: Path) -> None:
    """`--export-json`, `--export-csv` and `--export-markdown`, as a hyperfine user types them:
    rpcmeter's result document, CSV and tables."""
    files = {kind: tmp_path / f"out.{kind}" for kind in ("json", "csv", "md")}
    exports = ["--export-json", str(files["json"]), "--export-csv", str(files["csv"])]
    exports += ["--export-markdown", str(files["md"])]
    code = main(["cmd", "--no-store", "--no-live", "-N", "-r", "2", *exports, "true"])
    assert code == 0
    doc = json.loads(files["json"].read_text())
    assert [len(c["runs"]) for c in doc["cases"]] == [2]
    assert files["csv"].read_text().startswith("run_id,suite,case,variant,workload,")
    assert "true" in files["md"].read_text()
