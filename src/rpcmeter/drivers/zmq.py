"""ZeroMQ driver (pyzmq): REQ/REP round trips over ``tcp://`` and ``ipc://``.

Every closed loop owns one REQ socket, i.e. one connection (``load.connections`` does not apply:
the loops are the connections). Requests and replies use the frames of
:mod:`rpcmeter.protocols.zmq`: a one-byte workload code and the body of
:mod:`rpcmeter.protocols.bodies` out, an 8-byte server time (ns) and the reply body back.

Options:

- ``recv``: how the client waits for the reply (study 002): ``"block"`` (default, a blocking
  receive), ``"poll"`` (busy polling: non-blocking receives in a tight loop) or ``"sleep"``
  (non-blocking receives, sleeping ``sleep_us`` microseconds whenever nothing has arrived).
- ``sleep_us``: the sleep of ``recv = "sleep"`` (default 100).
- ``call_timeout_s``: give up on a reply after this long (the loop stops: a REQ socket that lost
  a reply cannot go on). Default: wait as long as the case runs.
- ``framing``: ``"rpcmeter"`` (default, the frames above) or ``"raw"``, for any REP or ROUTER
  server in any language: the request frame is the raw body of ``request_hex`` /
  ``request_base64`` / ``request_text`` / ``request_file`` (default: the workload's body without
  the code byte), the whole reply frame is the reply (no server time), and with ``validate`` it
  must equal ``expect_*`` (default: the workload's expected reply when the request is its body).

Options of the built-in server (:mod:`rpcmeter.servers.zmq_server`): ``server_mode``
(``"libzmq"``, default, or ``"zmtp"``: rpcmeter's own ZMTP on the event loop, whose replies carry
the queue time), ``server_workers`` (libzmq mode), ``max_message_bytes`` and ``queue_time``
(zmtp mode).

Counters: ``bytes_out`` / ``bytes_in`` (whole frames), and for ``poll`` and ``sleep``
``would_block_ns``: the total time between a request leaving and its reply being received, i.e.
how long a blocking client would have blocked (study 002's figure; not measured in ``block`` mode
so that mode keeps two clock reads per request).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import zmq

from rpcmeter.drivers.base import RAW_BODY_OPTIONS, Caller, Driver
from rpcmeter.errors import ProtocolError, SuiteError
from rpcmeter.protocols.bodies import (
    CODES,
    KINDS,
    bodies_from_options,
    check,
    check_raw_options,
    check_variant_options,
)
from rpcmeter.protocols.timing import ServerTime, read_frame_times
from rpcmeter.protocols.zmq import address, server_mode

if TYPE_CHECKING:
    from rpcmeter.suite.model import Suite

RECV_MODES = ("block", "poll", "sleep")
_CHECK_EVERY = 1024  # busy-poll misses between two looks at the clock


def parse_options(opts: Mapping[str, Any]) -> tuple[str, float, bool]:
    """Receive mode, sleep (s) and raw framing from the options (SuiteError naming the option)."""
    mode = str(opts.get("recv", "block"))
    if mode not in RECV_MODES:
        raise SuiteError(f"options.recv: expected one of {', '.join(RECV_MODES)} (got {mode!r})")
    sleep_us = opts.get("sleep_us", 100)
    if not isinstance(sleep_us, int | float) or sleep_us < 0:
        raise SuiteError(f"options.sleep_us: expected a number >= 0 (got {sleep_us!r})")
    framing = opts.get("framing", "rpcmeter")
    if framing not in ("rpcmeter", "raw"):
        raise SuiteError(f"options.framing: expected rpcmeter or raw (got {framing!r})")
    check_raw_options(opts)
    try:
        server_mode(opts)
    except ValueError as exc:
        raise SuiteError(f"options.{exc}") from None
    return mode, float(sleep_us) / 1e6, framing == "raw"


class ZmqDriver(Driver):
    name: ClassVar[str] = "zmq"
    transports: ClassVar[tuple[str, ...]] = ("tcp", "ipc")
    workloads: ClassVar[frozenset[str]] = frozenset(KINDS)
    builtin_server: ClassVar[str | None] = "rpcmeter.servers.zmq_server"
    reports_server_time: ClassVar[bool] = True
    packages: ClassVar[tuple[str, ...]] = ("pyzmq",)
    option_keys: ClassVar[frozenset[str] | None] = RAW_BODY_OPTIONS | {
        "recv",
        "sleep_us",
        "framing",
        "call_timeout_s",
        "server_workers",  # the built-in server's
        "server_mode",
        "max_message_bytes",
        "queue_time",
    }
    fatal_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError, EOFError)

    @classmethod
    def check_suite(cls, suite: Suite, where: str) -> None:
        check_variant_options(suite, where, cls.name, parse_options)

    def connect(self) -> None:
        opts = self.ctx.options
        self.mode, self.sleep_s, self.raw = parse_options(opts)
        timeout = opts.get("call_timeout_s")
        self.timeout_ns = int(float(timeout) * 1e9) if timeout is not None else None
        w = self.ctx.workload
        body, expected = bodies_from_options(opts if self.raw else {}, w)
        self.request = body if self.raw else CODES[w.kind] + body
        self.expected = expected if self.ctx.validate else None
        self.context: zmq.Context[Any] = zmq.Context()
        addr = address(self.ctx.endpoint)
        self.sockets = []
        for _ in range(self.ctx.threads):
            sock = self.context.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.ipv6 = ":" in self.ctx.endpoint.host and self.ctx.endpoint.path is None
            if self.mode == "block" and self.timeout_ns is not None:
                sock.setsockopt(zmq.RCVTIMEO, max(1, self.timeout_ns // 1_000_000))
            sock.connect(addr)
            self.sockets.append(sock)
        n = self.ctx.threads
        self.bytes_out = [0] * n
        self.bytes_in = [0] * n
        self.would_block_ns = [0] * n

    def close(self) -> None:
        for sock in self.sockets:
            sock.close(linger=0)
        self.context.term()

    def counters(self) -> dict[str, int]:
        out = {"bytes_out": sum(self.bytes_out), "bytes_in": sum(self.bytes_in)}
        if self.mode != "block":
            out["would_block_ns"] = sum(self.would_block_ns)
        return out

    def caller(self, thread_index: int) -> Caller:
        t = thread_index
        sock = self.sockets[t]
        send = sock.send
        recv = sock.recv
        request = self.request
        n_out = len(request)
        expected = self.expected
        kind = self.ctx.workload.kind
        out, inp, blocked = self.bytes_out, self.bytes_in, self.would_block_ns
        clock = time.perf_counter_ns
        timeout_ns = self.timeout_ns

        raw = self.raw

        def finish(reply: bytes) -> ServerTime | None:
            out[t] += n_out
            inp[t] += len(reply)
            if raw:
                if expected is not None:
                    check(reply, expected, kind)
                return None
            try:
                times, head = read_frame_times(reply)
            except struct.error:
                raise ProtocolError(f"a reply of {len(reply)} bytes (no server time)") from None
            if expected is not None:
                check(reply[head:], expected, kind)
            return times

        if self.mode == "block":

            def call_block() -> ServerTime | None:
                send(request)
                try:
                    reply = recv()
                except zmq.Again:
                    raise TimeoutError(f"no reply within {timeout_ns or 0:,} ns") from None
                return finish(reply)

            return call_block

        nap = self.sleep_s if self.mode == "sleep" else None
        sleep = time.sleep
        noblock = zmq.NOBLOCK
        again = zmq.Again

        def call_poll() -> ServerTime | None:
            send(request)
            t0 = clock()
            misses = 0
            while True:
                try:
                    reply = recv(noblock)
                    break
                except again:
                    if nap is not None:
                        sleep(nap)
                    misses += 1
                    if (
                        timeout_ns is not None
                        and misses % _CHECK_EVERY == 0
                        and clock() - t0 > timeout_ns
                    ):
                        raise TimeoutError(f"no reply within {timeout_ns / 1e9:g} s") from None
            blocked[t] += clock() - t0
            return finish(reply)

        return call_poll
