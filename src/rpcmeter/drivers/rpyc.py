"""rpyc driver: one connection per client process, shared by the client's threads.

Options: ``bind_threads`` (rpyc's thread binding, applied on both ends), ``background`` (extra
server threads serving each connection), and ``seed`` (set from the suite). Workloads: ``simple``,
``callback`` (any depth) and ``random_wait``. With ``validate``, every call carries a random value
that must come back unchanged.
"""

from __future__ import annotations

import random
import threading
from typing import Any, ClassVar

import rpyc

from rpcmeter.drivers.base import STALL_OPTIONS, Caller, Driver, ReplyMismatch
from rpcmeter.servers.rpyc_server import protocol_config
from rpcmeter.workloads import (
    CallbackParams,
    RandomWaitParams,
    random_wait_level,
    random_wait_seeds,
)


class RpycDriver(Driver):
    name: ClassVar[str] = "rpyc"
    transports: ClassVar[tuple[str, ...]] = ("tcp", "unix")
    workloads: ClassVar[frozenset[str]] = frozenset({"simple", "callback", "random_wait"})
    builtin_server: ClassVar[str | None] = "rpcmeter.servers.rpyc_server"
    fatal_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError, EOFError)
    packages: ClassVar[tuple[str, ...]] = ("rpyc",)
    option_keys: ClassVar[frozenset[str] | None] = STALL_OPTIONS | {
        "bind_threads",  # client and server
        "background",
        "corrupt_every",
        "spin_us",
        "wait",
    }

    conn: Any

    def connect(self) -> None:
        ep = self.ctx.endpoint
        config = protocol_config(dict(self.ctx.options))
        if ep.transport == "unix":
            assert ep.path is not None
            self.conn = rpyc.utils.factory.unix_connect(ep.path, config=config)
        else:
            self.conn = rpyc.connect(ep.host, ep.port, config=config, ipv6=":" in ep.host)
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

        if w.kind == "simple":
            simple = root.simple
            if not validate:
                call: Caller = simple
                return call

            def call_simple() -> object:
                value = values.getrandbits(32)
                got = simple(value)
                if got != value:
                    raise ReplyMismatch(f"sent {value}, got {got!r}")
                return None

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
