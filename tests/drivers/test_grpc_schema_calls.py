"""gRPC calls named from a schema against a real grpcio server with generated stubs
(``tests/support/schema_server.py``): a ``.proto``, a protoset or the server's reflection; JSON
data of every shape; ``expect`` field by field; both clients (rpcmeter's HTTP/2 client and
grpcio's) agreeing; streaming methods through the ``stream`` workload; TLS and metadata on the
reflection calls too; and the suite errors, each one line and exit status 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rpcmeter import model
from rpcmeter.cli import main
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols import grpc_schema as gs
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.process import ServerProcess, expand_command, new_endpoint

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
ROUTE_GUIDE = ROOT / "benchmarks" / "greeter" / "route_guide.proto"
KITCHEN = ROOT / "tests" / "support" / "protos" / "kitchen.proto"
PATRIOTS = {"latitude": 407838351, "longitude": -746143763}
ORDER = {
    "id": "A-17",
    "items": [{"name": "tea", "size": "LARGE", "extras": ["milk"]}, {"name": "cake"}],
    "counts": {"tea": 2},
    "favourites": {"sunday": {"name": "scone", "size": "SMALL"}},
    "address": {"street": "1 High Street", "geo": {"lat": 51.5, "lng": -0.12}},
    "voucher": 12,
    "placed": "2024-01-02T03:04:05Z",
    "wait": "1.5s",
    "default_size": "SMALL",
    "note": "aGVsbG8=",
    "big": 18446744073709551615,
}


def server(*flags: str) -> dict[str, Any]:
    """The schema server as a suite's server command."""
    command = [sys.executable, "-m", "tests.support.schema_server", "--port", "{port}", *flags]
    return {"command": command, "cwd": str(ROOT), "ready_timeout_s": 60}


def run(raw: dict[str, Any], where: Path | None = None) -> model.Result:
    suite = build_suite(
        {"load": {"requests": 20, "warmup": 2, "concurrency": 2}, "repeat": 1, **raw},
        str(where) if where else "<suite>",
    )
    if where is not None:
        suite.path = str(where)
    return run_suite(suite)


def test_both_clients_encode_and_decode_alike(tmp_path: Path) -> None:
    """The same order through each client to Kitchen/Echo (the server decodes it with its
    generated class and sends it back encoded): ``expect`` names every field, so every reply
    is decoded and compared field by field; a wrong ``expect`` is the same mismatch on both."""
    call = {"proto": str(KITCHEN), "call": "kitchen.Kitchen/Echo", "data": ORDER}
    wrong = {**call, "expect": {"address": {"geo": {"lng": 7}}}}
    result = run(
        {
            "target": {"driver": "grpc", "server": server()},
            "variants": {
                "h2": {"options": {**call, "expect": ORDER}},
                "grpcio": {"options": {**call, "expect": ORDER, "client": "grpcio"}},
                "h2 wrong": {"options": wrong},
                "grpcio wrong": {"options": {**wrong, "client": "grpcio"}},
            },
            "workloads": {"echo": {"kind": "noop"}},
        }
    )
    cases = {c.variant: c for c in result.cases}
    size = len(
        gs.RequestEncoder(
            gs.load_schema(gs.compile_proto(KITCHEN), "proto", "x").pool.FindMessageTypeByName(
                "kitchen.Order"
            )
        ).encode(ORDER)
    )
    for name in ("h2", "grpcio"):
        case = cases[name]
        assert case.status == "ok" and case.errors == {} and case.ok == 40, case.reason
        assert case.bytes is not None
        assert case.bytes.out_per_request == case.bytes.in_per_request == size
    samples = {cases[n].error_samples["mismatch"] for n in ("h2 wrong", "grpcio wrong")}
    assert samples == {"address.geo.lng: expected 7.0, got -0.12"}
    assert all(cases[n].errors == {"mismatch": 40} for n in ("h2 wrong", "grpcio wrong"))
    schemas = result.environment.schemas
    assert schemas is not None and set(schemas) == set(cases)
    assert schemas["h2"].source == "proto" and schemas["h2"].call == "kitchen.Kitchen/Echo"
    assert len({s.sha256 for s in schemas.values()}) == 1


