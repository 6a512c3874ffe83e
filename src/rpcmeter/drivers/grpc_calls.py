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

Requests that vary (:mod:`rpcmeter.protocols.templates`): string values of ``data``, values of
``metadata`` and ``expect`` may hold placeholders (``latitude = "{{request_number}}"`` fills a
numeric field through the JSON mapping); a ``data_file`` ending in ``.jsonl`` holds one message a
line, and a JSON file holding an array, one message per element, sent in turn
(:mod:`rpcmeter.protocols.request_data`). A mix (``kind = "mix"``) names its calls in the
workload: each table of ``calls`` has a ``call`` of the variant's schema, its own ``data`` or
``data_file``, ``metadata`` (over the options') and ``expect``; a variant with a mix needs no
``call`` of its own. Every message is encoded once, when the suite is loaded (with reflection:
when the server has answered), and travels to the clients compiled.

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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from rpcmeter.drivers.base import RAW_BODY_OPTIONS
from rpcmeter.drivers.varying import MIX_KEY, mix_key
from rpcmeter.errors import SuiteError
from rpcmeter.net.tls import ClientTls, probe_handshake
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
from rpcmeter.protocols.request_data import DataError, read_entries
from rpcmeter.protocols.templates import TemplateError, is_template, parse
from rpcmeter.suite.workloads import MixParams

if TYPE_CHECKING:
    from rpcmeter.net.endpoints import Endpoint
    from rpcmeter.suite.model import Suite

SCHEMA_OPTIONS = frozenset(
    {"call", "proto", "protoset", "import_paths", "reflection", "data", "data_file", "expect"}
)
CALL_KEY = "grpc_call"  # DriverContext.prepared[CALL_KEY]: the PreparedCall
MIX_CALL_KEYS = ("call", "data", "data_file", "metadata", "expect")  # a mix call's table
REFLECTION_TIMEOUT_S = 10.0
RAW_KEYS = ("method", *sorted(RAW_BODY_OPTIONS))


def source_of(opts: Mapping[str, Any]) -> str | None:
    """Where the options take a schema from (``proto``, ``protoset``, ``reflection``), if any."""
    given = [k for k in ("proto", "protoset") if opts.get(k) is not None]
    if opts.get("reflection") is True:
        given.append("reflection")
    return given[0] if given else None


@dataclass(frozen=True)
class MixCall:
    """One call of a mix, compiled: its name, weight, call and metadata (over the options')."""

    name: str
    weight: float
    call: PreparedCall
    metadata: tuple[tuple[str, str], ...] = ()


def check_metadata(metadata: Any, key: str) -> tuple[tuple[str, str], ...]:
    """Metadata as pairs; its values may hold placeholders, its names may not (SuiteError
    naming ``key``)."""
    if metadata is None:
        return ()
    if not isinstance(metadata, Mapping):
        raise SuiteError(f"{key}: expected a table")
    pairs = []
    for name, value in metadata.items():
        if is_template(str(name)):
            raise SuiteError(f"{key}: a metadata name cannot take a placeholder ({name!r})")
        if is_template(value):
            try:
                parse(str(value))
            except TemplateError as exc:
                raise SuiteError(f"{key}.{name}: {exc}") from None
        pairs.append((str(name), str(value)))
    return tuple(pairs)


def check_call_options(opts: Mapping[str, Any], mixes_only: bool = False) -> None:
    """The schema options of one variant make sense together (SuiteError naming the option);
    ``mixes_only``: its workloads are mixes, which name their calls themselves."""
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
    check_metadata(opts.get("metadata"), "options.metadata")
    if given and call is None and not mixes_only:
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


def data_lines(table: Mapping[str, Any], base: Path, key: str) -> list[tuple[Any, str]]:
    """The messages of ``table``'s ``data_file`` with where each is (``requests.jsonl:3``):
    one a line of a ``.jsonl`` file, one per element of a JSON array, else the one the file
    holds (none without a data_file). SuiteError naming ``key`` and the line at fault."""
    name = table.get("data_file")
    if name is None:
        return []
    if not isinstance(name, str):
        raise SuiteError(f"{key}: expected a file name (got {name!r})")
    if table.get("data") is not None:
        raise SuiteError(f"{key}: give data or data_file, not both")
    try:
        return [(e.value, e.where) for e in read_entries(_path(base, name), name)]
    except DataError as exc:
        raise SuiteError(f"{key}: {exc}") from None


def prepare_call(opts: Mapping[str, Any], schema: Schema, base: Path) -> PreparedCall:
    """The variant's call of ``schema``, compiled (SuiteError naming the option at fault)."""
    lines = data_lines(opts, base, "options.data_file")
    try:
        return compile_call(
            schema,
            str(opts["call"]),
            opts.get("data"),
            opts.get("expect"),
            where=("call", "data", "expect"),
            lines=lines,
        )
    except SchemaError as exc:
        text = str(exc)
        raise SuiteError(f"options.{'data_file: ' if lines else ''}{text}") from None


def prepare_mix(
    params: MixParams, opts: Mapping[str, Any], schema: Schema, base: Path
) -> tuple[MixCall, ...]:
    """A mix's calls of ``schema``, compiled (SuiteError naming ``calls[i]`` and the key at
    fault); each call's metadata over the options'."""
    shared = dict(check_metadata(opts.get("metadata"), "options.metadata"))
    out = []
    for i, (name, weight, table) in enumerate(
        zip(params.names(), params.weights(), params.requests(), strict=True)
    ):
        at = f"calls[{i}]"
        for key in table:
            if key not in MIX_CALL_KEYS:
                raise SuiteError(
                    f"{at}.{key}: a gRPC call of a mix has no key {key!r} (its keys: "
                    f"name, weight, {', '.join(MIX_CALL_KEYS)})"
                )
        if not isinstance(table.get("call"), str):
            raise SuiteError(f'{at}.call: name the method: call = "package.Service/Method"')
        metadata = {**shared, **dict(check_metadata(table.get("metadata"), f"{at}.metadata"))}
        lines = data_lines(table, base, f"{at}.data_file")
        try:
            call = compile_call(
                schema,
                table["call"],
                table.get("data"),
                table.get("expect"),
                where=(f"{at}.call", f"{at}.data", f"{at}.expect"),
                lines=lines,
            )
        except SchemaError as exc:
            raise SuiteError(f"{at}.data_file: {exc}" if lines else str(exc)) from None
        if call.kind != "unary":
            raise SuiteError(
                f"{at}.call: {call.path.removeprefix('/')} streams ({call.kind} streaming): "
                "a mix holds unary calls"
            )
        out.append(MixCall(name, weight, call, tuple(metadata.items())))
    return tuple(out)


def prepare_mixes(
    suite: Suite, opts: Mapping[str, Any], schema: Schema, base: Path
) -> dict[str, Any]:
    """Every mix workload of the suite compiled against ``schema``, by :func:`mix_key`."""
    mixes: dict[str, Any] = {}
    for wname, w in suite.workloads.items():
        if w.kind != "mix":
            continue
        params = suite.workload_params(wname)
        assert isinstance(params, MixParams)
        try:
            mixes[mix_key(params)] = prepare_mix(params, opts, schema, base)
        except SuiteError as exc:
            quoted = f'"{wname}"' if " " in wname or "." in wname else wname
            raise SuiteError(f"workloads.{quoted}.{exc}") from None
    return mixes


def check_workloads(suite: Suite, call: PreparedCall) -> None:
    """Every workload of the suite can run ``call``: ``noop`` for a unary method, ``stream``
    of the method's mode for a streaming one."""
    name = call.path.removeprefix("/")
    if suite.breakdown is not None and call.kind != "unary":
        raise SuiteError(
            f"breakdown: its round trip is a unary call, and {name} streams: drop [breakdown]"
        )
    if call.expect_varies and call.kind != "unary":
        raise SuiteError(
            f"options.expect: {name} streams: an expect with placeholders is for unary calls "
            "(placeholders in data, and data files, stream)"
        )
    for wname, w in suite.workloads.items():
        quoted = f'"{wname}"' if " " in wname or "." in wname else wname
        key = f"workloads.{quoted}.kind"
        if w.kind in ("idle", "mix"):  # sends nothing; names its own calls
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
        kinds = {w.kind for w in suite.workloads.values()} - {"idle"}
        try:
            check_call_options(opts, mixes_only=kinds == {"mix"})
            source = source_of(opts)
            if "mix" in kinds and source is None:
                raise SuiteError(
                    'a mix of gRPC calls names them from a schema: proto = "x.proto", '
                    'protoset = "x.protoset" or reflection = true'
                )
            if (opts.get("call") is not None or "mix" in kinds) and (
                suite.server_of(vname).command is None and suite.address_of(vname) is None
            ):
                raise SuiteError(
                    f"options.{'call' if opts.get('call') else source}: the built-in server "
                    "has no such method: start the service with server.command, or give its "
                    "address"
                )
            if source not in ("proto", "protoset"):
                continue
            key = (source, opts[source], tuple(opts.get("import_paths") or ()))
            if key not in schemas:
                schemas[key] = load_file_schema(opts, base)
            prepared: dict[str, Any] = {}
            if opts.get("call") is not None:
                prepared[CALL_KEY] = call = prepare_call(opts, schemas[key], base)
                check_workloads(suite, call)
            mixes = prepare_mixes(suite, opts, schemas[key], base)
        except SuiteError as exc:
            raise SuiteError(
                f"{prefix}: {exc}" if not str(exc).startswith("workloads.") else f"{where}: {exc}"
            ) from None
        if mixes:
            prepared[MIX_KEY] = mixes
        suite.prepared.setdefault(vname, {}).update(prepared)


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
        base = suite_dir(suite, where)
        prepared: dict[str, Any] = {}
        if opts.get("call") is not None:
            prepared[CALL_KEY] = call = prepare_call(opts, schema, base)
            check_workloads(suite, call)
        mixes = prepare_mixes(suite, opts, schema, base)
    except SuiteError as exc:
        text = str(exc)
        raise SuiteError(
            f"{where}: {text}"
            if text.startswith("workloads.")
            else f"{where}: variants.{variant}: {text}"
        ) from None
    if mixes:
        prepared[MIX_KEY] = mixes
    return prepared


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
    """What the result records of a variant's schema: its source and the call, or a mix's
    calls (their methods, comma-separated)."""
    call = prepared.get(CALL_KEY)
    if isinstance(call, PreparedCall):
        return call.describe()
    mixes = prepared.get(MIX_KEY) or {}
    calls = [c.call for mix in mixes.values() for c in mix]
    if not calls:
        return None
    names = dict.fromkeys(c.path.removeprefix("/") for c in calls)
    return {**calls[0].describe(), "call": ", ".join(names)}


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
