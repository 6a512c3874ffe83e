"""Structural tests of the plot data: which plots, which series, which points."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.reporters import plots
from rpcmeter.reporters.build import build
from rpcmeter.reporters.plots import palette, spectrum_percentiles
from rpcmeter.result.document import Result
from tests.support.synthetic import comparison_document, view_of


def _case(
    variant: str,
    workload: str,
    point: dict[str, Any],
    latencies_ns: list[int],
    rep: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    h = Histogram()
    h.record_array(np.array(latencies_ns, dtype=np.int64))
    params = {"clients": 1, "threads": 1, **point}
    return {
        "id": 0,
        "variant": variant,
        "workload": workload,
        "kind": "simple",
        "point": point,
        "params": params,
        "repetition": rep,
        "status": "ok",
        "reason": None,
        "requests": len(latencies_ns),
        "ok": len(latencies_ns),
        "errors": {},
        "wall_s": 1.0,
        "throughput_rps": float(len(latencies_ns)),
        "latency": h.summary_us(),
        "histogram": h.to_dict(),
        "cpu": {},
        **extra,
    }


def _result(cases: list[dict[str, Any]], variants: list[str], keys: list[str]) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "suite": {"name": "t", "variants": {v: {} for v in variants}, "matrix_keys": keys},
        "environment": {},
        "cases": cases,
        "warnings": [],
    }


def _by_id(doc: dict[str, Any]) -> dict[str, plots.Plot]:
    return {p.id: p for ps in view_of(doc).plots.values() for p in ps}


def test_spectrum_percentiles_grid() -> None:
    full = spectrum_percentiles(1_000_000)
    assert full[0] == 0.0 and full[-1] == pytest.approx(99.99)
    assert len(full) == 33  # 4 decades x 8 steps + the origin
    assert full == sorted(full)
    # never beyond what the sample count resolves: 100 samples stop at p99
    assert spectrum_percentiles(100)[-1] == pytest.approx(99.0)
    assert spectrum_percentiles(1) == [0.0]


def test_one_variant_one_case_gives_only_a_spectrum() -> None:
    r = _result([_case("a", "w", {}, list(range(1000, 2000)))], ["a"], [])
    got = _by_id(r)
    assert list(got) == ["spectrum-w-all"]
    s = got["spectrum-w-all"].series
    assert [x.name for x in s] == ["a"]
    h = Histogram()
    h.record_array(np.arange(1000, 2000))
    want = [v / 1e3 for v in h.percentiles(spectrum_percentiles(1000))]  # 1-2 us: unit us
    assert s[0].y == pytest.approx(tuple(want))
    assert got["spectrum-w-all"].y_label == "latency (µs)"


def _two_variant_matrix() -> dict[str, Any]:
    cases = []
    for threads in (1, 2, 4):
        for rep in (0, 1):
            cases.append(_case("base", "w", {"threads": threads}, [1_000_000 * threads] * 100, rep))
            cases.append(_case("fast", "w", {"threads": threads}, [500_000 * threads] * 100, rep))
    return _result(cases, ["base", "fast"], ["threads"])


def test_matrix_plots_series_and_points() -> None:
    got = _by_id({**_two_variant_matrix(), "comparisons": comparison_document()})  # none
    assert sorted(got) == sorted(
        [
            "spectrum-w-threads-1",
            "spectrum-w-threads-2",
            "spectrum-w-threads-4",
            "throughput-w",
            "p99-w",
            "ratio-w",
        ]
    )
    tput = got["throughput-w"]
    assert tput.categories == ("1", "2", "4") and tput.x_label == "threads"
    assert [s.variant for s in tput.series] == ["base", "fast"]
    assert tput.series[0].y == pytest.approx((100.0, 100.0, 100.0))
    p99 = got["p99-w"]
    assert p99.y_label == "p99 latency (ms)"
    assert p99.series[0].y == pytest.approx((1.0, 2.0, 4.0), rel=1e-3)
    assert p99.series[1].y == pytest.approx((0.5, 1.0, 2.0), rel=1e-3)
    ratio = got["ratio-w"]
    assert [s.variant for s in ratio.series] == ["fast"]  # the baseline is not compared to itself
    assert ratio.series[0].y == pytest.approx((0.5, 0.5, 0.5), rel=1e-3)
    assert ratio.reference_y == 1.0
    assert all(math.isnan(v) for v in ratio.series[0].lo or ())  # no comparisons: no intervals


def _stored_comparison(summary: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A stored comparison: ``fast`` 0.52 [0.48, 0.56] of ``base`` on mean latency at
    threads=2, faster."""
    row = {"point": {"threads": 2}, "ratio": 0.52, "ci_low": 0.48, "ci_high": 0.56}
    return comparison_document([{**row, "verdict": "faster"}], summary)


