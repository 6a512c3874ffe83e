"""Whole-command suites end to end: runs, placeholders, per-run values, failures, tables."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.cli import main
from rpcmeter.errors import SuiteError
from rpcmeter.plan.load import load_suite
from rpcmeter.result.cells import cells
from rpcmeter.runners.command import measure
from rpcmeter.suite.model import Runs
from rpcmeter.suite.placeholders import fill, placeholders
from tests.support.synthetic import parsed


def write_suite(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(textwrap.dedent(body))
    return path


def run_cli(suite: Path, tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "result.json"
    code = main(["run", str(suite), "-o", str(out), "--width", "160", *extra])
    return code, json.loads(out.read_text())


def test_placeholders_are_filled_without_a_shell() -> None:
    cmd = "sh -c 'echo {a} {{literal}}' --flag={flag} {n}"
    assert placeholders(cmd) == ["a", "flag", "n"]
    assert fill(cmd, {"a": "x y", "flag": True, "n": 3}) == [
        "sh",
        "-c",
        "echo x y {literal}",
        "--flag=true",
        "3",
    ]


@pytest.mark.timeout(120)
def test_runs_matrix_and_per_run_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = write_suite(
        tmp_path,
        """
        name = "sleepers"
        repeat = 1
        [target]
        driver = "command"
        command = "sleep {t}"
        [variants.short]
        [variants.spin]
        command = "sh -c 'sleep {t} & while kill -0 $! 2>/dev/null; do :; done'"
        [matrix]
        t = [0.05, 0.1]
        [runs]
        warmup = 1
        count = 5
        """,
    )
    code, result = run_cli(suite, tmp_path)
    assert code == 0
    assert len(result["cases"]) == 4
    for case in result["cases"]:
        assert case["status"] == "ok", case["reason"]
        assert case["kind"] == "command"
        assert len(case["runs"]) == 5 and case["requests"] == 5 and case["ok"] == 5
        t = case["point"]["t"]
        for run in case["runs"]:
            assert set(run) >= {"wall_s", "user_s", "sys_s", "max_rss_bytes", "exit_code"}
            assert run["exit_code"] == 0
            assert t * 0.9 <= run["wall_s"] < t + 2.0
        walls = [r["wall_s"] for r in case["runs"]]
        assert case["command"]["wall_s"] == pytest.approx(sum(walls) / 5)
        assert case["latency"]["mean_us"] == pytest.approx(sum(walls) / 5 * 1e6, rel=0.01)
        assert case["cpu"]["server_user_s"] == pytest.approx(sum(r["user_s"] for r in case["runs"]))
        assert case["memory"]["server_peak_rss_bytes"] > 0
    sleepy = [c for c in result["cases"] if c["variant"] == "short"]
    spinning = [c for c in result["cases"] if c["variant"] == "spin"]
    # sleep(1) uses almost no CPU; a shell polling its child burns CPU while it waits
    assert max(c["command"]["cpu_s"] for c in sleepy) < 0.05
    # `sleep` holds about 1.6 MB: its own peak, not the launcher's 13-14 MB
    assert max(c["memory"]["server_peak_rss_bytes"] for c in sleepy) < 4 << 20
    assert min(c["command"]["cpu_s"] for c in spinning) > 0.01
    for row in cells(parsed(result))["command"].values():  # per-run values for comparisons
        for cell in row.values():
            (case,) = cell.cases
            runs = case.runs or []
            assert cell.values("runs.wall_s") == [r.wall_s for r in runs]
            assert cell.values("runs.cpu_s") == pytest.approx([r.user_s + r.sys_s for r in runs])
    out = capsys.readouterr().out
    assert "wall ratio" in out and "CPU ratio" in out
    assert "more" in out  # the spinning variant uses more CPU, with a verdict


@pytest.mark.timeout(120)
def test_minimum_runs_and_minimum_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = write_suite(
        tmp_path,
        """
        repeat = 1
        [target]
        driver = "command"
        command = ["sleep", "0.05"]
        [runs]
        warmup = 0
        min_runs = 2
        min_time_s = 0.4
        """,
    )
    code, result = run_cli(suite, tmp_path)
    (case,) = result["cases"]
    assert code == 0 and case["status"] == "ok"
    assert len(case["runs"]) >= 2
    assert case["wall_s"] >= 0.4  # the measuring phase lasted at least min_time_s
    out = capsys.readouterr().out
    assert "(means over runs)" in out and "wall ratio" not in out  # one variant: nothing to compare


@pytest.mark.timeout(120)
def test_a_failing_command_fails_its_case_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = write_suite(
        tmp_path,
        """
        repeat = 1
        [target]
        driver = "command"
        command = "true"
        [variants.good]
        [variants.bad]
        command = "sh -c 'echo something broke >&2; exit 3'"
        [runs]
        warmup = 0
        count = 2
        """,
    )
    code, result = run_cli(suite, tmp_path)
    assert code == 0  # one variant still ran
    good, bad = result["cases"]
    assert good["status"] == "ok"
    assert bad["status"] == "failed"
    assert bad["reason"] == "run 1: command exited with status 3 (something broke)"
    assert bad["runs"][0]["exit_code"] == 3
    assert "failed: bad" in capsys.readouterr().out


def test_suite_errors_name_the_key(tmp_path: Path) -> None:
    unknown = write_suite(
        tmp_path,
        """
        repeat = 1
        [target]
        driver = "command"
        command = "sleep {t} {oops}"
        [matrix]
        t = [1]
        """,
    )
    with pytest.raises(SuiteError, match=r"target.command: unknown placeholder \{oops\}"):
        load_suite(unknown)
    missing = write_suite(tmp_path, '[target]\ndriver = "command"\n')
    with pytest.raises(SuiteError, match=r"target\.command: driver 'command' needs a command line"):
        load_suite(missing)


def test_quick_caps_runs(tmp_path: Path) -> None:
    path = write_suite(
        tmp_path, '[target]\ndriver = "command"\ncommand = "true"\n[runs]\nmin_runs = 50\n'
    )
    suite = load_suite(path, quick=True)
    assert (suite.runs.warmup, suite.runs.min_runs, suite.runs.min_time_s) == (0, 3, 0.0)


def _cgroups_of(case_dir: Path) -> list[str]:
    return [p.read_text() for p in sorted(case_dir.glob("cg-*"))]


@pytest.mark.timeout(120)
def test_cpus_is_how_many_cpus_the_command_runs_on(tmp_path: Path) -> None:
    """``{cpus}``: every CPU rpcmeter may use when the command runs unpinned; with
    ``placement.server_cpus = 1`` (a count) one, and every run starts on that CPU and in the
    server's quota cgroup where one can be made."""
    record = "sh -c 'echo {cpus} > cpus-$$; cat /proc/self/cgroup > cg-$$'"
    suite = write_suite(
        tmp_path,
        f"""
        repeat = 1
        [target]
        driver = "command"
        cwd = "."
        command = "{record}"
        [runs]
        warmup = 0
        count = 2
        """,
    )
    code, result = run_cli(suite, tmp_path)
    (case,) = result["cases"]
    assert code == 0 and case["status"] == "ok", case["reason"]
    assert case["command"]["argv"][2].startswith(f"echo {len(os.sched_getaffinity(0))} >")
    for path in tmp_path.glob("cg-*"):
        path.unlink()
    code, result = run_cli(suite, tmp_path, "--set", "placement.server_cpus=1")
    (case,) = result["cases"]
    assert code == 0 and case["status"] == "ok", case["reason"]
    assert case["command"]["argv"][2].startswith("echo 1 >")
    assert case["placement"]["server_cpus"] == [min(os.sched_getaffinity(0))]
    group = result["environment"]["placement"]["server_cgroup"]
    cgroups = _cgroups_of(tmp_path)
    assert len(cgroups) == 2
    if group is None:  # no writable cgroup here: the quota is skipped, and the reason recorded
        assert result["environment"]["placement"]["cgroup_notes"]
        return
    name = os.path.basename(group["path"])
    for text in cgroups:
        where = [
            path
            for _, controllers, path in (line.split(":", 2) for line in text.splitlines())
            if (controllers == "" if group["version"] == 2 else "cpu" in controllers.split(","))
        ]
        assert where and where[0].endswith("/" + name), text
    assert not case["placement"].get("notes")


