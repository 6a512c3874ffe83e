"""Memory of a case's time series as the case goes on: the parent's time line
(:class:`rpcmeter.runners.windows.Timeline`) fed one client's windows, each with a second's worth
of latencies (log-normal around 200 us), for a simulated case of hours; prints the Python memory
the time line holds (tracemalloc) and the size of the series in the result document after each
stretch. Flat memory: the series keeps at most ``MAX_WINDOWS`` intervals, merging adjacent ones
pairwise beyond that.

    python benchmarks/timeseries_memory.py --hours 6 --rate 2000
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc

import numpy as np

from rpcmeter.result.record import interval_of
from rpcmeter.runners.recording import Window
from rpcmeter.runners.stages import WindowClock
from rpcmeter.runners.windows import MAX_WINDOWS, Timeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=6.0, help="simulated case length")
    parser.add_argument("--rate", type=int, default=2000, help="replies per 1 s interval")
    args = parser.parse_args()
    seconds = int(args.hours * 3600)
    rng = np.random.default_rng(0)
    tracemalloc.start()
    timeline = Timeline(WindowClock(1_000_000_000), 1)
    marks = sorted({seconds // 8, seconds // 4, seconds // 2, seconds} | {600, 3600} - {0})
    t0 = time.perf_counter()
    print(f"{'case s':>8} {'intervals':>9} {'held MB':>8} {'peak MB':>8} {'series KB':>9}")
    for i in range(seconds):
        piece = Window()
        piece.hist.record_array(rng.lognormal(np.log(200_000), 0.5, args.rate).astype(np.int64))
        piece.ok = args.rate
        timeline.add(0, {i: piece}, i + 1, (0.001 * i, 0.0))
        if i + 1 in marks:
            gc.collect()
            held, peak = tracemalloc.get_traced_memory()
            series = [interval_of(k).dump() for k in timeline.intervals]
            size = len(json.dumps(series))
            print(
                f"{i + 1:>8} {len(timeline.intervals):>9} {held / 1e6:>8.1f} {peak / 1e6:>8.1f}"
                f" {size / 1e3:>9.0f}"
            )
    print(f"(at most {MAX_WINDOWS} intervals kept; {time.perf_counter() - t0:.0f} s to run)")


if __name__ == "__main__":
    main()
