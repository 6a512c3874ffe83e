"""Arguments several commands share, and their checks.

Everything here is light: it imports :mod:`rpcmeter.names` for the choices it offers, and nothing
that measures, computes statistics or draws.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from rpcmeter.names import (
    COLUMN_SETS,
    DEFAULT_STORE,
    METRICS,
    STORE_ENV,
    default_store,
)

# Output files (--output, --html, --csv, --markdown) and --plots create missing directories.
CREATES = " (missing parent directories are created)"


def whole(least: int, unit: str = "") -> Callable[[str], int]:
    """A flag's parser of whole numbers of ``least`` or more (``unit`` names them in errors)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < least:
            bound = "zero or more" if least == 0 else f"at least {least}"
            raise argparse.ArgumentTypeError(f"{value}: {bound}{' ' + unit if unit else ''}")
        return value

    return parse


columns = whole(40, "columns")  # ``--width``: 40 columns or more


def width(args: argparse.Namespace, out: TextIO) -> int:
    """``--width``, else the terminal's width where ``out`` is one, else 120 columns."""
    given = getattr(args, "width", None)
    if given:
        return int(given)
    return shutil.get_terminal_size((120, 40)).columns if out.isatty() else 120


def add_width(p: Any) -> None:
    p.add_argument(
        "--width", type=columns, default=None, help="table width (default: terminal width)"
    )


def add_set_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a suite value (dotted key; value parsed as TOML), repeatable",
    )


def add_store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"history database (default: ${STORE_ENV}, else {DEFAULT_STORE} under the "
        "current directory)",
    )


def store_path(args: argparse.Namespace) -> Path:
    """``--store``, else the default history (read when the command runs, not when it parses)."""
    given: Path | None = getattr(args, "store", None)
    return given if given is not None else default_store()


def add_gate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-if-slower",
        type=float,
        metavar="PCT",
        help="exit with status 1 when any case's --metric is significantly worse than the "
        "baseline by more than PCT percent (listing which), 3 when a case cannot be settled "
        "(too few repetitions for significance, or a difference beyond PCT that is not "
        "significant)",
    )
    p.add_argument(
        "--metric",
        default="mean",
        choices=[m.name for m in METRICS],
        help="metric that --fail-if-slower gates on (default: mean latency)",
    )


def add_report_outputs(p: Any) -> None:
    p.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write a self-contained HTML report here" + CREATES,
    )
    p.add_argument(
        "--plots",
        type=Path,
        metavar="DIR",
        help="write the plots as PNG files into DIR (created, with its parents, if missing)",
    )


def add_columns_option(p: Any) -> None:
    p.add_argument(
        "--columns",
        choices=COLUMN_SETS,
        metavar="SET",
        help="the run's figures laid out as another tool's table: grpc-bench (grpc_bench's "
        "results table, and each server under rpcmeter's client and a peer tool side by side)",
    )
