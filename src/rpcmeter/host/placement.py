"""Where server and clients run: CPU lists resolved from the suite's placement, and CPU quotas.

Placement is applied three ways:

- affinity: the server and every client process are pinned to their CPU list;
- a cgroup CPU quota, for a side whose placement is a count (``1``, ``2``, ``0.5``): the side's
  processes are moved into a cgroup of their own allowed exactly that many CPUs of run time per
  period. cgroup v2 (``cpu.max``) and v1 (``cpu.cfs_quota_us``) are supported; where neither can
  be written (no permission, no cpu controller, a container) the quota is skipped and the reason
  recorded (:attr:`CpuQuotas.notes`);
- a memory limit for the server (``placement.server_memory``): a cgroup of the run whose
  processes may use that much memory at most (v2 ``memory.max``, in the server's CPU quota cgroup
  when it has one; v1 ``memory.limit_in_bytes`` in the memory hierarchy), which the server joins
  as it starts (:func:`create_memory_cgroup`); the OOM kills in it tell a case whose server was
  killed at the limit (:meth:`Cgroup.oom_kills`). Where it cannot be made, the reason is
  recorded likewise.

The same cgroups also track a server's whole process tree (:func:`tracking_cgroup`): each server
is started in a cgroup of its own, without limits (nested in the server's quota cgroup when there
is one), so that the processes its children start in sessions of their own are still found and
stopped with it. Where that cgroup keeps CPU accounting (cgroup v2 ``cpu.stat``, v1 ``cpuacct``),
it also gives the server's CPU time (:meth:`Cgroup.cpu_times`), counting every process that ever
ran in it; where it does not, the server joins a second cgroup in a hierarchy that does
(:func:`accounting_cgroup`).
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from rpcmeter.errors import SuiteError
from rpcmeter.metrics.resources import split_total
from rpcmeter.suite.model import Placement

PERIOD_US = 100_000


@dataclass(frozen=True)
class Cpus:
    """Resolved placement: CPU lists (None: not pinned) and CPU counts for quotas."""

    server: list[int] | None
    client: list[int] | None
    server_quota: float | None = None  # CPUs of run time, when the placement was a count
    client_quota: float | None = None


def applied(cpus: Cpus, target: str, explicit_server: bool) -> Cpus:
    """The placement a case of a ``target`` kind really gets: ``"server"`` (rpcmeter starts the
    server and runs the clients) and ``"client"`` (the same, a command as the client) get
    ``cpus``; ``"remote"`` (a server elsewhere) only the client side; ``"command"`` (a whole
    command, no client processes) is pinned to the server CPUs only when they were set
    explicitly, and runs unpinned otherwise."""
    if target == "command":
        return Cpus(cpus.server if explicit_server else None, None)
    if target == "remote":
        return Cpus(None, cpus.client, None, cpus.client_quota)
    return cpus


def available_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def cpus_given(pinned: list[int] | None, quota: float | None) -> float:
    """How many CPUs a side may use: its quota, else its CPU list, else every available CPU."""
    if quota is not None:
        return quota
    if pinned:
        return float(len(pinned))
    return float(len(available_cpus()))


def format_cpus(cpus: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``."""
    runs: list[list[int]] = []
    for c in sorted(set(cpus)):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def resolve(placement: Placement, cpus: list[int] | None = None, where: str | None = None) -> Cpus:
    """Explicit lists are kept (each CPU must be available); counts take CPUs from the front
    (server) and the back (clients); ``auto`` keeps server and clients apart when there are two or
    more CPUs (server gets one)."""
    cpus = available_cpus() if cpus is None else cpus
    server_spec, client_spec = placement.server_cpus, placement.client_cpus

    def pick(spec: float | list[int] | str, key: str, from_front: bool) -> list[int] | None:
        if spec == "none":
            return None
        if isinstance(spec, list):
            missing = [c for c in spec if c not in cpus]
            if missing:
                raise SuiteError(
                    f"{where + ': ' if where else ''}placement.{key}: CPU {missing[0]} is not available "
                    f"(available: {format_cpus(cpus)})"
                )
            return sorted(set(spec))
        if isinstance(spec, int | float):
            n = max(1, min(math.ceil(spec), len(cpus)))
            return cpus[:n] if from_front else cpus[-n:]
        return None  # auto, resolved below

    def quota(spec: float | list[int] | str) -> float | None:
        if isinstance(spec, int | float) and not isinstance(spec, bool):
            return float(min(spec, len(cpus)))
        return None

    server = pick(server_spec, "server_cpus", True)
    client = pick(client_spec, "client_cpus", False)
    if len(cpus) >= 2:
        if server_spec == "auto":
            taken = set(client or [])
            free = [c for c in cpus if c not in taken] or cpus
            server = free[:1]
        if client_spec == "auto":
            taken = set(server or [])
            client = [c for c in cpus if c not in taken] or cpus
    return Cpus(server, client, quota(server_spec), quota(client_spec))


