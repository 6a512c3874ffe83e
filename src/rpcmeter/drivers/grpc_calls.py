"""The gRPC driver's calls named from a schema: the options, checked and compiled when the suite
is loaded, and the client of a server's reflection service.

Options (a target's or a variant's):

- the schema, one of: ``proto = "x.proto"`` (with ``import_paths = [...]``), ``protoset =
  "x.protoset"`` or ``reflection = true``; paths are relative to the suite file;
- ``call = "package.Service/Method"`` (ghz's ``package.Service.Method`` too);
- ``data = { ... }`` or ``data_file = "request.json"``: the request message as JSON (protobuf's
  JSON mapping; without either, the empty message);
- ``expect = { ... }``: the fields every reply must have (a subset; see
  :class:`~rpcmeter.protocols.grpc_schema.FieldExpect`), checked whether the suite validates
  or not.

A ``proto`` or ``protoset`` is compiled when the suite is loaded (:func:`prepare_suite`): an error
in the schema, the call or the data is a suite error before any server starts. With
``reflection``, the run asks the server once, before the cases (:func:`reflect`; the driver's
:meth:`~rpcmeter.drivers.base.Driver.ask_server`), over the variant's TLS and with its
``metadata``. Either way the variant's clients get a
:class:`~rpcmeter.protocols.grpc_schema.PreparedCall` (``DriverContext.prepared["grpc_call"]``),
and the result records the schema (``environment.schemas``).

A unary call runs the workload ``noop`` (its request is the call's data); a streaming method runs
the workload ``stream`` with the method's ``mode`` (``server``, ``client`` or ``bidi``), every
request message being the call's data and every reply checked against ``expect``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from rpcmeter.drivers.base import RAW_BODY_OPTIONS
from rpcmeter.errors import SuiteError
from rpcmeter.protocols.grpc import target
from rpcmeter.protocols.grpc_schema import (
    REFLECTION_PATHS,
    PreparedCall,
    ReflectionSession,
    Schema,
    SchemaError,
    compile_call,
    compile_proto,
    listing,
    load_schema,
    read_protoset,
)
from rpcmeter.tls import ClientTls, probe_handshake

if TYPE_CHECKING:
    from rpcmeter.endpoints import Endpoint
    from rpcmeter.suite_model import Suite

SCHEMA_OPTIONS = frozenset(
    {"call", "proto", "protoset", "import_paths", "reflection", "data", "data_file", "expect"}
)
CALL_KEY = "grpc_call"  # DriverContext.prepared[CALL_KEY]: the PreparedCall
REFLECTION_TIMEOUT_S = 10.0
RAW_KEYS = ("method", *sorted(RAW_BODY_OPTIONS))


def source_of(opts: Mapping[str, Any]) -> str | None:
    """Where the options take a schema from (``proto``, ``protoset``, ``reflection``), if any."""
    given = [k for k in ("proto", "protoset") if opts.get(k) is not None]
    if opts.get("reflection") is True:
        given.append("reflection")
    return given[0] if given else None


def check_call_options(opts: Mapping[str, Any]) -> None:
    """The schema options of one variant make sense together (SuiteError naming the option)."""
    given = [k for k in ("proto", "protoset") if opts.get(k) is not None]
    reflection = opts.get("reflection", False)
    if not isinstance(reflection, bool):
        raise SuiteError(f"options.reflection: expected true or false (got {reflection!r})")
    if reflection:
        given.append("reflection")
    for key in ("proto", "protoset", "data_file", "call"):
        if opts.get(key) is not None and not isinstance(opts[key], str):
            raise SuiteError(f"options.{key}: expected a string (got {opts[key]!r})")
    if len(given) > 1:
        raise SuiteError(f"options: give one schema: {' or '.join(given)}, not both")
    call = opts.get("call")
    if given and call is None:
        raise SuiteError(
            f'options.{given[0]}: name the method to call: call = "package.Service/Method"'
        )
    if call is not None and not given:
        raise SuiteError(
            'options.call: needs a schema: proto = "x.proto", protoset = "x.protoset" '
            "or reflection = true"
        )
    for key in ("data", "data_file", "expect"):
        if opts.get(key) is not None and call is None:
            raise SuiteError(f'options.{key}: only with call = "package.Service/Method"')
    if opts.get("data") is not None and opts.get("data_file") is not None:
        raise SuiteError("options: give data or data_file, not both")
    if call is not None:
        raw = [k for k in RAW_KEYS if opts.get(k) is not None]
        if raw:
            raise SuiteError(
                f"options.{raw[0]}: a raw body or method does not go with call (the schema "
                "makes the request: use data and expect)"
            )
    paths = opts.get("import_paths")
    if paths is not None:
        if opts.get("proto") is None:
            raise SuiteError("options.import_paths: only with proto")
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise SuiteError(
                f"options.import_paths: expected a list of directories (got {paths!r})"
            )


def suite_dir(suite: Suite, where: str) -> Path:
    """The directory the suite's relative paths start from."""
    path = Path(suite.path or where)
    return path.resolve().parent if path.is_file() else Path.cwd()


