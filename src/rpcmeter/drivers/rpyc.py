"""rpyc driver: one connection per client process, shared by the client's threads.

Options: ``bind_threads`` (rpyc's thread binding, applied on both ends), ``background`` (extra
server threads serving each connection), ``seed`` (set from the suite), ``nodelay`` (default
true: ``TCP_NODELAY`` on both ends over TCP; rpyc's own default is false, see
:mod:`rpcmeter.servers.rpyc_server`) and ``server_time`` (default true: see below). Workloads: ``simple``, ``callback`` (any depth), ``random_wait``, and
``noop`` (the server's ``noop`` call, or ``simple`` with no value where it has none: the round
trip of ``[breakdown]``). With ``validate``, every call carries a random value that must come
back unchanged.

Server times: when the server exposes ``simple_timed`` (the built-in one does:
:mod:`rpcmeter.servers.rpyc_server`) and ``server_time`` is true, workload ``simple`` calls it
instead of ``simple`` and reports the handling and queue times it answers with; otherwise, and for
``callback`` and ``random_wait`` (whose server time would include the client's nested calls),
the server times are unknown.
"""

from __future__ import annotations

import random
import threading
from typing import Any, ClassVar

import rpyc
from rpyc.core.stream import SocketStream
from rpyc.utils.factory import connect_stream

from rpcmeter.drivers.base import STALL_OPTIONS, Caller, Driver, ReplyMismatch
from rpcmeter.protocols.rpyc import protocol_config
from rpcmeter.protocols.timing import ServerTime
from rpcmeter.suite.workloads import (
    CallbackParams,
    RandomWaitParams,
    random_wait_level,
    random_wait_seeds,
)


class RpycDriver(Driver):
    name: ClassVar[str] = "rpyc"
    transports: ClassVar[tuple[str, ...]] = ("tcp", "unix")
    workloads: ClassVar[frozenset[str]] = frozenset({"simple", "callback", "random_wait", "noop"})
    builtin_server: ClassVar[str | None] = "rpcmeter.servers.rpyc_server"
    fatal_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError, EOFError)
    packages: ClassVar[tuple[str, ...]] = ("rpyc",)
    reports_server_time: ClassVar[bool] = True
    option_keys: ClassVar[frozenset[str] | None] = STALL_OPTIONS | {
        "bind_threads",  # client and server
        "background",
        "corrupt_every",
        "spin_us",
        "wait",
        "queue_time",  # server
        "nodelay",  # client and server
        "server_time",
    }

    conn: Any

    def connect(self) -> None:
        ep = self.ctx.endpoint
        config = protocol_config(dict(self.ctx.options))
        if ep.transport == "unix":
            assert ep.path is not None
            self.conn = rpyc.utils.factory.unix_connect(ep.path, config=config)
        else:
            nodelay = bool(self.ctx.options.get("nodelay", True))
            stream = SocketStream.connect(ep.host, ep.port, ipv6=":" in ep.host, nodelay=nodelay)
            self.conn = connect_stream(stream, rpyc.VoidService, config)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.conn.close()

    def _global_thread(self, thread_index: int) -> int:
        return self.ctx.client_index * self.ctx.threads + thread_index

    def caller(self, thread_index: int) -> Caller:
        root = self.conn.root
        w = self.ctx.workload
        validate = self.ctx.validate
        values = random.Random(self.ctx.seed * 7919 + self._global_thread(thread_index))

        timed = w.kind == "simple" and self.ctx.options.get("server_time", True)
        if timed and hasattr(root, "simple_timed"):  # a remote look-up, once per loop
            return self._timed_simple(root.simple_timed, values if validate else None)

        if w.kind == "noop":
            noop: Caller = root.noop if hasattr(root, "noop") else root.simple  # replies None
            return noop

        if w.kind == "simple":
            simple = root.simple
            if not validate:
                call: Caller = simple  # no value: the reply is None (no server times)
                return call

            def call_simple() -> None:
                value = values.getrandbits(32)
                got = simple(value)
                if got != value:
                    raise ReplyMismatch(f"sent {value}, got {got!r}")

            return call_simple

        if isinstance(w, CallbackParams):
            remote = root.callback
            depth = w.depth

            def client_fn(d: int, value: Any) -> Any:
                return remote(d - 1, client_fn, value) if d > 0 else value

            def call_callback() -> object:
                value = values.getrandbits(32) if validate else None
                got = remote(depth, client_fn, value)
                if validate and got != value:
                    raise ReplyMismatch(f"sent {value}, got {got!r}")
                return None

            return call_callback

        if isinstance(w, RandomWaitParams):
            # study 000: the thread's index within this client seeds both generators, and the
            # value each call carries is drawn from the caller's generator
            remote = root.random_wait
            rng = random.Random(random_wait_seeds(self.ctx.seed, thread_index)[1])
            p = w

            def client_level(value: Any, depth: int) -> Any:
                random_wait_level(
                    rng, p, depth, lambda v, d: remote(v, d, thread_index, client_level)
                )
                return value

            def call_random_wait() -> object:
                value = rng.random()
                got = remote(value, 0, thread_index, client_level)
                if validate and got != value:
                    raise ReplyMismatch(f"sent {value}, got {got!r}")
                return None

            return call_random_wait

        raise ValueError(f"rpyc driver cannot run workload {w.kind!r}")

    @staticmethod
    def _timed_simple(simple_timed: Any, values: random.Random | None) -> Caller:
        """``simple`` through the server's ``simple_timed``: the times it answers with."""
        if values is None:

            def call_timed() -> ServerTime:
                _, app, queue = simple_timed()
                return app, queue

            return call_timed

        def call_timed_validated() -> ServerTime:
            value = values.getrandbits(32)
            got, app, queue = simple_timed(value)
            if got != value:
                raise ReplyMismatch(f"sent {value}, got {got!r}")
            return app, queue

        return call_timed_validated