def test_only_the_variants_asked_for_run(tmp_path: Path) -> None:
    path = write_suite(
        tmp_path,
        """
        baseline = "b"
        [target]
        driver = "command"
        command = "true"
        [variants.a]
        [variants.b]
        [variants.c]
        """,
    )
    suite = load_suite(path, only_variants=["c", "b"])
    assert list(suite.variants) == ["b", "c"] and suite.baseline_variant == "b"
    suite = load_suite(path, only_variants=["c", "a"])
    assert list(suite.variants) == ["a", "c"] and suite.baseline_variant == "a"
    with pytest.raises(SuiteError, match=r"variants: no variant named 'd' \(have: a, b, c\)"):
        load_suite(path, only_variants=["d"])


@pytest.mark.parametrize(
    ("gate", "error"),
    [
        ('better = ["wall"]', r"gate\.better: unknown metric 'wall' \(expected one of: mean, "),
        ("where = { slow = true }", r"gate\.where\.slow: not a matrix key \(known: workload, t\)"),
        ('variants = ["b"]', r"gate\.variants: no variant named 'b' \(have: default\)"),
    ],
)
def test_gate_errors_name_the_key(tmp_path: Path, gate: str, error: str) -> None:
    path = write_suite(
        tmp_path,
        f"""
        [target]
        driver = "command"
        command = "sleep {{t}}"
        [workloads.w]
        [matrix]
        t = [1, 2]
        [gate]
        {gate}
        """,
    )
    with pytest.raises(SuiteError, match=error):
        load_suite(path)


