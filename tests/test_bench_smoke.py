"""Smoke tests of the side-by-side benchmarks: a tiny run must still write the report, a row for
every system, a verdict per target, and every plot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "report", "row_prefixes", "systems", "plots", "also"),
    [
        (
            "-m compare",
            "compare.md",
            ("| append whole table |", "| upsert 10,000 rows |", "| replace-where 1% (event_time range) |"),
            ("castable", "deltalake", "pyiceberg", "pyarrow"),
            (
                "compare_delete.png",
                "compare_scan.png",
                "compare_append.png",
                "compare_writes.png",
                "compare_commit.png",
            ),
            (
                "| full scan, moto S3 | 4,000 rows | **castable** |",
                "| filtered scan, moto S3 | 4,000 rows | pyarrow S3FileSystem",
                "| full scan | 4,000 rows | castable, caches cleared before each scan |",
            ),
        ),
        (
            "bench_contention.py",
            "contention.md",
            ("| ",),
            ("castable-local", "castable-moto", "deltalake"),
            ("contention.png",),
            (),
        ),
        (
            "bench_schema.py",
            "schema.md",
            ("| local |", "| moto |"),
            ("10", "100"),
            (),
            (),
        ),
        (
            "bench_database.py",
            "database.md",
            ("| local |", "| moto |"),
            ("transaction over 10 tables", "database"),
            (),
            (),
        ),
        (
            "bench_scale.py",
            "scale.md",
            ("| local store |", "| moto S3 over HTTP |"),
            ("10", "100"),
            ("scale.png",),
            (),
        ),
    ],
)
def test_quick_run_writes_report_and_plots(
    tmp_path: Path,
    command: str,
    report: str,
    row_prefixes: tuple[str, ...],
    systems: tuple[str, ...],
    plots: tuple[str, ...],
    also: tuple[str, ...],
) -> None:
    run = subprocess.run(
        [sys.executable, *command.split(), "--quick", "--out", str(tmp_path)],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    text = (tmp_path / report).read_text()
    for prefix in row_prefixes:
        rows = [line for line in text.splitlines() if line.startswith(prefix)]
        for system in systems:
            assert any(f"| {system} |" in row or f"| **{system}** |" in row for row in rows), (prefix, system)
    assert "## Targets" in text and ("**met**" in text or "**missed**" in text)
    for line in also:
        assert line in text, line
    for name in plots:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_register_benchmark_reports_both_verifications(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "bench_register.py",
            "--files",
            "2",
            "--rows",
            "1000",
            "--repeats",
            "1",
            "--out",
            str(tmp_path),
        ],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    rows = [line for line in (tmp_path / "register.md").read_text().splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[2:]] == ["| local", "| moto"]
