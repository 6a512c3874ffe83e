"""Rate sweeps in the suite, the knee, latency objectives and the rate search (pure parts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rpcmeter.analysis.rates import (
    RateSearch,
    Search,
    Step,
    mark_knee,
    parse_slo,
    rate_series,
)
from rpcmeter.errors import SuiteError, UsageError
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import Result
from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import build_suite
from rpcmeter.reporters import figures, terminal
from rpcmeter.reporters.build import build
from rpcmeter.reporters.plots import palette, rate_plots
from tests.support.synthetic import parsed


def raw(load: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"workloads": {"simple": {}}, "load": load, **extra}


def test_rates_become_the_matrix_dimension_rate() -> None:
    suite = build_suite(raw({"mode": "open", "rates": [100, 200, 400]}, matrix={"threads": [1, 2]}))
    assert suite.matrix == {"threads": [1, 2], "rate": [100, 200, 400]}
    cases = expand(suite)
    assert [(c.load.threads, c.load.rate) for c in cases] == [
        (t, r) for t in (1, 2) for r in (100, 200, 400)
    ]
    assert cases[0].params_dict()["rate"] == 100


def test_sweep_linear_and_log() -> None:
    lin = build_suite(raw({"mode": "open", "sweep": {"from": 1000, "to": 5000, "steps": 5}}))
    assert lin.matrix["rate"] == [1000, 2000, 3000, 4000, 5000]
    log = build_suite(
        raw({"mode": "open", "sweep": {"from": 100, "to": 10000, "steps": 3, "scale": "log"}})
    )
    assert log.matrix["rate"] == [100, 1000, 10000]


@pytest.mark.parametrize(
    ("load", "extra", "message"),
    [
        ({"rate": 100}, {}, 'load: rate is an open-loop setting: set load.mode = "open"'),
        ({"mode": "open"}, {}, "load.rate: open-loop load needs a rate"),
        (
            {"mode": "open", "rate": 0},
            {},
            "load.rate: Input should be greater than or equal to 0.001",
        ),
        ({"mode": "open", "rates": []}, {}, "rates must be a non-empty list"),
        (
            {"mode": "open", "rates": [1], "sweep": {"from": 1, "to": 2, "steps": 2}},
            {},
            "give either rates or sweep",
        ),
        ({"mode": "open", "sweep": {"from": 1, "to": 2, "steps": 1}}, {}, "load.sweep.steps"),
        (
            {"mode": "open", "rates": [1, 2]},
            {"matrix": {"rate": [3]}},
            "matrix.rate: the rates are given in load already",
        ),
        ({}, {"matrix": {"rate": [3]}}, "matrix.rate: an open-loop setting"),
    ],
)
def test_open_loop_suite_errors_name_the_key(
    load: dict[str, Any], extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(SuiteError) as err:
        build_suite(raw(load, **extra), "s.toml")
    assert str(err.value).startswith("s.toml: ")
    assert message in str(err.value)


def test_parse_slo() -> None:
    (o,) = parse_slo("p99=5ms")
    assert (o.stat, o.bound_us) == ("p99", 5000.0)
    a, b, c = parse_slo("p99.9=20ms, mean<=300us,p50=0.5s")
    assert (a.stat, a.bound_us) == ("p999", 20000.0)
    assert (b.stat, b.bound_us) == ("mean", 300.0)
    assert (c.stat, c.bound_us) == ("p50", 500000.0)
    for bad in ("p99", "p99=5", "q99=5ms", "p100=1ms", "p99=5min"):
        with pytest.raises(UsageError):
            parse_slo(bad)


def search_max_rate(probe: Callable[[float], Step], start: float, **how: Any) -> Search:
    """The search, handed ``probe``'s step at each rate it asks for."""
    search = RateSearch(start, **how)
    while search.rate is not None:
        search.told(probe(search.rate))
    return search.result


