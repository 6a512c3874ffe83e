"""Bad input ends in one line, ``rpcmeter: error: WHERE: WHAT``, and exit status 2: a generated
corpus of bad suite files and ``--set`` values, broken result files and history stores, output
paths that cannot take a result. None of them starts a server (each fails before the run)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from rpcmeter.cli import main

GOOD = """\
name = "x"
repeat = 1
[target]
driver = "http"
transport = "tcp"
[workloads.noop]
kind = "noop"
[load]
requests = 20
warmup = 2
"""


def with_server(text: str) -> str:
    return GOOD + "[target.server]\n" + text


def grpc_with(table: str, text: str) -> str:
    """The good suite for the grpc driver, ``text`` added to its ``[target.TABLE]``."""
    return GOOD.replace('"http"', '"grpc"') + f"[target.{table}]\n{text}"


# name -> (suite file bytes, what the error names)
SUITES: dict[str, tuple[bytes, str]] = {
    "binary": (b"\xff\xfe\x00\x01\x80garbage\x00", "not UTF-8"),
    "utf16": (GOOD.encode("utf-16"), "not UTF-8"),
    "nul_byte": (b'name = "x\x00"\n', "invalid TOML"),
    "deep_array": (("a = " + "[" * 5000 + "]" * 5000 + "\n").encode(), "nested too deeply"),
    "deep_table": (("a = " + "{b=" * 3000 + "1" + "}" * 3000 + "\n").encode(), "nested too deep"),
    "empty_command": (with_server('command = ""\n').encode(), "target.server.command"),
    "empty_command_list": (with_server("command = []\n").encode(), "target.server.command"),
    "blank_program": (with_server('command = ["", "x"]\n').encode(), "an empty command line"),
    "unbalanced_command": (with_server('command = "python \'abc"\n').encode(), "No closing"),
    "nul_in_argument": (
        with_server('command = ["python", "a\\u0000b"]\n').encode(),
        "target.server.command[1]: a NUL character",
    ),
    "nul_in_env": (with_server('env = { A = "x\\u0000y" }\n').encode(), "target.server.env.A"),
    "nul_in_env_name": (with_server('env = { "A\\u0000" = "x" }\n').encode(), "in key"),
    "bad_host": (
        GOOD.replace('transport = "tcp"', 'transport = "tcp"\nhost = "999.999.1.1"').encode(),
        "target.host: not a host name or address",
    ),
    "driver_raises_on_import": (
        GOOD.replace('"http"', '"brokendriver:Driver"').encode(),
        "RuntimeError: broken at import",
    ),
    "driver_colon": (GOOD.replace('"http"', '":"').encode(), "cannot load driver ':'"),
    "infinite_duration": (GOOD.replace("requests = 20", "duration_s = inf").encode(), "finite"),
    "tiny_rate": (
        GOOD.replace("requests = 20", 'mode = "open"\nrate = 1e-300').encode(),
        "load.rate",
    ),
    "quick_not_a_table": (GOOD.replace('name = "x"', 'name = "x"\nquick = 3').encode(), "quick"),
    # option values that were accepted until a client used them
    "call_timeout_word": (
        grpc_with("options", 'call_timeout_s = "soon"\n').encode(),
        "target.options.call_timeout_s: Input should be a valid number (got 'soon')",
    ),
    "connect_timeout_word": (
        grpc_with("options", 'connect_timeout_s = "x"\n').encode(),
        "target.options.connect_timeout_s",
    ),
    "max_message_bytes_word": (
        grpc_with("options", 'max_message_bytes = "big"\n').encode(),
        "target.options.max_message_bytes",
    ),
    "negative_call_timeout": (
        grpc_with("options", "call_timeout_s = -1\n").encode(),
        "target.options.call_timeout_s: Input should be greater than 0",
    ),
    "negative_max_message_bytes": (
        grpc_with("options", "max_message_bytes = -1\n").encode(),
        "target.options.max_message_bytes",
    ),
    "variant_option_type": (
        (GOOD + '[variants.a.options]\nqueue_time = "no"\n').encode(),
        "variants.a.options.queue_time: Input should be a valid boolean",
    ),
    "long_alpn": (
        grpc_with("tls", f'alpn = ["{"h" * 256}"]\n').encode(),
        "target.tls: alpn: a protocol name is at most 255 bytes (one has 256)",
    ),
    "infinite_handshake_timeout": (
        grpc_with("tls", "handshake_timeout_s = inf\n").encode(),
        "target.tls: handshake_timeout_s: Input should be a finite number",
    ),
    "verify_no": (grpc_with("tls", 'verify = "no"\n').encode(), "target.tls: verify"),
    "verify_zero": (grpc_with("tls", "verify = 0\n").encode(), "target.tls: verify"),
    "reuse_no": (
        GOOD.replace("warmup = 2", 'warmup = 2\nreuse = "no"').encode(),
        "load.reuse: Input should be a valid boolean (got 'no')",
    ),
}

KITCHEN = Path(__file__).resolve().parents[1] / "support" / "protos" / "kitchen.proto"


def http_options(text: str) -> bytes:
    """The good suite with ``text`` added to its ``[target.options]``."""
    return (GOOD + f"[target.options]\n{text}").encode()


def mix(calls: str) -> bytes:
    """The good suite with a mix workload of ``calls``."""
    return (GOOD + f'[workloads.m]\nkind = "mix"\ncalls = {calls}\n').encode()


# requests that vary (templates, data files, mixes)
SUITES.update(
    {
        "unknown_placeholder": (
            http_options('path = "/kv/{{request_nr}}"\n'),
            "options.path: unknown placeholder {{request_nr}} in '/kv/{{request_nr}}' (did you "
            "mean {{request_number}}?",
        ),
        "unbalanced_placeholder": (
            http_options('body = "n={{request_number"\n'),
            "options.body: unbalanced {{ at character 3 of 'n={{request_number'",
        ),
        "placeholder_in_method": (
            http_options('method = "{{uuid}}"\n'),
            "options.method: a method cannot take a placeholder",
        ),
        "placeholder_in_enum": (
            (
                GOOD.replace('"http"', '"grpc"')
                + '[target.server]\ncommand = "x {port}"\n[target.options]\n'
                + f'proto = "{KITCHEN}"\ncall = "kitchen.Kitchen/Echo"\n'
                + 'data = { default_size = "{{client}}" }\n'
            ).encode(),
            "options.data.default_size: a field of type enum kitchen.Size",
        ),
        "weight_zero": (
            mix('[{ name = "a", weight = 0, path = "/noop" }]'),
            "workloads.m.calls[0].weight: must be a number above 0 (got 0, call 'a')",
        ),
        "weight_negative": (
            mix('[{ name = "a", path = "/noop" }, { name = "b", weight = -2, path = "/noop" }]'),
            "workloads.m.calls[1].weight: must be a number above 0 (got -2",
        ),
        "mix_without_calls": (mix("[]"), "workloads.m.calls: a mix needs at least one call"),
        "data_file_missing": (
            http_options('data_file = "missing.jsonl"\n'),
            "options.data_file: no such file missing.jsonl",
        ),
        "data_file_empty": (
            http_options('data_file = "empty.jsonl"\n'),
            "options.data_file: empty.jsonl is empty",
        ),
        "data_file_bad_line": (
            http_options('data_file = "bad.jsonl"\n'),
            "options.data_file: bad.jsonl:2: not JSON",
        ),
    }
)

# name -> (run arguments after the suite, what the error names)
ARGUMENTS: dict[str, tuple[list[str], str]] = {
    "set_without_value": (["--set", "load.requests"], "expected KEY=VALUE"),
    "set_empty_key": (["--set", "=3"], "not a valid dotted key"),
    "set_bad_toml": (["--set", "load.requests=[1"], "load.requests"),
    "set_overflow": (["--set", "load.requests=1e999"], "finite"),
    "set_table_to_value": (["--set", "load=3"], "load"),
    "set_nul": (["--set", 'target.server.command="a\\u0000"'], "NUL"),
    "set_deep": (["--set", "load.requests=" + "[" * 3000 + "]" * 3000], "nested too deeply"),
    "quick_with_bad_count": (["--quick", "--set", 'load.requests="many"'], "load.requests"),
    "quick_with_table_load": (["--quick", "--set", "load=[1]"], "load"),
    "max_error_rate": (["--max-error-rate", "2"], "--max-error-rate"),
    "set_control_characters": (["--set", "\n\x1b[2J"], "--set \\n\\x1b[2J"),
    "set_empty_key_part": (["--set", "load..requests=5"], "--set load..requests: not a valid"),
    "set_trailing_dot": (["--set", "load.requests.=5"], "not a valid dotted key"),
    "set_unknown_variant": (
        ["--set", "variants.nosuch.options.http=2"],
        "--set variants.nosuch.options.http: no variant named 'nosuch'",
    ),
    "set_verify_word": (["--set", "target.tls.verify=no"], "target.tls: verify"),
}


@pytest.fixture
def suite_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "brokendriver.py").write_text("raise RuntimeError('broken at import')\n")
    (tmp_path / "empty.jsonl").write_text("\n")
    (tmp_path / "bad.jsonl").write_text('{"path": "/noop"}\n{"path": \n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str], code: int = 2) -> str:
    assert main(argv) == code
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("rpcmeter: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in captured.out + err
    return err


@pytest.mark.parametrize("name", sorted(SUITES))
def test_bad_suite_file(name: str, suite_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, names = SUITES[name]
    path = suite_dir / f"{name}.toml"
    path.write_bytes(data)
    err = one_line_error(["run", str(path), "--no-store"], capsys)
    assert f"rpcmeter: error: {path}: " in err and names in err, err


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_bad_arguments(name: str, suite_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args, names = ARGUMENTS[name]
    path = suite_dir / "good.toml"
    path.write_text(GOOD)
    err = one_line_error(["run", str(path), "--no-store", *args], capsys)
    assert names in err, err


@pytest.fixture(scope="module")
def pem_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a certificate it issued and that certificate's key; another key; a file that is
    no PEM at all, and the certificate in DER."""
    import ssl

    import trustme

    where = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    leaf, other = ca.issue_cert("localhost"), ca.issue_cert("elsewhere")
    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    leaf.cert_chain_pems[0].write_to_path(str(where / "cert.pem"))
    leaf.private_key_pem.write_to_path(str(where / "key.pem"))
    other.private_key_pem.write_to_path(str(where / "other.key"))
    (where / "junk.pem").write_text("not a certificate\n")
    der = ssl.PEM_cert_to_DER_cert(leaf.cert_chain_pems[0].bytes().decode())
    (where / "cert.der").write_bytes(der)
    return where


