"""The driver interface: connect, call, close. Drivers know nothing of metrics.

A driver instance lives in one client process and holds that client's connection(s). The runner
asks it for a *caller* per thread: a function of no arguments that performs one request and returns
when the reply has arrived. The runner times the call (two clock reads around it) and records the
latency; the driver never aggregates anything.

- A caller raises on failure. :class:`ReplyMismatch` means the reply arrived but was wrong (counted
  as ``mismatch``); ``OSError``/``EOFError`` (and the driver's ``fatal_errors``) mean the
  connection is gone: the thread stops and the case is marked failed. Those are counted under
  a named kind (:func:`rpcmeter.errors.error_kind`: ``connection_closed``, ``protocol_error``
  for a malformed or surplus reply, ``timeout``, ...). Any other exception is counted by its
  type name and the loop goes on.
- A driver whose server reports its own times sets ``reports_server_time``; its callers then
  return them as a :data:`~rpcmeter.protocols.timing.ServerTime` ``(compute_ns, queue_ns)``
  (``queue_ns`` None when the reply carried no queue time), or ``None`` when a reply carried none.
- ``counters()`` returns totals the driver kept itself (``bytes_out``, ``bytes_in``), read once at
  the end of the case.
- A reply that arrived but reports a failure (an HTTP status other than 2xx, an error frame) is a
  :class:`ReplyError`; it is counted under its ``kind`` (``http_503``) and the loop goes on.

Event drivers
-------------
A thread per closed loop cannot keep up with a fast server once there are many connections. An
:class:`EventDriver` therefore issues its requests from one event loop (uvloop when installed) per
client process; the runner (:mod:`rpcmeter.runners.event_loop`) runs every loop of the client
(``load.concurrency`` or ``load.threads``) as callbacks inside that event loop. The interface:

- ``async open()`` opens ``ctx.connections`` connections inside the running event loop.
- ``channel(index)`` returns the :data:`Channel` that loop ``index`` sends through (loops share the
  connections round-robin).
- A channel is called as ``channel(done)``: it writes one request of the workload and returns at
  once; when the reply has been read, it calls ``done(server, error)`` from the event loop,
  ``server`` being the server-reported times as a caller returns them (or ``None``) and ``error`` ``None`` or the
  exception a caller would have raised (same classification as above). ``done`` is never called
  from inside ``channel`` itself (a connection already lost schedules it with ``call_soon``), so
  a loop sending its next request from ``done`` does not recurse. A channel accepts a new
  request before the previous one completed: requests on one connection are pipelined and their
  ``done`` callbacks run in the order the requests were sent.
- ``close()`` closes the connections (called outside the event loop, after it stopped).
- Optionally, a channel whose connection serves one closed loop alone has an
  ``own(done, moved)`` method: it returns a callable that writes the next request, takes no
  argument and is best implemented in C (the transport's ``write`` with the request bound), and
  every reply on that connection is passed straight to ``done`` from then on, with no queue (see
  :class:`Ownership`). The closed loop then spends one Python call per request fewer; it calls the
  ownership's ``release()`` when it ends. When the server ends the connection, the driver calls
  ``moved(send)`` with the callable the loop sends with from then on (the new connection's).
  ``own`` returns ``None`` when it cannot (a shared connection, replies to validate).

The closed-loop runner reads the clock, calls ``channel(done)``, and in ``done`` reads the clock
again, stores the latency into the same :class:`~rpcmeter.runners.recorder.Recorder` buffers as the
thread loops, and sends the next request. The open-loop scheduler
(:class:`~rpcmeter.runners.open_loop.EventPacer`) uses the same interface: it calls
``channel(done)`` at each request's intended send time without waiting for the previous reply,
and records ``clock() - intended_send_time`` in ``done``, so a server that falls behind is
charged the queueing it causes (no coordinated omission). An event driver that also has a
blocking path (``connect``/``caller``) returns False from ``uses_event_loop()`` to be driven by
thread loops instead (the raw driver's ``io`` option).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from rpcmeter.errors import ReplyError as ReplyError  # drivers raise these; defined below them
from rpcmeter.errors import ReplyMismatch as ReplyMismatch
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.protocols.timing import ServerTime
from rpcmeter.suite.workloads import WorkloadParams

if TYPE_CHECKING:
    from rpcmeter.metrics.connections import ConnectionCosts
    from rpcmeter.net.tls import ClientTls
    from rpcmeter.suite.model import Suite


@dataclass(frozen=True)
class DriverContext:
    """Everything a driver needs to connect and to build its callers."""

    endpoint: Endpoint
    workload: WorkloadParams
    options: Mapping[str, Any] = field(default_factory=dict)
    validate: bool = False
    seed: int = 0
    uuid_seed: str | None = None  # the run's, for {{uuid}} (rpcmeter.protocols.templates)
    client_index: int = 0
    clients: int = 1  # client processes in the case (request numbers: rpcmeter.drivers.varying)
    threads: int = 1  # concurrent closed loops in this client (load.concurrency or load.threads)
    connections: int = 1  # connections this client opens; loops share them round-robin
    reuse: bool = True  # False: a new connection for every request (load.reuse)
    wait: str = "block"  # "spin": poll for replies without sleeping (load.wait)
    spin_us: float | None = None  # wait = "spin": poll this long, then sleep (None: unbounded)
    env: Mapping[str, str] = field(default_factory=dict)  # set in the client before connecting
    tls: ClientTls | None = None  # TLS to the server (rpcmeter.net.tls); None: cleartext
    # what the driver prepared for the variant before its cases (a compiled gRPC call: the
    # suite's load, or Driver.ask_server); empty when there is nothing
    prepared: Mapping[str, Any] = field(default_factory=dict)


Caller = Callable[[], object]


class ReplyCheck(Protocol):
    """A check of reply bodies: ``check(body)`` is None when ``body`` passes, else the
    mismatch to count. ``last`` is a body known to pass (None: none yet): a caller compares a
    reply with it first and calls the check only when they differ, so a reply that repeats
    costs one bytes comparison."""

    last: bytes | None

    def __call__(self, body: bytes) -> ReplyMismatch | None: ...


Done = Callable[[ServerTime | None, BaseException | None], None]  # (server times, error)
Channel = Callable[[Done], object]  # what it returns is ignored
Moved = Callable[[Callable[[], object]], None]  # an owning loop's new way to send


# options of the built-in servers that stall at a known moment (rpcmeter.servers.common.Stall)
STALL_OPTIONS = frozenset({"stall_ms", "stall_after_s", "stall_every_s"})
# a raw request body and the reply expected for it (rpcmeter.protocols.bodies.raw_bytes)
RAW_BODY_OPTIONS = frozenset(
    f"{which}_{form}"
    for which in ("request", "expect")
    for form in ("hex", "base64", "text", "file")
)


class Ownership(NamedTuple):
    """What ``channel.own(done)`` returns: how the owning loop sends, and how it lets go."""

    send: Callable[[], object]
    release: Callable[[], None]


class TargetSpec:
    """What a suite's ``driver`` names, as the suite's checks and the run's plan see it: the
    transports, workloads and options it takes, its built-in server, whether it speaks TLS,
    runs open loops or polls. A protocol driver (:class:`Driver`) is one; a whole command
    (:class:`rpcmeter.plan.targets.CommandTarget`) is another, run by rpcmeter's command runner."""

    name: ClassVar[str]
    transports: ClassVar[tuple[str, ...]] = ("tcp", "unix")
    workloads: ClassVar[frozenset[str]] = frozenset()
    builtin_server: ClassVar[str | None] = None  # module run as `python -m MODULE`
    reports_server_time: ClassVar[bool] = False
    open_loop: ClassVar[bool] = True  # requests can go out on a schedule (load.mode = "open")
    # True: the target is a whole command run per request, not a server connected to (its cases
    # go to rpcmeter.run.execute.CommandCase)
    whole_command: ClassVar[bool] = False
    # the target options it and its built-in server read; others are a suite error (None: any)
    option_keys: ClassVar[frozenset[str] | None] = None
    packages: ClassVar[tuple[str, ...]] = ()  # distributions whose versions the result records
    tls: ClassVar[bool] = False  # speaks TLS when the context carries it (rpcmeter.net.tls)
    # the scheme of its servers' URLs (``https`` with TLS): a command client's ``{scheme}``
    url_scheme: ClassVar[str | None] = None
    connection_per_request: ClassVar[bool] = False  # load.reuse = false
    # environment variables of its client processes, set before its module is imported there
    # (the variant's ``env`` wins): the settings of the library it drives
    client_env: ClassVar[Mapping[str, str]] = {}
    spins: ClassVar[bool] = False  # load.wait = "spin" (see also :meth:`spin_problem`)

    @classmethod
    def check_suite(cls, suite: Suite, where: str) -> None:
        """Checks of a suite this target needs beyond the model's (raise SuiteError)."""

    @classmethod
    def asks_server(cls, options: Mapping[str, Any]) -> bool:
        """Whether a variant with target options ``options`` needs something only its running
        server can tell (gRPC's server reflection): :meth:`ask_server` asks, once per run,
        before the cases."""
        return False

    @classmethod
    def ask_server(
        cls, suite: Suite, variant: str, endpoint: Endpoint, tls: ClientTls | None
    ) -> dict[str, Any]:
        """What ``variant``'s clients are to be handed (``DriverContext.prepared``), asked of
        its server at ``endpoint`` (over ``tls``); raise an RpcmeterError (a SuiteError for
        what the suite asks wrongly) when the server cannot tell."""
        raise NotImplementedError(f"driver {cls.name!r} asks its server nothing")

    @classmethod
    def describe_prepared(cls, prepared: Mapping[str, Any]) -> dict[str, Any] | None:
        """What the result's environment records of a variant's prepared mapping (its gRPC
        schema, ``environment.schemas``); None: nothing."""
        return None

    @classmethod
    def spin_problem(cls, options: Mapping[str, Any]) -> str | None:
        """Why a client of this target with target options ``options`` cannot poll without
        sleeping (``load.wait = "spin"``); None when it can."""
        if cls.spins:
            return None
        return "it waits inside calls rpcmeter does not control"

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


