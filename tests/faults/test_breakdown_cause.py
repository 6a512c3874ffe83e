"""A negative overhead of a case whose clients ran several loops is named for the client's
wakeup, which the round trip (one request at a time) pays for every reply and such a case often
does not, not blamed on the server's timer."""

from __future__ import annotations

import numpy as np

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.result.breakdown import breakdown, warnings_for
from tests.support.synthetic import completed


def hist(values_us: list[float]) -> Histogram:
    h = Histogram()
    h.record_array(np.array([int(v * 1e3) for v in values_us], dtype=np.int64))
    return h


def warning(loops: int | None, wait: str | None) -> str:
    # a round trip of 20 us, a case whose requests took 2 us beyond what the server reported
    b = breakdown(
        hist([20.0] * 100),
        hist([20.0] * 100),
        hist([50.0] * 100),
        hist([2.0] * 100),
        Histogram(),
        loops=loops,
        wait=wait,
    )
    case = {"status": "ok", "workload": "small", "variant": "v", "point": {}, "breakdown": b}
    [w] = warnings_for(completed({"cases": [case]}))
    assert "negative beyond the noise" in w
    return w


def test_several_loops_per_client_name_the_client_wakeup() -> None:
    w = warning(4, "block")
    assert "wakeup of the idle client" in w and "4 loops of each client" in w, w
    assert "server's reported times exceed" not in w
    assert 'load.wait = "spin"' in w


def test_one_loop_or_a_spinning_client_still_suspects_the_server_timer() -> None:
    for loops, wait in ((1, "block"), (4, "spin"), (None, None)):
        assert "server's reported times exceed" in warning(loops, wait)