def _path(base: Path, text: str) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else base / path


def load_file_schema(opts: Mapping[str, Any], base: Path) -> Schema:
    """The schema of a ``proto`` or ``protoset`` option (SuiteError naming the option)."""
    source = source_of(opts)
    assert source in ("proto", "protoset"), "a file schema"
    text = str(opts[source])
    try:
        if source == "proto":
            imports = [_path(base, p) for p in opts.get("import_paths") or []]
            data = compile_proto(_path(base, text), imports)
        else:
            data = read_protoset(_path(base, text))
        return load_schema(data, source, text)
    except SchemaError as exc:
        raise SuiteError(f"options.{source}: {text}: {exc}") from None


def request_data(opts: Mapping[str, Any], base: Path) -> tuple[Any, str]:
    """The request's JSON (``data``, or ``data_file`` read) and the option it came from."""
    if opts.get("data_file") is None:
        return opts.get("data"), "data"
    text = str(opts["data_file"])
    path = _path(base, text)
    try:
        return json.loads(path.read_text(encoding="utf-8")), "data_file"
    except FileNotFoundError:
        raise SuiteError(f"options.data_file: no such file {text}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"options.data_file: cannot read {text}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise SuiteError(f"options.data_file: {text} is not JSON: {exc}") from None


def prepare_call(opts: Mapping[str, Any], schema: Schema, base: Path) -> PreparedCall:
    """The variant's call of ``schema``, compiled (SuiteError naming the option at fault)."""
    data, data_key = request_data(opts, base)
    try:
        return compile_call(
            schema,
            str(opts["call"]),
            data,
            opts.get("expect"),
            where=("call", data_key, "expect"),
        )
    except SchemaError as exc:
        raise SuiteError(f"options.{exc}") from None


def check_workloads(suite: Suite, call: PreparedCall) -> None:
    """Every workload of the suite can run ``call``: ``noop`` for a unary method, ``stream``
    of the method's mode for a streaming one."""
    name = call.path.removeprefix("/")
    if suite.breakdown is not None and call.kind != "unary":
        raise SuiteError(
            f"breakdown: its round trip is a unary call, and {name} streams: drop [breakdown]"
        )
    for wname, w in suite.workloads.items():
        quoted = f'"{wname}"' if " " in wname or "." in wname else wname
        key = f"workloads.{quoted}.kind"
        if w.kind == "idle":  # sends nothing
            continue
        if call.kind == "unary":
            if w.kind != "noop":
                raise SuiteError(
                    f'{key}: the unary call {name} runs workload kind "noop" (its request is '
                    f"the call's data), not {w.kind!r}"
                )
            continue
        mode = w.params().get("mode", "server")
        if w.kind != "stream" or mode != call.kind:
            got = f"{w.kind!r}" + (f" with mode {mode!r}" if w.kind == "stream" else "")
            raise SuiteError(
                f'{key}: {name} streams ({call.kind} streaming): it runs workload kind "stream" '
                f'with mode = "{call.kind}", not {got}'
            )


def prepare_suite(suite: Suite, where: str, driver: str) -> None:
    """Check the schema options of every variant of ``driver`` and compile the calls that name a
    ``proto`` or ``protoset`` (each file once): ``suite.prepared[variant]["grpc_call"]``."""
    base = suite_dir(suite, where)
    schemas: dict[tuple[Any, ...], Schema] = {}
    for vname in suite.variants:
        if suite.driver_of(vname) != driver:
            continue
        opts = suite.options_of(vname)
        prefix = f"{where}: variants.{vname}"
        try:
            check_call_options(opts)
            source = source_of(opts)
            if opts.get("call") is not None and (
                suite.server_of(vname).command is None and suite.address_of(vname) is None
            ):
                raise SuiteError(
                    "options.call: the built-in server has no such method: start the service "
                    "with server.command, or give its address"
                )
            if source not in ("proto", "protoset"):
                continue
            key = (source, opts[source], tuple(opts.get("import_paths") or ()))
            if key not in schemas:
                schemas[key] = load_file_schema(opts, base)
            call = prepare_call(opts, schemas[key], base)
            check_workloads(suite, call)
        except SuiteError as exc:
            raise SuiteError(f"{prefix}: {exc}") from None
        suite.prepared.setdefault(vname, {})[CALL_KEY] = call


def ask_server(
    suite: Suite, variant: str, endpoint: Endpoint, tls: ClientTls | None
) -> dict[str, Any]:
    """The call of a ``reflection = true`` variant, from its server's reflection service."""
    where = suite.path or "<suite>"
    opts = suite.options_of(variant)
    metadata = tuple((str(k), str(v)) for k, v in (opts.get("metadata") or {}).items())
    try:
        try:
            schema = reflect(endpoint, tls, metadata, float(opts.get("connect_timeout_s", 10.0)))
        except SchemaError as exc:
            raise SuiteError(f"options.reflection: {exc}") from None
        call = prepare_call(opts, schema, suite_dir(suite, where))
        check_workloads(suite, call)
    except SuiteError as exc:
        raise SuiteError(f"{where}: variants.{variant}: {exc}") from None
    return {CALL_KEY: call}


# ---- the reflection client ----------------------------------------------------------------------


def channel_credentials(
    tls: ClientTls | None,
) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, Any]]]:
    """grpcio's channel credentials and options for ``tls`` (None: cleartext)."""
    if tls is None:
        return None, []
    s = tls.settings

    def read(path: str | None) -> bytes | None:
        return Path(path).read_bytes() if path else None

    creds = grpc.ssl_channel_credentials(
        root_certificates=read(tls.ca_file),
        private_key=read(s.key_file),
        certificate_chain=read(s.cert_file),
    )
    name = tls.server_name
    return creds, [("grpc.ssl_target_name_override", name)] if name else []