# name -> (the tls table's files, the key named, what the error says)
TLS_FILES: dict[str, tuple[dict[str, str], str, str]] = {
    "ca_not_pem": ({"ca_file": "junk.pem"}, "ca_file", "holds no PEM certificate"),
    "ca_in_der": ({"ca_file": "cert.der"}, "ca_file", "holds no PEM certificate"),
    "client_ca_not_pem": ({"client_ca_file": "junk.pem"}, "client_ca_file", "holds no PEM"),
    "cert_not_pem": (
        {"cert_file": "junk.pem", "key_file": "key.pem"},
        "cert_file",
        "holds no PEM certificate",
    ),
    "key_not_pem": (
        {"cert_file": "cert.pem", "key_file": "junk.pem"},
        "key_file",
        "holds no PEM private key",
    ),
    "key_of_another_cert": (
        {"cert_file": "cert.pem", "key_file": "other.key"},
        "key_file",
        "is not the key of cert_file 'cert.pem'",
    ),
}


@pytest.mark.parametrize("name", sorted(TLS_FILES))
def test_tls_files_are_loaded_with_the_suite(
    name: str, pem_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files, key, says = TLS_FILES[name]
    table = ", ".join(f'{k} = "{v}"' for k, v in files.items())
    path = pem_files / f"{name}.toml"  # the files are named relative to the suite
    path.write_text(GOOD.replace('transport = "tcp"', f'transport = "tcp"\ntls = {{ {table} }}'))
    err = one_line_error(["run", str(path), "--no-store"], capsys)
    assert f"{path}: target.tls.{key}: '{files[key]}' {says}" in err, err


def test_good_tls_files_load(pem_files: Path) -> None:
    from rpcmeter.plan.load import load_suite

    path = pem_files / "good.toml"
    table = 'ca_file = "ca.pem", cert_file = "cert.pem", key_file = "key.pem"'
    path.write_text(GOOD.replace('transport = "tcp"', f'transport = "tcp"\ntls = {{ {table} }}'))
    tls = load_suite(path).target.tls
    assert tls is not None and tls.key_file == str(pem_files / "key.pem")


@pytest.mark.parametrize("value", ["nan", "inf", "0.5"])
def test_trend_threshold_that_no_step_can_pass(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_with_a_run(tmp_path / "h.db", GOLDEN)
    argv = ["trend", "--store", str(tmp_path / "h.db"), "--fail-on-step", "--threshold", value]
    err = one_line_error(argv, capsys)
    assert f"--threshold {float(value)}: a finite factor of at least 1" in err, err


def store_with_a_run(path: Path, result_file: Path) -> None:
    """A history holding one run (the result document in ``result_file``)."""
    from rpcmeter.history.store import Store

    with Store(path) as store:
        store.save(json.loads(result_file.read_text()))


GOLDEN = Path(__file__).parents[1] / "reporters" / "golden" / "result.json"


def broken_histogram() -> str:
    doc = json.loads(GOLDEN.read_text())
    doc["cases"][0]["histogram"]["buckets"] = "not base64 zlib"
    return json.dumps(doc)


RESULT_FILES: dict[str, tuple[bytes, str]] = {
    "binary": (b"\xff\xfe\x00garbage", "not UTF-8"),
    "malformed": (b"{not json", "not a readable result document"),
    "deep": (b"[" * 100_000 + b"]" * 100_000, "not a readable result document"),
    "not_a_table": (b"[1, 2]", "no schema_version"),
    "without_suite": (json.dumps({"schema_version": 1, "cases": []}).encode(), "no suite"),
    "cases_not_a_list": (
        json.dumps({"schema_version": 1, "suite": {}, "cases": 3}).encode(),
        "cases is not a list",
    ),
    "broken_histogram": (broken_histogram().encode(), "cases[0].histogram: a broken histogram"),
}


@pytest.mark.parametrize("name", sorted(RESULT_FILES))
@pytest.mark.parametrize("command", ["show", "report"])
def test_bad_result_file(
    name: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, names = RESULT_FILES[name]
    path = tmp_path / f"{name}.json"
    path.write_bytes(data)
    err = one_line_error([command, str(path)], capsys)
    assert f"{path}: " in err and names in err, err


def corrupt(path: Path) -> None:
    """Overwrite the middle of a SQLite file (its header stays)."""
    data = bytearray(path.read_bytes())
    data[100:] = os.urandom(len(data) - 100)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "argv",
    [["history"], ["show", "last"], ["run", "SUITE"], ["tag", "base", "1"]],
    ids=["history", "show", "run", "tag"],
)
@pytest.mark.parametrize("damage", ["garbage", "pages", "foreign"])
def test_corrupt_store_is_named_and_left_alone(
    argv: list[str], damage: str, suite_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = suite_dir / "history.db"
    if damage == "garbage":
        db.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    elif damage == "foreign":  # another program's database
        with sqlite3.connect(db) as other:
            other.execute("CREATE TABLE mine (x)")
    else:
        store_with_a_run(db, GOLDEN)
        corrupt(db)
    (suite_dir / "good.toml").write_text(GOOD)
    before = db.read_bytes()
    argv = [str(suite_dir / "good.toml") if a == "SUITE" else a for a in argv]
    err = one_line_error([*argv, "--store", str(db)], capsys)
    assert f"rpcmeter: error: {db}: " in err, err
    assert db.read_bytes() == before  # never written into


def test_store_whose_parent_is_a_file(suite_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (suite_dir / "good.toml").write_text(GOOD)
    store = suite_dir / "good.toml" / "history.db"
    err = one_line_error(["run", "good.toml", "--store", str(store)], capsys)
    assert "good.toml is a file" in err, err


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo", "parent_is_file"])
def test_output_that_cannot_take_a_result(
    kind: str, suite_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (suite_dir / "good.toml").write_text(GOOD)
    target = suite_dir / "out"
    if kind == "directory":
        target.mkdir()
    elif kind == "symlink":
        (suite_dir / "real.json").write_text("{}")
        target.symlink_to(suite_dir / "real.json")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target = suite_dir / "good.toml" / "out.json"
    err = one_line_error(["run", "good.toml", "--no-store", "-o", str(target)], capsys)
    assert f"rpcmeter: error: {target}: " in err, err
    if kind == "symlink":  # the link and its target are as they were
        assert target.is_symlink() and (suite_dir / "real.json").read_text() == "{}"
    if kind == "fifo":
        assert target.is_fifo()
