"""The names the command line offers, in a module that loads nothing heavy.

``rpcmeter --help`` and every command's ``--help`` list these choices: the metrics a comparison,
a gate or a trend reads, how a trend groups runs, the text formats, the column sets and where the
history lives. The modules that compute with them (:mod:`rpcmeter.analysis.compare`, :mod:`rpcmeter.history.trend`,
:mod:`rpcmeter.history.store`, :mod:`rpcmeter.reporters.registry`) import them from here, so the
parser and the code agree without the parser importing numpy, scipy or the result model.

This module imports nothing of rpcmeter's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class Metric:
    name: str  # as given to --metric
    path: str  # key path in a case document
    label: str  # in sentences
    short: str  # in table headers
    unit: str
    higher_is_better: bool = False
    words: tuple[str, str] = ("faster", "slower")  # how faster / slower read in tables


CPU_WORDS = ("less", "more")  # CPU time: less is better


METRICS: tuple[Metric, ...] = (
    Metric("mean", "latency.mean_us", "mean latency", "mean", "us"),
    Metric("p50", "latency.p50_us", "median latency", "p50", "us"),
    Metric("p99", "latency.p99_us", "p99 latency", "p99", "us"),
    Metric("throughput", "throughput_rps", "throughput", "req/s", "1/s", higher_is_better=True),
    Metric(
        "server_cpu",
        "cpu.server_us_per_request",
        "server CPU per request",
        "server CPU",
        "us",
        words=CPU_WORDS,
    ),
    Metric(
        "client_cpu",
        "cpu.client_us_per_request",
        "client CPU per request",
        "client CPU",
        "us",
        words=CPU_WORDS,
    ),
    # whole commands (runners/command.py): CPU seconds per run, user and system apart
    Metric("user_cpu", "command.user_s", "user CPU per run", "user s", "s", words=CPU_WORDS),
    Metric("sys_cpu", "command.sys_s", "system CPU per run", "sys s", "s", words=CPU_WORDS),
)
METRIC_BY_NAME = {m.name: m for m in METRICS}
# how a metric's column reads where every compared case is a whole command (runners/command.py):
# a run is no request and the command's CPU no server's
COMMAND_SHORT = {
    "mean": "wall",
    "p50": "p50 wall",
    "p99": "p99 wall",
    "throughput": "runs/s",
    "server_cpu": "CPU/run",
}
# compared for each call of a mix (paths in ``cases[].calls[]``)
CALL_METRICS = tuple(m for m in METRICS if m.name in ("mean", "p50", "p99", "throughput"))


def verdict_word(metric_name: str, verdict: str) -> str:
    """How a stored verdict reads in a table: ``faster``/``slower`` in the metric's own words
    (``less``/``more`` for CPU time); ``same``, ``unknown`` and anything else unchanged."""
    m = METRIC_BY_NAME.get(metric_name)
    if m is None or verdict not in ("faster", "slower"):
        return verdict
    return m.words[0] if verdict == "faster" else m.words[1]


# what ``rpcmeter trend --metric`` also takes
METRIC_ALIASES = {"rps": "throughput"}

# how ``rpcmeter trend`` groups runs into points
By = Literal["run", "revision", "date"]
BY: tuple[By, ...] = ("run", "revision", "date")
DEFAULT_THRESHOLD = 1.05  # a step this much worse fails ``trend --fail-on-step``

# the formats of ``show``, ``compare`` and ``report --format`` (every one can render a
# comparison), and the two a column set is drawn in
TEXT_FORMATS = ("text", "json", "csv", "markdown")
COLUMN_FORMATS = ("text", "markdown")
# ``--columns``: another tool's table
COLUMN_SETS = ("grpc-bench",)

# the history database
DEFAULT_STORE = Path(".rpcmeter") / "history.db"
STORE_ENV = "RPCMETER_STORE"


def default_store() -> Path:
    """The history the commands use without ``--store``: ``$RPCMETER_STORE`` when set, else
    ``.rpcmeter/history.db`` under the current directory."""
    return Path(os.environ.get(STORE_ENV) or DEFAULT_STORE)