def test_ratio_uses_stored_comparisons_with_intervals() -> None:
    r = _two_variant_matrix()
    r["comparisons"] = _stored_comparison()
    ratio = _by_id(r)["ratio-w"]
    assert ratio.series[0].y[1] == pytest.approx(0.52)
    assert ratio.series[0].lo is not None and ratio.series[0].lo[1] == pytest.approx(0.48)
    assert ratio.series[0].hi is not None and ratio.series[0].hi[1] == pytest.approx(0.56)
    assert "confidence interval" in ratio.note


def test_cpu_plots_when_present_and_stacked() -> None:
    r = _two_variant_matrix()
    for c in r["cases"]:
        c["cpu"] = {
            "client_user_s": 0.003,
            "client_sys_s": 0.001,
            "server_user_s": 0.002,
            "server_sys_s": 0.002,
            "server_idle_pct": 1.5,
        }
    got = _by_id(r)
    for side, user, system in (("client", 30.0, 10.0), ("server", 20.0, 20.0)):
        p = got[f"cpu-{side}-w"]
        assert [(s.variant, s.shade) for s in p.series] == [
            ("base", 0),
            ("base", 1),
            ("fast", 0),
            ("fast", 1),
        ]
        assert p.series[0].y == pytest.approx((user,) * 3)  # 0.003 s / 100 requests = 30 us
        assert p.series[1].y == pytest.approx((system,) * 3)
        assert p.series[0].stack == p.series[1].stack == "base"
    idle = got["idle-cpu"]
    assert [s.variant for s in idle.series] == ["base", "fast"]
    assert idle.categories == ("w",)  # per workload, over its matrix points
    assert idle.series[0].y == pytest.approx((1.5,))


def test_cpu_plot_omitted_without_data() -> None:
    r = _two_variant_matrix()
    assert not any(p.kind.startswith("cpu") or p.kind == "idle" for p in _by_id(r).values())


def test_command_cases_give_wall_user_system_bars() -> None:
    cases = []
    for v, scale in (("before", 1.0), ("after", 0.5)):
        runs = [{"wall_s": 2.0 * scale, "user_s": 8.0 * scale, "sys_s": 4.0 * scale}] * 3
        cases.append(_case(v, "job", {}, [2_000_000_000 * int(scale * 2)] * 3, runs=runs))
    got = _by_id(_result(cases, ["before", "after"], []))
    cmd = got["command-job-all"]
    assert cmd.categories == ("wall", "user", "system")
    assert [s.variant for s in cmd.series] == ["before", "after"]
    assert cmd.series[0].y == pytest.approx((2.0, 8.0, 4.0))  # user and system not swapped
    assert cmd.series[1].y == pytest.approx((1.0, 4.0, 2.0))
    assert got["ratio-job"].series[0].y == pytest.approx((0.5,))
    # a spectrum of a few run times or "CPU per request" would mislead for whole commands
    assert sorted(got) == ["command-job-all", "ratio-job"]


def test_failed_cells_are_gaps_not_errors() -> None:
    r = _two_variant_matrix()
    broken = copy.deepcopy(r)
    for c in broken["cases"]:
        if c["variant"] == "fast" and c["point"]["threads"] == 2:
            c["status"] = "failed"
    got = _by_id(broken)
    assert math.isnan(got["ratio-w"].series[0].y[1])
    assert math.isnan(got["throughput-w"].series[1].y[1])
    assert [s.name for s in got["spectrum-w-threads-2"].series] == ["base"]


def test_palette_is_stable_and_distinct() -> None:
    colors = palette(["a", "b", "c"])
    assert colors == palette(["a", "b", "c"])
    assert len(set(colors.values())) == 3


