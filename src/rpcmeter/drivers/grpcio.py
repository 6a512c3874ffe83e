"""The gRPC driver's grpcio path (``options.client = "grpcio"``): grpcio's blocking stubs on
threads.

Each client process opens ``load.connections`` channels, each its own HTTP/2 connection (a local
subchannel pool and a per-channel argument keep grpcio from sharing one), and runs
``load.concurrency`` closed loops whose calls are spread over them round-robin. The loops are
threads calling the blocking stubs (see :mod:`rpcmeter.drivers.grpc` for why not grpc.aio).
TLS: grpcio's own credentials (``ca_file`` or the system's CAs, ``cert_file``/``key_file`` for
mutual TLS, ``server_name`` as the target name override); a channel that does not connect is
diagnosed with one handshake from Python's ssl module, so the failure names its cause.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import grpc

from rpcmeter.drivers.base import Caller, DriverContext
from rpcmeter.drivers.grpc import GrpcCommon, status_error
from rpcmeter.drivers.grpc_calls import channel_credentials
from rpcmeter.drivers.grpc_plan import grpcio_callers
from rpcmeter.drivers.grpc_stream import StreamFigures, grpcio_stream_caller, message_source
from rpcmeter.drivers.varying import LoopState, loop_of
from rpcmeter.net.tls import probe_handshake
from rpcmeter.protocols.grpc import target
from rpcmeter.protocols.timing import ServerTime, trailer_times

PROBE_EVERY_S = 0.1  # how often a connecting channel is looked at


class GrpcioDriver(GrpcCommon):
    """Calls through grpcio's blocking stubs, one thread per closed loop (see the module doc)."""

    spins: ClassVar[bool] = False

    @classmethod
    def spin_problem(cls, options: Mapping[str, Any]) -> str | None:
        return 'its grpcio client (options.client = "grpcio") waits in grpc\'s own threads'

    def credentials(self) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, Any]]]:
        """The channel credentials and options of ``ctx.tls`` (None: cleartext)."""
        return channel_credentials(self.ctx.tls)

    def __init__(self, ctx: DriverContext) -> None:
        super().__init__(ctx)
        self.figures = StreamFigures()
        self.channels: list[grpc.Channel] = []
        self.plan_counts: list[list[int]] = []  # requests that vary: per loop, bytes out and in

    def connect(self) -> None:
        addr = target(self.ctx.endpoint)
        creds, tls_options = self.credentials()
        self.channels = []
        for i in range(max(1, self.ctx.connections)):
            channel_options = [
                ("grpc.max_receive_message_length", self.max_message),
                ("grpc.use_local_subchannel_pool", 1),
                ("rpcmeter.client", self.ctx.client_index),
                ("rpcmeter.channel", i),
                *tls_options,
            ]
            self.channels.append(
                grpc.insecure_channel(addr, options=channel_options)
                if creds is None
                else grpc.secure_channel(addr, creds, options=channel_options)
            )
        wait_s = self.connect_timeout_s
        for ch in self.channels:
            try:
                self.wait_ready(ch, wait_s)
            except (grpc.FutureTimeoutError, OSError) as exc:
                self.close()
                if isinstance(exc, OSError):
                    raise
                raise ConnectionError(f"no gRPC connection to {addr} within {wait_s:g} s") from None
        self.stubs = [ch.unary_unary(self.path) for ch in self.channels]
        self.bytes_out = [0] * self.ctx.threads
        self.bytes_in = [0] * self.ctx.threads

    def wait_ready(self, channel: grpc.Channel, wait_s: float) -> None:
        """Wait until ``channel`` is connected (``grpc.FutureTimeoutError`` after ``wait_s``).
        grpcio retries a failed connection quietly until the deadline: the first time it fails
        over TLS, one handshake with Python's ssl module names why (a TlsError at once:
        ``certificate verify failed: certificate has expired``)."""
        failed = threading.Event()

        def watch(state: grpc.ChannelConnectivity) -> None:
            if state is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                failed.set()

        ready = grpc.channel_ready_future(channel)
        tls, ep = self.ctx.tls, self.ctx.endpoint
        probe = tls is not None and ep.port is not None
        deadline = time.monotonic() + wait_s
        channel.subscribe(watch)
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    ready.result(timeout=max(0.0, min(left, PROBE_EVERY_S)))
                    return
                except grpc.FutureTimeoutError:
                    if left > PROBE_EVERY_S and not failed.is_set():
                        continue
                if probe and tls is not None and ep.port is not None:
                    why = probe_handshake(tls, ep.host, ep.port, ("h2",))
                    if why is not None:
                        raise why
                    probe = False  # the handshake is not what fails
                if left <= PROBE_EVERY_S:
                    raise grpc.FutureTimeoutError()
        finally:
            ready.cancel()
            channel.unsubscribe(watch)

    def close(self) -> None:
        for ch in self.channels:
            ch.close()

    def counters(self) -> dict[str, int]:
        if self.stream is not None:
            return self.figures.counters()
        if self.plan_counts:
            return {
                "bytes_out": sum(c[0] for c in self.plan_counts),
                "bytes_in": sum(c[1] for c in self.plan_counts),
            }
        return {"bytes_out": sum(self.bytes_out), "bytes_in": sum(self.bytes_in)}

    def caller(self, thread_index: int) -> Caller:
        if self.stream is not None:
            return grpcio_stream_caller(
                self.channels[thread_index % len(self.channels)],
                self.path,
                self.stream,
                self.request,
                self.check,
                self.metadata,
                self.timeout,
                self.figures,
                status_error,
                None
                if self.messages is None
                else message_source(self.messages, self.ctx, thread_index),
            )
        if self.plan is not None:
            counts = [0, 0]
            self.plan_counts.append(counts)
            return grpcio_callers(
                self.channels[thread_index % len(self.channels)],
                self.plan,
                LoopState(loop_of(self.ctx, thread_index)),
                self.timeout,
                self.check,
                counts,
                status_error,
            )
        stub = self.stubs[thread_index % len(self.stubs)]
        request = self.request
        n_out = len(request)
        check = self.check
        metadata = self.metadata or None
        timeout = self.timeout
        out = self.bytes_out
        inp = self.bytes_in
        t = thread_index

        def call() -> ServerTime | None:
            try:
                reply, rpc = stub.with_call(request, timeout=timeout, metadata=metadata)
            except grpc.RpcError as exc:
                raise status_error(exc) from None
            out[t] += n_out
            inp[t] += len(reply)
            if check is not None and reply != check.last and (wrong := check(reply)) is not None:
                raise wrong
            return trailer_times(rpc.trailing_metadata())

        return call
