"""The dataflow: ``python -m busy_polling.flow --workers 4 --items 4 --long-input true``."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

import busy_polling


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def burn(cpu_s: float) -> int:
    """Map one item: ``cpu_s`` seconds of CPU in this process."""
    end = time.process_time() + cpu_s
    n = 0
    while time.process_time() < end:  # reading a CPU clock is a system call: not too often
        for _ in range(2000):
            n = (n * 31 + 7) % 1_000_003
    return n


class Input:
    """One worker's partition: item k is ready ``(k + 1) * interval`` after the start."""

    def __init__(self, items: int, interval: float) -> None:
        self.items, self.interval = items, interval
        self.start = time.monotonic()
        self.next = 0

    def poll(self) -> int | None:
        """The next item, or None while it is not ready yet (never blocks)."""
        if time.monotonic() - self.start < (self.next + 1) * self.interval:
            return None
        self.next += 1
        return self.next - 1


def worker(items: int, interval: float, heavy_s: float, park_s: float) -> None:
    source = Input(items, interval)
    done = 0
    while done < items:
        item = source.poll()
        if item is None:
            if park_s > 0:
                time.sleep(park_s)  # park: give the CPU back until the next poll
            continue  # spin: poll again at once
        burn(heavy_s)
        done += 1


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m busy_polling.flow")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--heavy-map", type=_flag, default=False)
    parser.add_argument("--long-input", type=_flag, default=False)
    parser.add_argument("--heavy-s", type=float, default=0.05)
    args = parser.parse_args()
    park_s = float(os.environ.get("BUSY_POLLING_PARK_S", busy_polling.PARK_S))
    interval = args.interval if args.long_input else 0.0
    heavy_s = args.heavy_s if args.heavy_map else 0.0
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=worker, args=(args.items, interval, heavy_s, park_s))
        for _ in range(args.workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [p.exitcode for p in procs if p.exitcode]
    if failed:
        raise SystemExit(f"{len(failed)} workers failed")


if __name__ == "__main__":
    main()
