"""What each driver option means: the table the suite reference is generated from.

Every key a built-in driver reads from a target's or variant's ``options`` (its ``option_keys``)
has one row here: its type, default, allowed values, a one-line meaning and an example. A key
that means something else to another driver (``method``, ``expect``, ``server_mode``) has a row of
its own for that driver in :data:`BY_DRIVER`. The docs build fails on a key with no row
(``docs/hooks/reference.py``), so a new option is documented where it is added.

Pure data: nothing here is read on a request's path, and it imports nothing of rpcmeter.
"""

from __future__ import annotations

from typing import NamedTuple


class OptionDoc(NamedTuple):
    """One option: its type, its default and allowed values as a suite writes them, what it does,
    and an example value (TOML)."""

    type: str
    default: str
    meaning: str
    example: str
    allowed: str = ""


_RAW_FORMS = "hex, base64, text (UTF-8) or file (a path from the suite file)"

OPTIONS: dict[str, OptionDoc] = {
    # the built-in servers
    "queue_time": OptionDoc(
        "boolean",
        "true",
        "Built-in server: report each request's queue time (read with kernel timestamps).",
        "false",
    ),
    "corrupt_every": OptionDoc(
        "integer",
        "0",
        "Built-in server: send every Nth reply wrong, to test validation (0: never).",
        "100",
        "≥ 0",
    ),
    "stall_ms": OptionDoc(
        "number",
        "0",
        "Built-in server: stall this many milliseconds, to see how the load takes a pause.",
        "200",
        "≥ 0",
    ),
    "stall_after_s": OptionDoc(
        "number",
        "1.0",
        "Built-in server: when the stall starts, in seconds after the first request.",
        "2.5",
        "≥ 0",
    ),
    "stall_every_s": OptionDoc(
        "number",
        "(once)",
        "Built-in server: repeat the stall this often, in seconds (longer than the stall).",
        "5.0",
        "> 0",
    ),
    "server_workers": OptionDoc(
        "integer",
        "1 (grpc sync: 16)",
        "Built-in server: requests served at a time, from worker threads.",
        "4",
        "≥ 1",
    ),
    "max_message_bytes": OptionDoc(
        "integer",
        "grpc: 4 MiB; zmq: 1 GiB",
        "The largest message accepted; a larger one is an error.",
        "16777216",
        "≥ 1",
    ),
    "kv_capacity": OptionDoc(
        "integer",
        "1000000",
        "Built-in HTTP server: keys its key/value store holds before it evicts.",
        "500",
        "≥ 1",
    ),
    "kv_miss_us": OptionDoc(
        "number",
        "100",
        "Built-in HTTP server: CPU microseconds a miss of its key/value store costs.",
        "50",
        "≥ 0",
    ),
    # event drivers
    "event_loop": OptionDoc(
        "string",
        '"uvloop"',
        "The client's event loop.",
        '"asyncio"',
        '"uvloop", "asyncio"',
    ),
    "io": OptionDoc(
        "string",
        '"auto"',
        "How loops drive connections: an event loop, blocking threads, or auto "
        "(blocking for one loop a connection).",
        '"event"',
        '"auto", "event", "blocking"',
    ),
    # HTTP
    "http": OptionDoc(
        "string", '"1.1"', "The HTTP version: 1.1, or 2 (h2c, or h2 over TLS).", '"2"', '"1.1", "2"'
    ),
    "pipeline": OptionDoc(
        "boolean",
        "false",
        "HTTP/1.1: pipeline the loops' requests over load.connections. Off: one request at a "
        "time per connection, as wrk and oha, with a connection per loop.",
        "true",
    ),
    "path": OptionDoc(
        "string",
        "the workload's (/noop, /echo, ...)",
        "The path and query string; may hold placeholders.",
        '"/kv/{{request_number}}"',
    ),
    "headers": OptionDoc(
        "table of string",
        "(none)",
        "Extra request headers; values may hold placeholders.",
        '{ Authorization = "Bearer x" }',
    ),
    "body": OptionDoc(
        "string",
        "the workload's",
        "The request body, instead of the workload's; may hold placeholders.",
        '"{\\"id\\": {{request_number}}}"',
    ),
    "host": OptionDoc("string", "the server's address", "The Host header.", '"api.example.com"'),
    "data_file": OptionDoc(
        "string",
        "(none)",
        "Requests sent in turn, from the suite file's directory: .jsonl one a line, else one "
        "JSON document (HTTP: method, path, headers, body; gRPC: a message).",
        '"requests.jsonl"',
    ),
    # gRPC
    "client": OptionDoc(
        "string",
        '"h2"',
        "The gRPC client: rpcmeter's own HTTP/2 client, or grpcio's.",
        '"grpcio"',
        '"h2", "grpcio"',
    ),
    "call_timeout_s": OptionDoc(
        "number",
        "(none: as long as the case)",
        "The deadline of every call.",
        "1.0",
        "> 0",
    ),
    "connect_timeout_s": OptionDoc(
        "number", "10.0", "How long a connection may take to open.", "3.0", "> 0"
    ),
    "metadata": OptionDoc(
        "table of string",
        "(none)",
        "Metadata sent with every call (and with reflection's).",
        '{ authorization = "Bearer x" }',
    ),
    "proto": OptionDoc(
        "string",
        "(none)",
        "A .proto file that names the call's messages, compiled when the suite loads.",
        '"protos/route_guide.proto"',
    ),
    "import_paths": OptionDoc(
        "list of string",
        "(none)",
        "Directories protoc searches for the imports of proto.",
        '["protos/include"]',
    ),
    "protoset": OptionDoc(
        "string",
        "(none)",
        "A compiled descriptor set (protoc -o) that names the call's messages.",
        '"route_guide.protoset"',
    ),
    "reflection": OptionDoc(
        "boolean",
        "false",
        "Ask the server's reflection service for the schema, once per run.",
        "true",
    ),
    "call": OptionDoc(
        "string",
        "(none)",
        "The method to call, by name, from proto, protoset or reflection.",
        '"routeguide.RouteGuide/GetFeature"',
    ),
    "data": OptionDoc(
        "table",
        "(none)",
        "The request message as a table (protobuf's JSON mapping); may hold placeholders.",
        "{ latitude = 409146138, longitude = -746188906 }",
    ),
    "expect": OptionDoc(
        "table",
        "(none)",
        "Fields every reply must have, compared as protobuf reads them.",
        '{ name = "Berkshire Valley Management Area Trail" }',
    ),
    # raw bodies (gRPC and ZeroMQ)
    **{
        f"request_{form}": OptionDoc(
            "string",
            "the workload's body",
            f"The raw request body ({form}); at most one of the request_* keys. Forms: {_RAW_FORMS}.",
            {"hex": '"0a05776f726c64"', "base64": '"CgV3b3JsZA=="', "text": '"ping"'}.get(
                form, '"request.bin"'
            ),
        )
        for form in ("hex", "base64", "text", "file")
    },
    **{
        f"expect_{form}": OptionDoc(
            "string",
            "the workload's reply",
            f"The reply body every call must return with validate ({form}). Forms: {_RAW_FORMS}.",
            {"hex": '"0a0b68656c6c6f20776f726c64"', "base64": '"CgtoZWxsbyB3b3JsZA=="'}.get(
                form, '"pong"' if form == "text" else '"reply.bin"'
            ),
        )
        for form in ("hex", "base64", "text", "file")
    },
    # ZeroMQ
    "framing": OptionDoc(
        "string",
        '"rpcmeter"',
        "rpcmeter's frames for its built-in server, or raw frames for any REP or ROUTER server.",
        '"raw"',
        '"rpcmeter", "raw"',
    ),
    "recv": OptionDoc(
        "string",
        '"block"',
        "How the client waits for a reply: a blocking receive, busy polling, or polling "
        "with sleeps of sleep_us.",
        '"poll"',
        '"block", "poll", "sleep"',
    ),
    "sleep_us": OptionDoc(
        "number",
        "100",
        'With recv = "sleep": microseconds slept whenever nothing has arrived.',
        "20",
        "≥ 0",
    ),
    # rpyc
    "bind_threads": OptionDoc(
        "boolean",
        "false",
        "rpyc's thread binding, on both ends: each client thread gets its own server thread.",
        "true",
    ),
    "background": OptionDoc(
        "integer",
        "0",
        "Built-in rpyc server: extra threads serving each connection.",
        "2",
        "≥ 0",
    ),
    "nodelay": OptionDoc(
        "boolean",
        "true",
        "TCP_NODELAY on both ends over TCP (rpyc's own default is false).",
        "false",
    ),
    "server_time": OptionDoc(
        "boolean",
        "true",
        "Call the server's timed simple call, which reports its handling and queue times.",
        "false",
    ),
    "spin_us": OptionDoc(
        "number",
        "0",
        "Built-in rpyc server: CPU microseconds every call burns.",
        "50",
        "≥ 0",
    ),
    "wait": OptionDoc(
        "string",
        '"block"',
        "Built-in rpyc server: how it waits for input, sleeping in select() or polling it.",
        '"spin"',
        '"block", "spin"',
    ),
}

