"""The live view of a running case: sparklines, what it draws, and the progress line it falls
back to (not a terminal, or ``--no-live``)."""

from __future__ import annotations

import io
import math
import re

from rpcmeter.cli.progress import Progress
from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import build_suite
from rpcmeter.reporters.live import LiveView, sparkline
from rpcmeter.run.events import IntervalFigures


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _figures(i: int, ok: int, errors: int = 0) -> IntervalFigures:
    return IntervalFigures(i, i * 0.5, 0.5, "stage 2 of 3", ok, errors, 150.0 + i, 900.0 + i)


def test_sparkline_spans_lowest_to_highest() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, math.nan, 5]) == "▅ ▅" and sparkline([0, 0]) == "▁▁"
    assert sparkline([]) == ""


def test_the_live_view_shows_the_last_interval_with_its_history() -> None:
    stream = _Tty()
    view = LiveView(stream)
    view.line("[1/1] default · echo · 1,000 requests")
    for i, ok in enumerate((100, 200, 400)):
        view.interval(_figures(i, ok, errors=i))
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())
    last = text[text.rindex("[1/1]") :]
    assert "last interval: 1.0-1.5 s · stage 2 of 3" in last
    rows = {line.split()[0]: line.split()[1:] for line in last.splitlines()[2:] if line.strip()}
    assert rows["req/s"] == ["800", "▁▃█"]  # 400 in half a second
    assert rows["p99"] == ["ms", "0.902", "▁▅█"] and rows["errors"] == ["2", "▁▅█"]
    # a progress line redrawn between intervals draws the same figures: laid out once
    assert view.renderable().renderables[1] is view.renderable().renderables[1]
    view.new_case()
    assert view.last is None and not view.rps
    view.stop()


def test_not_a_terminal_or_no_live_keeps_the_progress_line() -> None:
    suite = build_suite({"target": {"driver": "rpyc"}, "workloads": {"simple": {}}})
    (case,) = expand(suite)
    for stream, live in ((io.StringIO(), True), (_Tty(), False)):
        progress = Progress(stream, live=live)
        assert progress.live is None
        progress.case_started(case, 1)
        progress.interval(case, 1, _figures(0, 10))  # shown nowhere
        assert "req/s" not in stream.getvalue() and "[1/1]" in stream.getvalue()
    progress = Progress(_Tty(), live=True)
    assert progress.live is not None
    progress.case_started(case, 1)
    progress.interval(case, 1, _figures(0, 10))
    assert progress.live.last is not None
    progress.clear()
    assert progress.live.live is None
