"""``rpcmeter grpc ADDRESS METHOD`` (ghz's flags: load one method, or compare several
addresses), and grpcurl's two everyday verbs: ``rpcmeter grpc call ADDRESS METHOD -d JSON`` (one
call, its reply as JSON) and ``rpcmeter grpc describe ADDRESS [SYMBOL]`` (a service, method or
message with its field types).

The schema comes from the server's reflection unless ``--proto`` or ``--protoset`` gives it. The
load command makes a suite (:mod:`rpcmeter.cli.oneline`) whose variants are the addresses;
``call`` and ``describe`` talk to the server with grpcio. Light at import: grpcio and protobuf
come in when a command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rpcmeter.cli import oneline, run
from rpcmeter.errors import UsageError

if TYPE_CHECKING:
    from rpcmeter.net.endpoints import Endpoint
    from rpcmeter.net.tls import ClientTls
    from rpcmeter.protocols.grpc_schema import Schema

VERBS = ("list", "call", "describe", "load")
DEFAULT_WORKERS = 50  # ghz's -c
DEFAULT_MESSAGES = 10  # messages per stream of a streaming method


def implicit_load(argv: list[str]) -> list[str]:
    """``rpcmeter grpc ADDRESS METHOD ...`` is ``rpcmeter grpc load ADDRESS METHOD ...``: the
    word after ``grpc`` that is no verb (nor ``-h``) starts the load command's arguments."""
    if len(argv) >= 2 and argv[0] == "grpc" and argv[1] not in (*VERBS, "-h", "--help"):
        return ["grpc", "load", *argv[1:]]
    return argv


def add_schema_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("schema (default: the server's reflection)")
    g.add_argument("--proto", default=None, metavar="FILE", help="the service's .proto file")
    g.add_argument(
        "-i",
        "--import-paths",
        action="append",
        default=[],
        metavar="DIRS",
        help="directories the .proto imports from (comma-separated, repeatable)",
    )
    g.add_argument(
        "--protoset",
        default=None,
        metavar="FILE",
        help="a FileDescriptorSet (protoc --descriptor_set_out --include_imports)",
    )


def add_connection_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("connection (cleartext unless a TLS flag is given)")
    oneline.add_tls_flags(
        g,
        ("--insecure",),
        "cleartext (ghz's meaning; the default here: accepted for ghz's command lines)",
        client=True,
        prefix="TLS: ",
    )
    g.add_argument(
        "-m",
        "--metadata",
        action="append",
        default=[],
        metavar="META",
        help='request metadata: a JSON object (\'{"key": "value"}\', as ghz) or KEY=VALUE, '
        "repeatable; values may hold placeholders (load)",
    )


