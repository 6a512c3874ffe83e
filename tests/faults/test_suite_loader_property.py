"""Property: whatever a suite file holds, and whatever ``--set`` says, loading it gives a suite or
one SuiteError, never another exception (hypothesis)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpcmeter.errors import SuiteError
from rpcmeter.plan.load import build_suite, load_suite

KEYS = [
    "name", "repeat", "seed", "target", "driver", "transport", "host", "address", "server",
    "command", "env", "cwd", "options", "variants", "workloads", "kind", "load", "requests",
    "duration_s", "warmup", "timeout_s", "rate", "rates", "mode", "clients", "threads",
    "matrix", "quick", "resources", "idle_s", "placement", "breakdown", "runs", "sweep", "from",
    "to", "steps", "ready_timeout_s", "python", "install", "git", "concurrency", "connections",
]  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["http", "raw", "zmq", "rpyc", "grpc", "command", "tcp", "unix", "open"])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=25,
)
TABLES = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def loads(build: Any) -> None:
    try:
        build()
    except SuiteError as exc:
        assert str(exc)  # the command line shows it on one line (tests/faults/test_bad_inputs)


@SETTINGS
@given(raw=TABLES, quick=st.booleans())
def test_any_mapping_gives_a_suite_or_a_suite_error(raw: dict[str, Any], quick: bool) -> None:
    loads(lambda: build_suite(raw, "<s>", quick=quick))


@SETTINGS
@given(assignments=st.lists(st.text(max_size=30), max_size=3), quick=st.booleans())
def test_any_set_value_gives_a_suite_or_a_suite_error(assignments: list[str], quick: bool) -> None:
    loads(lambda: build_suite({"target": {"driver": "http"}}, "<s>", assignments, quick))


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("suites") / "suite.toml"


@SETTINGS
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8")))
def test_any_file_gives_a_suite_or_a_suite_error(suite_file: Path, data: bytes) -> None:
    suite_file.write_bytes(data)
    loads(lambda: load_suite(suite_file))


@SETTINGS
@given(raw=TABLES)
def test_any_toml_document_gives_a_suite_or_a_suite_error(
    suite_file: Path, raw: dict[str, Any]
) -> None:
    text = "\n".join(f"{k} = {toml_value(v)}" for k, v in raw.items())
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return  # a value TOML cannot hold (None); the mapping test covers the rest
    suite_file.write_text(text, encoding="utf-8")
    loads(lambda: load_suite(suite_file))


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    if isinstance(value, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(value), repr(value))
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {toml_value(v)}' for k, v in value.items()) + "}"
    return "null" if value is None else str(value)