def test_search_grows_then_bisects_to_the_capacity() -> None:
    probed: list[float] = []

    def probe(rate: float) -> Step:
        probed.append(rate)
        return Step(rate, rate <= 3700, "")

    s = search_max_rate(probe, 100, tolerance=0.05, max_steps=20)
    assert probed[:7] == [100, 200, 400, 800, 1600, 3200, 6400]
    assert s.converged
    assert s.best is not None and 3700 * 0.95 <= s.best.rate <= 3700
    assert s.lowest_failing is not None and s.lowest_failing > 3700
    assert (s.lowest_failing - s.best.rate) <= 0.05 * s.best.rate
    assert len(s.steps) == len(probed) <= 20


def test_search_goes_down_when_the_start_fails_and_is_bounded() -> None:
    s = search_max_rate(lambda r: Step(r, r <= 30, ""), 1000, tolerance=0.01, max_steps=6)
    assert [st.rate for st in s.steps][:3] == [1000, 500, 250]
    assert len(s.steps) == 6 and not s.converged
    nothing = search_max_rate(lambda r: Step(r, False, ""), 8, max_steps=50)
    assert nothing.best is None and len(nothing.steps) == 4  # 8, 4, 2, 1: not below 1 req/s
    assert nothing.lowest_failing == 1


def test_a_search_without_steps_probes_nothing() -> None:
    search = RateSearch(100, max_steps=0)
    assert search.rate is None and search.result.steps == []
    with pytest.raises(AssertionError, match="the search is over"):
        search.told(Step(100, True, ""))


def fake_case(i: int, rate: float, p99_ms: float, achieved: float, dropped: int = 0) -> Any:
    h = Histogram()
    # 100 values: 98 at 0.1 ms, 2 at p99_ms -> p99 = p99_ms
    h.record_array([100_000] * 98 + [int(p99_ms * 1e6)] * 2)
    return {
        "id": i,
        "variant": "default",
        "workload": "simple",
        "point": {"rate": rate},
        "repetition": 0,
        "status": "ok",
        "reason": None,
        "requests": 100,
        "errors": {},
        "histogram": h.to_dict(),
        "histogram_uncorrected": h.to_dict(),
        "open_loop": {
            "offered_rps": rate,
            "achieved_rps": achieved,
            "scheduled": 100,
            "sent": 100 - dropped,
            "late": 0,
            "dropped": dropped,
        },
        "throughput_rps": achieved,
        "wall_s": 1.0,
    }


def sweep_result(cases: list[Any]) -> Result:
    return parsed(sweep_document(cases))


def sweep_document(cases: list[Any]) -> dict[str, Any]:
    return {
        "schema_version": 2,
        "suite": {"name": "t", "variants": {"default": {}}, "matrix_keys": ["rate"]},
        "cases": cases,
        "environment": {},
        "warnings": [],
        "status": "complete",
    }


def test_knee_is_the_first_rate_with_a_worse_p99_or_a_missed_rate() -> None:
    result = sweep_result(
        [
            fake_case(0, 100, 1.0, 100),
            fake_case(1, 200, 2.5, 199),
            fake_case(2, 400, 3.5, 400),  # 3.5 x the p99 at 100 req/s
            fake_case(3, 800, 50, 700),
        ]
    )
    (series,) = rate_series(result)
    assert [p.offered_rps for p in series.points] == [100, 200, 400, 800]
    assert series.knee is not None and series.knee.offered_rps == 400
    assert [p.knee for p in series.points] == [False, False, True, False]
    # a missed rate is a knee even when latency looks fine
    series.points[1].achieved_rps = 150
    mark_knee(series.points)
    assert series.knee is not None and series.knee.offered_rps == 200
    text = terminal.render(build(result), width=160)
    assert "latency vs offered rate" in text
    knee_line = next(line for line in text.splitlines() if "knee" in line and "400" in line)
    assert "3.50" in knee_line


