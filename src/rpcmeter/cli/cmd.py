"""``rpcmeter cmd 'A' ['B' ...]``: whole commands measured and compared without a suite file, with
hyperfine's flags.

The flags become a suite document (:func:`suite_document`): a ``command`` target, one variant
per command (and per value of its parameters, as hyperfine names them), the first the baseline;
``[runs]`` from ``--warmup``, ``--runs``, ``--min-runs``, ``--max-runs`` and ``--min-time``. Two
or more commands run interleaved, in rounds (the suite's ``repeat``): the runs and the minimum
time are shared out between them. The suite is built and saved as the other one-liners' are
(:func:`rpcmeter.cli.oneline.prepare`): ``--save-suite FILE`` writes that document, and
``rpcmeter run FILE`` plans the same cases.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NoReturn, TextIO

from rpcmeter.cli import oneline
from rpcmeter.cli.options import whole
from rpcmeter.errors import UsageError

# hyperfine's defaults: at least 10 runs and at least 3 s of the command's own time
MIN_RUNS = 10
MIN_TIME_S = 3.0
# two or more commands run in this many interleaved rounds
ROUNDS = 3
# fewer runs of a command than this: no verdict can be reached (analysis: rank test at 5 %)
VERDICT_RUNS = 4

_PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*$")


def add_parser(sub: Any) -> None:
    from rpcmeter.cli.run import HYPERFINE_EXPORTS, add_run_outputs

    p = sub.add_parser(
        "cmd",
        help="measure and compare whole commands, with hyperfine's flags (no suite file)",
        description="Measure whole commands (wall time, user and system CPU of the whole "
        "process tree, peak memory) and compare them: the first is the baseline, each other "
        "gets a ratio, an interval and a verdict. The flags are hyperfine's.",
    )
    p.add_argument("commands", nargs="+", metavar="COMMAND", help="a command line to measure")
    p.add_argument(
        "-w", "--warmup", type=whole(0), default=0, metavar="N", help="N unmeasured runs first"
    )
    p.add_argument("-r", "--runs", type=whole(1), default=None, metavar="N", help="exactly N runs")
    p.add_argument(
        "-m",
        "--min-runs",
        type=whole(1),
        default=MIN_RUNS,
        metavar="N",
        help=f"at least N runs (default {MIN_RUNS})",
    )
    p.add_argument(
        "-M", "--max-runs", type=whole(1), default=None, metavar="N", help="at most N runs"
    )
    p.add_argument(
        "--min-time",
        type=_duration,
        default=MIN_TIME_S,
        metavar="TIME",
        help=f"run until the command's own wall time adds up to TIME (3, 500ms, 1m; default "
        f"{MIN_TIME_S:g} s; rpcmeter's time between runs is not counted)",
    )
    p.add_argument(
        "-p", "--prepare", metavar="CMD", help="run CMD before each run (warmup runs too)"
    )
    p.add_argument("-s", "--setup", metavar="CMD", help="run CMD once before a command's runs")
    p.add_argument("-c", "--cleanup", metavar="CMD", help="run CMD once after a command's runs")
    p.add_argument(
        "-S",
        "--shell",
        default="sh",
        metavar="SHELL",
        help="sh (default: /bin/sh runs each command line) or none (split, run without a shell)",
    )
    p.add_argument(
        "-N",
        dest="shell",
        action="store_const",
        const="none",
        help="no shell: --shell=none",
    )
    p.add_argument(
        "-L",
        "--parameter-list",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUES"),
        help="run each command once per value (a,b,c) of {NAME} (repeatable)",
    )
    p.add_argument(
        "-P",
        "--parameter-scan",
        nargs=3,
        default=None,
        metavar=("NAME", "MIN", "MAX"),
        help="run each command for {NAME} from MIN to MAX by --parameter-step-size",
    )
    p.add_argument(
        "-D",
        "--parameter-step-size",
        default=None,
        metavar="STEP",
        help="the step of --parameter-scan (default 1)",
    )
    p.add_argument(
        "-n",
        "--command-name",
        action="append",
        default=[],
        metavar="NAME",
        help="the name of a command in the output, in order (repeatable; may hold {NAME})",
    )
    p.add_argument(
        "--rounds",
        type=whole(1),
        default=None,
        metavar="N",
        help=f"interleave two or more commands in N rounds (default {ROUNDS})",
    )
    p.add_argument(
        "--save-suite",
        type=Path,
        metavar="FILE",
        help="write the suite (TOML) that reproduces this run; rpcmeter run FILE runs it",
    )
    p.add_argument(
        "--tables",
        action="store_true",
        help="print rpcmeter's tables after the summary (every figure and comparison)",
    )
    add_run_outputs(p, HYPERFINE_EXPORTS)
    p.set_defaults(handler=cmd_cmd)
    p.error = _one_line  # one line, not the usage block


def _one_line(message: str) -> NoReturn:
    """A usage error of ``rpcmeter cmd``: one line, exit 2 (not argparse's usage block)."""
    sys.stderr.write(f"rpcmeter: error: cmd: {message} (see rpcmeter cmd --help)\n")
    sys.exit(2)


def _duration(text: str) -> float:
    """``--min-time``: seconds, or a number with ``ms``, ``s`` or ``m``."""
    m = _DURATION.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 3, 500ms, 1m)")
    unit = {"ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}[m.group(2)]
    return float(m.group(1)) * unit


def _scan(name: str, low: str, high: str, step: str | None) -> list[str]:
    """``--parameter-scan``'s values, as hyperfine writes them (whole numbers, else decimals with
    the step's places)."""
    try:
        lo, hi = Decimal(low), Decimal(high)
        by = Decimal(step) if step is not None else Decimal(1)
    except InvalidOperation:
        raise UsageError(
            f"--parameter-scan {name}: MIN, MAX and the step are numbers "
            f"(got {low!r}, {high!r}, {step!r})"
        ) from None
    if by <= 0 or hi < lo:
        raise UsageError(f"--parameter-scan {name}: MIN <= MAX and a positive step")
    count = int((hi - lo) / by) + 1
    if count > 10_000:
        raise UsageError(f"--parameter-scan {name}: {count} values; at most 10,000")
    return [str(lo + by * i) for i in range(count)]


def _parameters(args: argparse.Namespace) -> dict[str, list[str]]:
    params: dict[str, list[str]] = {}
    for name, values in args.parameter_list:
        params[name] = values.split(",")
    if args.parameter_scan is not None:
        name, low, high = args.parameter_scan
        params[name] = _scan(name, low, high, args.parameter_step_size)
    elif args.parameter_step_size is not None:
        raise UsageError("-D/--parameter-step-size is the step of -P/--parameter-scan; give both")
    for name, values in params.items():
        if not _PARAM.match(name):
            raise UsageError(f"parameter name {name!r}: letters, digits and _, not first a digit")
        if not values or any(v == "" for v in values):
            raise UsageError(f"-L {name}: an empty value in {','.join(values)!r}")
    if len(params) < len(args.parameter_list) + (args.parameter_scan is not None):
        raise UsageError("a parameter is given twice")
    return params


def _literal(text: str, names: set[str]) -> str:
    """``text`` as a suite command line: braces are literal except around a parameter's name."""
    escaped = text.replace("{", "{{").replace("}", "}}")
    for name in names:
        escaped = escaped.replace("{{" + name + "}}", "{" + name + "}")
    return escaped


def _filled(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def _runs(args: argparse.Namespace, rounds: int) -> dict[str, Any]:
    """``[runs]`` of one round: the counts and the minimum time shared out between rounds."""
    runs: dict[str, Any] = {"warmup": args.warmup}
    if args.runs is not None:
        runs["count"] = math.ceil(args.runs / rounds)
        return runs
    runs["min_runs"] = math.ceil(args.min_runs / rounds)
    runs["min_time_s"] = round(args.min_time / rounds, 6)
    if args.max_runs is not None:
        runs["max_runs"] = max(1, math.ceil(args.max_runs / rounds))
    return runs


def _rounds(args: argparse.Namespace, variants: int) -> int:
    """How many interleaved rounds: one for one command; else --rounds (default 3), at most as
    many as there are runs, and dividing an exact --runs count."""
    if variants < 2:
        return 1
    rounds = args.rounds if args.rounds is not None else ROUNDS
    if args.runs is not None:
        rounds = max(r for r in range(1, min(rounds, args.runs) + 1) if args.runs % r == 0)
    elif args.max_runs is not None:
        rounds = min(rounds, args.max_runs)
    return rounds


def suite_document(args: argparse.Namespace) -> dict[str, Any]:
    """The suite that the flags describe (as TOML would hold it)."""
    if args.shell not in ("sh", "none"):
        raise UsageError(f"--shell {args.shell}: sh or none (-N)")
    if args.runs is not None and (args.max_runs is not None or args.min_runs != MIN_RUNS):
        raise UsageError("--runs is an exact count: leave out --min-runs and --max-runs")
    if args.max_runs is not None and args.max_runs < args.min_runs:
        raise UsageError(f"--max-runs {args.max_runs} is below --min-runs {args.min_runs}")
    if len(args.command_name) > len(args.commands):
        raise UsageError(
            f"{len(args.command_name)} --command-name for {len(args.commands)} command(s)"
        )
    if any(not c.strip() for c in args.commands):
        raise UsageError("an empty command")
    params = _parameters(args)
    names = set(params)
    variants: dict[str, dict[str, str]] = {}
    for i, command in enumerate(args.commands):
        given = args.command_name[i] if i < len(args.command_name) else None
        # once per value of the parameters it names (a command that names none: once)
        used = [n for n in params if "{" + n + "}" in command + (given or "")]
        combos = itertools.product(*(params[n] for n in used))
        for point in (dict(zip(used, combo, strict=True)) for combo in combos):
            name = _filled(given if given is not None else command, point)
            if name in variants:
                raise UsageError(
                    f"two commands named {name!r}: name them apart with -n/--command-name"
                )
            variants[name] = {"command": _literal(_filled(command, point), names)}
    rounds = _rounds(args, len(variants))
    target: dict[str, Any] = {"driver": "command", "shell": args.shell == "sh"}
    for hook in ("setup", "prepare", "cleanup"):
        line = getattr(args, hook)
        if line is not None:
            target[hook] = _literal(line, set())
    return {
        "name": "cmd",
        "description": "rpcmeter cmd " + " ".join(repr(c) for c in args.commands),
        "repeat": rounds,
        "target": target,
        "variants": variants,
        "runs": _runs(args, rounds),
    }


def _too_few(doc: dict[str, Any]) -> int | None:
    """The runs a command gets at most when they are too few for a verdict, else None."""
    if len(doc["variants"]) < 2:
        return None
    runs = doc["runs"]
    each = runs.get("count") or runs.get("max_runs")
    if each is None:
        return None
    total = each * doc["repeat"]
    return total if total < VERDICT_RUNS else None


def cmd_cmd(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.cli.run import run_and_report

    doc = suite_document(args)
    suite, _ = oneline.prepare(doc, args, "rpcmeter cmd", doc["description"], err)
    few = _too_few(doc)
    if few is not None:
        err.write(
            f"rpcmeter: note: {few} run(s) of each command are too few for a verdict "
            f"(at least {VERDICT_RUNS})\n"
        )
    return run_and_report(suite, args, out, err, summary=_summary(args.tables))


def _summary(tables: bool) -> Any:
    def summary(result: Any, view: Any) -> tuple[str, bool]:
        from rpcmeter.reporters.hyperfine import render

        return render(result, view.comparisons), tables

    return summary
