"""Server process lifecycle: start (pinned, in its own process group and, where the machine allows
it, its own cgroup), probe until ready, watch, and always stop the whole process tree, on success,
failure, timeout and Ctrl-C; if rpcmeter is killed outright, :mod:`rpcmeter.host.watchdog` stops the
group and the cgroup. The cgroup holds every process the server starts, also those that start a
session of their own (``setsid``) and so leave its process group; without one, such a process is
stopped only while it is still a descendant of the server. The cgroup's CPU accounting (or that of
a second cgroup the server joins where the first keeps none) gives the CPU time of all of them,
those that left the tree and those that exited unseen included (:meth:`ServerProcess.cpu_times`)."""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import psutil

from rpcmeter.errors import ServerError
from rpcmeter.host.launch import spawn
from rpcmeter.host.placement import (
    Cgroup,
    accounting_cgroup,
    hierarchy,
    join_cgroup,
    tracking_cgroup,
)
from rpcmeter.host.watchdog import WATCHDOG
from rpcmeter.net.endpoints import Endpoint

_LIVE: set[ServerProcess] = set()
_LIVE_LOCK = threading.Lock()
_SERIAL = itertools.count(1)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (bound to port 0, then released)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def new_endpoint(transport: str, host: str = "127.0.0.1") -> Endpoint:
    """A fresh endpoint: a free port, or a socket path in a new private temporary directory."""
    if transport in ("unix", "ipc"):
        directory = tempfile.mkdtemp(prefix="rpcmeter-")
        return Endpoint(transport, host=host, path=os.path.join(directory, "server.sock"))
    return Endpoint(transport, host=host, port=free_port(host))


def expand_command(
    command: str | Sequence[str], endpoint: Endpoint, extra: Mapping[str, str] | None = None
) -> list[str]:
    """Split a command line and fill ``{host}``, ``{port}``, ``{socket}`` (and ``extra``)."""
    parts = shlex.split(command) if isinstance(command, str) else list(command)
    values = {
        "host": endpoint.host,
        "port": "" if endpoint.port is None else str(endpoint.port),
        "socket": endpoint.path or "",
        **(extra or {}),
    }
    out = []
    for part in parts:
        for key, value in values.items():
            part = part.replace("{" + key + "}", value)
        out.append(part)
    return out


def probe(endpoint: Endpoint, timeout: float = 0.2) -> bool:
    """True when something accepts connections at ``endpoint``."""
    try:
        if endpoint.path is not None:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                s.connect(endpoint.path)
        else:
            with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout):
                pass
        return True
    except OSError:
        return False


