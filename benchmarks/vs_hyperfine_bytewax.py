"""rpcmeter's whole-command figures against hyperfine's, on study 003's bytewax dataflows.

Each dataflow of ``examples/bytewax/suite.toml`` (workload x heavy_map x long_input, for the
variants asked for; their environments prepared as ``rpcmeter run`` prepares them, and cached)
runs as one command line, with one environment and directory, under both tools in turn, one run
each per round: hyperfine (``-N``, no shell, one run, ``--export-json``: its wall time and the
user and system time of the command and the children it waited for) and rpcmeter's launcher
(:func:`rpcmeter.runners.command.measure`, as ``rpcmeter run`` runs each run: every process of
the tree reaped and counted). Both run unpinned, one after the other, so a round's two runs see
about the same machine.

Per dataflow and variant it prints the medians of wall, user and system seconds of both and the
median over the rounds of each round's ratio rpcmeter / hyperfine (wall, user, system, CPU =
user + system). A row whose runs last over 1 s is judged: the wall ratio within 5 % of 1 and the
CPU ratio within 10 %; exit status 1 when a judged row is not.

    python benchmarks/vs_hyperfine_bytewax.py [--variant 0.21.1 ...] [--workload partitioned ...]
        [--items 8] [--rounds 5] [--processes N] [--set KEY=VALUE ...]

``--items`` is the items per partition (the study: 20; 8 makes a slow input's run about 2 s and
a fast input's with the heavy map over 1 s on two CPUs). ``--processes`` sets ``-p`` (default:
``{cpus}``, every CPU). With two or more processes a run's wall time jumps by a second between
runs of the same command, under either tool: at start a worker connects to the workers before it
and, when one does not listen yet, retries a second later (timely's networking). One process
starts the same way every time.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rpcmeter.errors import EnvError
from rpcmeter.host import envs as envs
from rpcmeter.plan.cases import Case, expand
from rpcmeter.plan.load import load_suite
from rpcmeter.runners.command import CommandLine, command_line, measure
from rpcmeter.suite.model import Runs

SUITE = Path(__file__).resolve().parent.parent / "examples" / "bytewax" / "suite.toml"
ONE_RUN = Runs(warmup=0, count=1)
WALL_TOLERANCE = 0.05
CPU_TOLERANCE = 0.10
JUDGED_ABOVE_S = 1.0


@dataclass
class Sample:
    wall_s: float
    user_s: float
    sys_s: float

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s


@dataclass
class Row:
    label: str
    hyperfine: list[Sample] = field(default_factory=list)
    rpcmeter: list[Sample] = field(default_factory=list)


def run_hyperfine(line: CommandLine, scratch: Path) -> Sample:
    """One run of ``line`` timed by hyperfine."""
    out = scratch / "hyperfine.json"
    subprocess.run(
        [
            *("hyperfine", "-N", "--runs", "1", "--warmup", "0", "--style", "none"),
            *("--export-json", str(out), shlex.join(line.argv)),
        ],
        env=line.environ,
        cwd=line.cwd,
        check=True,
        capture_output=True,
        timeout=600,
    )
    result = json.loads(out.read_text())["results"][0]
    if result["exit_codes"] != [0]:
        raise RuntimeError(f"hyperfine: {line.argv} exited with {result['exit_codes']}")
    return Sample(result["times"][0], result["user"], result["system"])


def run_rpcmeter(line: CommandLine) -> Sample:
    """One run of ``line`` through rpcmeter's launcher."""
    outcome = measure(line.argv, env=line.environ, cwd=line.cwd, runs=ONE_RUN)
    if outcome.failure or not outcome.runs:
        raise RuntimeError(f"rpcmeter: {outcome.failure}\n{outcome.output_tail}")
    run = outcome.runs[0]
    return Sample(run.wall_s, run.user_s, run.sys_s)


def value(sample: Sample, key: str) -> float:
    figure: float = getattr(sample, key)
    return figure


def ratio(row: Row, key: str) -> float:
    """The median over the rounds of each round's rpcmeter / hyperfine ratio of ``key`` (NaN
    when hyperfine read 0 in every round: its system time of a one-process run can be 0.0)."""
    pairs = zip(row.rpcmeter, row.hyperfine, strict=True)
    ratios = [value(a, key) / value(b, key) for a, b in pairs if value(b, key) > 0]
    return statistics.median(ratios) if ratios else math.nan


