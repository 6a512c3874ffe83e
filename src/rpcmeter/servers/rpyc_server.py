"""Built-in rpyc reference server: the study-000 service (simple, callback, random_wait).

Options (JSON, from the suite's ``target.options`` and the variant's ``options``):

- ``bind_threads`` (bool): rpyc's thread binding protocol option.
- ``background`` (int): extra threads serving each connection, so that without thread binding
  several requests of one connection can run at once (study 000's ``--background``).
- ``seed`` (int): base seed of the random_wait generators (server thread ``t``: ``seed + t``).
- ``corrupt_every`` (int): for testing validation, every N-th ``simple`` reply is altered.
- ``stall_ms``, ``stall_after_s``, ``stall_every_s``: stall the server at a known moment
  (:class:`~rpcmeter.servers.common.Stall`).
- ``workload`` (object): the case's workload, ``kind`` and parameters (random_wait's delay_p,
  delay_s, sub_p and max_depth are read from it).
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from typing import Any

import rpyc
from rpyc.utils.server import ThreadedServer

from rpcmeter.servers.common import Stall, announce_ready, exit_on_sigterm, parse_server_args
from rpcmeter.workloads import RandomWaitParams


def protocol_config(options: dict[str, Any]) -> dict[str, Any]:
    return {"bind_threads": bool(options.get("bind_threads", False)), "sync_request_timeout": 300}


def serve_forever(conn: Any) -> None:
    """A background thread serving ``conn`` besides its own thread (the ``background`` option):
    while one thread runs a slow request, another can receive and run the next."""
    with contextlib.suppress(Exception):  # ends when the connection closes
        while not conn.closed:
            conn.serve(0.1)


def make_service(options: dict[str, Any]) -> type[rpyc.Service]:
    background = int(options.get("background", 0))
    corrupt_every = int(options.get("corrupt_every", 0))
    served = itertools.count(1)
    stall = Stall(options)
    stalled = stall.check if stall.active else None
    seed = int(options.get("seed", 0))
    workload = dict(options.get("workload", {}))
    rw = RandomWaitParams.model_validate(
        {k: v for k, v in workload.items() if k != "kind"}
        if workload.get("kind") == "random_wait"
        else {}
    )

    class BenchService(rpyc.Service):  # type: ignore[misc]
        def on_connect(self, conn: Any) -> None:
            self._rngs: dict[int, random.Random] = {}
            self._lock = threading.Lock()
            for i in range(background):
                threading.Thread(
                    target=serve_forever, args=(conn,), name=f"bg-{i}", daemon=True
                ).start()

        def exposed_simple(self, value: Any = None) -> Any:
            if stalled:
                stalled()
            if corrupt_every and next(served) % corrupt_every == 0:
                return None if value is None else value + 1
            return value

        def exposed_callback(self, depth: int, fn: Any, value: Any = None) -> Any:
            if stalled:
                stalled()
            if depth > 0:
                return fn(depth - 1, value)
            return value

        def _rng(self, thread: int) -> random.Random:
            rng = self._rngs.get(thread)
            if rng is None:
                with self._lock:
                    rng = self._rngs.setdefault(thread, random.Random(seed + thread))
            return rng

        def exposed_random_wait(self, thread: int, depth: int, fn: Any, value: Any = None) -> Any:
            if stalled:
                stalled()
            rng = self._rng(thread)
            if rng.random() < rw.delay_p:
                time.sleep(rng.uniform(0.0, rw.delay_s))
            if depth < rw.max_depth and rng.random() < rw.sub_p:
                return fn(depth + 1, value)
            return value

    return BenchService


def main() -> None:
    args = parse_server_args("rpcmeter's built-in rpyc server")
    exit_on_sigterm()
    service = make_service(args.options)
    config = protocol_config(args.options)
    if args.transport == "unix":
        assert args.socket is not None, "--socket is required for the unix transport"
        server = ThreadedServer(service, socket_path=args.socket, protocol_config=config)
        where = args.socket
    else:
        server = ThreadedServer(
            service,
            hostname=args.host,
            port=args.port,
            protocol_config=config,
            ipv6=":" in args.host,
        )
        where = f"{args.host}:{server.port}"
    announce_ready(where)
    try:
        server.start()
    finally:
        server.close()


if __name__ == "__main__":
    main()
