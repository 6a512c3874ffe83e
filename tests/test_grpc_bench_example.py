"""examples/grpc-bench without its toolchains: the suite loads (and with --quick), every server's
build names inputs that exist (its cache key can be made), every gRPC variant is pinned as
grpc_bench pins its servers, and the request and the expected replies are grpc_bench's
complex_proto payload, every reply checked field by field (whichever order a server's encoder
writes them in).

Compiling the servers is not a test's job (CI has no Rust, Java or Go): a run of the suite does
that (docs/protocols/grpc-servers.md, "Study 001: gRPC servers side by side")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.host.build import request_of
from rpcmeter.plan.load import load_suite
from rpcmeter.suite.model import Suite

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "grpc-bench"
SERVERS = [
    "cpp-grpc",
    "rust-tonic",
    "go-grpc",
    "java-grpc-netty",
    "node-grpc-js",
    "python-grpc-aio",
]


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite(EXAMPLE / "suite.toml")


def test_six_servers_each_with_ghz_beside_it(suite: Suite) -> None:
    assert list(suite.variants) == [*SERVERS, *(f"{s} (ghz)" for s in SERVERS)]
    for name in SERVERS:
        ghz = suite.variants[f"{name} (ghz)"]
        assert ghz.client_report == "ghz" and suite.command_client(f"{name} (ghz)")
        assert ghz.server == suite.variants[name].server  # the same server, and the same build
        assert ghz.install == suite.variants[name].install


def test_pinned_as_grpc_bench_runs_them(suite: Suite) -> None:
    assert suite.placement.server_cpus == 1 and suite.placement.client_cpus == 1
    assert suite.placement.server_memory == 512 << 20
    assert (suite.load.connections, suite.load.concurrency) == (50, 1000)
    assert suite.load.duration_s == 20 and suite.validate_replies
    quick = load_suite(EXAMPLE / "suite.toml", quick=True)
    assert (quick.load.connections, quick.load.concurrency, quick.load.duration_s) == (50, 200, 3)


def test_every_build_names_inputs_that_exist(suite: Suite) -> None:
    for name in SERVERS:
        req = request_of(suite, suite.server_of(name), None)
        assert req is not None and req.cwd.is_dir()
        _, count = req.inputs_hash()  # a pattern that matches no file raises
        assert count >= 1


# the reply of every server but Go's (fields in number order) and of Go's (the oneof field c1
# after the repeated pets): the same message in two byte orders, as the servers sent them
CANONICAL = (
    "0a4c0a0661206e616d651111e4a084993612401dcd4c684320012820309794e49ef70c3a076f66636f7573654a0f"
    "0a0b426f662074686520646f6710024a0f0a0b4b696d20746865206361741003"
)
GO_ORDER = (
    "0a4c0a0661206e616d651111e4a084993612401dcd4c684320012820309794e49ef70c4a0f0a0b426f6620746865"
    "20646f6710024a0f0a0b4b696d207468652063617410033a076f66636f757365"
)


def test_the_request_is_the_complex_proto_payload_and_replies_are_checked_field_by_field(
    suite: Suite,
) -> None:
    call = suite.prepared["go-grpc"]["grpc_call"]
    assert call.path == "/helloworld.Greeter/SayHello"
    assert call.request.hex() == CANONICAL  # HelloRequest{request} and HelloReply{response}: 1
    check = call.reply_check()
    assert check is not None
    assert check.problem(bytes.fromhex(CANONICAL)) is None
    assert check.problem(bytes.fromhex(GO_ORDER)) is None  # the same fields, another order
    other = bytes.fromhex(CANONICAL.replace("1003", "1004"))  # Kim the cat turned YELLOW
    assert check.problem(other) is not None
    payload = json.loads((EXAMPLE / "payload.json").read_text())["request"]
    options: dict[str, Any] = dict(suite.target.options)
    assert options["expect"]["response"] == payload  # the reply: the request back
