"""examples/grpc-bench without its toolchains: the suite loads (and with --quick), every server's
build names inputs that exist (its cache key can be made), every gRPC variant is pinned as
grpc_bench pins its servers, and the request and the expected replies are grpc_bench's
complex_proto payload (checked with protoc and protobuf's JSON mapping where protoc exists).

Compiling the servers is not a test's job (CI has no Rust, Java or Go): a run of the suite does
that (README, "Study 001: gRPC servers side by side")."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.servers.build import request_of
from rpcmeter.suite import Suite, load_suite

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


def _message_class() -> Any:
    """helloworld.HelloRequest from the example's .proto (protoc's descriptor set)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    out = subprocess.run(
        [
            "protoc",
            "-I",
            str(EXAMPLE / "proto"),
            "--descriptor_set_out=/dev/stdout",
            "helloworld.proto",
        ],
        capture_output=True,
        check=True,
    ).stdout
    files = descriptor_pb2.FileDescriptorSet.FromString(out)
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("helloworld.HelloRequest"))


@pytest.mark.skipif(shutil.which("protoc") is None, reason="protoc is not installed")
def test_the_request_and_the_replies_are_the_complex_proto_payload(suite: Suite) -> None:
    from google.protobuf import json_format

    cls = _message_class()
    payload = json_format.Parse((EXAMPLE / "payload.json").read_text(), cls())
    assert payload.request.pets[1].name == "Kim the cat"
    request = bytes.fromhex(suite.target.options["request_hex"])
    assert cls.FromString(request) == payload
    assert request == payload.SerializeToString(deterministic=True)
    for name in SERVERS:  # each expected reply: the same message (in its encoder's order)
        options = {**suite.target.options, **suite.variants[name].options}
        assert cls.FromString(bytes.fromhex(options["expect_hex"])) == payload
    assert json.loads((EXAMPLE / "payload.json").read_text())["request"]["l"] == 444325235223
