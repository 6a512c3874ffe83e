"""The ``stream`` section of a streaming case's document, from the driver counters the streaming
client kept (:mod:`rpcmeter.drivers.grpc_stream`), merged over every client and worker.

A case's ``requests`` are its streams and its ``latency`` their whole durations; the section adds
per message (a *message* is one of the stream's streamed direction: the replies of server and
bidirectional streaming, the requests of client streaming, i.e. the larger of the two counts)::

    "stream": {
      "streams": int, "messages": int, "messages_out": int, "messages_in": int,
      "streams_per_s": float, "messages_per_s": float, "messages_per_stream": float,
      "bytes_out_per_message": float, "bytes_in_per_message": float,
      "first_message": {latency summary, us}, "first_message_histogram": {histogram},
      "message": {latency summary, us}, "message_histogram": {histogram},
      "cpu_us_per_message": {"client": float | null, "server": float | null}
    }
"""

from __future__ import annotations

import math

from rpcmeter.metrics.histogram import Histogram
from rpcmeter.model import Cpu, Latency, Stream, StreamCpu

PREFIX = "stream."


def split(counters: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """The driver's counters apart from the streaming figures, and those figures."""
    rest = {k: v for k, v in counters.items() if not k.startswith(PREFIX)}
    figures = {k: v for k, v in counters.items() if k.startswith(PREFIX)}
    return rest, figures


def section(figures: dict[str, int], streams: int, wall_s: float) -> Stream:
    """The ``stream`` section (see the module doc) of ``streams`` good streams in ``wall_s``;
    its CPU per message unknown until :func:`with_cpu`."""
    out_n = figures.get(f"{PREFIX}messages_out", 0)
    in_n = figures.get(f"{PREFIX}messages_in", 0)
    messages = max(out_n, in_n)
    first = Histogram.from_counters(figures, f"{PREFIX}first_ns")
    each = Histogram.from_counters(figures, f"{PREFIX}message_ns")
    nan = math.nan
    return Stream(
        streams=streams,
        messages=messages,
        messages_out=out_n,
        messages_in=in_n,
        streams_per_s=streams / wall_s if wall_s > 0 else 0.0,
        messages_per_s=messages / wall_s if wall_s > 0 else 0.0,
        messages_per_stream=messages / streams if streams else nan,
        bytes_out_per_message=figures.get(f"{PREFIX}bytes_out", 0) / out_n if out_n else nan,
        bytes_in_per_message=figures.get(f"{PREFIX}bytes_in", 0) / in_n if in_n else nan,
        first_message=Latency.of(first) if first.count else None,
        first_message_histogram=first if first.count else None,
        message=Latency.of(each) if each.count else None,
        message_histogram=each if each.count else None,
        cpu_us_per_message=StreamCpu(client=None, server=None),
    )


def with_cpu(stream: Stream, cpu: Cpu) -> Stream:
    """``stream`` with its CPU per message on both sides, from the case's ``cpu`` totals
    (unchanged when it counted no messages)."""
    if not stream.messages:
        return stream
    per: dict[str, float | None] = {}
    for side, user, sys_ in (
        ("client", cpu.client_user_s, cpu.client_sys_s),
        ("server", cpu.server_user_s, cpu.server_sys_s),
    ):
        total = user + sys_ if user is not None and sys_ is not None else 0.0
        ok = math.isfinite(total) and total > 0
        per[side] = total * 1e6 / stream.messages if ok else None
    return stream.model_copy(update={"cpu_us_per_message": StreamCpu(**per)})