# ---- cgroup CPU quotas ----------------------------------------------------------------------


def _own_cgroup(controller: str | None) -> str | None:
    """This process's cgroup path for ``controller`` (v1) or the unified hierarchy (None)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if controller is None and parts[0] == "0" and parts[1] == "":
            return parts[2]
        if controller is not None and controller in parts[1].split(","):
            return parts[2]
    return None


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fs type, options) of cgroup file systems."""
    out = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            f = line.split()
            if len(f) >= 4 and f[2] in ("cgroup", "cgroup2"):
                out.append((f[1], f[2], f[3]))
    except OSError:
        pass
    return out


@dataclass
class Cgroup:
    """One cgroup: a directory whose ``procs`` file takes process ids (``cpus``: its CPU quota,
    ``memory``: its memory limit in bytes; None for a cgroup that only tracks processes)."""

    path: Path
    version: int
    cpus: float | None
    memory: int | None = None

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def add(self, pid: int) -> None:
        self.procs.write_text(str(pid))

    def pids(self) -> list[int]:
        """The processes in the cgroup now (none when it cannot be read)."""
        try:
            return [int(pid) for pid in self.procs.read_text().split()]
        except (OSError, ValueError):
            return []

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every process in the cgroup."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()

    def oom_kills(self) -> int | None:
        """How many processes of the cgroup (and the cgroups below it) the OOM killer has killed
        since it was made (v2 ``memory.events``, v1 ``memory.oom_control``), or None where that
        cannot be read (no memory controller)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            fields = dict(
                line.split(None, 1) for line in (self.path / name).read_text().splitlines()
            )
            return int(fields["oom_kill"])
        except (OSError, ValueError, KeyError):
            return None

    def cpu_times(self) -> tuple[float, float] | None:
        """User and system CPU seconds of every process that ran in the cgroup since it was made
        (exited ones included), or None when the cgroup keeps no CPU accounting readable here."""
        try:
            if self.version == 2:
                return parse_cpu_stat((self.path / "cpu.stat").read_text())
            # v1: the total is exact (the scheduler's run time); the split into user and system
            # is sampled at clock ticks, so it only gives the ratio (as the kernel does for v2)
            total = parse_ns((self.path / "cpuacct.usage").read_text())
            try:
                split = (
                    parse_ns((self.path / "cpuacct.usage_user").read_text()),
                    parse_ns((self.path / "cpuacct.usage_sys").read_text()),
                )
            except OSError:  # kernels before 4.7 have only cpuacct.stat
                split = parse_cpuacct_stat((self.path / "cpuacct.stat").read_text())
            return split_total(total, *split)
        except (OSError, ValueError):
            return None


def parse_cpu_stat(text: str) -> tuple[float, float]:
    """User and system seconds from a cgroup v2 ``cpu.stat`` (``user_usec``, ``system_usec``)."""
    fields = dict(line.split(None, 1) for line in text.splitlines() if line.strip())
    try:
        return int(fields["user_usec"]) / 1e6, int(fields["system_usec"]) / 1e6
    except KeyError as exc:
        raise ValueError(f"cpu.stat has no {exc.args[0]}") from None


def parse_ns(text: str) -> float:
    """Seconds from a cgroup v1 ``cpuacct.usage``, ``cpuacct.usage_user`` or ``cpuacct.usage_sys``
    (nanoseconds)."""
    return int(text.strip()) / 1e9


def parse_cpuacct_stat(text: str) -> tuple[float, float]:
    """User and system seconds from a cgroup v1 ``cpuacct.stat`` (``user``, ``system``, in
    clock ticks)."""
    fields = dict(line.split(None, 1) for line in text.splitlines() if line.strip())
    tick = os.sysconf("SC_CLK_TCK")
    try:
        return int(fields["user"]) / tick, int(fields["system"]) / tick
    except KeyError as exc:
        raise ValueError(f"cpuacct.stat has no {exc.args[0]}") from None


def create_cgroup(name: str, cpus: float) -> tuple[Cgroup | None, str]:
    """A new cgroup limited to ``cpus`` CPUs of run time, or None and the reason it failed."""
    quota = max(1000, round(cpus * PERIOD_US))
    return _limited_cgroup(
        name,
        "cpu",
        {"cpu.max": f"{quota} {PERIOD_US}"},
        {"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(quota)},
        cpus=cpus,
    )


def create_memory_cgroup(name: str, limit: int, same: Cgroup | None) -> tuple[Cgroup | None, str]:
    """A cgroup whose processes may use at most ``limit`` bytes of memory (the OOM killer stops
    one that needs more), or None and the reason it failed: ``same`` itself (a cgroup v2 quota
    cgroup: the limit is added to it) where it can, else a new one (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``)."""
    first = ""
    if same is not None and same.version == 2:
        try:
            problem = _enable_v2(same.path.parent, "memory")
            if problem is None:
                (same.path / "memory.max").write_text(str(limit))
                same.memory = limit
                return same, ""
            first = problem + "; "
        except OSError as exc:
            first = f"cgroup v2 at {same.path}: {exc.strerror}; "
    group, reason = _limited_cgroup(
        name,
        "memory",
        {"memory.max": str(limit)},
        {"memory.limit_in_bytes": str(limit)},
        memory=limit,
    )
    return group, (first + reason if group is None else "")


def _enable_v2(parent: Path, controller: str) -> str | None:
    """Enable ``controller`` for the cgroups below the v2 cgroup ``parent``; why it is not
    available there, or None."""
    try:
        controllers = (parent / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return f"{parent}: {exc.strerror}"
    if controller not in controllers:
        return f"cgroup v2 at {parent} has no {controller} controller"
    with contextlib.suppress(OSError):  # may be enabled already, or not allowed here
        (parent / "cgroup.subtree_control").write_text(f"+{controller}")
    return None


def _limited_cgroup(
    name: str,
    controller: str,
    v2_files: dict[str, str],
    v1_files: dict[str, str],
    cpus: float | None = None,
    memory: int | None = None,
) -> tuple[Cgroup | None, str]:
    """A new cgroup ``name`` in this process's own cgroup of the first hierarchy with
    ``controller`` where its limit files (``v2_files`` or ``v1_files``: file -> value) can be
    written; or None and why it could not be made anywhere."""
    reasons: list[str] = []
    for mount, fstype, options in _mounts():
        v2 = fstype == "cgroup2"
        if not v2 and controller not in options.split(","):
            continue
        own = _own_cgroup(None if v2 else controller)
        if own is None:
            continue
        parent = Path(mount) / own.lstrip("/")
        if v2 and (problem := _enable_v2(parent, controller)) is not None:
            reasons.append(problem)
            continue
        path = parent / name
        try:
            path.mkdir(exist_ok=True)
            for file, value in (v2_files if v2 else v1_files).items():
                (path / file).write_text(value)
            return Cgroup(path, 2 if v2 else 1, cpus, memory), ""
        except OSError as exc:
            reasons.append(f"cgroup v{2 if v2 else 1} at {parent}: {exc.strerror}")
            with contextlib.suppress(OSError):
                path.rmdir()
    return None, "; ".join(reasons) or f"no cgroup file system with a {controller} controller"


def hierarchy(path: Path) -> str:
    """The cgroup file system (its mount point) that ``path`` lies in: two cgroups of one
    hierarchy cannot both hold a process."""
    mounts = [m for m, _, _ in _mounts() if path.is_relative_to(m)]
    return max(mounts, key=len, default="")


def format_memory(size: int) -> str:
    """``536870912`` -> ``512 MiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):.4g} {unit}"
    return f"{size} B"


