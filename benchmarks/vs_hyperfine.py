"""``rpcmeter cmd`` against hyperfine on the same commands, alternating in one run.

For each command (by default a ~5 ms one, ``sleep 0.005``, and a ~100 ms one, ``sleep 0.1``),
each round runs ``hyperfine`` and then ``rpcmeter cmd`` with the same flags (``-N`` unless
``--shell``, ``--warmup``, the default budget of both: at least 10 runs and 3 s of the command's
own time), then the next round in the other order. Printed per command: each tool's mean wall
time (over all its runs), the runs it made, the seconds its whole invocation took, and the
ratios rpcmeter / hyperfine: the mean must be within 3 % and the runs made at least as many.
Then rpcmeter's time per run around the command: the time from the start of its first measured
run to the end of its last (the case's ``wall_s`` in the result), less the runs' own time, over
the runs. Its fixed cost (start, warmup runs, report) is the first line: ``rpcmeter cmd -r 1
true`` as a whole.

An earlier version took the invocation's seconds, less that fixed cost and the runs' own time,
over the runs. That counted the warmup runs' own time as rpcmeter's (3 x 100 ms over 30 runs:
10 ms a run too many for ``sleep 0.1``), and the start's noise (0.1 s) over a few runs.

    python benchmarks/vs_hyperfine.py [--rounds 3] [--warmup 3] [--shell]
        [--command 'sleep 0.005' --command 'sleep 0.1']

Needs ``hyperfine`` on PATH (``apt-get install hyperfine``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_COMMANDS = ["sleep 0.005", "sleep 0.1"]


def _hyperfine(command: str, warmup: int, shell: bool, out: Path) -> tuple[list[float], float]:
    """hyperfine's run times (seconds) of ``command`` and the seconds its invocation took."""
    argv = ["hyperfine", "--style", "none", "--warmup", str(warmup), "--export-json", str(out)]
    argv += [] if shell else ["-N"]
    start = time.perf_counter()
    subprocess.run([*argv, command], check=True, stdout=subprocess.DEVNULL)
    took = time.perf_counter() - start
    times = json.loads(out.read_text())["results"][0]["times"]
    return [float(t) for t in times], took


def _rpcmeter(
    command: str, warmup: int, shell: bool, out: Path, extra: tuple[str, ...] = ()
) -> tuple[list[float], float, float]:
    """``rpcmeter cmd``'s run times (seconds) of ``command``, the seconds its invocation took
    and the seconds from its first measured run's start to its last one's end."""
    argv = [sys.executable, "-m", "rpcmeter", "cmd", "--no-store", "--no-live", "-o", str(out)]
    argv += ["--warmup", str(warmup), *([] if shell else ["-N"]), *extra]
    start = time.perf_counter()
    subprocess.run(
        [*argv, command], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    took = time.perf_counter() - start
    doc = json.loads(out.read_text())
    walls = [r["wall_s"] for c in doc["cases"] for r in c["runs"] if r["exit_code"] == 0]
    return walls, took, sum(c["wall_s"] for c in doc["cases"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--shell", action="store_true", help="both tools run commands with sh")
    parser.add_argument("--command", action="append", default=None)
    args = parser.parse_args()
    if shutil.which("hyperfine") is None:
        print("hyperfine is not on PATH (apt-get install hyperfine)", file=sys.stderr)
        return 2
    commands = args.command or DEFAULT_COMMANDS
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        # rpcmeter's own start (interpreter, imports, the report): not time around runs
        starts = [_rpcmeter("true", 0, args.shell, out, ("-r", "1"))[1] for _ in range(3)]
        start_s = statistics.median(starts)
        print(f"rpcmeter cmd -r 1 true: {start_s:.2f} s (median of 3; its start and report)")
        print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs\n")
        for command in commands:
            got: dict[str, list[tuple[list[float], float]]] = {"hyperfine": [], "rpcmeter": []}
            loops: list[float] = []  # rpcmeter's measuring phase, a round each
            for r in range(args.rounds):
                order = ["hyperfine", "rpcmeter"] if r % 2 == 0 else ["rpcmeter", "hyperfine"]
                for tool in order:
                    if tool == "hyperfine":
                        got[tool].append(_hyperfine(command, args.warmup, args.shell, out))
                    else:
                        walls, took_s, loop_s = _rpcmeter(command, args.warmup, args.shell, out)
                        got[tool].append((walls, took_s))
                        loops.append(loop_s)
            print(f"{command!r}, {args.rounds} rounds alternating")
            print(
                f"  {'tool':<10} {'mean ms':>9} {'runs':>7} {'took s':>8}   per round (mean ms/runs)"
            )
            means, runs, took = {}, {}, {}
            for tool, rounds in got.items():
                walls = [w for times, _ in rounds for w in times]
                means[tool] = statistics.fmean(walls)
                runs[tool] = statistics.fmean(len(times) for times, _ in rounds)
                took[tool] = statistics.fmean(t for _, t in rounds)
                each = ", ".join(f"{statistics.fmean(t) * 1e3:.2f}/{len(t)}" for t, _ in rounds)
                print(
                    f"  {tool:<10} {means[tool] * 1e3:>9.3f} {runs[tool]:>7.0f} "
                    f"{took[tool]:>8.2f}   {each}"
                )
            ratio = means["rpcmeter"] / means["hyperfine"]
            print(
                f"  rpcmeter / hyperfine: mean {ratio:.3f} ({(ratio - 1) * 100:+.1f} %), "
                f"runs {runs['rpcmeter'] / runs['hyperfine']:.2f}, "
                f"time taken {took['rpcmeter'] / took['hyperfine']:.2f}"
            )
            own = [
                (loop_s - sum(times)) / len(times)
                for (times, _), loop_s in zip(got["rpcmeter"], loops, strict=True)
                if times
            ]
            print(
                f"  rpcmeter's time per run around the command: {statistics.fmean(own) * 1e3:.2f} ms"
                f" (the command's own: {means['rpcmeter'] * 1e3:.2f} ms)\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