class ServerProcess:
    """One server process (and its children). Use as a context manager."""

    def __init__(
        self,
        command: Sequence[str],
        endpoint: Endpoint,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        cpus: Sequence[int] | None = None,
        ready_timeout_s: float = 20.0,
        stop_timeout_s: float = 5.0,
        ready_probe: bool = True,
        quota: Cgroup | None = None,
        memory: Cgroup | None = None,
    ) -> None:
        """``quota``: the cgroup with the server's CPU quota, if any; the server's own cgroup is
        made inside it (or, where that fails, the server joins it). ``memory``: the cgroup with
        the server's memory limit, if any (on cgroup v2 ``quota`` itself when both are set):
        the server's own cgroup is made inside it when there is no ``quota`` and it is of the
        same hierarchy, else the server joins it as it starts."""
        self.command = list(command)
        self.endpoint = endpoint
        self.env = dict(env or {})
        self.cwd = cwd
        self.cpus = list(cpus) if cpus else None
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.ready_probe = ready_probe
        self.proc: subprocess.Popen[bytes] | None = None
        self.quota = quota
        self.memory = memory
        self.cgroup: Cgroup | None = None  # the server's own cgroup, where it could be made
        self.accounting: Cgroup | None = None  # the cgroup that counts its CPU (may be ``cgroup``)
        self.cgroup_note: str | None = None  # why the server is not in its quota cgroup
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the server
            prefix="rpcmeter-server-", suffix=".log", delete=False
        )
        self.log_path = Path(self._log.name)

    # lifecycle ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        assert self.proc is not None, "server not started"
        return self.proc.pid

    def start(self) -> None:
        cpus = self.cpus

        parent = os.getpid()
        name = f"rpcmeter-{parent}-server-{next(_SERIAL)}"
        memory = self.memory
        inside = self.quota or (memory if memory is not None and memory.version == 2 else None)
        self.cgroup, _ = tracking_cgroup(name, inside)
        self.accounting = accounting_cgroup(name, self.cgroup)
        procs = [str(g.procs) for g in self._cgroups()]
        taken = {hierarchy(g.path) for g in self._cgroups()}
        if memory is not None and not self._nested(memory) and hierarchy(memory.path) not in taken:
            procs.append(str(memory.procs))  # a hierarchy of its own (v1): joined at the start

        try:  # placed before the command runs, so that all it starts is inside
            self.proc = spawn(
                self.command,
                parent=parent,
                procs=procs,
                cpus=cpus,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                cwd=self.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            self._remove_cgroup()
            raise ServerError(
                f"cannot start server {shlex.join(self.command)}: {exc.strerror}"
            ) from None
        if self.cgroup is not None and self.proc.pid not in self.cgroup.pids():
            self._remove_cgroup()  # the server could not join it: stopped as without cgroups
        limits = [self.quota] if self.quota is not None else []
        limits += [memory] if memory is not None and memory is not self.quota else []
        notes = [
            join_cgroup(limit, [self.proc.pid])
            for limit in limits
            if not self._nested(limit) and self.proc.pid not in limit.pids()
        ]
        self.cgroup_note = "; ".join(n for n in notes if n) or None
        accounting = self.accounting
        if accounting is not None and self.proc.pid not in accounting.pids():
            self.accounting = None  # its CPU comes from its process tree
            if accounting != self.cgroup:
                accounting.remove()
        WATCHDOG.guard(self.proc.pid, *(str(g.procs) for g in self._cgroups()))
        with _LIVE_LOCK:
            _LIVE.add(self)
        if self.ready_probe:
            self.wait_ready()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        delay = 0.005
        while True:
            code = self.exit_code()
            if code is not None:
                raise ServerError(
                    f"server exited with status {code} before it was ready "
                    f"({shlex.join(self.command)})",
                    self.output_tail(),
                )
            if probe(self.endpoint):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(
                    f"server not ready at {self.endpoint.describe()} after "
                    f"{self.ready_timeout_s:g} s ({shlex.join(self.command)})",
                    self.output_tail(),
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.02)

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tree(self) -> list[psutil.Process]:
        """The server process and all its descendants, as far as they can be seen."""
        if self.proc is None:
            return []
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def cpu_times(self) -> tuple[float, float] | None:
        """User and system CPU seconds of every process that ran in the server's cgroup (see the
        module docstring), or None without a cgroup that counts them."""
        group = self.accounting
        return group.cpu_times() if group is not None else None

    def _nested(self, limit: Cgroup) -> bool:
        """Whether the server's own cgroup was made inside ``limit``."""
        return self.cgroup is not None and self.cgroup.path.parent == limit.path

    def _cgroups(self) -> list[Cgroup]:
        """The server's cgroups: the one that tracks it, and the one that counts its CPU."""
        groups = [self.cgroup, self.accounting]
        return [g for i, g in enumerate(groups) if g is not None and g not in groups[:i]]

    def _signal(self, signum: int) -> None:
        """``signum`` to the server's process group and to every process in its cgroup."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signum)
        if self.cgroup is not None:
            self.cgroup.signal(signum)

    def stop(self) -> None:
        """Stop the whole tree: SIGTERM to the group and the cgroup, then SIGKILL after
        ``stop_timeout_s`` to what is left of them."""
        proc = self.proc
        if proc is None:
            return
        descendants = self.tree()[1:]
        if proc.poll() is None:
            deadline = time.monotonic() + self.stop_timeout_s
            self._signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(self.stop_timeout_s)
            while self.cgroup is not None and self.cgroup.pids() and time.monotonic() < deadline:
                time.sleep(0.01)
        self._signal(signal.SIGKILL)
        proc.wait()
        for child in descendants:  # children that left the group (where there is no cgroup)
            with contextlib.suppress(psutil.Error):
                child.kill()
        self._remove_cgroup()
        WATCHDOG.release(proc.pid)
        with _LIVE_LOCK:
            _LIVE.discard(self)
        self._cleanup_socket()

    def _remove_cgroup(self) -> None:
        """Remove the server's cgroups once the processes killed in them have left them."""
        groups = self._cgroups()
        self.cgroup = self.accounting = None
        deadline = time.monotonic() + 2.0
        for group in groups:
            while group.pids() and time.monotonic() < deadline:
                time.sleep(0.005)
            group.remove()

    def _cleanup_socket(self) -> None:
        path = self.endpoint.path
        if path and os.path.basename(os.path.dirname(path)).startswith("rpcmeter-"):
            with contextlib.suppress(OSError):
                os.unlink(path)
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(path))

    def output_tail(self, lines: int = 20) -> str:
        try:
            self._log.flush()
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def close(self) -> None:
        self.stop()
        self._log.close()
        with contextlib.suppress(OSError):
            self.log_path.unlink()

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def stop_all() -> None:
    """Stop every server still running and remove its temporary files: output log, socket
    directory (used on Ctrl-C, SIGTERM and at the end of a run)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for server in live:
        with contextlib.suppress(Exception):
            server.close()
