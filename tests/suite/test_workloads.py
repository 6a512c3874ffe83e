"""Study 000's random wait: its arithmetic, and the seeded sequence replayed without a transport."""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

import pytest

from rpcmeter.suite.workloads import (
    RandomWaitMismatch,
    RandomWaitParams,
    random_wait_expected_calls,
    random_wait_expected_s,
    random_wait_level,
    random_wait_replay,
)

STUDY_SEED = 4093473691


def test_expected_sleep_and_calls_follow_the_recurrence() -> None:
    # the study's defaults: pauses of 5 ms on average; 5 ms at depth 2, 5 + (10 + 5) / 2 ... ms
    study = RandomWaitParams()
    assert random_wait_expected_s(study) == pytest.approx(0.0125)
    assert random_wait_expected_calls(study) == pytest.approx(1.75)
    # one level never calls: one pause, one call
    flat = RandomWaitParams(delay_s=0.02, max_depth=0)
    assert random_wait_expected_s(flat) == pytest.approx(0.01)
    assert random_wait_expected_calls(flat) == 1.0
    # always calling, always waiting: 2 * depth + 1 pauses, depth + 1 calls
    full = RandomWaitParams(delay_s=0.002, sub_p=1.0, max_depth=3)
    assert random_wait_expected_s(full) == pytest.approx(7 * 0.001)
    assert random_wait_expected_calls(full) == 4.0
    # delay_p scales every pause
    assert random_wait_expected_s(RandomWaitParams(delay_p=0.5)) == pytest.approx(0.00625)


def study_replay(p: RandomWaitParams, seed: int, thread: int, requests: int) -> list[float]:
    """The study's benchmark.py transcribed (its _wait, _sub and _validate, its seeding): the list
    of sleeps its sequence makes, in order."""
    sleeps: list[float] = []
    server = random.Random(seed + thread)
    client = random.Random(seed + 1000 + thread)

    def wait(r: random.Random) -> None:
        if r.random() < p.delay_p:
            sleeps.append(r.uniform(0, p.delay_s))

    def sub(depth: int, r: random.Random) -> bool:
        return depth < p.max_depth and r.random() < p.sub_p

    def validate(fn: Any, r: random.Random, args: tuple[int]) -> None:
        expected = r.random()
        assert fn(expected, *args) == expected

    def side(r: random.Random) -> Any:
        def level(argument: float, depth: int) -> float:
            wait(r)
            if sub(depth, r):
                validate(other[r is server], r, (depth + 1,))
                wait(r)
            return argument

        return level

    other = {True: side(client), False: side(server)}  # who a level calls: server -> client
    for _ in range(requests):
        validate(other[False], client, (0,))
    return sleeps


@pytest.mark.parametrize("thread", [0, 3])
def test_replay_makes_the_studys_sleeps_in_the_studys_order(thread: int) -> None:
    p = RandomWaitParams()
    sleeps: list[float] = []

    # the same walk as random_wait_replay, keeping each sleep instead of summing
    rngs = (random.Random(STUDY_SEED + thread), random.Random(STUDY_SEED + 1000 + thread))

    def call(value: float, depth: int) -> float:
        random_wait_level(rngs[depth % 2], p, depth, call, sleeps.append)
        return value

    for _ in range(300):
        call(rngs[1].random(), 0)
    assert sleeps == study_replay(p, STUDY_SEED, thread, 300)
    slept, _ = random_wait_replay(p, STUDY_SEED, thread, 300)
    assert slept == pytest.approx(math.fsum(sleeps))


def test_mean_sleep_per_request_of_the_seeded_sequence_matches_the_arithmetic() -> None:
    p = RandomWaitParams()
    expected_s = random_wait_expected_s(p)
    # one request's sleep varies by about 9 ms; over 40 threads of 1,000 requests the standard
    # error of the mean is under 0.05 ms, so 2 % is more than four of them
    totals = [random_wait_replay(p, STUDY_SEED, t, 1000) for t in range(40)]
    mean_s = math.fsum(s for s, _ in totals) / 40_000
    mean_calls = sum(c for _, c in totals) / 40_000
    assert mean_s == pytest.approx(expected_s, rel=0.02)
    assert mean_calls == pytest.approx(random_wait_expected_calls(p), rel=0.02)
    # each thread of the study's run (n = 1000) is within four standard errors of it
    spread = statistics.stdev(random_wait_replay(p, s, 0, 1)[0] for s in range(2000))
    for slept, _ in totals[:4]:
        assert abs(slept / 1000 - expected_s) < 4 * spread / math.sqrt(1000)
    # the sequence before study 000 was reproduced (no pause after a nested call) slept 30 % less
    assert mean_s > 1.3 * 0.00875


def test_a_nested_call_returning_another_value_is_a_mismatch() -> None:
    p = RandomWaitParams(delay_s=0.0, sub_p=1.0, max_depth=1)
    with pytest.raises(RandomWaitMismatch, match="depth 1"):
        random_wait_level(random.Random(1), p, 0, lambda value, depth: value + 1, lambda s: None)