def test_reflection_over_tls_with_metadata(tmp_path: Path) -> None:
    """A server that refuses calls without its key, over TLS (the run's certificates): the
    reflection calls and the measured ones carry the same metadata and TLS; paths of the
    suite are relative to its file."""
    suite_file = tmp_path / "suite.toml"
    suite_file.write_text("")
    (tmp_path / "point.json").write_text(json.dumps(PATRIOTS))
    tls_server = server(
        "--reflection", "--api-key", "k1", "--cert", "{cert_file}", "--key", "{key_file}"
    )
    name = "Patriots Path, Mendham, NJ 07945, USA"
    call = {
        "reflection": True,
        "call": "routeguide.RouteGuide.GetFeature",
        "data_file": "point.json",
        "expect": {"name": name, "location": PATRIOTS},
        "metadata": {"x-api-key": "k1"},
    }
    result = run(
        {
            "target": {"driver": "grpc", "tls": True, "server": tls_server},
            "variants": {
                "h2": {"options": call},
                "grpcio": {"options": {**call, "client": "grpcio"}},
            },
            "workloads": {"get": {"kind": "noop"}},
        },
        suite_file,
    )
    for case in result.cases:
        assert case.status == "ok" and case.errors == {}, (case.variant, case.reason)
    schemas = result.environment.schemas
    assert schemas is not None
    assert schemas["h2"].source == "reflection"
    assert schemas["h2"].origin == "grpc.reflection.v1alpha"  # v1 first: grpcio serves v1alpha
    assert "route_guide.proto" in (schemas["h2"].files or [])
    # without the key the server refuses the reflection call itself: the run stops before a case
    bad = {**call, "metadata": {"x-api-key": "wrong"}}
    with pytest.raises(Exception, match="reflection service failed: UNAUTHENTICATED"):
        run(
            {
                "target": {"driver": "grpc", "tls": True, "server": tls_server},
                "variants": {"bad": {"options": bad}},
                "workloads": {"get": {"kind": "noop"}},
            },
            suite_file,
        )


@pytest.mark.parametrize(
    ("workload", "call", "expect"),
    [
        (
            {"kind": "stream", "mode": "server", "messages": 11},
            "routeguide.RouteGuide/ListFeatures",
            {"location": {}},
        ),
        (
            {"kind": "stream", "mode": "client", "messages": 5},
            "routeguide.RouteGuide/RecordRoute",
            {"point_count": 5, "feature_count": 5, "distance": 0},
        ),
        (
            {"kind": "stream", "mode": "bidi", "messages": 4},
            "routeguide.RouteGuide/RouteChat",
            {"message": "hi", "location": PATRIOTS},
        ),
    ],
)
def test_streaming_methods_run_the_stream_workload(
    workload: dict[str, Any], call: str, expect: dict[str, Any]
) -> None:
    data = {
        "routeguide.RouteGuide/ListFeatures": {
            "lo": {"latitude": 400000000, "longitude": -750000000},
            "hi": {"latitude": 420000000, "longitude": -730000000},
        },
        "routeguide.RouteGuide/RecordRoute": PATRIOTS,
        "routeguide.RouteGuide/RouteChat": {"message": "hi", "location": PATRIOTS},
    }[call]
    options = {"proto": str(ROUTE_GUIDE), "call": call, "data": data, "expect": expect}
    result = run(
        {
            "target": {"driver": "grpc", "server": server()},
            "variants": {
                "h2": {"options": options},
                "grpcio": {"options": {**options, "client": "grpcio"}},
            },
            "workloads": {"s": workload},
            "load": {"requests": 5, "warmup": 1, "concurrency": 2},
        }
    )
    for case in result.cases:
        assert case.status == "ok" and case.errors == {}, (case.variant, case.reason)
        replies = 1 if workload["mode"] == "client" else workload["messages"]
        assert case.stream is not None and case.stream.messages_in == 10 * replies