def median(samples: list[Sample], key: str) -> float:
    return statistics.median(value(s, key) for s in samples)


def report(rows: list[Row]) -> int:
    """The table and the verdicts; the exit status."""
    w = max(len(r.label) for r in rows)
    head = (
        f"{'dataflow · variant':<{w}} {'tool':<9} {'wall s':>7} {'user s':>7} {'sys s':>7}"
        f"   {'ratio: wall':>11} {'user':>6} {'sys':>6} {'CPU':>6}  verdict"
    )
    print("\n" + head + "\n" + "-" * len(head))
    failed = 0
    for row in rows:
        for tool, samples in (("hyperfine", row.hyperfine), ("rpcmeter", row.rpcmeter)):
            figures = " ".join(f"{median(samples, k):>7.3f}" for k in ("wall_s", "user_s", "sys_s"))
            label = row.label if tool == "hyperfine" else ""
            if tool == "hyperfine":
                print(f"{label:<{w}} {tool:<9} {figures}")
                continue
            wall, cpu = ratio(row, "wall_s"), ratio(row, "cpu_s")
            ratios = f"{wall:>11.3f} {ratio(row, 'user_s'):>6.3f} {ratio(row, 'sys_s'):>6.3f} {cpu:>6.3f}"
            if median(row.hyperfine, "wall_s") <= JUDGED_ABOVE_S:
                verdict = "not judged (runs under 1 s)"
            elif abs(wall - 1) <= WALL_TOLERANCE and abs(cpu - 1) <= CPU_TOLERANCE:
                verdict = "ok"
            else:
                verdict = "OUTSIDE (wall 5 %, CPU 10 %)"
                failed += 1
            print(f"{label:<{w}} {tool:<9} {figures}   {ratios}  {verdict}")
    judged = sum(1 for r in rows if median(r.hyperfine, "wall_s") > JUDGED_ABOVE_S)
    print(f"\n{judged - failed} of {judged} judged rows within 5 % (wall) and 10 % (CPU)")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, default=SUITE)
    parser.add_argument("--variant", "-V", action="append", help="variants (default: all)")
    parser.add_argument("--workload", "-w", action="append", help="workloads (default: all)")
    parser.add_argument("--items", type=int, default=8, help="items per partition (default 8)")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each tool (default 5)")
    parser.add_argument(
        "--processes",
        "-p",
        type=int,
        help="bytewax processes, {cpus} in the commands (default: every CPU; nothing is pinned)",
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    if shutil.which("hyperfine") is None:
        sys.exit(
            "vs_hyperfine_bytewax: hyperfine is not installed (Debian: apt-get install hyperfine)"
        )
    names = load_suite(args.suite, args.overrides, only_workloads=args.workload).workloads
    items = [f'workloads."{name}".items={args.items}' for name in names]
    overrides = ["repeat=1", *items, *args.overrides]
    suite = load_suite(
        args.suite, overrides, only_workloads=args.workload, only_variants=args.variant
    )
    prepared = envs.prepare_variants(suite, lambda v, msg: print(f"{v}: {msg}", file=sys.stderr))
    cases: list[tuple[Case, CommandLine]] = []
    for case in expand(suite):
        env = prepared.get(case.variant)
        if isinstance(env, EnvError):
            print(f"{case.variant}: skipped: {env}", file=sys.stderr)
            continue
        cpus = list(range(args.processes)) if args.processes else None  # fills {cpus} only
        cases.append((case, command_line(suite, case, env, cpus=cpus)))
    rows = [Row(case.label()) for case, _ in cases]
    with tempfile.TemporaryDirectory(prefix="vs-hyperfine-") as tmp:
        for r in range(1, args.rounds + 1):
            for row, (_, line) in zip(rows, cases, strict=True):
                row.hyperfine.append(run_hyperfine(line, Path(tmp)))
                row.rpcmeter.append(run_rpcmeter(line))
                h, m = row.hyperfine[-1], row.rpcmeter[-1]
                print(
                    f"round {r}  {row.label} · wall {h.wall_s:.3f} / {m.wall_s:.3f}  "
                    f"CPU {h.cpu_s:.3f} / {m.cpu_s:.3f}  (hyperfine / rpcmeter)",
                    flush=True,
                )
    return report(rows)


if __name__ == "__main__":
    sys.exit(main())