def add_parsers(gsub: Any) -> None:
    """``grpc load`` (also ``grpc ADDRESS METHOD``), ``grpc call`` and ``grpc describe``."""
    p = gsub.add_parser(
        "load",
        help="load a method, or compare several addresses (ghz's flags); also: rpcmeter grpc "
        "ADDRESS METHOD",
        description="Load one gRPC method (ghz's flags). Several --address values (or "
        "NAME=ADDRESS) compare servers: the first is the baseline, all run interleaved.",
    )
    p.prog = "rpcmeter grpc"
    oneline.brief_errors(p)
    p.add_argument(
        "words",
        nargs="*",
        metavar="ADDRESS METHOD",
        help="host:port (or NAME=host:port) and the method (pkg.Service/Method or ghz's "
        "pkg.Service.Method)",
    )
    p.add_argument("--call", default=None, metavar="METHOD", help="the method (as ghz names it)")
    p.add_argument(
        "--address",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a server to load, repeatable (several compare); NAME=ADDRESS names it",
    )
    p.add_argument(
        "-c",
        "--concurrency",
        type=oneline.positive_int,
        default=DEFAULT_WORKERS,
        metavar="N",
        help=f"calls in flight at once (ghz's workers; default {DEFAULT_WORKERS})",
    )
    p.add_argument(
        "--connections",
        type=oneline.positive_int,
        default=1,
        metavar="N",
        help="HTTP/2 connections the calls share (default 1)",
    )
    oneline.add_load_flags(p, ("-c",))
    add_request_flags(p)
    p.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a field every reply must hold (dotted path; the value as JSON, else text), "
        "repeatable: a reply that differs counts as a mismatch",
    )
    p.add_argument(
        "--messages",
        type=oneline.positive_int,
        default=None,
        metavar="N",
        help="streaming methods: messages per stream: requests sent (client, bidi), replies "
        "due (server; default: as many as one call of the request brings), "
        f"else {DEFAULT_MESSAGES}",
    )
    p.add_argument(
        "--grpcio",
        action="store_true",
        help="make the calls with grpcio's client instead of rpcmeter's own HTTP/2 client",
    )
    add_schema_flags(p)
    add_connection_flags(p)
    run.add_run_outputs(p)
    p.set_defaults(handler=cmd_load)

    p = _asking(
        gsub,
        "call",
        "make one call and print the reply as JSON, with its status, trailers and time (grpcurl)",
    )
    p.add_argument("method", help="pkg.Service/Method (or pkg.Service.Method)")
    add_request_flags(p)
    _asked(p, "the call's deadline (default 10s)", cmd_call)

    p = _asking(
        gsub,
        "describe",
        "a service, method or message of a server's schema as JSON with field types "
        "(grpcurl describe)",
    )
    p.add_argument(
        "symbol",
        nargs="?",
        help="pkg.Service, pkg.Service/Method or pkg.Message (default: every service)",
    )
    _asked(p, "default 10s", cmd_describe)


def _asking(gsub: Any, name: str, help: str) -> argparse.ArgumentParser:
    """The parser of a verb that asks one server (``call``, ``describe``), with its address;
    :func:`_asked` ends it."""
    p: argparse.ArgumentParser = gsub.add_parser(name, help=help)
    oneline.brief_errors(p)
    p.add_argument("address", help="host:port or a Unix socket path")
    return p


def _asked(p: argparse.ArgumentParser, timeout_help: str, handler: Any) -> None:
    """The rest of an asking verb's parser: its deadline, the schema and the connection."""
    p.add_argument(
        "--timeout", type=oneline.duration, default=10.0, metavar="TIME", help=timeout_help
    )
    add_schema_flags(p)
    add_connection_flags(p)
    p.set_defaults(handler=handler)


def add_request_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("request")
    g.add_argument(
        "-d",
        "--data",
        default=None,
        metavar="JSON",
        help="the request as JSON (proto or JSON field names; placeholders in strings: load)",
    )
    oneline.add_data_file_flag(
        g,
        "the request from a JSON file; a .jsonl file holds one request a line, sent in turn (load)",
    )


# ---- what the flags say -------------------------------------------------------------------------


def _json(text: str, flag: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} {text!r}: not JSON: {exc.msg} (column {exc.colno})") from None


