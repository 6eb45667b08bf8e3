"""Smoke test of bench/compare.py: a tiny run must still produce the report and every plot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SYSTEMS = ("castable", "deltalake", "pyiceberg", "pyarrow")


@pytest.mark.slow
def test_quick_run_writes_report_and_plots(tmp_path: Path) -> None:
    """``compare.py --quick --out DIR`` writes compare.md with rows for all four systems, and the PNGs."""
    run = subprocess.run(
        [sys.executable, "compare.py", "--quick", "--out", str(tmp_path)],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    report = (tmp_path / "compare.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| append whole table |")]
    for system in SYSTEMS:
        assert any(f"| {system} |" in row or f"| **{system}** |" in row for row in rows), system
    assert "## Targets" in report and ("**met**" in report or "**missed**" in report)
    for name in ("delete", "scan", "append", "commit"):
        png = tmp_path / f"compare_{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
