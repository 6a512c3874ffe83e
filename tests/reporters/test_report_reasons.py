"""What a report says about why: ratios without a verdict say why and how many repetitions one
needs, for any number of variants; each error kind's first kept sample under its case's line;
warnings in one line each in the terminal, whole in the HTML; CPU verdicts in the terminal's
words in the HTML too. Through the command line, on synthetic results written as JSON files."""

from __future__ import annotations

from pathlib import Path

import pytest

from rpcmeter import model
from rpcmeter.analysis.checks import min_requests
from rpcmeter.cli import main
from rpcmeter.plan.load import builtin_suite_path, load_suite
from rpcmeter.result.document import write_json
from tests.reporters.test_exports import golden_result
from tests.support.synthetic import CellSpec, synthetic_result, with_case


def _written(result: model.Result, tmp_path: Path) -> str:
    path = tmp_path / "run.json"
    write_json(result.to_json(), path)
    return str(path)


def _show(path: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["show", path, "--width", "160"]) == 0
    return capsys.readouterr().out


def _html(path: str, tmp_path: Path) -> str:
    page = tmp_path / "r.html"
    assert main(["report", path, "--html", str(page)]) == 0
    return page.read_text(encoding="utf-8")


def test_three_repetitions_say_why_there_is_no_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """repeat = 3: every ratio is shown with the reason it has no verdict and the repetitions
    needed, in the terminal and the HTML, with four variants as with two."""
    factors = {"a": 1.0, "b": 0.5, "c": 2.0, "d": 1.5}
    spec: CellSpec = {("w", (), v): [100 * f, 101 * f, 99 * f] for v, f in factors.items()}
    path = _written(synthetic_result(spec, cpu=True), tmp_path)
    text = _show(path, capsys)
    why = "no verdict with 3 repetitions a side: the test needs at least 4 a side to reach 5%"
    assert why in text and "use repeat >= 5" in text
    table = text[text.index("w: each variant / a, ratio") :]
    rows = [line.split() for line in table.splitlines() if line.strip()[:1] in ("b", "c", "d")]
    assert [r[0] for r in rows] == ["b", "c", "d"]  # every variant's ratios, four variants
    means = [float(r[1]) for r in rows]  # mean ratios, no verdict word beside them
    assert means == pytest.approx([0.5, 2.0, 1.5], rel=0.05)
    assert not any(w in table for w in ("faster", "slower", " same"))
    page = _html(path, tmp_path)
    assert why in page and page.count(">no verdict</span>") == 9  # 3 variants x 3 columns


def test_mismatch_sample_is_printed_with_the_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first kept sample of each error kind shows under the case's failure (or errors)
    line, in the terminal and in the HTML report."""
    sample = 'name: expected "feature at 109,0", got "feature at 110,0"'
    result = synthetic_result({("w", (), "a"): [100], ("w", (), "b"): [90]})
    result = with_case(
        result,
        0,
        status="failed",
        reason="mismatch: 9,706 of 10,000 requests failed",
        errors={"mismatch": 9706, "timeout": 3},
        error_samples={"mismatch": sample, "timeout": "no reply within 1 s"},
    )
    result = with_case(result, 1, errors={"timeout": 2}, error_samples={"timeout": "late"})
    path = _written(result, tmp_path)
    lines = _show(path, capsys).splitlines()
    failed = next(i for i, line in enumerate(lines) if line.startswith("failed: a · w"))
    assert "mismatch: 9,706 of 10,000 requests failed" in lines[failed]
    assert lines[failed + 1] == f"  mismatch: {sample}"
    assert lines[failed + 2] == "  timeout: no reply within 1 s"
    errors = next(i for i, line in enumerate(lines) if line.startswith("errors: b · w"))
    assert lines[errors + 1] == "  timeout: late"
    page = _html(path, tmp_path)
    assert "mismatch: name: expected &quot;feature at 109,0&quot;" in page
    assert "timeout: late" in page


def test_warnings_are_one_line_in_the_terminal_and_whole_in_the_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _written(golden_result(), tmp_path)
    text = _show(path, capsys)
    warnings = [line for line in text.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: 1 of 8 results vary by more than 10 % between repetitions",
        "warning: 8 of 8 results have fewer than 1,000 requests: too few for their p99",
        "warning: comparisons against default: 6 of 24 verdicts rest on as few as 4 repetitions",
    ]
    assert "(each warning's details: the HTML report (--html) and the result's JSON)" in text
    assert "worst: bind · simple · threads=4, throughput CV 17 %" not in text
    page = _html(path, tmp_path)
    assert "<li>1 of 8 results vary by more than 10 % between repetitions<br>" in page
    assert "worst: bind · simple · threads=4, throughput CV 17 %. The machine was busy" in page


def test_a_weak_same_is_marked_in_its_table_not_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``same`` on repetitions spread by over 10 % reads ``same?`` where the verdict is, in
    the terminal and the HTML, with a note that says why; it is no warning about the run."""
    path = _written(golden_result(), tmp_path)
    text = _show(path, capsys)
    note = "same?: the repetitions vary by over 10% (worst: p50 of bind, CV 20%)"
    assert note in text and "1.04 same?" in text
    assert not any("same" in line for line in text.splitlines() if line.startswith("warning: "))
    page = _html(path, tmp_path)
    assert note in page and '<span class="same">same?</span>' in page


def test_summary_table_says_what_its_time_column_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _show(_written(golden_result(), tmp_path), capsys)
    header = next(line for line in text.splitlines() if "seconds per case" in line)
    assert "wall s" not in header
    assert "default / bind" in text.splitlines()[text.splitlines().index(header) + 1]


def test_html_summary_uses_the_terminals_words_for_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bind uses 1.32x the client CPU of default in `sub 1`: the terminal says "more", and so
    does the HTML's summary of verdicts (it said "slower")."""
    path = _written(golden_result(), tmp_path)
    assert "1.32 more" in _show(path, capsys)
    page = _html(path, tmp_path)
    start = page.index('<section id="summary">')
    summary = page[start : page.index("</section>", start)]
    cpu = [row for row in summary.split("<tr>") if ">client_cpu<" in row]
    assert len(cpu) == 1
    assert '<span class="slower">1 more</span>' in cpu[0]
    assert '<span class="faster">1 less</span>' in cpu[0]
    assert "slower</span>" not in cpu[0] and "faster</span>" not in cpu[0]


@pytest.mark.parametrize("quick", [False, True])
def test_demo_gives_every_cell_requests_enough_for_its_p99(quick: bool) -> None:
    """`rpcmeter run` and `rpcmeter run --quick`: every cell of the demo gets the requests its
    p99 needs, so a quiet machine raises no warning about too few of them."""
    suite = load_suite(builtin_suite_path("demo"), quick=quick)
    assert not suite.matrix  # each workload's load is its own
    for name, workload in suite.workloads.items():
        load = suite.load.model_copy(update=workload.load_overrides())
        assert load.requests * load.threads * load.clients * suite.repeat >= min_requests(99), name
