"""Whole-command cases (driver ``command``): the command line is the system under test.

Per case, the command runs ``runs.warmup`` times unmeasured, then at least ``runs.min_runs`` times
and until its measured runs' own wall time adds up to ``runs.min_time_s`` seconds, and at least
as many times as hyperfine would (``runs.min_time_s`` over the first run's wall time); at most
``runs.max_runs``; or exactly ``runs.count`` times. Every run goes through the launcher
:mod:`rpcmeter.runners.tree`, which reaps the command's whole process tree and reports wall time,
user and system CPU of every process in it, and the peak memory. One launcher serves all the runs
of a case (:class:`Launcher`), so a run costs rpcmeter a few forks and execs, not the start of an
interpreter. With ``target.shell`` the command line (and the hooks') is run by ``/bin/sh``;
``target.setup``, ``prepare`` and ``cleanup`` run around the runs (:class:`Hooks`).

The command line (a string split like a shell would, or a list) takes ``{name}`` placeholders:
the workload's parameters and the matrix keys, and ``{python}``, the variant's interpreter
(``{{`` and ``}}`` are literal braces). Booleans are written ``true``/``false``. There is no
shell: write ``sh -c '...'`` for pipes and redirections. The command runs in ``target.cwd``
(relative to the suite file; default: the current directory), with the variant's environment
activated (its ``bin`` first on ``PATH``, ``VIRTUAL_ENV`` set) and ``target.env`` and the
variant's ``env`` added. It is pinned to ``placement.server_cpus`` only when that is set
explicitly (a whole command usually wants every CPU).

A run that exits with a non-zero status, times out or cannot start ends the case as failed, with
the status and the last line of the command's output; the runs measured before it are kept.

The case document (see :mod:`rpcmeter.result.document`) gets, besides the common fields:

- ``runs``: every measured run, ``{"wall_s", "user_s", "sys_s", "cpu_s", "max_rss_bytes",
  "exit_code", "processes"}`` (``cpu_s`` = user + system; ``processes``: how many processes of
  the tree were reaped); ``Cell.values("runs.cpu_s")`` gives them over all repetitions;
- ``command``: ``{"argv", "warmup_runs", "wall_s", "wall_stdev_s", "user_s", "sys_s", "cpu_s",
  "cpu_stdev_s", "cores", "max_rss_bytes", "python"}``, means over the runs (``cpu_s`` = user +
  system, ``cores`` = cpu_s / wall_s, the CPUs kept busy on average);
- ``latency``/``histogram``: the distribution of the runs' wall times, so every table and
  comparison built on latency works for commands too; ``requests`` counts runs, ``ok`` the
  successful ones, ``throughput_rps`` runs per second;
- ``cpu``: ``server_user_s`` and ``server_sys_s`` (totals over the measured runs: the command is
  the server side) and ``server_us_per_request`` (mean CPU per run, microseconds); ``memory``:
  ``server_peak_rss_bytes``.

A *command client* (a ``command`` variant in a suite whose target starts a server;
:meth:`~rpcmeter.suite.model.Suite.command_client`) runs the same way against the server
started for its case, or the one at its ``address`` (:class:`rpcmeter.run.execute.CommandClientCase`):
its command line also takes ``{host}``, ``{port}``, ``{socket}``, ``{requests_per_run}``,
``{scheme}`` and with TLS ``{ca_file}`` and ``{server_name}`` (:func:`command_line`); each run
is pinned to the client CPUs and, with a client CPU quota, starts in the clients' cgroup
(:func:`run_once`); its case is counted in requests, with no latency
(:func:`rpcmeter.result.record.case_result`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from rpcmeter.host import launch as launch
from rpcmeter.host import placement as placement
from rpcmeter.host.envs import Env
from rpcmeter.host.watchdog import WATCHDOG
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.net.tls import ClientTls
from rpcmeter.net.tls import server_name as tls_server_name
from rpcmeter.plan.cases import Case
from rpcmeter.plan.targets import command_of
from rpcmeter.runners import tree
from rpcmeter.runners.client_reports import ClientReport, ReportError
from rpcmeter.suite.model import Runs, Suite
from rpcmeter.suite.placeholders import fill, fill_line
from rpcmeter.suite.workloads import CommandParams

# ---- one run ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """The measured runs of one case (what each used; :func:`rpcmeter.result.record.command_run` is
    one as the case records it), and why it stopped early if it did."""

    runs: list[tree.TreeUsage] = field(default_factory=list)
    elapsed_s: float = 0.0
    failure: str | None = None
    output_tail: str = ""
    placement_note: str | None = None  # why the command is not in its cgroup, if it is not
    reports: list[ClientReport] = field(default_factory=list)  # a measured run's each, if read


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the launcher and every process below it."""
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
    with contextlib.suppress(OSError):
        proc.kill()
    proc.wait()


