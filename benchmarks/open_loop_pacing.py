"""How precisely and how cheaply rpcmeter's open loop sends on schedule.

With a call that returns at once, the corrected latency of every request is the send lag (how
late after its intended time it went out) plus nothing. For each way of waiting, in one run,
alternating: send lag p50 / p99 and the CPU time the client spent per request.

- threads: ``measure_open`` as shipped (sleep with 1 ns timer slack to ``SPIN_NS`` before the slot,
  then yield), with other ``SPIN_NS``, and with the default 50 us slack (a plain ``time.sleep``);
- event loop: ``EventPacer`` with the timerfd waker as shipped, and with ``LoopWaker`` (event-loop
  timers, millisecond resolution, then polling the loop for the last stretch).

    python benchmarks/open_loop_pacing.py [--rates 1000,10000] [--seconds 1] [--rounds 3] [--cpu N]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from rpcmeter.runners import open_loop
from rpcmeter.runners.event_loop import new_event_loop
from rpcmeter.runners.open_loop import EventLoad, EventPacer, LoopWaker, Schedule, measure_open
from rpcmeter.runners.recorder import Recorder
from rpcmeter.runners.recording import ThreadStats
from rpcmeter.runners.spec import Pacing

Result = tuple[float, float, float]  # lag p50 us, lag p99 us, CPU us per request


def thread_way(fine: bool, spin_ns: int) -> Callable[[float, float], Result]:
    def run(rate: float, seconds: float) -> Result:
        saved = open_loop.SPIN_NS, open_loop.fine_timer_slack
        open_loop.SPIN_NS = spin_ns
        if not fine:
            open_loop.fine_timer_slack = lambda: ctypes.CDLL(None).prctl(29, 50_000, 0, 0, 0)
        try:
            sched = Schedule(Pacing(rate), requests=None, duration_s=seconds)
            stats = ThreadStats()
            box: list[float] = []

            def body() -> None:
                c0 = time.thread_time()
                measure_open(
                    lambda: None,
                    Recorder(stats, False, uncorrected=True),
                    sched,
                    loops=1,
                    fatal=(OSError,),
                    stop=lambda: False,
                    publish=lambda n: None,
                )
                box.append(time.thread_time() - c0)

            t = threading.Thread(target=body)
            t.start()
            t.join()
            return _figures(stats, box[0])
        finally:
            open_loop.SPIN_NS, open_loop.fine_timer_slack = saved

    return run


def event_way(timerfd: bool) -> Callable[[float, float], Result]:
    def run(rate: float, seconds: float) -> Result:
        saved = open_loop.new_waker
        if not timerfd:
            open_loop.new_waker = LoopWaker
        loop = new_event_loop()
        try:
            sched = Schedule(Pacing(rate), requests=None, duration_s=seconds)
            stats = ThreadStats()

            def channel(done: Any) -> None:
                loop.call_soon(done, None, None)

            pacer = EventPacer(
                EventLoad(
                    loop,
                    sched,
                    [channel] * 8,
                    Recorder(stats, False, uncorrected=True),
                    stats,
                    (OSError,),
                )
            )
            c0 = time.thread_time()
            stats.start_ns = sched.begin(time.perf_counter_ns())
            pacer.start()
            loop.run_until_complete(pacer.finished)
            cpu = time.thread_time() - c0
            pacer.close()
            pacer.fold()
            return _figures(stats, cpu)
        finally:
            open_loop.new_waker = saved
            loop.close()

    return run


def _figures(stats: ThreadStats, cpu_s: float) -> Result:
    h = stats.hist  # corrected latency of an instant call: the send lag (plus two clock reads)
    return h.percentile(50) / 1e3, h.percentile(99) / 1e3, cpu_s / max(h.count, 1) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,10000")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=None, help="pin to this CPU")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, [args.cpu])
    ways = {
        f"threads: sleep, 1 ns slack, yield {open_loop.SPIN_NS // 1000} us (shipped)": thread_way(
            True, open_loop.SPIN_NS
        ),
        "threads: sleep, 1 ns slack, yield 30 us": thread_way(True, 30_000),
        "threads: sleep, 1 ns slack": thread_way(True, 0),
        "threads: plain sleep, 50 us slack": thread_way(False, 0),
        "event loop: timerfd (shipped)": event_way(True),
        "event loop: loop timers + polling": event_way(False),
    }
    for rate in (float(r) for r in args.rates.split(",")):
        got: dict[str, list[Result]] = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, way in ways.items():
                got[name].append(way(rate, args.seconds))
        print(f"\n{rate:,.0f} req/s, {args.rounds} rounds of {args.seconds:g} s (medians):")
        w = max(len(name) for name in ways)  # the longest name sets the first column
        print(f"  {'':{w}} {'lag p50 us':>10} {'lag p99 us':>10} {'CPU us/req':>10}")
        for name, runs in got.items():
            p50, p99, cpu = (statistics.median(col) for col in zip(*runs, strict=True))
            print(f"  {name:{w}} {p50:10.1f} {p99:10.1f} {cpu:10.1f}")


if __name__ == "__main__":
    main()
