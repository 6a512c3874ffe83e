"""`rpcmeter history`, `show`, `compare`, `tag` and the gate's exit codes, on stored results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rpcmeter.cli import main
from rpcmeter.history.store import STORE_ENV, Store
from rpcmeter.reporters.gate import UNDECIDED as EXIT_UNDECIDED
from rpcmeter.result.document import write_json
from tests.support.synthetic import document, parsed, synthetic_result, written

P1 = (("threads", 1),)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Run 1: the baseline; run 2: workload w 30 % slower, workload v unchanged."""
    path = tmp_path / "h.db"
    old = synthetic_result({("w", P1, "x"): [100, 101, 99, 100, 102], ("v", P1, "x"): [50] * 5})
    new = synthetic_result(
        {("w", P1, "x"): [130, 131, 129, 130, 132], ("v", P1, "x"): [50, 51, 49, 50, 50]},
        seed=1,
    )
    doc = document(new)
    doc["suite"]["git"] = {"commit": "c" * 40, "branch": "topic", "dirty": True}
    with Store(path) as store:
        store.save(old)
        store.save(parsed(doc))
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_history_lists_runs(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["tag", "main", "1", "--store", str(db)], capsys)
    assert code == 0 and "tagged run 1 as 'main'" in out
    code, out, _ = run(["history", "--store", str(db)], capsys)
    assert code == 0
    lines = [line for line in out.splitlines() if "synthetic" in line]
    assert len(lines) == 2 and lines[0].split()[0] == "2" and "main" in lines[1]
    assert "2026-01-02 03:04:05" in out and "10" in lines[0]
    # run 2's revision: commit (dirty) and branch; run 1 has none
    assert "cccccccccc*" in lines[0] and "topic" in lines[0].split()
    assert lines[1].split()[4:6] == ["-", "-"]
    assert out.splitlines()[2].split()[3:5] == ["commit", "branch"]


def test_the_store_defaults_to_rpcmeter_store(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STORE_ENV, str(db))
    code, out, _ = run(["history"], capsys)
    assert code == 0 and f"history: {db}" in out and "synthetic" in out
    monkeypatch.setenv(STORE_ENV, str(db.with_name("other.db")))
    code, _, err = run(["show", "last"], capsys)
    assert code != 0 and "other.db" in err


def test_compare_and_gate_exit_codes(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = ["--store", str(db)]
    code, out, _ = run(["compare", "1", "2", *store], capsys)
    assert code == 0
    assert "run 2 against run 1" in out and "slower" in out and "same" in out
    code, out, _ = run(["compare", "1", "last", "--fail-if-slower", "10", *store], capsys)
    assert code == 1
    assert "gate: 1 case(s) mean latency worse" in out
    assert "w · threads=1 · x: mean latency 1.3" in out and "of run 1 (p=0.00794)" in out
    code, out, _ = run(["compare", "1", "2", "--fail-if-slower", "50", *store], capsys)
    assert code == 0 and "no case's mean latency is significantly worse" in out
    code, _, err = run(["compare", "last", *store], capsys)  # B defaults to last
    assert code == 2 and "are both run 2: a run compared with itself" in err
    code, out, _ = run(
        ["compare", "1", "2", "--metric", "throughput", "--fail-if-slower", "10", *store], capsys
    )
    assert code == 1 and "throughput" in out
    code, out, _ = run(["compare", "1", "2", "--format", "json", *store], capsys)
    doc = json.loads(out)
    assert doc["kind"] == "runs" and {r["verdict"] for r in doc["rows"]} >= {"slower", "same"}
    code, out, _ = run(["compare", "1", "2", "--format", "csv", *store], capsys)
    assert out.splitlines()[0].startswith("workload,threads,variant,baseline,metric")
    code, out, _ = run(["compare", "1", "2", "--format", "markdown", *store], capsys)
    assert "| threads | variant | mean |" in out and "**slower**" in out


def test_show_formats_and_files(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", str(db)]
    code, out, _ = run(["show", "last", *store], capsys)
    assert code == 0 and "synthetic · 10 cases" in out
    code, out, _ = run(["show", "1", "--format", "json", *store], capsys)
    assert json.loads(out)["run_id"] == "5e1ec7ed0000"
    code, out, _ = run(["show", "1", "-f", "csv", *store], capsys)
    assert "latency.p99_us" in out
    code, out, _ = run(["show", "1", "-f", "markdown", *store], capsys)
    assert out.startswith("## synthetic")
    file = tmp_path / "r.json"
    write_json(written(synthetic_result({("w", P1, "x"): [100, 101, 99, 100, 102]}, seed=5)), file)
    code, out, _ = run(["compare", str(file), "1", *store], capsys)
    assert code == 0 and f"run 1 against {file}" in out


def test_user_errors_are_one_line(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["show", "42", "--store", str(db)], capsys)
    assert code == 2 and err.count("\n") == 1 and "42: no such run" in err
    code, _, err = run(["compare", "1", "last~5", "--store", str(db)], capsys)
    assert code == 2 and "last~5: the history at" in err
    code, _, err = run(["show", str(tmp_path / "missing.json"), "--store", str(db)], capsys)
    assert code == 2 and "no such result file" in err
    code, _, err = run(["history", "--store", str(tmp_path / "none.db")], capsys)
    assert code == 2 and "no history database" in err


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        # 3 and 3 repetitions: the test cannot reach 5 % whatever the data
        ([100, 101, 99], [190, 195, 192], "3 and 3 repetitions cannot reach significance"),
        # 4 and 4, 1.5x on average but overlapping: not significant
        ([100, 160, 95, 105], [150, 90, 170, 190], "not significant (p="),
    ],
)
def test_a_gate_that_cannot_settle_a_case_fails_with_its_own_status(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    old: list[float],
    new: list[float],
    why: str,
) -> None:
    path = tmp_path / "h.db"
    with Store(path) as store:
        store.save(synthetic_result({("w", P1, "x"): old}))
        store.save(synthetic_result({("w", P1, "x"): new}, seed=1))
    code, out, _ = run(
        ["compare", "1", "2", "--fail-if-slower", "20", "--store", str(path)], capsys
    )
    assert code == EXIT_UNDECIDED == 3
    assert "gate: cannot tell for 1 of 1 case(s) whether mean latency is worse" in out
    assert why in out and "at least 4 repetitions per side" in out
    # a difference within the threshold is no reason to doubt
    code, out, _ = run(
        ["compare", "1", "2", "--fail-if-slower", "200", "--store", str(path)], capsys
    )
    assert code == (3 if len(old) == 3 else 0)


def test_a_gate_on_a_metric_never_measured_does_not_pass(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "1", "2", "--metric", "server_cpu", "--fail-if-slower", "10"]
    code, out, _ = run([*argv, "--store", str(db)], capsys)
    assert code == EXIT_UNDECIDED
    assert "no case has server CPU per request measured on both sides" in out
