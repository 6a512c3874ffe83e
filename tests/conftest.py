"""Settings shared by every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import rpcmeter.suite.model
from rpcmeter.history.store import STORE_ENV


@pytest.fixture(autouse=True, scope="session")
def _history_in_a_temporary_directory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """Commands run without ``--store`` record their runs in a history of the test session's
    own (``$RPCMETER_STORE``), not under the directory the tests run from."""
    mp = pytest.MonkeyPatch()
    mp.setenv(STORE_ENV, str(tmp_path_factory.mktemp("history") / "history.db"))
    yield
    mp.undo()


@pytest.fixture(autouse=True, scope="session")
def _short_idle_window() -> Iterator[None]:
    """Every case measures the server's idle CPU over a quiet window (1 s by default) before its
    load; tests keep it short unless they set ``resources.idle_s`` themselves."""
    saved = rpcmeter.suite.model.DEFAULT_IDLE_S
    rpcmeter.suite.model.DEFAULT_IDLE_S = 0.05
    yield
    rpcmeter.suite.model.DEFAULT_IDLE_S = saved


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say why each rerun test failed before it passed (pytest-rerunfailures keeps the reason to
    itself): the end of its failure, so that a timing-sensitive test's flakes can be read from a
    CI log."""
    reruns = terminalreporter.stats.get("rerun", [])
    if not reruns:
        return
    terminalreporter.section("why tests were rerun")
    for report in reruns:
        lines = report.longreprtext.splitlines()
        terminalreporter.write_line(f"{report.nodeid} ({report.when}):")
        for line in lines[-30:]:
            terminalreporter.write_line(f"    {line}")