def metadata(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if item.lstrip().startswith("{"):
            table = _json(item, "-m")
            if not isinstance(table, dict):
                raise UsageError(f"-m {item!r}: expected a JSON object of strings")
            for key, value in table.items():
                out[str(key).strip().lower()] = str(value)
            continue
        key, sep, value = item.partition("=")
        if not sep:
            key, sep, value = item.partition(":")
        if not sep or not key.strip():
            raise UsageError(f"-m {item!r}: expected KEY=VALUE or a JSON object")
        out[key.strip().lower()] = value.strip()
    return out


def expect(items: list[str]) -> dict[str, Any]:
    """``--expect a.b=VALUE`` each, as the nested table ``expect`` takes."""
    out: dict[str, Any] = {}
    for item in items:
        path, sep, text = item.partition("=")
        keys = [k.strip() for k in path.split(".")]
        if not sep or not all(keys):
            raise UsageError(f"--expect {item!r}: expected FIELD=VALUE (FIELD dotted: a.b)")
        try:
            value: Any = json.loads(text)
        except json.JSONDecodeError:
            value = text
        table = out
        for key in keys[:-1]:
            nested = table.setdefault(key, {})
            if not isinstance(nested, dict):
                raise UsageError(f"--expect {item!r}: {key} is given a value and fields")
            table = nested
        table[keys[-1]] = value
    return out


def schema_options(args: argparse.Namespace) -> dict[str, Any]:
    """``proto`` (with ``import_paths``), ``protoset`` or ``reflection``, paths made absolute."""
    if args.proto and args.protoset:
        raise UsageError("--proto and --protoset: give one schema")
    if args.import_paths and not args.proto:
        raise UsageError("-i/--import-paths go with --proto")
    for flag in ("proto", "protoset"):
        path = getattr(args, flag)
        if path is not None and not Path(path).is_file():
            raise UsageError(f"--{flag} {path}: no such file")
    if args.proto:
        dirs = [d for item in args.import_paths for d in item.split(",") if d]
        out: dict[str, Any] = {"proto": str(Path(args.proto).resolve())}
        if dirs:
            out["import_paths"] = [str(Path(d).resolve()) for d in dirs]
        return out
    if args.protoset:
        return {"protoset": str(Path(args.protoset).resolve())}
    return {"reflection": True}


def tls_table(args: argparse.Namespace) -> dict[str, Any] | None:
    """The suite's ``tls`` table, None for cleartext."""
    if not (args.tls or args.cacert or args.cert or args.key or args.cname):
        return None
    table: dict[str, Any] = dict(oneline.tls_files(args))
    if args.cname:
        table["server_name"] = args.cname
    return table


def client_tls(table: dict[str, Any] | None) -> ClientTls | None:
    from rpcmeter.net.tls import ClientTls, TlsSettings

    if table is None:
        return None
    settings = TlsSettings(**table)
    return ClientTls(settings, settings.ca_file, settings.server_name)


def endpoint(address: str) -> Endpoint:
    from rpcmeter.net.endpoints import remote_endpoint

    try:
        return remote_endpoint(address)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def schema(
    args: argparse.Namespace, address: str, meta: dict[str, str], timeout_s: float = 10.0
) -> Schema:
    """The schema of the flags: the file's, else the server's by reflection."""
    from rpcmeter.drivers.grpc_calls import load_file_schema, reflect
    from rpcmeter.errors import SuiteError
    from rpcmeter.protocols.grpc_schema import SchemaError

    opts = schema_options(args)
    if "reflection" not in opts:
        try:
            return load_file_schema(opts, Path.cwd())
        except SuiteError as exc:
            raise UsageError(str(exc).removeprefix("options.")) from None
    tls = client_tls(tls_table(args))
    try:
        return reflect(endpoint(address), tls, tuple(meta.items()), timeout_s)
    except SchemaError as exc:
        raise UsageError(f"{address}: {exc}") from None


def method_of(found: Schema, call: str) -> Any:
    from rpcmeter.protocols.grpc_schema import SchemaError, find_method

    try:
        return find_method(found, call)
    except SchemaError as exc:
        raise UsageError(str(exc)) from None


# ---- rpcmeter grpc ADDRESS METHOD ---------------------------------------------------------------


def load_targets(args: argparse.Namespace) -> tuple[list[tuple[str | None, str]], str]:
    """The addresses (each with the name given) and the method, from the words and flags."""
    words = list(args.words)
    call = args.call
    if call is None:
        if not words:
            raise UsageError("grpc: give ADDRESS METHOD (or --call METHOD --address ADDRESS)")
        call = words.pop()
    addresses = oneline.targets([*words, *args.address])
    if not addresses:
        raise UsageError(f"grpc {call}: no address to call (ADDRESS METHOD, or --address)")
    for _, address in addresses:
        endpoint(address)
    if "/" not in call and call.count(".") < 1:
        raise UsageError(f"grpc: {call!r} is no method (pkg.Service/Method)")
    return addresses, call


def check_request(found: Schema, call: str, options: dict[str, Any]) -> None:
    """``-d`` and ``--expect`` against the method's messages: a mistake is a usage error
    naming the flag, before the run (which compiles them again, as a suite's)."""
    from rpcmeter.protocols.grpc_schema import SchemaError, compile_call

    if "data_file" in options:
        return  # a suite's own check names the file and the line
    try:
        compile_call(
            found, call, options.get("data"), options.get("expect"), ("METHOD", "-d", "--expect")
        )
    except SchemaError as exc:
        text = str(exc)
        for flag in ("-d", "--expect"):
            if text.startswith(f"{flag}."):
                text = f"{flag}: {text.removeprefix(flag + '.')}"
        raise UsageError(text) from None


def replies_due(
    args: argparse.Namespace,
    address: str,
    meta: dict[str, str],
    method: Any,
    options: dict[str, Any],
    err: TextIO,
) -> int:
    """How many messages a stream carries when ``--messages`` does not say: for a server
    stream, as many replies as one call of the request brings (asked once, before the run;
    the default where the request varies or the call fails); else the default."""
    from rpcmeter.protocols.grpc_schema import streaming

    data = options.get("data")
    if streaming(method) != "server" or "data_file" in options or "{{" in json.dumps(data):
        return DEFAULT_MESSAGES
    requests = _messages(
        argparse.Namespace(data=json.dumps(data or {}), data_file=None), method.input_type
    )
    got = one_call(endpoint(address), client_tls(tls_table(args)), meta, method, requests, 10.0)
    if got.code != "OK" or not got.replies:
        return DEFAULT_MESSAGES
    err.write(
        f"rpcmeter: {method.name} streams {len(got.replies)} replies to this request "
        f"(one call asked): --messages {len(got.replies)}\n"
    )
    return len(got.replies)


def suite_of(
    args: argparse.Namespace, argv: list[str], err: TextIO = sys.stderr
) -> tuple[dict[str, Any], str]:
    """The suite document of ``rpcmeter grpc`` (the server's schema asked for when it comes by
    reflection: a streaming method runs the stream workload) and the command line."""
    addresses, call = load_targets(args)
    names = oneline.variant_names([n for n, _ in addresses], [a for _, a in addresses], "ADDRESS")
    meta = metadata(args.metadata)
    options: dict[str, Any] = {"call": call, **schema_options(args)}
    if args.data is not None and args.data_file is not None:
        raise UsageError("-d/--data and -D/--data-file: give one or the other")
    if args.data is not None:
        options["data"] = _json(args.data, "-d")
    elif args.data_file is not None:
        if not args.data_file.is_file():
            raise UsageError(f"-D {args.data_file}: no such file")
        options["data_file"] = str(args.data_file.resolve())
    if meta:
        options["metadata"] = meta
    if args.expect:
        options["expect"] = expect(args.expect)
    if args.grpcio:
        options["client"] = "grpcio"
    tls = tls_table(args)
    load = oneline.load_table(args, args.connections, args.concurrency)
    # a streaming method runs the stream workload of its mode: the method's kind is asked for
    from rpcmeter.protocols.grpc_schema import streaming

    found = schema(args, addresses[0][1], meta)
    method = method_of(found, call)
    check_request(found, call, options)
    kind = streaming(method)
    command = oneline.command_line("rpcmeter grpc", argv)
    shown = " ".join(a for _, a in addresses)
    raw = oneline.suite_document(args, f"grpc {shown} {call}", command, len(addresses))
    target: dict[str, Any] = {"driver": "grpc", "options": options}
    if tls is not None:
        target["tls"] = tls
    raw["target"] = target
    raw["variants"] = {
        name: {"address": address} for name, (_, address) in zip(names, addresses, strict=True)
    }
    workload: dict[str, Any] = {"kind": "noop"}
    if kind != "unary":
        messages = args.messages
        if messages is None:
            messages = replies_due(args, addresses[0][1], meta, method, options, err)
        workload = {"kind": "stream", "mode": kind, "messages": messages}
    raw["workloads"] = {method.name: workload}
    if "requests" in load and "warmup" not in load:
        load["warmup"] = min(10, load["requests"])
    raw["load"] = load
    return raw, command


def _argv(args: argparse.Namespace, verb: str) -> list[str]:
    argv = list(getattr(args, "argv", None) or sys.argv[1:])
    if argv[:1] == ["grpc"]:
        argv = argv[1:]
    if argv[:1] == [verb]:
        argv = argv[1:]
    return argv


def cmd_load(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    run.check_run_outputs(args)
    raw, command = suite_of(args, _argv(args, "load"), err)
    return oneline.run(raw, args, "rpcmeter grpc", command, out, err)


# ---- rpcmeter grpc call / describe ---------------------------------------------------------------


def _messages(args: argparse.Namespace, desc: Any) -> list[Any]:
    """The request messages: one, or one per element of a JSON array (client streams)."""
    from google.protobuf import json_format

    from rpcmeter.protocols.grpc_schema import message_class

    if args.data is not None and args.data_file is not None:
        raise UsageError("-d/--data and -D/--data-file: give one or the other")
    if args.data_file is not None:
        try:
            text = args.data_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"-D {args.data_file}: {exc.strerror or exc}") from None
        if args.data_file.suffix in (".jsonl", ".ndjson"):
            data: Any = [_json(line, "-D") for line in text.splitlines() if line.strip()]
        else:
            data = _json(text, "-D")
    else:
        data = _json(args.data, "-d") if args.data is not None else {}
    out = []
    for item in data if isinstance(data, list) else [data]:
        try:
            out.append(json_format.ParseDict(item, message_class(desc)()))
        except (json_format.ParseError, TypeError, ValueError) as exc:
            raise UsageError(f"-d: not a {desc.full_name}: {exc}") from None
    return out


class Reply:
    """What one call brought back: its status, messages, metadata and time."""

    def __init__(self) -> None:
        self.code = "OK"
        self.details = ""
        self.replies: list[Any] = []
        self.headers: dict[str, str] = {}
        self.trailers: dict[str, str] = {}
        self.seconds = 0.0


def one_call(
    ep: Endpoint,
    tls: ClientTls | None,
    meta: dict[str, str],
    method: Any,
    requests: list[Any],
    timeout_s: float,
) -> Reply:
    """Make one call of ``method`` with grpcio (a stream of ``requests`` for a client or bidi
    stream) and collect what came back."""
    import time

    import grpc

    from rpcmeter.drivers.grpc_calls import channel_credentials
    from rpcmeter.protocols.grpc import target
    from rpcmeter.protocols.grpc_schema import message_class, streaming

    kind = streaming(method)
    reply_class: Any = message_class(method.output_type)
    path = f"/{method.containing_service.full_name}/{method.name}"
    creds, options = channel_credentials(tls)
    addr = target(ep)
    channel = (
        grpc.insecure_channel(addr, options=options)
        if creds is None
        else grpc.secure_channel(addr, creds, options=options)
    )

    def ser(message: Any) -> bytes:
        return bytes(message.SerializeToString())

    de = reply_class.FromString
    kw: dict[str, Any] = {"timeout": timeout_s, "metadata": tuple(meta.items()) or None}
    got = Reply()
    call: Any = None
    started = time.perf_counter()
    try:
        if kind == "unary":
            reply, call = channel.unary_unary(path, ser, de).with_call(requests[0], **kw)
            got.replies = [reply]
        elif kind == "client":
            reply, call = channel.stream_unary(path, ser, de).with_call(iter(requests), **kw)
            got.replies = [reply]
        else:
            if kind == "server":
                call = channel.unary_stream(path, ser, de)(requests[0], **kw)
            else:
                call = channel.stream_stream(path, ser, de)(iter(requests), **kw)
            got.replies = list(call)
    except grpc.RpcError as exc:
        call = exc
        code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
        got.code = code.name
        got.details = (exc.details() if isinstance(exc, grpc.Call) else str(exc)) or ""
    finally:
        got.seconds = time.perf_counter() - started
        if isinstance(call, grpc.Call):
            got.headers = _shown(call.initial_metadata())
            got.trailers = _shown(call.trailing_metadata())
        channel.close()
    return got


def _shown(pairs: Any) -> dict[str, str]:
    return {str(k): (v.hex() if isinstance(v, bytes) else str(v)) for k, v in (pairs or ())}


def cmd_call(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from google.protobuf import json_format

    from rpcmeter.protocols.grpc_schema import streaming

    meta = metadata(args.metadata)
    ep = endpoint(args.address)
    tls = client_tls(tls_table(args))
    found = schema(args, args.address, meta, args.timeout)
    method = method_of(found, args.method)
    requests = _messages(args, method.input_type)
    kind = streaming(method)
    if kind in ("unary", "server") and len(requests) != 1:
        raise UsageError(f"{args.method}: takes one request (got {len(requests)})")
    got = one_call(ep, tls, meta, method, requests, args.timeout)
    doc: dict[str, Any] = {
        "method": f"{method.containing_service.full_name}/{method.name}",
        "status": got.code,
    }
    if got.details:
        doc["details"] = got.details
    as_json = [json_format.MessageToDict(r, preserving_proto_field_name=True) for r in got.replies]
    if kind in ("unary", "client"):
        if as_json:
            doc["reply"] = as_json[0]
    else:
        doc["replies"] = as_json
    doc["headers"] = got.headers
    doc["trailers"] = got.trailers
    doc["time_ms"] = round(got.seconds * 1e3, 3)
    out.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return 0 if got.code == "OK" else 1


def describe_symbol(found: Schema, symbol: str | None) -> dict[str, Any]:
    """A service (its methods), a method (input and output with field types), a message or an
    enum, as JSON; every service when ``symbol`` is None."""
    import difflib

    from rpcmeter.protocols.grpc_schema import signature, streaming, typed_skeleton

    pool = found.pool
    if symbol is None:
        return {
            "services": {s.full_name: [signature(m) for m in s.methods] for s in found.services()}
        }
    name = symbol.strip().removeprefix("/")
    for service in found.services():
        if service.full_name == name:
            return {
                "service": service.full_name,
                "file": service.file.name,
                "methods": [signature(m) for m in service.methods],
            }
    if "/" in name or any(
        name.rpartition(".")[0] == s.full_name and name.rpartition(".")[2] in s.methods_by_name
        for s in found.services()
    ):
        method = method_of(found, name)
        return {
            "method": f"{method.containing_service.full_name}/{method.name}",
            "streaming": streaming(method),
            "signature": signature(method),
            "input": {
                "message": method.input_type.full_name,
                "fields": typed_skeleton(method.input_type),
            },
            "output": {
                "message": method.output_type.full_name,
                "fields": typed_skeleton(method.output_type),
            },
        }
    try:
        desc = pool.FindMessageTypeByName(name)
        return {"message": desc.full_name, "fields": typed_skeleton(desc)}
    except KeyError:
        pass
    try:
        enum = pool.FindEnumTypeByName(name)
        return {"enum": enum.full_name, "values": [v.name for v in enum.values]}
    except KeyError:
        pass
    known = [s.full_name for s in found.services()]
    known += [f"{s.full_name}/{m.name}" for s in found.services() for m in s.methods]
    for file_name in found.file_names():
        file = pool.FindFileByName(file_name)
        known += [m.full_name for m in file.message_types_by_name.values()]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" (closest: {', '.join(close)})" if close else ""
    raise UsageError(f"grpc describe: no service, method or message {symbol!r}{hint}")


def cmd_describe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    meta = metadata(args.metadata)
    endpoint(args.address)
    found = schema(args, args.address, meta, args.timeout)
    doc = describe_symbol(found, args.symbol)
    out.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return 0
