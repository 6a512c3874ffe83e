"""What a variant runs against (rpcmeter.plan.targets.variant_target): the driver whose server
its cases start, its clients' class (the client path its options pick) and its target kind."""

from __future__ import annotations

from rpcmeter.drivers.http import HttpDriver
from rpcmeter.drivers.http2 import Http2Driver
from rpcmeter.drivers.rpyc import RpycDriver
from rpcmeter.plan.load import build_suite
from rpcmeter.plan.targets import CommandTarget, VariantTarget, variant_target


def test_a_client_path_picks_the_clients_class_not_the_servers() -> None:
    suite = build_suite(
        {
            "target": {"driver": "http"},
            "variants": {
                "h1": {},
                "h2": {"options": {"http": "2"}},
                "far": {"address": "127.0.0.1:1"},
            },
            "workloads": {"noop": {"kind": "noop"}},
        }
    )
    assert variant_target(suite, "h1") == VariantTarget(HttpDriver, HttpDriver, "server")
    assert variant_target(suite, "h2") == VariantTarget(Http2Driver, HttpDriver, "server")
    assert variant_target(suite, "far") == VariantTarget(HttpDriver, HttpDriver, "remote")


def test_a_whole_command_and_a_command_client() -> None:
    whole = build_suite({"target": {"driver": "command", "command": "true"}})
    assert variant_target(whole, "default") == VariantTarget(
        CommandTarget, CommandTarget, "command"
    )
    mixed = build_suite(
        {
            "target": {"driver": "rpyc"},
            "variants": {
                "rpcmeter": {},
                "client": {
                    "driver": "command",
                    "command": "true {host} {port}",
                    "requests_per_run": 1,
                },
            },
            "workloads": {"simple": {}},
        }
    )
    assert variant_target(mixed, "client") == VariantTarget(CommandTarget, RpycDriver, "client")
    assert variant_target(mixed, "rpcmeter") == VariantTarget(RpycDriver, RpycDriver, "server")
