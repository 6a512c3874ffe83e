"""``rpcmeter grpc ADDRESS METHOD`` (ghz's flags), ``grpc call`` and ``grpc describe``
(grpcurl's verbs), run through the command line against a server whose schema rpcmeter has no
.proto for (``tests/support/schema_server.py``, asked by reflection) and the built-in gRPC
server (no reflection)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rpcmeter.cli import main
from rpcmeter.cli.app import build_parser
from rpcmeter.cli.grpc_oneline import implicit_load, suite_of
from rpcmeter.cli.oneline import build
from rpcmeter.drivers import driver_class
from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import load_suite
from rpcmeter.servers.process import ServerProcess, new_endpoint

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
ROUTE_GUIDE = ROOT / "benchmarks" / "greeter" / "route_guide.proto"
FEATURE = "routeguide.RouteGuide/GetFeature"
PATRIOTS = '{"latitude": 407838351, "longitude": -746143763}'
QUIET = ["--no-store", "--no-live", "--warmup", "1"]


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    """The schema server with reflection: rpcmeter is given no .proto for it. A process of the
    test's own (a run stops the servers it knows of), which says its port once it serves."""
    command = [sys.executable, "-m", "tests.support.schema_server", "--port", "0", "--reflection"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "listening PORT", or "" if it died
        assert line.startswith("listening "), line
        yield f"127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_load_command_is_implicit() -> None:
    assert implicit_load(["grpc", "h:1", "a.B/C"]) == ["grpc", "load", "h:1", "a.B/C"]
    assert implicit_load(["grpc", "--call", "a.B/C", "h:1"])[:2] == ["grpc", "load"]
    for verb in ("list", "call", "describe", "load", "-h"):
        assert implicit_load(["grpc", verb, "x"]) == ["grpc", verb, "x"]
    assert implicit_load(["http", "h:1"]) == ["http", "h:1"]


def test_load_by_reflection_with_placeholders_and_expect(
    address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = '{"latitude": "{{request_number}}", "longitude": -746143763}'
    argv = ["grpc", address, FEATURE, "-d", data, "-c", "2", "-n", "40", *QUIET]
    status = main([*argv, "--expect", "location.latitude={{request_number}}"])
    captured = capsys.readouterr()
    assert status == 0, captured
    assert "2 in flight · 40 requests" in captured.out
    assert "40 ok, 0 failed" in captured.out and "[OK] 40 replies" in captured.out
    assert "Latency histogram (each row: the requests up to its latency):" in captured.out
    assert "asking its server (grpc reflection)" in captured.err
    # a reply that differs from --expect is a mismatch, with its sample
    status = main([*argv, "--expect", "name=nowhere"])
    out, err = capsys.readouterr()
    assert status == 1, err  # every reply differed: the case failed
    assert "40 mismatch" in out and "name: expected" in out


def test_several_addresses_compare(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "grpc",
            "--call",
            FEATURE,
            "--address",
            f"one={address}",
            "--address",
            f"two={address}",
            "-d",
            PATRIOTS,
            "-c",
            "2",
            "-n",
            "20",
            "--repeat",
            "1",
            *QUIET,
        ]
    )
    captured = capsys.readouterr()
    assert status == 0, captured
    assert "--repeat 1 is too few repetitions for a verdict" in captured.err
    assert "2 cases" in captured.out and "one" in captured.out and "two" in captured.out


def test_a_server_stream_runs_as_many_replies_as_it_sends(
    address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rect = '{"lo": {"latitude": 400000000, "longitude": -750000000}, '
    rect += '"hi": {"latitude": 420000000, "longitude": -730000000}}'
    argv = ["grpc", address, "routeguide.RouteGuide.ListFeatures", "-d", rect, "-c", "2"]
    status = main([*argv, "-n", "10", *QUIET])
    captured = capsys.readouterr()
    assert status == 0, captured
    assert "ListFeatures streams 11 replies to this request (one call asked)" in captured.err
    assert "10 ok, 0 failed" in captured.out


def test_saved_suite_plans_the_same_cases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From a .proto: no server is asked while the suite is made."""
    saved = tmp_path / "g.toml"
    argv = [
        "grpc",
        "a=127.0.0.1:9",
        "b=127.0.0.1:10",
        FEATURE,
        "--proto",
        str(ROUTE_GUIDE),
        "-d",
        PATRIOTS,
        "-m",
        '{"X-Api-Key": "k"}',
        "--expect",
        "location.latitude=407838351",
        "-c",
        "8",
        "--connections",
        "2",
        "-z",
        "2s",
        "--save-suite",
        str(saved),
        "--dry-run",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out == saved.read_text()
    suite = load_suite(saved)
    assert list(suite.variants) == ["a", "b"] and suite.repeat == 5
    assert suite.load.concurrency == 8 and suite.load.connections == 2
    assert suite.load.duration_s == 2.0
    opts = suite.options_of("a")
    assert opts["call"] == FEATURE and opts["proto"] == str(ROUTE_GUIDE)
    assert opts["metadata"] == {"x-api-key": "k"}
    assert opts["expect"] == {"location": {"latitude": 407838351}}
    args = build_parser().parse_args(implicit_load(argv))
    raw, command = suite_of(args, argv[1:])
    own, _ = build(raw, "rpcmeter grpc", command)
    assert expand(own) == expand(suite)
    assert own.variants == suite.variants and own.target == suite.target


def test_call_prints_the_reply_as_json(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grpc", "call", address, FEATURE, "-d", PATRIOTS]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "OK" and doc["method"] == FEATURE
    assert doc["reply"]["name"] == "Patriots Path, Mendham, NJ 07945, USA"
    assert doc["reply"]["location"] == {"latitude": 407838351, "longitude": -746143763}
    assert doc["time_ms"] > 0 and isinstance(doc["trailers"], dict)
    # a bidi stream: one reply per note sent
    notes = '[{"message": "a"}, {"message": "b"}]'
    assert main(["grpc", "call", address, "routeguide.RouteGuide/RouteChat", "-d", notes]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["message"] for r in doc["replies"]] == ["a", "b"]


def test_describe_a_method_a_message_and_the_services(
    address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["grpc", "describe", address, FEATURE]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["streaming"] == "unary"
    assert doc["input"] == {
        "message": "routeguide.Point",
        "fields": {"latitude": "int32", "longitude": "int32"},
    }
    assert doc["output"]["fields"]["location"] == {"latitude": "int32", "longitude": "int32"}
    assert main(["grpc", "describe", address, "kitchen.Order"]) == 0
    fields = json.loads(capsys.readouterr().out)["fields"]
    assert fields["card"] == "string (oneof payment)"
    assert fields["counts"] == {"<string>": "int32"}
    assert fields["items"][0]["size"] == "enum kitchen.Size (SIZE_UNSPECIFIED, SMALL, LARGE)"
    assert main(["grpc", "describe", address]) == 0
    services = json.loads(capsys.readouterr().out)["services"]
    assert (
        "RecordRoute(stream routeguide.Point) returns (routeguide.RouteSummary)"
        in (services["routeguide.RouteGuide"])
    )
    assert main(["grpc", "describe", address, "kitchen.Ordr"]) == 2
    err = capsys.readouterr().err
    assert "no service, method or message 'kitchen.Ordr' (closest: kitchen.Order" in err


def test_the_builtin_server_has_no_reflection(capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = new_endpoint("tcp")
    command = driver_class("grpc").server_command(endpoint, {})
    with ServerProcess(command, endpoint, ready_timeout_s=60):
        address = f"127.0.0.1:{endpoint.port}"
        assert main(["grpc", address, "rpcmeter.Bench/Noop", "-n", "10", "--no-store"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rpcmeter: error: {address}: the server at {address} has no ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["h:1", FEATURE, "-d", "{nope"], "-d '{nope': not JSON"),
        (["h:1", FEATURE, "--expect", "name"], "--expect 'name': expected FIELD=VALUE"),
        (["h:1", FEATURE, "-m", "novalue"], "-m 'novalue': expected KEY=VALUE"),
        (["h:1", FEATURE, "--cert", "c.pem"], "--cert and --key go together"),
        (["h:1", FEATURE, "-z", "soon"], "argument -z/--duration: not a duration"),
        (["h", FEATURE], "expected 'host:port' or a Unix socket path, got 'h'"),
        (["h:1", "nomethod"], "'nomethod' is no method"),
        (["--call", FEATURE], "no address to call"),
        (["h:1", FEATURE, "--bogus"], "grpc: unrecognized arguments: --bogus (see rpcmeter grpc"),
        (["h:1", FEATURE, "--proto", "missing.proto"], "--proto missing.proto: no such file"),
    ],
)
def test_usage_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any connection: no server listens at these addresses."""
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["grpc", *argv, "--no-store"]))
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith("rpcmeter: error: ") and message in err, err
    assert err.count("\n") == 1


def test_a_request_that_does_not_fit_the_method_names_its_flag(
    address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked against the schema the server gives, before the run starts."""
    argv = ["grpc", address, FEATURE, "--no-store"]
    assert main([*argv, "-d", '{"latitude": "north"}']) == 2
    err = capsys.readouterr().err
    assert err == 'rpcmeter: error: -d: latitude: expected int32, got "north"\n'
    assert main([*argv, "--expect", "location.lat=3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rpcmeter: error: --expect: location.lat: routeguide.Point has no ")
    assert main(["grpc", address, f"{FEATURE}s", "--no-store"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rpcmeter: error: no method 'routeguide.RouteGuide/GetFeatures' in ")
    assert "(closest: routeguide.RouteGuide/GetFeature" in err
