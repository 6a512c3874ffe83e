"""How long each probe of a rate search runs (rpcmeter.run.maxrate.probe_duration_s), and the
search as a source of cases handed each result (RateSearchCases), without a server."""

from __future__ import annotations

import pytest

from rpcmeter import model
from rpcmeter.analysis.rates import parse_slo
from rpcmeter.metrics.histogram import Histogram
from rpcmeter.plan.cases import Case, expand
from rpcmeter.plan.load import build_suite
from rpcmeter.run.maxrate import (
    PROBE_MAX_S,
    PROBE_MIN_S,
    RateSearchCases,
    probe_duration_s,
    search_suite,
)
from rpcmeter.suite.model import Load


def test_a_duration_is_kept() -> None:
    assert probe_duration_s(Load(mode="open", rate=50, duration_s=3.0), 100.0) == 3.0


@pytest.mark.parametrize(
    ("load", "start", "expected"),
    [
        # 500 requests per loop, 2 loops in each of 2 clients: 2,000 requests at 400 req/s
        (Load(requests=500, threads=2, clients=2), 400.0, 5.0),
        (Load(requests=500, concurrency=4, connections=2), 400.0, 5.0),  # concurrency counts
        (Load(requests=1000), 10.0, PROBE_MAX_S),  # 100 s: every probe would take that long
        (Load(requests=200), 1000.0, PROBE_MIN_S),  # 0.2 s: too short to say anything
    ],
)
def test_a_request_count_becomes_the_time_it_takes_at_the_start(
    load: Load, start: float, expected: float
) -> None:
    """The same for every probe: halving the rate with a fixed count would double each probe."""
    assert probe_duration_s(load, start) == pytest.approx(expected)


def probed(case: Case, p99_ms: float) -> model.Case:
    """What a probe of ``case`` measured: all requests sent, p99 ``p99_ms``."""
    rate = case.load.rate
    assert rate is not None
    h = Histogram()
    h.record_array([100_000] * 98 + [int(p99_ms * 1e6)] * 2)  # p99 = p99_ms
    return model.Case.model_validate(
        {
            "id": case.index,
            "variant": case.variant,
            "workload": case.workload,
            "point": dict(case.point),
            "repetition": 0,
            "status": "ok",
            "requests": 100,
            "histogram": h.to_dict(),
            "histogram_uncorrected": h.to_dict(),
            "open_loop": {
                "offered_rps": rate,
                "achieved_rps": rate,
                "scheduled": 100,
                "sent": 100,
                "late": 0,
                "dropped": 0,
            },
            "throughput_rps": rate,
            "wall_s": 1.0,
        }
    )


def test_the_search_is_a_source_of_cases_handed_each_result() -> None:
    """Each base is searched in turn; its entry is handed over once, when its search ends."""
    raw = {
        "name": "s",
        "target": {"driver": "rpyc", "transport": "unix"},
        "workloads": {"simple": {}},
        "matrix": {"threads": [1, 2]},
        "load": {"mode": "open", "rate": 100, "duration_s": 0.5},
    }
    bases = [c for c in expand(search_suite(build_suite(raw))) if c.repetition == 0]
    source = RateSearchCases(bases, parse_slo("p99=5ms"), 100, tolerance=0.05, max_steps=3)
    assert source.planned == 6 and source.matrix_keys == ("rate",)
    proposed, found = [], []
    case = source.next(None)
    while case is not None:
        proposed.append(case)
        case = source.next(probed(case, 1.0 if case.load.rate == 100 else 10.0))
        found.append(source.found())
    # 100 passes, 200 fails, then the middle, 150, fails: three steps per base
    assert [(c.index, dict(c.point), c.load.rate) for c in proposed] == [
        (i, {"threads": threads, "rate": rate}, rate)
        for i, (threads, rate) in enumerate((t, r) for t in (1, 2) for r in (100, 200, 150))
    ]
    assert [len(f) for f in found] == [0, 0, 1, 0, 0, 1]
    entries = [e for f in found for e in f]
    assert [(e.point, e.max_rate_rps, e.lowest_failing_rps, e.converged) for e in entries] == [
        ({"threads": threads}, 100, 150, False) for threads in (1, 2)
    ]
    assert [[s.case for s in e.steps] for e in entries] == [[0, 1, 2], [3, 4, 5]]
    assert [s.passed for s in entries[0].steps] == [True, False, False]
    assert source.found() == [] and source.next(None) is None