class Driver(TargetSpec, ABC):
    """Client side of one protocol inside one client process."""

    fork_safe: ClassVar[bool] = True  # its module may be imported before client processes fork
    fatal_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError, EOFError)

    def __init__(self, ctx: DriverContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def connect(self) -> None:
        """Open this client's connection(s)."""

    @abstractmethod
    def caller(self, thread_index: int) -> Caller:
        """A function performing one request of the workload for thread ``thread_index``."""

    def close(self) -> None:
        """Close connections (errors here are ignored by the runner)."""

    def counters(self) -> dict[str, int]:
        """Totals the driver kept (bytes_out, bytes_in, ...)."""
        return {}

    def setup(self) -> dict[str, int]:
        """Counts that describe how the client was set up (the HTTP/1.1 driver's connections
        and loops), reported with the counters as they are rather than since the gate opened."""
        return {}

    def connection_costs(self) -> ConnectionCosts | None:
        """Connect and handshake times of the connections it opened (None: not measured)."""
        return None


class EventDriver(Driver):
    """A driver whose requests are issued from an event loop (see the module docstring).

    One that also has a blocking client path implements :meth:`connect` and :meth:`caller` too
    and returns False from :meth:`uses_event_loop` when its options ask for that path; the
    runner then drives it with thread loops like any other driver."""

    spins: ClassVar[bool] = True  # the event loop polls with a zero timeout (load.wait = "spin")

    def uses_event_loop(self) -> bool:
        return True

    def connect(self) -> None:
        """Event drivers connect inside the event loop: :meth:`open`."""

    def caller(self, thread_index: int) -> Caller:
        raise NotImplementedError(f"driver {self.name!r} is an event driver: use channel()")

    @abstractmethod
    async def open(self) -> None:
        """Open ``ctx.connections`` connections inside the running event loop."""

    @abstractmethod
    def channel(self, index: int) -> Channel:
        """The channel closed loop ``index`` sends its requests through."""
