from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rpcmeter.errors import SuiteError
from rpcmeter.plan.load import apply_set, build_suite, builtin_suite_path, load_suite, split_key

GOOD = """
name = "t"
[target]
driver = "rpyc"
transport = "unix"
[variants.default]
[variants.bind]
options = { bind_threads = true }
[workloads.simple]
[workloads."sub 2"]
kind = "callback"
depth = 2
[load]
requests = 100
[matrix]
threads = [1, 4]
clients = [1, 4]
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "suite.toml"
    p.write_text(text)
    return p


def error_of(tmp_path: Path, text: str, *overrides: str, where: str | None = None) -> str:
    p = write(tmp_path, text)
    with pytest.raises(SuiteError) as info:
        load_suite(p, list(overrides))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(where or str(p))
    return message


def test_good_suite_loads(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, GOOD))
    assert list(suite.variants) == ["default", "bind"]
    assert suite.baseline_variant == "default"
    assert suite.workloads["sub 2"].kind == "callback"
    assert suite.workloads["simple"].kind == "simple"
    assert suite.matrix == {"threads": [1, 4], "clients": [1, 4]}
    assert len(suite.source_hash) == 64


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD.replace("requests = 100", "requests = 0"),
            "load.requests: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            GOOD.replace("requests = 100", "requests = 'many'"),
            "load.requests: Input should be a valid integer",
        ),
        (GOOD.replace("requests = 100", "requets = 100"), "load.requets: unknown key"),
        (
            GOOD.replace('driver = "rpyc"', 'driver = "corba"'),
            "target.driver: unknown driver 'corba'",
        ),
        (
            GOOD.replace('transport = "unix"', 'transport = "udp"'),
            "target.transport: driver 'rpyc' has no transport 'udp'",
        ),
        (
            GOOD.replace('kind = "callback"', 'kind = "teleport"'),
            "workloads.\"sub 2\".kind: unknown workload kind 'teleport'",
        ),
        (
            GOOD.replace('kind = "callback"', 'kind = "factorial"'),
            "driver 'rpyc' cannot run workload 'factorial'",
        ),
        (
            GOOD.replace("depth = 2", "depth = 0"),
            'workloads."sub 2".depth: Input should be greater than or equal to 1',
        ),
        (
            GOOD.replace("clients = [1, 4]", "clientz = [1, 4]"),
            "matrix.clientz: not a load setting",
        ),
        (GOOD.replace("clients = [1, 4]", "clients = [1, 0]"), "matrix.clients: "),
        ('baseline = "nope"\n' + GOOD, "baseline: no variant named 'nope'"),
        (
            GOOD.replace("[load]", "[load]\nconnections = 5\nconcurrency = 2"),
            "concurrency (2) must be at least connections (5)",
        ),
        ("name = [", "invalid TOML"),
        (
            GOOD.replace("bind_threads = true", "bind_thread = true"),
            "variants.bind.options.bind_thread: driver 'rpyc' has no option 'bind_thread' "
            "(did you mean 'bind_threads'? its options: background, bind_threads,",
        ),
        (
            GOOD.replace("[variants.default]", "[target.options]\nstal_ms = 5\n[variants.default]"),
            "target.options.stal_ms: driver 'rpyc' has no option 'stal_ms' (did you mean 'stall_ms'?",
        ),
        (
            '[target]\ndriver = "command"\ncommand = "true"\n[load]\nmode = "open"\nrate = 9\n',
            "load.mode: driver 'command' cannot send requests on a schedule (open loop)",
        ),
        (
            GOOD.replace('driver = "rpyc"', 'driver = "tests.support.incomplete_drivers:Nameless"'),
            "target.driver: driver 'tests.support.incomplete_drivers:Nameless' has no name: "
            'set its class attribute, e.g. name = "nameless"',
        ),
        (
            GOOD.replace(
                'driver = "rpyc"', 'driver = "tests.support.incomplete_drivers:NoWorkloads"'
            ),
            "declares no workload it can send: set its class attribute, "
            'e.g. workloads = frozenset({"noop", "echo"})',
        ),
    ],
)
def test_errors_name_file_key_and_value(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in error_of(tmp_path, text)


def test_missing_file() -> None:
    with pytest.raises(SuiteError, match="no such suite file"):
        load_suite("/nonexistent/suite.toml")


def test_set_overrides_dotted_and_quoted(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD)
    suite = load_suite(
        p,
        [
            "load.requests=5",
            "matrix.threads=[2]",
            'workloads."sub 2".depth=3',
            "seed=42",
            "validate=true",
            "name=plain text",
        ],
    )
    assert suite.load.requests == 5
    assert suite.matrix["threads"] == [2]
    assert suite.workload_params("sub 2").depth == 3  # type: ignore[attr-defined]
    assert suite.seed == 42 and suite.validate_replies is True
    assert suite.name == "plain text"


def test_set_replaces_one_way_of_giving_rates_with_another() -> None:
    example = Path(__file__).parents[2] / "examples" / "latency-vs-rate.toml"
    assert len(load_suite(example).matrix["rate"]) == 7  # its load.sweep
    suite = load_suite(example, ["load.rates=[1000, 3000]"])
    assert suite.load.sweep is None and suite.matrix["rate"] == [1000, 3000]
    # over the suite's [quick] values too (they set load.sweep)
    suite = load_suite(example, ["load.rates=[1000, 3000]"], quick=True)
    assert suite.matrix["rate"] == [1000, 3000] and suite.load.duration_s == 1.0
    assert load_suite(example, quick=True).matrix["rate"] == [2000, 4000]
    suite = load_suite(example, ["matrix.rate=[500]"])
    assert suite.load.sweep is None and suite.matrix["rate"] == [500]
    suite = load_suite(example, ["load.rates=[1000]", "load.sweep={from=1, to=3, steps=3}"])
    assert suite.load.rates is None and suite.matrix["rate"] == [1, 2, 3]


def test_set_errors(tmp_path: Path) -> None:
    assert "expected KEY=VALUE" in error_of(tmp_path, GOOD, "load.requests", where="--set")
    assert "'name' is a value, not a table" in error_of(tmp_path, GOOD, "name.x=1", where="--set")
    assert "load.requests: Input should be a valid integer" in error_of(
        tmp_path, GOOD, "load.requests=abc"
    )


def test_split_key() -> None:
    assert split_key('workloads."random wait".n') == ["workloads", "random wait", "n"]
    assert split_key("a.'b.c'.d") == ["a", "b.c", "d"]


def test_quick_caps_counts_and_repetitions(tmp_path: Path) -> None:
    text = "repeat = 7\n" + GOOD.replace(
        "requests = 100", "requests = 100000\nwarmup = 1000\nduration_s = 30"
    )
    text += '[quick]\n"matrix.threads" = [1]\n'
    suite = load_suite(write(tmp_path, text), quick=True)
    assert suite.repeat == 1
    assert suite.load.requests <= 200 and suite.load.warmup <= 5 and suite.load.duration_s == 1.0
    assert suite.matrix["threads"] == [1]  # the suite's own quick overrides


def test_workload_selection(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, GOOD), only_workloads=["sub 2"])
    assert list(suite.workloads) == ["sub 2"]
    with pytest.raises(SuiteError, match="no workload named 'nope'"):
        load_suite(write(tmp_path, GOOD), only_workloads=["nope"])


def test_apply_set_creates_tables() -> None:
    raw: dict[str, object] = {}
    apply_set(raw, "variants.default.options.bind_threads=true")
    assert raw == {"variants": {"default": {"options": {"bind_threads": True}}}}
    apply_set(raw, "variants.bind={}")  # a new variant: given whole
    apply_set(raw, "variants.bind.options.bind_threads=true")
    assert raw["variants"] == {
        "default": {"options": {"bind_threads": True}},
        "bind": {"options": {"bind_threads": True}},
    }


def test_builtin_demo_and_examples_are_valid() -> None:
    load_suite(builtin_suite_path("demo"))
    for path in sorted(Path(__file__).parents[2].joinpath("examples").glob("*.toml")):
        try:
            load_suite(path)
        except SuiteError as exc:
            if "unknown driver" not in str(exc):  # examples of drivers not installed here
                raise


def test_cli_suite_error_is_one_line_exit_2(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.replace("requests = 100", "requests = -1"))
    proc = subprocess.run(
        [sys.executable, "-m", "rpcmeter.cli", "run", str(p)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "Traceback" not in proc.stderr
    assert f"{p}: load.requests: Input should be greater than or equal to 1 (got -1)" in proc.stderr


def test_build_suite_defaults() -> None:
    suite = build_suite({"workloads": {"simple": {}}})
    assert suite.target.driver == "rpyc" and list(suite.variants) == ["default"]
    with pytest.raises(SuiteError, match="at least one workload"):
        build_suite({})


def test_resources_section_and_quick_idle_window() -> None:
    raw = {"workloads": {"simple": {}, "idle": {"kind": "idle", "duration_s": 3}}}
    suite = build_suite({**raw, "resources": {"idle_s": 2.5}})
    assert suite.resources.idle_s == 2.5 and suite.resources.cgroup is True
    assert build_suite({**raw, "resources": {"idle_s": 2.5}}, quick=True).resources.idle_s == 0.2
    with pytest.raises(SuiteError, match=r"resources\.idle_s"):
        build_suite({**raw, "resources": {"idle_s": -1}})
    # idle sends no requests, so any driver can run it
    assert build_suite(raw).workloads["idle"].kind == "idle"
    assert build_suite({**raw, "placement": {"server_cpus": 0.5}}).placement.server_cpus == 0.5


def test_comparisons_default_to_five_repetitions(tmp_path: Path) -> None:
    assert load_suite(write(tmp_path, GOOD)).repeat == 5  # two variants, repeat not set
    assert load_suite(write(tmp_path, GOOD), quick=True).repeat == 1
    assert load_suite(write(tmp_path, "repeat = 2\n" + GOOD)).repeat == 2
    assert load_suite(write(tmp_path, GOOD), ["repeat=3"]).repeat == 3
    one = GOOD.replace("[variants.bind]\noptions = { bind_threads = true }\n", "")
    assert load_suite(write(tmp_path, one)).repeat == 1


def test_workload_load_values_are_validated(tmp_path: Path) -> None:
    text = GOOD.replace("depth = 2", "depth = 2\nthreads = 0")
    assert 'workloads."sub 2".threads: Input should be greater than or equal to 1' in error_of(
        tmp_path, text
    )
