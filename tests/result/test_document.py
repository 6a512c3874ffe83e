"""Writing the result document."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rpcmeter.result.document import read_json, write_json
from tests.support.synthetic import document, synthetic_result


def test_the_document_gets_the_mode_of_any_new_file(tmp_path: Path) -> None:
    """Written through a temporary file (mode 0o600) and renamed: it still gets 0o666 less the
    umask, as the CSV and Markdown written beside it do."""
    result = synthetic_result({("w", (), "a"): [100.0, 101.0]})
    old = os.umask(0o027)
    try:
        write_json(document(result), tmp_path / "r.json")
        (tmp_path / "beside.csv").write_text("x\n")
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "r.json").stat().st_mode)
    assert mode == 0o640 == stat.S_IMODE((tmp_path / "beside.csv").stat().st_mode)
    assert len(read_json(tmp_path / "r.json").cases) == len(result.cases)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beside.csv", "r.json"]  # no leftover
