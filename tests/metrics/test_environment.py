"""Environment capture: what a run depends on is recorded."""

from __future__ import annotations

from rpcmeter.metrics import environment
from rpcmeter.suite import build_suite


def test_capture_records_machine_settings() -> None:
    env = environment.capture(("rpyc",))
    for key in ("kernel", "cpu_governor", "cpuidle_driver", "load_average", "virtualization"):
        assert key in env
    assert env["packages"]["rpyc"]
    assert env["load_average"] is None or len(env["load_average"]) == 3
    assert set(env["virtualization"]) == {"detect_virt", "hypervisor_flag", "product_name"}


def test_capture_suite_resolves_names_and_records_variant_packages() -> None:
    suite = build_suite(
        {
            "target": {"host": "127.0.0.1"},
            "variants": {"a": {}, "b": {"host": "localhost"}},
            "workloads": {"simple": {}},
        }
    )
    extra = environment.capture_suite(suite, {"a": ("rpyc",), "b": ("rpyc",)})
    assert list(extra["resolved_hosts"]) == ["localhost"]  # addresses need no resolving
    assert extra["resolved_hosts"]["localhost"]
    assert extra["variant_packages"]["a"]["rpyc"] == environment.package_version("rpyc")
    assert environment.is_address("::1") and not environment.is_address("localhost")
