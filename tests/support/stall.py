"""The checks of an open-loop run against a server that stalled once for ``stall_s`` seconds in a
``duration_s`` run at ``rate`` requests/s (the server option ``stall_ms``).

The requests due during the stall wait for its end, so the corrected latency of the tail is
spread linearly over (0, S]: P(corrected > x) = (S - x) / ((1 - rho) D) with rho the server's
load, i.e. p(q) = S - (1 - q) (1 - rho) D. Uncorrected, only the requests in flight see it. (The
exact arithmetic, with no machine noise, is tested in-process in test_open_loop_schedule.py.)
On a real machine, load only moves the corrected tail towards S and above; a virtual machine also
adds hiccups of its own, in either histogram (an idle server waking on an idle vCPU sometimes
answers a plain call after 50-200 ms). So the uncorrected tail is judged against the corrected
one, by how many requests each holds above S / 4, not by a percentile of a handful of samples.
"""

from __future__ import annotations

from typing import Any

from rpcmeter.metrics.histogram import Histogram


def count_above(histogram: dict[str, Any], threshold_ns: float) -> int:
    values, counts = Histogram.from_dict(histogram).bucket_values()
    return sum(c for v, c in zip(values, counts, strict=True) if v > threshold_ns)


def check_stall(case: dict[str, Any], rate: float, stall_s: float, duration_s: float) -> None:
    corrected, uncorrected = case["latency"], case["latency_uncorrected"]
    for key, q in (("p99_us", 0.99), ("p999_us", 0.999)):
        # the arithmetic for an idle server (rho = 0); a loaded one only moves it towards S
        expected_us = (stall_s - (1 - q) * duration_s) * 1e6
        assert expected_us * 0.85 < corrected[key] < stall_s * 1e6 * 2, key
    assert uncorrected["p99_us"] < corrected["p99_us"] / 2
    assert uncorrected["max_us"] >= stall_s * 1e6 * 0.9  # a request in flight
    # above S / 4: R * 3S / 4 corrected requests, and the ones in flight uncorrected
    threshold_ns = stall_s * 1e9 / 4
    above_corrected = count_above(case["histogram"], threshold_ns)
    above_uncorrected = count_above(case["histogram_uncorrected"], threshold_ns)
    assert above_corrected >= rate * stall_s * 3 / 4 * 0.8, above_corrected
    assert 1 <= above_uncorrected <= above_corrected / 5, (above_uncorrected, above_corrected)
    # at least the R * S requests due during the stall could not go out on time (hiccups add more)
    assert case["open_loop"]["late"] >= rate * stall_s * 0.8
