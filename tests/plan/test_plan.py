from __future__ import annotations

from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import build_suite


def suite(**extra: object):  # type: ignore[no-untyped-def]
    raw = {
        "variants": {"a": {}, "b": {"options": {"bind_threads": True}}},
        "workloads": {"simple": {}, "deep": {"kind": "callback", "depth": 3, "requests": 7}},
        "load": {"requests": 50, "warmup": 2},
        "matrix": {"threads": [1, 4], "clients": [1, 2]},
        "repeat": 2,
    }
    raw.update(extra)
    return build_suite(raw)


def test_cases_are_interleaved_across_variants() -> None:
    cases = expand(suite())
    assert len(cases) == 2 * 2 * 4 * 2
    assert [c.variant for c in cases[:6]] == ["a", "b", "a", "b", "a", "b"]
    assert [c.index for c in cases] == list(range(len(cases)))
    # repetitions outermost: the second half repeats the first
    assert [(c.workload, c.point, c.variant) for c in cases[:16]] == [
        (c.workload, c.point, c.variant) for c in cases[16:]
    ]
    assert {c.repetition for c in cases[16:]} == {1}


def test_matrix_sets_load_and_workload_values() -> None:
    cases = expand(
        suite(matrix={"threads": [4], "depth": [1, 2]}, workloads={"cb": {"kind": "callback"}})
    )
    assert [c.params.depth for c in cases] == [1, 1, 2, 2, 1, 1, 2, 2]  # type: ignore[attr-defined]
    assert all(c.load.threads == 4 for c in cases)
    assert cases[0].params_dict()["threads"] == 4 and cases[0].params_dict()["depth"] == 1


def test_workload_count_overrides_suite_duration() -> None:
    cases = expand(suite(load={"duration_s": 3.0}))
    simple = next(c for c in cases if c.workload == "simple")
    deep = next(c for c in cases if c.workload == "deep")
    assert simple.load.duration_s == 3.0
    assert deep.load.duration_s is None and deep.load.requests == 7
    assert "requests_per_thread" in deep.params_dict() and "duration_s" in simple.params_dict()


def test_a_workload_may_set_any_load_value() -> None:
    cases = expand(
        suite(
            workloads={"big": {"kind": "callback", "threads": 1, "clients": 3, "requests": 1}},
            matrix={},
        )
    )
    assert {(c.load.threads, c.load.clients, c.load.requests) for c in cases} == {(1, 3, 1)}
    assert cases[0].params_dict()["depth"] == 1 and "threads" not in cases[0].params.model_dump()
