"""A staged case in the reports: a table per staged case (terminal, Markdown, HTML)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rpcmeter import model
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.reporters import figures, html, markdown, terminal
from tests.support.synthetic import synthetic_result, view_of, with_case


def _hist(mean_us: float, n: int, seed: int) -> Histogram:
    h = Histogram()
    h.record_array(
        np.random.default_rng(seed).lognormal(np.log(mean_us * 1e3), 0.2, n).astype(np.int64)
    )
    return h


def staged_result(interrupted: bool = False) -> model.Result:
    """One open-loop case of three stages (1 s each: 100/s, a ramp to 300/s, 50/s) and its
    series of half-second intervals; latency rising with the rate."""
    loads = [(None, 100.0), (100.0, 300.0), (None, 50.0)]
    stages: list[dict[str, Any]] = []
    intervals: list[dict[str, Any]] = []
    for i, (start, rate) in enumerate(loads):
        h = _hist(200.0 * (1 + i), int(rate), i)
        stages.append(
            model.Stage(
                index=i,
                name="cool" if i == 2 else "",
                start_s=float(i),
                duration_s=1.0,
                rate=rate,
                start_rate=start,
                requests=h.count,
                ok=h.count,
                sent=h.count,
                late=i,
                throughput_rps=float(h.count),
                latency=model.Latency.of(h),
                histogram=h,
                latency_uncorrected=model.Latency.of(h),
                client_cpu_s=0.01,
                complete=not (interrupted and i == 2),
            ).dump()
        )
        for half in range(2):
            part = _hist(200.0 * (1 + i) * (1 + half / 4), h.count // 2, 10 * i + half)
            summary = part.summary_us()
            intervals.append(
                model.Interval(
                    start_s=i + half / 2,
                    seconds=0.5,
                    stage=i,
                    requests=part.count,
                    ok=part.count,
                    sent=part.count,
                    **{k: summary[k] for k in ("p50_us", "p99_us", "max_us")},
                    histogram=part.coarsened(6).to_dict(),
                ).dump()
            )
    result = synthetic_result({("echo", (), "default"): [300.0]})
    return with_case(
        result,
        0,
        stages=stages,
        series={"interval_s": 0.5, "intervals": intervals},
        open_loop={"offered_rps": 150.0, "achieved_rps": 150.0, "sent": 450},
        status="incomplete" if interrupted else "ok",
    )


def test_terminal_shows_a_table_per_staged_case() -> None:
    text = terminal.render(view_of(staged_result()), width=160)
    assert "echo · default · stages" in text and "latency from the intended send time" in text
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "100->300/s" in lines["2"] and "50/s" in lines["cool"]
    # the stages' own figures, not the case's: no latency-vs-rate table for a staged case
    assert "latency vs offered rate" not in text


def test_a_stage_cut_short_is_marked() -> None:
    view = view_of(staged_result(interrupted=True))
    text = terminal.render(view, width=160)
    assert "cool*" in text and "*: cut short" in text and "incomplete" in text
    assert "| cool\\* |" in markdown.render(view)


def test_html_and_pngs_plot_the_case_over_time_with_its_stages(tmp_path: Path) -> None:
    view = view_of(staged_result())
    kinds = {p.id: p for p in view.all_plots}
    latency, throughput = kinds["time-latency-echo-case-0"], kinds["time-throughput-echo-case-0"]
    # the stage boundaries after the first, labelled with their load
    assert latency.marks == throughput.marks == ((1.0, "2: 100->300/s"), (2.0, "cool: 50/s"))
    assert [s.name for s in latency.series] == ["p50", "p99", "max"]
    assert throughput.series[0].y == pytest.approx([100, 100, 300, 300, 50, 50], abs=1)
    page = html.render(view)
    assert 'data-kind="time-latency"' in page and 'data-kind="time-throughput"' in page
    assert "cool: 50/s" in page  # the mark's label, drawn in the SVG
    assert "echo · default · stages" in page  # and the stages' table
    written = figures.write_pngs(view, tmp_path)
    assert {p.name for p in written} >= {
        "time-latency-echo-case-0.png",
        "time-throughput-echo-case-0.png",
    }


def test_the_series_stays_small_for_long_cases() -> None:
    # a kept interval is a few counts and a coarsened histogram: about a hundred bytes encoded
    result = staged_result()
    case = result.cases[0]
    assert case.series is not None
    sizes = [len(json.dumps(i.dump())) for i in case.series.intervals]
    assert max(sizes) < 1200


def ramp_result(errors: bool, cut: bool) -> model.Result:
    """The five stages of ``examples/ramp.toml`` (1k/s, ramps to 5k, 10k and 20k/s, a hold at
    20k/s) with figures as wide as that run's, the server's CPU measured; ``errors``: some
    stages failed requests; ``cut``: Ctrl-C during the hold."""
    loads = [(None, 1000.0), (1000.0, 5000.0), (5000.0, 10000.0), (10000.0, 20000.0)]
    loads.append((None, 20000.0))
    stages = []
    for i, (start, rate) in enumerate(loads):
        h = _hist(2000.0 * (1 + i), 500, i)
        h.record(25_000_000_000)  # a 25 s outlier: the widest latency figure
        requests = int(rate * 4)
        stages.append(
            model.Stage(
                index=i,
                name="hold" if i == 4 else "",
                start_s=4.0 * i,
                duration_s=4.0,
                rate=rate,
                start_rate=start,
                requests=requests,
                ok=requests - (12_345 if errors and i else 0),
                errors={"timeout": 12_345} if errors and i else {},
                sent=requests,
                late=requests // 2,
                throughput_rps=rate,
                latency=model.Latency.of(h),
                histogram=h,
                latency_uncorrected=model.Latency.of(h),
                client_cpu_s=requests * 119e-6,
                server_cpu_s=requests * 123.4e-6,
                server_us_per_request=123.4,
                server_util_pct=99.9,
                complete=not (cut and i == 4),
            ).dump()
        )
    result = synthetic_result({("echo", (), "default"): [300.0]})
    return with_case(result, 0, stages=stages, status="incomplete" if cut else "ok")


@pytest.mark.parametrize(("errors", "cut"), [(False, False), (True, True)])
def test_the_stage_table_fits_100_columns_with_the_servers_cpu(errors: bool, cut: bool) -> None:
    text = terminal.render(view_of(ramp_result(errors, cut)), width=100)
    block = text[text.index("echo · default · stages") :]
    lines = block[: block.index("\n\n")].splitlines()
    assert "…" not in "".join(lines) and max(len(x.rstrip()) for x in lines) <= 100
    rule = next(i for i, x in enumerate(lines) if "───" in x)
    top = next(i for i, x in enumerate(lines) if not x.strip())  # the title's end
    header = " ".join(lines[top:rule]).split()
    columns = ["stage", "load", "req/s", "p50", "p99", "p99 from send", "late %"]
    columns += ["client us/req", "server us/req", "server CPU %"] + (["errors"] if errors else [])
    assert {w for c in columns for w in c.split()} <= set(header)  # no header cut
    assert ("errors" in header) is errors and ("no errors" in block) is not errors
    rows = {x.split()[0]: x.split() for x in lines[rule + 1 :] if x.strip()}
    # the widest row whole: its load, req/s, errors, latency, late sends, both sides' CPU
    row = rows["4"]
    assert row[:3] == ["4", "10k->20k/s", "20,000"] and ("12,345" in row) is errors
    assert row[-6:] == ["13.09", "13.09", "50.0", "119", "123", "99.9"]
    assert ("hold*" in rows) is cut and ("cut short" in block) is cut
