"""`rpcmeter compare` says, beside its verdicts, what differed between the two runs'
environments (load average, CPUs available, placement, versions, the clients' CPUs busy with
other work) and warns when that may explain the differences it found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rpcmeter import model
from rpcmeter.cli import main
from rpcmeter.result.document import write_json
from tests.support.synthetic import synthetic_result

P = (("threads", 1),)


def _run(mean_us: float, load: float, busy: float, cpus: list[int]) -> model.Result:
    result = synthetic_result({("w", P, "x"): [mean_us * f for f in (1, 1.01, 0.99, 1.0, 1.02)]})
    env = result.environment.model_copy(
        update={"load_average": [load, load, load], "cpus_available": cpus, "cpu_count": 2}
    )
    cases = [
        c.model_copy(
            update={
                "cpu": c.cpu.model_copy(
                    update={"client_cpus_busy_pct": busy + 20.0, "client_util_pct": 20.0}
                )
            }
        )
        for c in result.cases
    ]
    return result.replace(environment=env, cases=cases)


def _write(result: model.Result, path: Path) -> str:
    write_json(result.to_json(), path)
    return str(path)


def test_compare_shows_what_differed_and_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _write(_run(100, load=0.3, busy=2, cpus=[0, 1]), tmp_path / "a.json")
    b = _write(_run(196, load=3.4, busy=55, cpus=[0]), tmp_path / "b.json")
    assert main(["compare", a, b, "--width", "160"]) == 0
    text = capsys.readouterr().out
    assert "1.96 slower" in text
    table = text[text.index("what differed between the runs' environments") :]
    rows = {line.split("  ")[0].strip(): line for line in table.splitlines()[1:] if line.strip()}
    assert "0.30" in rows["load average (1 min)"] and "3.40" in rows["load average (1 min)"]
    assert "0-1" in rows["CPUs available"] and "it may explain differences" in text
    busy = rows["clients' CPUs busy with other work"]
    assert "2 %" in busy and "55 %" in busy
    warnings = [line for line in text.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: the runs' environments differed: the 4 faster/slower verdict(s) may come from the "
        "machine"
    ]
    assert main(["compare", a, b, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "load average (1 min), clients' CPUs busy with other work. Rerun" in doc["warnings"][-1]
    assert {d["what"] for d in doc["environment"]} == {
        "CPUs available",
        "load average (1 min)",
        "clients' CPUs busy with other work",
    }


def test_compare_of_like_runs_lists_no_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _write(_run(100, load=0.3, busy=2, cpus=[0, 1]), tmp_path / "a.json")
    b = _write(_run(100, load=0.4, busy=5, cpus=[0, 1]), tmp_path / "b.json")
    assert main(["compare", a, b, "--width", "160"]) == 0
    text = capsys.readouterr().out
    assert "what differed" not in text and "environments differed" not in text
    assert main(["compare", a, b, "--format", "json"]) == 0
    assert "environment" not in json.loads(capsys.readouterr().out)