BY_DRIVER: dict[tuple[str, str], OptionDoc] = {
    ("http", "method"): OptionDoc("string", "GET for noop, else POST", "The HTTP method.", '"PUT"'),
    ("grpc", "method"): OptionDoc(
        "string",
        "the workload's",
        "The full method path, called with raw bodies (request_*, expect_*).",
        '"/grpc.health.v1.Health/Check"',
    ),
    ("http", "expect"): OptionDoc(
        "table",
        "(none)",
        "What every reply must hold with validate: its body.",
        '{ body = "pong" }',
    ),
    ("grpc", "server_mode"): OptionDoc(
        "string",
        '"aio"',
        "The built-in gRPC server: grpc.aio, grpcio's threaded server, or rpcmeter's own "
        "HTTP/2 (h2).",
        '"h2"',
        '"aio", "sync", "h2"',
    ),
    ("zmq", "server_mode"): OptionDoc(
        "string",
        '"libzmq"',
        "The built-in ZeroMQ server: pyzmq's ROUTER socket, or rpcmeter's own ZMTP (zmtp).",
        '"zmtp"',
        '"libzmq", "zmtp"',
    ),
    ("zmq", "call_timeout_s"): OptionDoc(
        "number",
        "(none: as long as the case)",
        "Give up on a reply after this long; the loop stops, as a REQ socket cannot go on.",
        "1.0",
        "> 0",
    ),
}


def option_doc(driver: str, key: str) -> OptionDoc | None:
    """What ``key`` means to ``driver`` (None: undocumented)."""
    return BY_DRIVER.get((driver, key)) or OPTIONS.get(key)