def test_real_run_plots(demo_result: Result) -> None:
    got = build(demo_result).plots
    assert list(got) == ["simple", "random wait", ""]  # "": the idle CPU plot across workloads
    assert [p.kind for p in got[""]] == ["idle"]
    for workload, ps in got.items():
        kinds = [p.kind for p in ps]
        if workload:
            assert kinds == [
                "spectrum",
                "spectrum",
                "throughput",
                "p99",
                "ratio",
                "cpu-client",
                "cpu-server",
            ], workload
        for p in ps:
            assert p.series, p.id
            for s in p.series:
                assert s.finite_points() >= 1, (p.id, s.name)
        spectra = [p for p in ps if p.kind == "spectrum"]
        assert all([s.variant for s in p.series] == ["default", "bind"] for p in spectra)


def test_html_table_and_summary_show_intervals_and_verdicts() -> None:
    from rpcmeter.reporters import html

    r = _two_variant_matrix()
    geomean = {"variant": "fast", "metric": "mean", "geomean": 0.5, "cases": 3}
    verdicts = {"faster": 1, "slower": 0, "same": 0, "unknown": 0}
    r["comparisons"] = _stored_comparison([{**geomean, **verdicts}])
    colors = palette(["base", "fast"])
    table = html.workload_table(view_of(r), "w", colors)
    assert '0.52 <span class="ci">[0.48, 0.56]</span> <span class="faster">faster</span>' in table
    assert table.count("<tr>") == 1 + 3 * 2  # a header, one row per matrix point and variant
    assert table.count(">baseline</td>") == 3
    assert "0.50" in table  # plain ratios where no comparison is stored
    summary = html.comparison_summary(view_of(r), colors)
    assert "Against base" in summary and '<span class="faster">1 faster</span>' in summary
    assert html.comparison_summary(view_of(_two_variant_matrix()), colors) == ""


def test_open_loop_rate_sweep_puts_the_offered_rate_on_x() -> None:
    cases = []
    for rate in (200.0, 50.0, 100.0):
        c = _case("a", "w", {"rate": rate}, [int(1e6 * rate / 50)] * 50)
        c["params"]["rate"] = rate
        cases.append(c)
    got = _by_id(_result(cases, ["a"], ["rate"]))
    p99 = got["p99-w"]
    assert p99.categories == ("50", "100", "200")  # ascending offered rate
    assert p99.x_label == "offered rate (requests/s)"
    assert "spectrum-w-rate-50" in got  # 50.0 is written 50
    assert p99.series[0].y == pytest.approx((1.0, 2.0, 4.0), rel=1e-3)


def test_html_lists_warnings_and_failed_cases_folding_long_lists() -> None:
    from rpcmeter.reporters import html

    cases = [_case("a", "w", {}, [1000] * 10)]
    for i in range(10):
        failed = _case("a", "w", {}, [1000], rep=i + 1)
        failed.update(status="failed", reason=f"server exited {i}")
        cases.append(failed)
    r = _result(cases, ["a"], [])
    r["warnings"] = ["client CPUs saturated"]
    page = html.render(view_of(r))
    section = page[page.index('id="warnings"') : page.index("</section>", page.index("warnings"))]
    assert "client CPUs saturated" in section and "server exited 9" in section
    assert "<summary>3 more</summary>" in section  # 11 problems, 8 shown
    assert page.count('<figure class="plot"') == 1  # the spectrum of the one good case


def test_environment_rows_are_one_readable_line_each() -> None:
    from rpcmeter.reporters.html import _env_rows

    env = {
        "packages": {"rpyc": "6.0.2"},
        "placement": {"server_cpus": [0], "client_cpus": [1], "server_quota_cpus": None},
        "variant_packages": {"a": {"rpyc": "6.0.2"}, "b": {"rpyc": "5.3.1"}},
        "governor": None,
    }
    assert list(_env_rows(env)) == [
        ("packages", "rpyc 6.0.2"),
        ("placement", "server_cpus: 0, client_cpus: 1"),
        ("variant packages", "a: rpyc 6.0.2; b: rpyc 5.3.1"),
    ]