# hierarchies for a tracking cgroup, best first: no controller limits anything, and the ``cpu``
# hierarchy, where quota cgroups live, only when nothing else can be written
_TRACKING = ("pids", "freezer", "cgroup2", "cpu")


def tracking_cgroup(name: str, inside: Cgroup | None = None) -> tuple[Cgroup | None, str]:
    """A new cgroup without limits to hold one process tree, or None and the reason it failed.

    It is made in ``inside`` (the server's quota cgroup, whose quota then applies to it) when
    given and possible, otherwise in this process's own cgroup of the first writable hierarchy."""
    candidates: list[tuple[int, Path, int]] = []
    if inside is not None:
        candidates.append((-1, inside.path, inside.version))
    for mount, fstype, options in _mounts():
        kinds = [fstype] if fstype == "cgroup2" else options.split(",")
        rank = min((_TRACKING.index(k) for k in kinds if k in _TRACKING), default=None)
        if rank is None:
            continue
        own = _own_cgroup(None if fstype == "cgroup2" else _TRACKING[rank])
        if own is not None:
            candidates.append(
                (rank, Path(mount) / own.lstrip("/"), 2 if fstype == "cgroup2" else 1)
            )
    reasons: list[str] = []
    for _, parent, version in sorted(candidates, key=lambda c: c[0]):
        try:
            (parent / name).mkdir()
        except OSError as exc:
            reasons.append(f"{parent}: {exc.strerror}")
            continue
        return Cgroup(parent / name, version, None), ""
    return None, "; ".join(reasons) or "no cgroup file system"


