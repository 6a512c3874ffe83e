"""The streaming figures among the driver counters the streaming client kept
(:mod:`rpcmeter.drivers.grpc_stream`), merged over every client and worker; a streaming case's
document makes its ``stream`` section of them (:func:`rpcmeter.result.parts.stream_section`).

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

PREFIX = "stream."


def split(counters: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """The driver's counters apart from the streaming figures, and those figures."""
    rest = {k: v for k, v in counters.items() if not k.startswith(PREFIX)}
    figures = {k: v for k, v in counters.items() if k.startswith(PREFIX)}
    return rest, figures