def test_a_disturbed_rate_below_rates_that_kept_up_is_not_the_knee() -> None:
    # the lowest rate missed its schedule (the machine was busy), 4,000 req/s kept up with a
    # p99 of 9.56 ms: no knee, rather than one on the lowest rate
    result = sweep_result([fake_case(0, 2000, 9.0, 1859), fake_case(1, 4000, 9.56, 3999)])
    (series,) = rate_series(result)
    assert series.knee is None
    # the knee is where the failing rates begin that end the sweep; the disturbed rate below
    # does not count, nor does its p99 set the base (the lowest p99 of the rates that kept up)
    result = sweep_result(
        [
            fake_case(0, 1000, 30.0, 900),  # disturbed
            fake_case(1, 2000, 1.0, 2000),
            fake_case(2, 4000, 2.0, 4000),
            fake_case(3, 8000, 3.5, 8000),  # 3.5 x 1.0
            fake_case(4, 16000, 9.0, 12000),
        ]
    )
    (series,) = rate_series(result)
    assert [p.knee for p in series.points] == [False, False, False, True, False]


# ---- the latency-vs-offered-rate plot ------------------------------------------------------


def test_rate_plot_series_points_and_knee() -> None:
    result = sweep_result(
        [
            fake_case(0, 100, 1.0, 100),
            fake_case(1, 200, 1.5, 200),
            fake_case(2, 400, 9.0, 390),  # the knee: p99 9x the one at 100 req/s
        ]
    )
    (plot,) = rate_plots(rate_series(result), "simple")
    assert plot.kind == "rate" and plot.id == "rate-simple-default"
    assert [s.name for s in plot.series] == ["p50", "p99", "p99.9", "p99 uncorrected"]
    assert all(s.x == (100, 200, 400) for s in plot.series)
    p99 = plot.series[1]
    assert plot.y_label == "latency (ms)"
    assert p99.y == pytest.approx((1.0, 1.5, 9.0), rel=0.01)
    assert plot.series[3].linestyle == "--"
    assert plot.marks == ((400, "knee"),)
    assert plot in build(result).plots["simple"]
    svg = figures.to_svg(plot, palette(["default"]))
    assert all(f'id="rate-simple-default-series-{i}"' in svg for i in range(4))
    assert ">knee<" in svg


def test_no_rate_plot_without_a_rate_dimension() -> None:
    assert rate_plots(rate_series(sweep_result([fake_case(0, 100, 1.0, 100)])), "simple") == []
    closed = sweep_document([fake_case(0, 100, 1.0, 100), fake_case(1, 200, 1.0, 200)])
    for case in closed["cases"]:
        del case["open_loop"]
    assert rate_plots(rate_series(parsed(closed)), "simple") == []


def test_a_single_open_loop_rate_gets_its_row_without_a_knee() -> None:
    case = fake_case(0, 500, 5.0, 300)  # far from keeping up, but nothing to compare with
    case["point"] = {}
    (series,) = rate_series(sweep_result([case]))
    assert [p.offered_rps for p in series.points] == [500]
    assert series.knee is None
    assert not series.points[0].keeps_up


def test_spectrum_of_an_open_loop_case_adds_the_uncorrected_latency_dashed() -> None:
    from rpcmeter.metrics.histogram import Histogram
    from rpcmeter.reporters.plots import spectrum_plot
    from rpcmeter.result.cells import cells

    case = fake_case(0, 100, 50.0, 100)
    uncorrected = Histogram()
    uncorrected.record_array([100_000] * 100)  # the stall hidden: 0.1 ms throughout
    case["histogram_uncorrected"] = uncorrected.to_dict()
    result = sweep_result([case])
    ((point, row),) = cells(result)["simple"].items()
    plot = spectrum_plot("simple", point, row)
    assert plot is not None
    corrected, dashed = plot.series
    assert dashed.name == "default uncorrected" and dashed.linestyle == "--"
    assert corrected.linestyle == "-"
    assert corrected.y[-1] == pytest.approx(50.0, rel=0.01)  # ms: the 2 % at 50 ms show
    assert dashed.y[-1] == pytest.approx(0.1, rel=0.01)
    assert "uncorrected" in plot.note
    del case["histogram_uncorrected"]  # a closed loop: one line per variant, no note
    result = sweep_result([case])
    (only,) = spectrum_plot("simple", point, cells(result)["simple"][point]).series  # type: ignore[union-attr]
    assert only.name == "default"
