"""What differed between two runs' environments, for ``rpcmeter compare``.

Two runs of the same code can differ because the machine did: its load, the CPUs it gave,
where server and clients ran, the software's versions, the clients' CPUs busy with other
processes. :func:`differences` lists what differed, each marked ``suspect`` when it may
explain a difference in the figures; :func:`warning_of` says so beside verdicts that found one.

Thresholds: a load average (1 minute) that moved by at least :data:`LOAD_STEP` and by a quarter
of the machine's CPUs; clients' CPUs busy with other work (their CPUs' busy share less the
clients' own, averaged over the cases) that moved by :data:`BUSY_POINTS` percentage points.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from rpcmeter.model import Environment, Placement, Result
from rpcmeter.text import warning

LOAD_STEP = 0.5  # load average (1 minute): a smaller move is noise
BUSY_POINTS = 10.0  # clients' CPUs busy with other work: percentage points


class Difference(BaseModel):
    """One thing that differed: its name, its value in the baseline run and in the other, and
    whether it may explain a difference in the figures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    what: str
    baseline: str
    other: str
    suspect: bool


def _cpus(cpus: Sequence[int] | None) -> str:
    from rpcmeter.host.placement import format_cpus

    return format_cpus(list(cpus)) if cpus else "any"


def _placement(env: Environment) -> str:
    p = env.placement or Placement()
    return f"server {_cpus(p.server_cpus)}, clients {_cpus(p.client_cpus)}"


def _load(env: Environment) -> float | None:
    return env.load_average[0] if env.load_average else None


def other_work_pct(result: Result) -> float | None:
    """How busy the clients' CPUs were with other processes, in percent of those CPUs: their
    busy share less the clients' own, averaged over the cases that measured both (None: none
    did)."""
    shares = [
        max(0.0, c.cpu.client_cpus_busy_pct - (c.cpu.client_util_pct or 0.0))
        for c in result.cases
        if c.status == "ok" and c.cpu.client_cpus_busy_pct is not None
    ]
    return statistics.fmean(shares) if shares else None


# what is compared as text: its name and how to read it from an environment
TEXTS: tuple[tuple[str, Callable[[Environment], object]], ...] = (
    ("host", lambda e: e.host),
    ("CPU model", lambda e: e.cpu_model),
    ("CPUs available", lambda e: _cpus(e.cpus_available)),
    ("placement", _placement),
    ("CPU governor", lambda e: ", ".join(sorted(e.cpu_governor or {}))),
    ("kernel", lambda e: e.kernel),
    ("Python", lambda e: e.python),
    ("rpcmeter", lambda e: e.rpcmeter),
    ("client compiled", lambda e: e.rpcmeter_compiled),
)


def differences(a: Result, b: Result) -> list[Difference]:
    """What differed between run ``a`` (the baseline) and run ``b``, in the order of
    :data:`TEXTS`, then the packages' versions, the load average and the clients' CPUs busy
    with other work. Every one is ``suspect`` but a load or a share of other work that moved
    less than its threshold (then it is not listed)."""
    ea, eb = a.environment, b.environment
    out = []
    for what, read in TEXTS:
        va, vb = read(ea), read(eb)
        if va is not None and vb is not None and va != vb:
            out.append(Difference(what=what, baseline=str(va), other=str(vb), suspect=True))
    for name in sorted(set(ea.packages) | set(eb.packages)):
        va, vb = ea.packages.get(name), eb.packages.get(name)
        if va != vb:
            out.append(Difference(what=name, baseline=va or "-", other=vb or "-", suspect=True))
    la, lb = _load(ea), _load(eb)
    cpus = max(ea.cpu_count or 1, eb.cpu_count or 1)
    if la is not None and lb is not None and abs(lb - la) >= max(LOAD_STEP, cpus / 4):
        out.append(
            Difference(
                what="load average (1 min)", baseline=f"{la:.2f}", other=f"{lb:.2f}", suspect=True
            )
        )
    wa, wb = other_work_pct(a), other_work_pct(b)
    if wa is not None and wb is not None and abs(wb - wa) >= BUSY_POINTS:
        out.append(
            Difference(
                what="clients' CPUs busy with other work",
                baseline=f"{wa:.0f} %",
                other=f"{wb:.0f} %",
                suspect=True,
            )
        )
    return out


def warning_of(found: Sequence[Difference], verdicts: int) -> str | None:
    """The warning beside ``verdicts`` differences found (faster or slower) when the
    environments differed in what may explain them; None otherwise."""
    suspects = [d.what for d in found if d.suspect]
    if not suspects or not verdicts:
        return None
    return warning(
        f"the runs' environments differed: the {verdicts} faster/slower verdict(s) may come "
        "from the machine",
        f"what differed: {', '.join(suspects)}. Rerun both on the same quiet machine, or "
        "compare them as variants of one run, whose cases interleave.",
    )
