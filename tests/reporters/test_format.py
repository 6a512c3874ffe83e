"""The terminal's number formats."""

from __future__ import annotations

from rpcmeter.reporters.format import fmt_ms


def test_times_below_a_microsecond_keep_two_significant_digits() -> None:
    # rpyc's server reports its handling time of a trivial call: about 0.39 us, not "0.000"
    assert fmt_ms(0.388527) == "0.00039"
    assert fmt_ms(0.0) == "0.000"
    assert fmt_ms(1.5) == "0.002"
    assert fmt_ms(150.0) == "0.150"
    assert fmt_ms(1500.0) == "1.50"
    assert fmt_ms(150_000.0) == "150"
