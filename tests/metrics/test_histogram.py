from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rpcmeter.metrics.histogram import (
    MAX_VALUE_NS,
    N_BUCKETS,
    Histogram,
    bucket_bounds,
    bucket_index,
)

REL = 1 / 1024  # documented precision: better than 3 significant digits


def exact_percentile(values: np.ndarray, pct: float) -> float:
    """The smallest value with at least ceil(pct/100 * n) values <= it (HDR semantics)."""
    ordered = np.sort(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return float(ordered[rank - 1])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_match_exact_within_precision(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # latencies from 1 us to ~1 s, heavy tailed
    values = (rng.lognormal(mean=11.0, sigma=1.5, size=200_000)).astype(np.int64) + 1000
    h = Histogram()
    for chunk in np.array_split(values, 7):
        h.record_array(chunk)
    for pct in (0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100):
        got = h.percentile(pct)
        want = exact_percentile(values, pct)
        assert got == pytest.approx(want, rel=REL), pct


def test_exact_moments_min_max() -> None:
    values = np.array([1_000, 2_000, 3_000, 10_000_000], dtype=np.int64)
    h = Histogram()
    h.record_array(values)
    assert h.count == 4
    assert h.min == 1_000 and h.max == 10_000_000
    assert h.mean == pytest.approx(values.mean())
    assert h.stdev == pytest.approx(values.std(ddof=1))


def test_small_values_are_exact_and_buckets_contiguous() -> None:
    values = np.arange(0, 5000, dtype=np.int64)
    idx = bucket_index(values)
    assert (idx[:2048] == values[:2048]).all()
    assert (np.diff(idx) >= 0).all() and (np.diff(idx) <= 1).all()
    for i in (0, 2047, 2048, 3071, 3072, N_BUCKETS - 1):
        lo, hi = bucket_bounds(i)
        assert bucket_index(np.array([lo, hi], dtype=np.int64)).tolist() == [i, i]
        assert hi - lo <= max(lo * REL, 0)


def test_range_one_hour_and_clipping() -> None:
    hour = 3_600 * 10**9
    h = Histogram()
    h.record_array(np.array([1_000, hour, MAX_VALUE_NS * 4], dtype=np.int64))
    assert h.percentile(50) == pytest.approx(hour, rel=REL)
    assert h.max == MAX_VALUE_NS


def test_merge_equals_concatenation() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(1_000, 5_000_000, size=50_000)
    b = rng.integers(50_000, 90_000_000, size=30_000)
    ha, hb, hall = Histogram(), Histogram(), Histogram()
    ha.record_array(a)
    hb.record_array(b)
    hall.record_array(np.concatenate([a, b]))
    merged = Histogram.merged([ha, hb])
    assert merged.count == hall.count == 80_000
    assert merged.sum == hall.sum
    assert merged.percentiles([50, 90, 99, 99.9]) == hall.percentiles([50, 90, 99, 99.9])
    assert merged.min == hall.min and merged.max == hall.max


def test_encoding_round_trip_through_json() -> None:
    rng = np.random.default_rng(3)
    h = Histogram()
    h.record_array(rng.integers(500, 10**9, size=10_000))
    data = json.loads(json.dumps(h.to_dict()))
    back = Histogram.from_dict(data)
    assert back.count == h.count and back.sum == h.sum and back.min == h.min
    assert back.percentiles([1, 50, 99.99]) == h.percentiles([1, 50, 99.99])
    with pytest.raises(ValueError, match="unsupported histogram encoding"):
        Histogram.from_dict({**data, "encoding": "other"})


def test_memory_does_not_grow_with_samples() -> None:
    h = Histogram()
    size = h._counts.nbytes
    h.record_array(np.ones(1_000_000, dtype=np.int64) * 12345)
    assert h._counts.nbytes == size
    assert len(h.to_dict()["buckets"]) < 100  # one non-empty bucket, sparse encoding


def test_empty_histogram() -> None:
    h = Histogram()
    assert math.isnan(h.mean) and math.isnan(h.percentile(50))
    assert Histogram.from_dict(h.to_dict()).count == 0


def test_counters_add_and_subtract_as_the_histograms_do() -> None:
    rng = np.random.default_rng(7)
    a_vals = rng.integers(1_000, 5_000_000, 3000)
    b_vals = rng.integers(10, 90_000_000, 2000)
    a, b, both = Histogram(), Histogram(), Histogram()
    a.record_array(a_vals)
    b.record_array(b_vals)
    both.record_array(np.concatenate([a_vals, b_vals]))
    ca, cb = a.to_counters("x"), b.to_counters("x")
    added = {k: ca.get(k, 0) + cb.get(k, 0) for k in {*ca, *cb}}
    merged = Histogram.from_counters(added, "x")
    assert merged.count == both.count and merged.sum == both.sum
    assert merged.percentiles([50, 99, 99.9]) == pytest.approx(both.percentiles([50, 99, 99.9]))
    assert merged.stdev == pytest.approx(both.stdev)
    lo, hi = both.min, both.max
    assert merged.min <= lo <= merged.min * 1.001 and merged.max * 0.999 <= hi <= merged.max
    # the warmup's counters subtracted: what b added alone
    since = {k: v - ca.get(k, 0) for k, v in added.items()}
    assert Histogram.from_counters(since, "x").percentiles([50, 90]) == b.percentiles([50, 90])
    assert Histogram.from_counters({}, "x").count == 0


def test_pickled_as_its_buckets_and_equal_after() -> None:
    import pickle

    h = Histogram()
    h.record_array(np.array([5, 1_000, 1_000, 2_500_000], dtype=np.int64))
    data = pickle.dumps(h)
    assert len(data) < 300  # the non-empty buckets, not the whole array
    back = pickle.loads(data)
    assert back.to_dict() == h.to_dict()
    assert back.percentile(50) == h.percentile(50) and back.max == h.max
    assert pickle.loads(pickle.dumps(Histogram())).count == 0
