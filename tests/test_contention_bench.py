"""Smoke test of bench/bench_contention.py: a tiny run must still produce the report and the plot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SYSTEMS = ("castable-local", "castable-moto", "deltalake")


@pytest.mark.slow
def test_quick_run_writes_report_and_plot(tmp_path: Path) -> None:
    """``bench_contention.py --quick --out DIR`` writes contention.md with rows for every system, and the PNG."""
    run = subprocess.run(
        [sys.executable, "bench_contention.py", "--quick", "--out", str(tmp_path)],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    report = (tmp_path / "contention.md").read_text()
    for system in SYSTEMS:
        assert any(line.startswith(f"| {system} |") for line in report.splitlines()), system
    assert "## Targets" in report and ("**met**" in report or "**missed**" in report)
    png = tmp_path / "contention.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