@dataclass
class Hooks:
    """Commands around the measured one, as hyperfine's: ``setup`` once before a case's runs,
    ``prepare`` before each run (warmup runs included), ``cleanup`` once after them; none is
    measured. Each is an argv (with ``shell``, one command line)."""

    setup: list[str] | None = None
    prepare: list[str] | None = None
    cleanup: list[str] | None = None


@dataclass(frozen=True)
class Batch:
    """Runs one after another in the launcher, with no message between them: at most ``times``,
    and once ``least`` have run, only until their wall time adds up to ``until_s``. Those are the
    runs that :func:`measure`'s rule would make one by one (:func:`_batch`)."""

    times: int = 1
    least: int = 1
    until_s: float = 0.0


class Launcher:
    """One launcher process (:mod:`rpcmeter.runners.tree`, ``--serve``) that runs a case's runs
    one after another, placed on ``cpus`` and in ``cgroup`` (it joins them before it starts, so
    every tree it starts is there). A run then costs rpcmeter two forks of a small shell and a
    ``wait4``, not an interpreter's start; runs in a :class:`Batch` need no message between
    them."""

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        cwd: str | None,
        cpus: Sequence[int] | None = None,
        cgroup: placement.Cgroup | None = None,
    ) -> None:
        # the launcher's own errors (closed with it, in __exit__)
        self.errors = tempfile.TemporaryFile(prefix="rpcmeter-launcher-")  # noqa: SIM115
        self.proc = launch.spawn(
            [sys.executable, "-S", "-P", str(Path(tree.__file__)), "--serve"],
            procs=[str(cgroup.procs)] if cgroup is not None else [],
            cpus=cpus,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        # the launcher, starting up: it is in the cgroup or never
        self.note = placement.joined(cgroup, self.proc.pid)
        WATCHDOG.guard(self.proc.pid)  # on SIGTERM the launcher kills its tree

    def run(
        self,
        argv: Sequence[str],
        *,
        runs: Runs,
        log: Path,
        shell: bool = False,
        batch: Batch | None = None,
    ) -> list[tree.TreeUsage]:
        """Runs of ``argv`` (with ``shell``: one command line for ``/bin/sh``), one after another
        in the launcher, each one's output in ``log``: one run, or a ``batch``; a failed run ends
        them. Their :class:`~rpcmeter.runners.tree.TreeUsage` (one with ``error`` when the
        launcher failed)."""
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        batch = batch or Batch()
        request = {
            "argv": list(argv),
            "log": str(log),
            "timeout": runs.timeout_s,
            "linger": runs.linger_s,
            "shell": shell,
            "times": batch.times,
            "least": batch.least,
            "until_s": batch.until_s,
        }
        wait_s = (runs.timeout_s + runs.linger_s) * batch.times + 30
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], wait_s)
            line = proc.stdout.readline() if ready else b""
        except BrokenPipeError:
            line = b""
        except BaseException:
            self.close(kill=True)
            raise
        try:
            return [tree.TreeUsage(**usage) for usage in json.loads(line)]
        except (ValueError, TypeError):
            return [tree.TreeUsage(error="launcher failed: " + self._why())]

    def _why(self) -> str:
        if self.proc.poll() is None:
            self.close(kill=True)
        self.errors.seek(0)
        detail = self.errors.read().decode(errors="replace").strip().splitlines()
        return detail[-1] if detail else f"status {self.proc.returncode}"

    def close(self, kill: bool = False) -> None:
        """Let the launcher end (it does at the end of its input), or kill it and its tree."""
        proc = self.proc
        if not kill and proc.poll() is None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill = True
        if kill and proc.poll() is None:
            _kill(proc)
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        WATCHDOG.release(proc.pid)

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(kill=exc[0] is not None)
        self.errors.close()


