"""A run's plan (rpcmeter.plan.run): everything is settled before the first case. The plan holds
every case and each variant's plan before the document is written; preparation then gives each
variant its environment, its server's build and what its clients are handed, in that order,
before any case runs."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, ClassVar

from rpcmeter.drivers.rpyc import RpycDriver
from rpcmeter.host.envs import Env
from rpcmeter.plan.cases import Case, expand
from rpcmeter.plan.load import build_suite
from rpcmeter.plan.run import Prepared, plan_run, prepare
from rpcmeter.suite.model import Suite


class AskingDriver(RpycDriver):
    """A driver whose variants ask their server before the cases (as gRPC reflection does)
    when their options say ``ask = true``."""

    option_keys: ClassVar[frozenset[str] | None] = None

    @classmethod
    def asks_server(cls, options: Mapping[str, Any]) -> bool:
        return bool(options.get("ask"))

    @classmethod
    def describe_prepared(cls, prepared: Mapping[str, Any]) -> dict[str, Any] | None:
        return {"answer": prepared["answer"]} if "answer" in prepared else None


def two_variants(**target: Any) -> Suite:
    return build_suite(
        {
            "target": target,
            "variants": {"own": {"python": sys.executable}, "host": {}},
            "workloads": {"simple": {}, "noop": {"kind": "noop"}},
            "load": {"requests": 10, "warmup": 0},
            "repeat": 2,
        }
    )


def test_the_plan_holds_every_case_and_each_variants_plan() -> None:
    suite = two_variants()
    plan = plan_run(suite, cgroups=False)
    try:
        assert list(plan.plans) == ["own", "host"]
        assert [(c.index, c.variant, c.workload) for c in plan.cases] == [
            (c.index, c.variant, c.workload) for c in expand(suite)
        ]
        first = plan.first_cases()
        assert {v: c.index for v, c in first.items()} == {"own": 0, "host": 1}
        assert plan.managed("own") and plan.managed("host")
    finally:
        plan.close()


def test_each_variant_gets_its_environment_before_the_first_case() -> None:
    plan = plan_run(two_variants(), cgroups=False)
    notes: list[tuple[str, str]] = []
    asked: list[Case] = []

    def ask(case: Case) -> Mapping[str, Any]:
        asked.append(case)
        return {}

    prepared = Prepared()
    try:
        prepare(plan, prepared, lambda v, m: notes.append((v, m)), ask)
    finally:
        plan.close()
    env = prepared.envs["own"]
    assert list(prepared.envs) == ["own"]  # the other variant runs in rpcmeter's own Python
    assert isinstance(env, Env) and env.python == sys.executable and env.packages
    assert ("own", f"preparing environment: python {sys.executable}") in notes
    assert prepared.builds == {} and prepared.calls == {} and prepared.schemas == {}
    assert asked == []  # rpyc asks its server nothing


def test_a_driver_that_asks_its_server_is_asked_once_with_the_first_case() -> None:
    suite = two_variants(driver=f"{__name__}:AskingDriver", options={"ask": True})
    plan = plan_run(suite, cgroups=False)
    notes: list[tuple[str, str]] = []
    asked: list[Case] = []

    def ask(case: Case) -> Mapping[str, Any]:
        asked.append(case)
        return {"answer": case.variant}

    prepared = Prepared()
    try:
        prepare(plan, prepared, lambda v, m: notes.append((v, m)), ask, environments=False)
    finally:
        plan.close()
    assert [(c.index, c.variant) for c in asked] == [(0, "own"), (1, "host")]
    assert prepared.calls == {"own": {"answer": "own"}, "host": {"answer": "host"}}
    assert prepared.schemas == {"own": {"answer": "own"}, "host": {"answer": "host"}}
    assert ("host", "asking its server (rpyc reflection)") in notes
    assert prepared.envs == {}  # environments=False: rpcmeter's own Python (rpcmeter describe)
