"""gRPC's commands: ``describe`` (a suite's schemas), ``grpc list`` (a server's reflection), and
the one-liners of :mod:`rpcmeter.cli.grpc_oneline`: ``grpc [load] ADDRESS METHOD``, ``grpc call``
and ``grpc describe``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from rpcmeter.cli import grpc_oneline, options
from rpcmeter.errors import UsageError
from rpcmeter.text import printable

MAX_TIMEOUT_S = 86400.0  # grpc list --timeout: a day (grpcio takes no infinite deadline)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "describe",
        help="the gRPC services and methods a suite's schemas offer, each method's input as JSON",
    )
    p.add_argument("suite", help="suite file (TOML)")
    options.add_set_option(p)
    p.set_defaults(handler=cmd_describe)
    g = sub.add_parser(
        "grpc",
        help="load a gRPC method (rpcmeter grpc ADDRESS METHOD, ghz's flags), make one call, "
        "describe or list a server's schema",
        description="rpcmeter grpc ADDRESS METHOD [flags] loads a method (the load command); "
        "call, describe and list ask a server.",
    )
    gsub = g.add_subparsers(dest="grpc_command", metavar="COMMAND", required=True)
    grpc_oneline.add_parsers(gsub)
    p = gsub.add_parser(
        "list", help="the services and methods a server's reflection service offers"
    )
    p.add_argument("address", help="host:port or a Unix socket path")
    p.add_argument(
        "--tls", action="store_true", help="over TLS (the system's CAs unless --ca-file)"
    )
    p.add_argument("--ca-file", help="TLS: the CA to trust (implies --tls)")
    p.add_argument("--server-name", help="TLS: the name to check the certificate against")
    p.add_argument("--cert-file", help="TLS: a client certificate (with --key-file)")
    p.add_argument("--key-file", help="TLS: the client certificate's key")
    p.add_argument(
        "--metadata",
        "-H",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="request metadata sent with the reflection calls, repeatable",
    )
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default 10)")
    p.set_defaults(handler=cmd_grpc_list)


def cmd_describe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.cli.progress import Progress
    from rpcmeter.drivers.grpc_calls import describe_calls
    from rpcmeter.plan.load import load_suite
    from rpcmeter.run.execute import suite_calls

    suite = load_suite(Path(args.suite), args.overrides)
    lines = describe_calls(suite_calls(suite, Progress(err)))
    if not lines:
        out.write(
            f"{args.suite}: no variant names a gRPC call from a schema "
            "(options proto, protoset or reflection = true, with call)\n"
        )
        return 0
    out.write("\n".join(printable(line) for line in lines) + "\n")
    return 0


def cmd_grpc_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from rpcmeter.drivers.grpc_calls import reflect
    from rpcmeter.net.endpoints import remote_endpoint
    from rpcmeter.net.tls import ClientTls, TlsSettings
    from rpcmeter.protocols.grpc_schema import SchemaError, listing

    if not (0 < args.timeout <= MAX_TIMEOUT_S):  # nan too: no call could finish in it
        raise UsageError(
            f"grpc list --timeout: seconds above 0 and at most {MAX_TIMEOUT_S:g}, e.g. 10 "
            f"(got {args.timeout:g})"
        )
    try:
        endpoint = remote_endpoint(args.address)
    except ValueError as exc:
        raise UsageError(f"grpc list: {exc}") from None
    metadata = []
    for item in args.metadata:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"grpc list --metadata {item}: expected KEY=VALUE")
        metadata.append((key.strip().lower(), value.strip()))
    tls = None
    if args.tls or args.ca_file or args.cert_file or args.key_file or args.server_name:
        if bool(args.cert_file) != bool(args.key_file):
            raise UsageError("grpc list: --cert-file and --key-file go together")
        for name in ("ca_file", "cert_file", "key_file"):
            path = getattr(args, name)
            if path and not Path(path).is_file():
                raise UsageError(f"grpc list --{name.replace('_', '-')}: no such file {path}")
        settings = TlsSettings(
            ca_file=args.ca_file,
            server_name=args.server_name,
            cert_file=args.cert_file,
            key_file=args.key_file,
        )
        tls = ClientTls(settings, args.ca_file, args.server_name)
    try:
        schema = reflect(endpoint, tls, tuple(metadata), args.timeout)
    except SchemaError as exc:
        raise UsageError(f"grpc list {args.address}: {exc}") from None
    out.write(f"{args.address}: {schema.origin}, sha256 {schema.sha256[:12]}\n")
    out.write("\n".join(printable(line) for line in listing(schema)) + "\n")
    if schema.undescribed:
        out.write(f"listed without descriptors: {', '.join(schema.undescribed)}\n")
    return 0
