"""The driver interface: connect, call, close. Drivers know nothing of metrics.

A driver instance lives in one client process and holds that client's connection(s). The runner
asks it for a *caller* per thread: a function of no arguments that performs one request and returns
when the reply has arrived. The runner times the call (two clock reads around it) and records the
latency; the driver never aggregates anything.

- A caller raises on failure. :class:`ReplyMismatch` means the reply arrived but was wrong (counted
  as ``mismatch``); ``OSError``/``EOFError`` (and the driver's ``fatal_errors``) mean the
  connection is gone: the thread stops and the case is marked failed. Any other exception is
  counted by its type name and the loop goes on.
- A driver whose server reports its own compute time sets ``reports_server_time``; its callers
  then return that time in nanoseconds (or ``None`` when a reply carried none).
- ``counters()`` returns totals the driver kept itself (``bytes_out``, ``bytes_in``), read once at
  the end of the case.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rpcmeter.workloads import WorkloadParams


class ReplyMismatch(Exception):
    """A reply arrived but did not match what was sent or expected (validation)."""


@dataclass(frozen=True)
class Endpoint:
    """Where a server listens: ``tcp`` host and port, or a ``unix`` socket path."""

    transport: str
    host: str = "127.0.0.1"
    port: int | None = None
    path: str | None = None

    def describe(self) -> str:
        if self.path is not None:
            return f"{self.transport}://{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.transport}://{host}:{self.port}"


@dataclass(frozen=True)
class DriverContext:
    """Everything a driver needs to connect and to build its callers."""

    endpoint: Endpoint
    workload: WorkloadParams
    options: Mapping[str, Any] = field(default_factory=dict)
    validate: bool = False
    seed: int = 0
    client_index: int = 0
    threads: int = 1  # concurrent closed loops in this client (load.concurrency or load.threads)
    connections: int = 1  # connections this client opens; loops share them round-robin
    env: Mapping[str, str] = field(default_factory=dict)  # set in the client before connecting


Caller = Callable[[], object]


class Driver(ABC):
    """Client side of one protocol inside one client process."""

    name: ClassVar[str]
    transports: ClassVar[tuple[str, ...]] = ("tcp", "unix")
    workloads: ClassVar[frozenset[str]] = frozenset()
    builtin_server: ClassVar[str | None] = None  # module run as `python -m MODULE`
    reports_server_time: ClassVar[bool] = False
    packages: ClassVar[tuple[str, ...]] = ()  # distributions whose versions the result records
    fatal_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError, EOFError)

    def __init__(self, ctx: DriverContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def connect(self) -> None:
        """Open this client's connection(s)."""

    @abstractmethod
    def caller(self, thread_index: int) -> Caller:
        """A function performing one request of the workload for thread ``thread_index``."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Close connections (errors here are ignored by the runner)."""

    def counters(self) -> dict[str, int]:
        """Totals the driver kept (bytes_out, bytes_in, ...)."""
        return {}

    @classmethod
    def server_command(cls, endpoint: Endpoint, options: Mapping[str, Any]) -> list[str]:
        """Command line of the built-in reference server for this driver."""
        import json
        import sys

        if cls.builtin_server is None:
            raise NotImplementedError(f"driver {cls.name!r} has no built-in server")
        cmd = [sys.executable, "-m", cls.builtin_server, "--transport", endpoint.transport]
        if endpoint.path is not None:
            cmd += ["--socket", endpoint.path]
        else:
            cmd += ["--host", endpoint.host, "--port", str(endpoint.port)]
        return [*cmd, "--options", json.dumps(dict(options), sort_keys=True)]