def reflect(
    endpoint: Endpoint,
    tls: ClientTls | None = None,
    metadata: tuple[tuple[str, str], ...] = (),
    timeout_s: float = REFLECTION_TIMEOUT_S,
) -> Schema:
    """The schema the server at ``endpoint`` gives by reflection (``grpc.reflection.v1``, else
    ``v1alpha``), asked over ``tls`` with ``metadata``. SchemaError in one line when it has no
    reflection service, cannot be reached or answers wrongly."""
    addr = target(endpoint)
    creds, options = channel_credentials(tls)
    channel = (
        grpc.insecure_channel(addr, options=options)
        if creds is None
        else grpc.secure_channel(addr, creds, options=options)
    )
    try:
        for path in REFLECTION_PATHS:
            session = ReflectionSession()
            stub = channel.stream_stream(path)
            try:
                while (request := session.next_request()) is not None:
                    for reply in stub(
                        iter((request,)), timeout=timeout_s, metadata=metadata or None
                    ):
                        session.feed(reply)
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
                details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
                if code is grpc.StatusCode.UNIMPLEMENTED:
                    continue  # not this version: the next
                if code is grpc.StatusCode.UNAVAILABLE:
                    why = None
                    if tls is not None and endpoint.port is not None:
                        why = probe_handshake(tls, endpoint.host, endpoint.port, ("h2",))
                    raise SchemaError(
                        f"no gRPC connection to {addr}: {why or details or code.name}"
                    ) from None
                raise SchemaError(
                    f"the server's reflection service failed: {code.name}: {details}"
                ) from None
            version = path.split("/")[1].rpartition(".")[0]
            return load_schema(session.file_set(), "reflection", version, session.undescribed)
    finally:
        channel.close()
    raise SchemaError(
        f"the server at {addr} has no reflection service (neither grpc.reflection.v1 nor "
        "v1alpha answers)"
    )


def describe_prepared(prepared: Mapping[str, Any]) -> dict[str, Any] | None:
    call = prepared.get(CALL_KEY)
    return call.describe() if isinstance(call, PreparedCall) else None


def describe_calls(prepared: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``rpcmeter describe``: each variant's schema and call, then each distinct schema's
    services and methods, every method with its input message as a JSON skeleton."""
    calls = {
        v: p[CALL_KEY] for v, p in prepared.items() if isinstance(p.get(CALL_KEY), PreparedCall)
    }
    lines: list[str] = []
    first: dict[str, str] = {}  # sha256 -> the first variant with it
    for vname, call in calls.items():
        info = call.schema
        sha = str(info["sha256"])
        same = f" (as {first[sha]!r})" if sha in first else ""
        first.setdefault(sha, vname)
        lines.append(
            f"variant {vname!r}: {info['source']} {info['origin']}, sha256 {sha[:12]}{same}; "
            f"call {call.path.removeprefix('/')}"
        )
    for sha, vname in first.items():
        users = [v for v, c in calls.items() if c.schema["sha256"] == sha]
        called: dict[str, list[str]] = {}
        for v in users:
            called.setdefault(calls[v].path.removeprefix("/"), []).append(v)
        lines += ["", f"schema sha256 {sha[:12]} ({', '.join(users)}):"]
        lines += listing(calls[vname].loaded_schema(), called)
    return lines