@pytest.mark.timeout(60)
def test_batched_runs_stop_where_one_by_one_runs_would(tmp_path: Path) -> None:
    # the launcher makes the runs in batches; the rule of when to stop is the same
    runs = Runs(warmup=2, min_runs=3, min_time_s=0.3, timeout_s=30)
    told: list[int] = []
    outcome = measure(
        ["sleep", "0.01"],
        env=dict(os.environ),
        cwd=str(tmp_path),
        runs=runs,
        on_run=lambda n, _: told.append(n),
    )
    assert outcome.failure is None
    walls = [run.wall_s for run in outcome.runs]
    least = max(runs.min_runs, int(runs.min_time_s / walls[0]))
    assert len(walls) >= least and sum(walls) >= runs.min_time_s
    assert len(walls) - 1 < least or sum(walls[:-1]) < runs.min_time_s  # the last was wanted
    assert told == sorted(told) and told[-1] == len(walls)
    exact = measure(["true"], env=dict(os.environ), cwd=None, runs=Runs(warmup=3, count=37))
    assert len(exact.runs) == 37 and exact.failure is None


@pytest.mark.timeout(60)
def test_a_run_failing_in_a_batch_is_named_by_its_number(tmp_path: Path) -> None:
    counter = tmp_path / "n"
    script = f"n=$(($(cat {counter} 2>/dev/null || echo 0) + 1)); echo $n > {counter}; "
    script += 'echo "run $n"; [ $n -ne {fail} ]'
    for fail, says in ((2, "warmup run 2"), (6, "run 3")):
        counter.unlink(missing_ok=True)
        outcome = measure(
            ["sh", "-c", script.replace("{fail}", str(fail))],
            env=dict(os.environ),
            cwd=None,
            runs=Runs(warmup=3, count=10, timeout_s=30),
        )
        assert outcome.failure == f"{says}: command exited with status 1 (run {fail})"
        assert len(outcome.runs) == max(0, fail - 3)  # the failed measured run is kept