def accounting_cgroup(name: str, tracking: Cgroup | None) -> Cgroup | None:
    """A cgroup that keeps CPU accounting for the processes of ``tracking``: ``tracking`` itself
    when it does, else a new cgroup (without limits) in this process's own cgroup of a hierarchy
    that does (v1 ``cpuacct``, v2), which the processes must join as well; None where there is
    none that can be made and read."""
    if tracking is not None and tracking.cpu_times() is not None:
        return tracking
    for mount, fstype, options in _mounts():
        if fstype != "cgroup2" and "cpuacct" not in options.split(","):
            continue
        own = _own_cgroup(None if fstype == "cgroup2" else "cpuacct")
        if own is None:
            continue
        group = Cgroup(Path(mount) / own.lstrip("/") / name, 2 if fstype == "cgroup2" else 1, None)
        try:
            group.path.mkdir()
        except OSError:
            continue
        if group.cpu_times() is not None:
            return group
        group.remove()
    return None


@dataclass
class CpuQuotas:
    """The cgroups of one run (server and clients, and the server's memory limit, which on
    cgroup v2 is the server's quota cgroup itself when it has one), removed on exit."""

    server: Cgroup | None = None
    client: Cgroup | None = None
    notes: list[str] = field(default_factory=list)
    server_memory: Cgroup | None = None
    memory_limit: int | None = None  # the server memory limit asked for (applied or not)

    def oom_kills(self) -> int | None:
        """The OOM kills in the server's memory cgroup so far (None: no memory limit)."""
        return self.server_memory.oom_kills() if self.server_memory is not None else None

    def close(self) -> None:
        for group in (self.server, self.client, self.server_memory):
            if group is not None:
                group.remove()


def apply_quotas(cpus: Cpus, enabled: bool = True, server_memory: int | None = None) -> CpuQuotas:
    """cgroups for the sides whose placement was a CPU count, and for the server's memory limit
    (see the module docstring)."""
    quotas = CpuQuotas(memory_limit=server_memory)
    tag = f"rpcmeter-{os.getpid()}"
    for side, amount in (("server", cpus.server_quota), ("client", cpus.client_quota)):
        if amount is None:
            continue
        if not enabled:
            quotas.notes.append(f"{side} CPU quota not applied: resources.cgroup is false")
            continue
        group, reason = create_cgroup(f"{tag}-{side}", amount)
        if group is None:
            quotas.notes.append(f"{side} CPU quota of {amount:g} CPUs not applied: {reason}")
        setattr(quotas, side, group)
    if server_memory is not None:
        shown = format_memory(server_memory)
        if not enabled:
            quotas.notes.append("server memory limit not applied: resources.cgroup is false")
        else:
            group, reason = create_memory_cgroup(
                f"{tag}-server-memory", server_memory, quotas.server
            )
            if group is None:
                quotas.notes.append(f"server memory limit of {shown} not applied: {reason}")
            quotas.server_memory = group
    return quotas


def joined(group: Cgroup | None, pid: int) -> str | None:
    """After :func:`rpcmeter.host.launch.place`: None when ``pid`` is in ``group`` (or there is no
    group), else why it is not (:func:`join_cgroup`, tried once more)."""
    if group is None or pid in group.pids():
        return None
    return join_cgroup(group, [pid])


def join_cgroup(group: Cgroup | None, pids: list[int]) -> str | None:
    """Move ``pids`` (all their threads) into ``group``; the reason when that failed."""
    if group is None:
        return None
    for pid in pids:
        try:
            group.add(pid)
        except OSError as exc:
            return f"cannot move process {pid} into {group.path}: {exc.strerror}"
    return None