def run_once(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    runs: Runs,
    log: Path,
    cpus: Sequence[int] | None = None,
    cgroup: placement.Cgroup | None = None,
    shell: bool = False,
) -> tuple[tree.TreeUsage, str | None]:
    """One run of ``argv`` through a launcher of its own, placed on ``cpus`` and in ``cgroup``:
    its :class:`~rpcmeter.runners.tree.TreeUsage` (with ``error`` when the launcher itself
    failed), and why it is not in ``cgroup`` if it is not."""
    with Launcher(env=env, cwd=cwd, cpus=cpus, cgroup=cgroup) as launcher:
        return launcher.run(argv, runs=runs, log=log, shell=shell)[0], launcher.note


def _tail(log: Path, lines: int = 20) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _problem(usage: tree.TreeUsage, runs: Runs) -> str | None:
    if usage.error:
        return usage.error
    if usage.timed_out:
        return f"timed out after {runs.timeout_s:g} s (runs.timeout_s)"
    code = usage.exit_code
    if code:
        return f"command exited with status {code}" if code > 0 else f"killed by signal {-code}"
    return None


# the live view is told of a case's runs at most this often (a run of a fast command takes a few
# milliseconds: telling it of each would cost more than the run)
PROGRESS_EVERY_S = 0.2


def measure(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    runs: Runs,
    cpus: Sequence[int] | None = None,
    on_run: Callable[[int, float], None] | None = None,
    on_go: Callable[[], None] | None = None,
    cgroup: placement.Cgroup | None = None,
    report: Callable[[str], ClientReport] | None = None,
    shell: bool = False,
    hooks: Hooks | None = None,
) -> Outcome:
    """Warmup runs, then the measured runs (see the module documentation), each on ``cpus`` and
    in ``cgroup``, all through one :class:`Launcher`; ``on_go`` is called between them. The
    minimum time counts the measured runs' own wall time, not rpcmeter's time around them, and
    there are at least as many runs as hyperfine makes (the minimum time over the first run's
    wall time). With ``report``, every successful measured run's output is read by it
    (:mod:`rpcmeter.runners.client_reports`); output it cannot read ends the case as failed.
    ``hooks``: commands run before and after (:class:`Hooks`); one that fails fails the case."""
    outcome = Outcome()
    hooks = hooks or Hooks()
    with (
        tempfile.NamedTemporaryFile(prefix="rpcmeter-command-", suffix=".log") as logf,
        Launcher(env=env, cwd=cwd, cpus=cpus, cgroup=cgroup) as launcher,
    ):
        log = Path(logf.name)
        outcome.placement_note = launcher.note

        def some(
            label: str,
            batch: Batch | None = None,
            number: int | None = None,
            command: Sequence[str] = argv,
        ) -> list[tree.TreeUsage]:
            """Runs of ``command`` (one, or a ``batch``, the first of them run ``number``): those
            to keep (a failed one with its exit status too); a failed one fails the case, named
            ``label`` (and its number)."""
            usages = launcher.run(command, runs=runs, log=log, shell=shell, batch=batch)
            problem = _problem(usages[-1], runs)
            if problem is None:
                return usages
            outcome.output_tail = _tail(log)
            last = outcome.output_tail.splitlines()[-1][:200] if outcome.output_tail else ""
            if number is not None:
                label = f"{label} {number + len(usages) - 1}"
            outcome.failure = f"{label}: {problem}" + (f" ({last})" if last else "")
            return usages if usages[-1].exit_code is not None else usages[:-1]

        def hook(label: str, command: list[str] | None) -> bool:
            """Run a hook; False when it failed (the case's failure says so)."""
            return command is None or (bool(some(label, command=command)) and not outcome.failure)

        if not hook("setup", hooks.setup):
            return outcome
        _runs(some, hook, hooks, runs, outcome, on_run, on_go, report, log)
        failure, outcome.failure = outcome.failure, None
        hook("cleanup", hooks.cleanup)  # after a failed run too, as after a good one
        outcome.failure = failure or outcome.failure  # the first failure is the one to tell
    return outcome


