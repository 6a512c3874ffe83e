"""What one case measured, as one typed value: :class:`CaseOutcome`.

A case runner (:mod:`rpcmeter.run.execute`) starts from :func:`new_outcome` and replaces fields
as the case goes (``dataclasses.replace``); the resource monitor's readings go in as plain values
when the case ends (:class:`rpcmeter.metrics.resources.TreeReadings`), never the live monitor.
:func:`rpcmeter.result.record.case_result` then turns the outcome into the case's result, with no
I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rpcmeter import model
from rpcmeter.result.document import now_iso
from rpcmeter.result.parts import placement_of

if TYPE_CHECKING:
    from rpcmeter.host.placement import CpuQuotas, Cpus
    from rpcmeter.metrics.histogram import Histogram
    from rpcmeter.metrics.resources import CpuTimes, TreeReadings
    from rpcmeter.plan.cases import Case
    from rpcmeter.runners.command import Outcome
    from rpcmeter.runners.recording import LoadOutcome
    from rpcmeter.runners.stages import LoadStage

#: What the case measured: a load (``load``), a load cut short by Ctrl-C (``interrupted``), the
#: server's quiet window (an ``idle`` case), a whole command's runs (``command``) or a command
#: client's runs against a server (``client``).
Measured = Literal["load", "interrupted", "idle", "command", "client"]


@dataclass(frozen=True)
class CommandLine:
    """What a command's case runs: its argument vector, its interpreter, its warm-up runs and the
    parameters it was given (the case's ``params``)."""

    argv: tuple[str, ...]
    python: str
    warmup_runs: int
    params: model.Json


@dataclass(frozen=True)
class RoundTrips:
    """The round trip before and after the case, the ``breakdown``'s basis: no-op requests
    (``noop``, with the ``loops`` per client and the ``wait`` as they ran) or TCP handshakes
    (``network``)."""

    before: Histogram
    after: Histogram
    basis: str = "noop"
    loops: int | None = None
    wait: str | None = None


@dataclass(frozen=True)
class Ending:
    """Why the runner says the case failed or is incomplete (and the server's last output)."""

    status: Literal["failed", "incomplete"]
    reason: str
    server_output_tail: str = ""


@dataclass(frozen=True)
class CaseOutcome:
    """Everything one case measured, and how it ended."""

    case: Case
    placement: model.Placement  # as applied (a whole command: its CPUs)
    cpus: Cpus  # the variant's, for the CPU figures
    quotas: CpuQuotas
    started_at: str
    endpoint: str | None = None
    server_managed: bool | None = None  # None: not said (a whole command)
    notes: tuple[str, ...] = ()  # how the case was placed (a cgroup that could not be joined)
    profiles: Mapping[str, model.CaseProfile] | None = None
    measured: Measured | None = None  # None: it failed before it measured anything
    load: LoadOutcome | None = None
    stages: tuple[LoadStage, ...] = ()
    remote_load: bool = False  # the clients ran on other machines (their CPUs unknown here)
    server: TreeReadings | None = None  # None: no server watched
    idle: CpuTimes | None = None  # the server's CPU over a quiet window (an idle case's whole)
    network_rtt: RoundTrips | None = None  # TCP handshakes before and after
    breakdown: RoundTrips | None = None
    command: CommandLine | None = None
    runs: Outcome | None = None
    requests_per_run: int | None = None  # a command client's
    client_report: str | None = None  # the kind of report a command client's runs printed
    ending: Ending | None = None


def new_outcome(case: Case, applied: Cpus, cpus: Cpus, quotas: CpuQuotas) -> CaseOutcome:
    """A case's outcome as it starts, now: nothing measured yet, placed as ``applied``."""
    return CaseOutcome(
        case=case, placement=placement_of(applied), cpus=cpus, quotas=quotas, started_at=now_iso()
    )
