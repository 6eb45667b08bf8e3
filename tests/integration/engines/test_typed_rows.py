"""Every scalar type castable filters on, with pandas not installed: written by castable and by
pyarrow (registered with add_files), read back bit for bit, filtered on every column (float16,
uint64 beyond int64, nanosecond timestamps with and without a zone, date64, times, decimals of 9,
12, 18 and 38 digits and a decimal256, NaN and -0.0), deleted from and erased with a verified
purge (issue: files the world writes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import ROOT
from helpers.typed_rows import rows

COLUMNS = [column for column, _ in rows()[1]]


def test_every_type_reads_filters_deletes_and_erases_without_pandas(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "helpers.typed_rows", str(tmp_path)],
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])
    expected: dict[str, object] = {}
    for how in ("append", "add_files"):
        expected[f"{how}:equal"] = True
        for column in COLUMNS:
            expected[f"{how}:{column} ="] = [4]
            expected[f"{how}:{column} >="] = [4, 5, 6, 7] if column == "f64" else [4, 5, 6, 7, 8]  # 8 is NaN
            expected[f"{how}:{column} <"] = [0, 1, 2, 3]
        expected[f"{how}:after delete"] = [0, 1, 2, 3, 4, 5]
        expected[f"{how}:erase verified"] = True
        expected[f"{how}:after erase"] = [4, 5]
        expected[f"{how}:survivors equal"] = True
    assert found == expected