GOOD = f"""\
name = "x"
[target]
driver = "grpc"
server = {{ command = "{sys.executable} -m tests.support.schema_server --port {{port}}", cwd = "{ROOT}" }}
[workloads.get]
kind = "noop"
[load]
requests = 5
warmup = 0
[variants.v]
"""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            'proto = "bad.proto", call = "a.B/C"',
            'variants.v: options.proto: bad.proto: does not compile: bad.proto:2:25: Expected ";".',
        ),
        (
            f'proto = "{ROUTE_GUIDE}", call = "routeguide.RouteGuide/GetFeatures"',
            "variants.v: options.call: no method 'routeguide.RouteGuide/GetFeatures' in the "
            "schema (closest: routeguide.RouteGuide/GetFeature, ",
        ),
        (
            f'proto = "{ROUTE_GUIDE}", call = "routeguide.RouteGuide/GetFeature", '
            'data = { latitude = "abc" }',
            'variants.v: options.data.latitude: expected int32, got "abc"',
        ),
        (
            f'proto = "{ROUTE_GUIDE}", call = "routeguide.RouteGuide/GetFeature", '
            "expect = { location = { lat = 1 } }",
            "variants.v: options.expect.location.lat: routeguide.Point has no field 'lat'",
        ),
        (
            'protoset = "bad.proto", call = "a.B/C"',
            "variants.v: options.protoset: bad.proto: not a FileDescriptorSet",
        ),
        (
            f'proto = "{ROUTE_GUIDE}", call = "routeguide.RouteGuide/ListFeatures"',
            "workloads.get.kind: routeguide.RouteGuide/ListFeatures streams (server streaming): "
            'it runs workload kind "stream" with mode = "server", not \'noop\'',
        ),
        ('call = "a.B/C"', "options.call: needs a schema"),
        (f'proto = "{ROUTE_GUIDE}"', 'options.proto: name the method to call: call = "'),
        (
            f'proto = "{ROUTE_GUIDE}", call = "routeguide.RouteGuide/GetFeature", '
            'request_hex = "00"',
            "options.request_hex: a raw body or method does not go with call",
        ),
        ('reflection = true, protoset = "x", call = "a.B/C"', "give one schema: protoset or"),
        (
            f'proto = "{ROUTE_GUIDE}", call = "routeguide.RouteGuide/GetFeature", '
            'data_file = "nope.json"',
            "variants.v: options.data_file: no such file nope.json",
        ),
        (
            f'proto = "{ROUTE_GUIDE}", call = "routeguide.RouteGuide/GetFeature", '
            'data_file = "bad.proto"',
            "variants.v: options.data_file: bad.proto:1: not JSON: Expecting value (column 1)",
        ),
        ('protoset = "x", import_paths = ["."], call = "a.B/C"', "import_paths: only with proto"),
    ],
)
def test_suite_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: str, message: str
) -> None:
    (tmp_path / "bad.proto").write_text('syntax = "proto3";\nmessage A { int32 x = 1 }\n')
    suite = tmp_path / "s.toml"
    suite.write_text(GOOD + f"options = {{ {options} }}\n")
    assert main(["run", str(suite), "--no-store"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"rpcmeter: error: {suite}: "), err
    assert message in err, err


def test_a_server_without_reflection_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(
        GOOD + 'options = { reflection = true, call = "routeguide.RouteGuide/GetFeature" }\n'
    )
    assert main(["run", str(suite), "--no-store"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        f"rpcmeter: error: {suite}: variants.v: options.reflection: the server at 127.0.0.1:"
        + err[-1].split("127.0.0.1:")[1].split(" ")[0]
        + " has no reflection service (neither grpc.reflection.v1 nor v1alpha answers)"
    )


def test_describe_and_grpc_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(
        GOOD.replace("--port {port}", "--port {port} --reflection")
        + f'options = {{ proto = "{ROUTE_GUIDE}", call = "routeguide.RouteGuide/GetFeature" }}\n'
        + '[variants.r]\noptions = { reflection = true, call = "kitchen.Kitchen/Place" }\n'
    )
    plain = tmp_path / "plain.toml"
    plain.write_text(GOOD.replace("[variants.v]\n", ""))
    assert main(["describe", str(plain)]) == 0
    assert "no variant names a gRPC call from a schema" in capsys.readouterr().out
    assert main(["describe", str(suite)]) == 0
    out = capsys.readouterr().out
    assert f"variant 'v': proto {ROUTE_GUIDE}, sha256 " in out
    assert "variant 'r': reflection grpc.reflection.v1alpha, sha256 " in out
    assert "  GetFeature(routeguide.Point) returns (routeguide.Feature)  <- v\n" in out
    assert '    {"latitude": 0, "longitude": 0}\n' in out
    assert "  Place(kitchen.Order) returns (kitchen.Receipt)  <- r\n" in out
    endpoint = new_endpoint("tcp")
    command = expand_command(server("--reflection")["command"], endpoint, {})
    with ServerProcess(command, endpoint, cwd=str(ROOT), ready_timeout_s=60):
        address = f"127.0.0.1:{endpoint.port}"
        assert main(["grpc", "list", address]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"{address}: grpc.reflection.v1alpha, sha256 ")
        assert "  RecordRoute(stream routeguide.Point) returns (routeguide.RouteSummary)\n" in out
        assert main(["grpc", "list", address, "--tls"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"rpcmeter: error: grpc list {address}: no gRPC connection to")
        assert "the server does not speak TLS" in err.splitlines()[-1]


def test_placeholders_in_streaming_messages(tmp_path: Path) -> None:
    """A bidi stream whose note says ``n{{loop}}``, through the command line, with both clients:
    each stream's messages are made from its loop's values (the server echoes them), so loop 0's
    streams match an expect of "n0" and loop 1's do not; data files stream in turn too."""
    suite = tmp_path / "chat.toml"
    suite.write_text(
        f"""
name = "chat"
repeat = 1
[target]
driver = "grpc"
[target.server]
command = {json.dumps(server()["command"])}
cwd = {json.dumps(str(ROOT))}
ready_timeout_s = 60
[target.options]
proto = {json.dumps(str(ROUTE_GUIDE))}
call = "routeguide.RouteGuide/RouteChat"
data = {{ message = "n{{{{loop}}}}", location = {{ latitude = 1, longitude = 2 }} }}
expect = {{ message = "n0", location = {{ latitude = 1, longitude = 2 }} }}
[variants.h2]
[variants.grpcio]
options = {{ client = "grpcio" }}
[workloads.chat]
kind = "stream"
mode = "bidi"
messages = 3
[load]
requests = 4
warmup = 0
concurrency = 2
connections = 1
[resources]
idle_s = 0
"""
    )
    out = tmp_path / "chat.json"
    assert main(["run", str(suite), "-o", str(out), "--no-store"]) in (0, 1)  # half mismatch
    for case in json.loads(out.read_text())["cases"]:
        assert case["ok"] == 4 and case["errors"] == {"mismatch": 4}, (case["variant"], case)
        assert 'message: expected "n0", got "n1"' in case["error_samples"]["mismatch"]
        assert case["stream"]["messages_in"] == 3 * 4  # the loop-0 streams' replies
