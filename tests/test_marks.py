"""The timing_sensitive mark selects exactly the tests decorated with it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def test_timing_sensitive_mark_collects_the_marked_tests() -> None:
    counts = {
        path: len(re.findall(r"^@timing_sensitive$", path.read_text(), re.MULTILINE))
        for path in TESTS.rglob("test_*.py")
    }
    files = [str(path) for path, n in counts.items() if n]
    decorated = sum(counts.values())
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    proc = subprocess.run(
        [*argv, "-m", "timing_sensitive", *files],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert decorated > 0
    assert len(collected) == decorated, proc.stdout + proc.stderr