def _runs(
    some: Callable[[str, Batch | None, int], list[tree.TreeUsage]],
    hook: Callable[[str, list[str] | None], bool],
    hooks: Hooks,
    runs: Runs,
    outcome: Outcome,
    on_run: Callable[[int, float], None] | None,
    on_go: Callable[[], None] | None,
    report: Callable[[str], ClientReport] | None,
    log: Path,
) -> None:
    """The warmup and measured runs of :func:`measure`, each after ``hooks.prepare``; in batches
    (:class:`Batch`) where no hook and no report comes between two runs."""
    warm = 0
    while warm < runs.warmup:
        if not hook(f"prepare (before warmup run {warm + 1})", hooks.prepare):
            return
        times = 1 if hooks.prepare is not None else runs.warmup - warm
        got = some("warmup run", Batch(times, times), warm + 1)
        warm += len(got)
        if not got or outcome.failure:
            return
    if on_go:
        on_go()
    start = time.monotonic()
    told = start
    measured_s = 0.0  # the measured runs' own wall time: what the minimum time counts
    estimate = 0  # hyperfine's count: the minimum time over the first run's time
    one_by_one = hooks.prepare is not None or report is not None
    while True:
        n = len(outcome.runs)
        if runs.count is not None:
            if n >= runs.count:
                break
        elif (n >= max(runs.min_runs, estimate) and measured_s >= runs.min_time_s) or (
            runs.max_runs is not None and n >= runs.max_runs
        ):
            break
        if not hook(f"prepare (before run {n + 1})", hooks.prepare):
            break
        batch = None if one_by_one or n == 0 else _batch(runs, n, measured_s, estimate)
        got = some("run", batch, n + 1)
        outcome.runs += got
        measured_s += sum(usage.wall_s for usage in got)
        if n == 0 and got and got[0].wall_s > 0:
            estimate = int(min(runs.min_time_s / got[0].wall_s, 1e9))
        if report is not None and got and not outcome.failure:
            _read_report(report, log, n + 1, outcome)
        now = time.monotonic()
        outcome.elapsed_s = now - start
        if on_run and (now - told >= PROGRESS_EVERY_S or outcome.failure):
            told = now
            on_run(len(outcome.runs), outcome.elapsed_s)
        if outcome.failure:
            break
    if on_run:
        on_run(len(outcome.runs), outcome.elapsed_s)


def _batch(runs: Runs, n: int, measured_s: float, estimate: int) -> Batch:
    """The measured runs after the first ``n`` that :func:`_runs`' rule would make one by one,
    as one batch: at most as many as take the live view's interval (at least one)."""
    times = max(1, min(int(PROGRESS_EVERY_S * n / measured_s), 10_000)) if measured_s > 0 else 1
    if runs.count is not None:
        times = min(times, runs.count - n)
        return Batch(times=times, least=times)
    if runs.max_runs is not None:
        times = min(times, runs.max_runs - n)
    return Batch(
        times=times,
        least=max(0, max(runs.min_runs, estimate) - n),
        until_s=max(0.0, runs.min_time_s - measured_s),
    )


def _read_report(
    report: Callable[[str], ClientReport], log: Path, run: int, outcome: Outcome
) -> None:
    """Read run ``run``'s report from its output into ``outcome`` (its failure, when there is
    none to read)."""
    text = log.read_text(errors="replace")
    try:
        outcome.reports.append(report(text))
    except ReportError as exc:
        outcome.output_tail = _tail(log)
        outcome.failure = f"run {run}: {exc}"


# ---- the case ---------------------------------------------------------------------------------


@dataclass
class CommandLine:
    """A command case's command as it runs: its argv, environment and directory, the
    interpreter that ``{python}`` named and the case's ``params`` as recorded."""

    argv: list[str]
    environ: dict[str, str]
    cwd: str | None
    python: str
    params: dict[str, Any]
    shell: bool = False  # argv is one line for /bin/sh
    hooks: Hooks = field(default_factory=Hooks)


def command_line(
    suite: Suite,
    case: Case,
    env: Env | None,
    server: Endpoint | None = None,
    tls: ClientTls | None = None,
    scheme: str | None = None,
    cpus: Sequence[int] | None = None,
) -> CommandLine:
    """The command line of ``case``, its placeholders filled (``{cpus}``: how many CPUs it runs
    on, ``cpus`` where it is pinned, else every CPU this process may use); with ``server``, a
    command client's (:meth:`~rpcmeter.suite.model.Suite.command_client`), which also gets where that
    server listens (``{host}``, ``{port}``, ``{socket}``), ``{requests_per_run}``, the case's
    load shape (``{connections}``, ``{concurrency}``, ``{duration_s}``, ``{requests}`` per
    loop), the ``scheme`` of the server's URLs when it has them (``{scheme}``: ``https`` with
    ``tls``) and with ``tls`` the CA file to trust and the name to send and check (``{ca_file}``,
    ``{server_name}``)."""
    params = case.params
    python = env.python if env is not None else sys.executable
    given = params.placeholders() if isinstance(params, CommandParams) else params.model_dump()
    values = {**given, "python": python, "cpus": len(cpus or placement.available_cpus())}
    if server is not None:
        per_run = suite.variants[case.variant].requests_per_run
        if per_run is not None:  # else the command's own report counts its requests
            given["requests_per_run"] = values["requests_per_run"] = per_run
        load = case.load
        values.update(
            host=server.host,
            port="" if server.port is None else server.port,
            socket=server.path or "",
            connections=load.connections,
            concurrency=load.concurrency or load.threads,
            duration_s="" if load.duration_s is None else f"{load.duration_s:g}",
            requests=load.requests,
        )
        if scheme:
            values["scheme"] = scheme + "s" if tls is not None else scheme
        if tls is not None:
            values.update(ca_file=tls.ca_file or "", server_name=tls_server_name(tls, server.host))
    command, _ = command_of(suite, case.variant, case.workload)
    assert command is not None, "checked when the suite was loaded"
    variant = suite.variants[case.variant]
    environ = env.environ() if env is not None else dict(os.environ)
    environ.update({**suite.target.env, **variant.env})
    cwd = suite.target.cwd
    if cwd is not None and not os.path.isabs(cwd) and suite.path:
        cwd = str(Path(suite.path).resolve().parent / cwd)
    runs = suite.runs
    shell = suite.target.shell

    def line(given: str | list[str] | None) -> list[str] | None:
        if given is None:
            return None
        return [fill_line(given, values)] if shell else fill(given, values)

    target = suite.target
    return CommandLine(
        argv=line(command) or [],
        shell=shell,
        hooks=Hooks(
            setup=line(target.setup), prepare=line(target.prepare), cleanup=line(target.cleanup)
        ),
        environ=environ,
        cwd=cwd,
        python=python,
        params={
            **given,
            "warmup_runs": runs.warmup,
            **({"runs": runs.count} if runs.count else {"min_runs": runs.min_runs}),
        },
    )


def run_command(
    line: CommandLine,
    runs: Runs,
    cpus: Sequence[int] | None,
    on_run: Callable[[int, float], None] | None = None,
    on_go: Callable[[], None] | None = None,
    cgroup: placement.Cgroup | None = None,
    report: Callable[[str], ClientReport] | None = None,
) -> Outcome:
    """The runs of ``line`` (:func:`measure`), on ``cpus`` and in ``cgroup``."""
    return measure(
        line.argv,
        env=line.environ,
        cwd=line.cwd,
        runs=runs,
        cpus=cpus,
        on_run=on_run,
        on_go=on_go,
        cgroup=cgroup,
        report=report,
        shell=line.shell,
        hooks=line.hooks,
    )
