"""Smoke tests of the side-by-side benchmarks: a tiny run (``python -m bench NAME --quick``, and
``python -m bench.compare --quick``) must still write the report, a row for every system, a
verdict per target, and every plot."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import pytest
from helpers import ROOT

from bench.common.shaped_s3 import shaped_s3


def command(benchmark: str) -> list[str]:
    """How to run ``benchmark`` from the repository's root: the runner's name, or the comparison."""
    return ["-m", "bench.compare"] if benchmark == "compare" else ["-m", "bench", benchmark]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("benchmark", "report", "row_prefixes", "systems", "plots", "also"),
    [
        (
            "compare",
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
            "contention",
            "contention.md",
            ("| ",),
            ("castable-local", "castable-moto", "deltalake"),
            ("contention.png",),
            (),
        ),
        (
            "faults",
            "faults.md",
            ("| ",),
            ("no faults", "1% of write answers lost", "15% of write answers lost", "5% of requests answered 503"),
            (),
            ("Every acknowledged commit exactly once, none twice: **met**",),
        ),
        (
            "cli",
            "cli.md",
            ("| ",),
            ("castable --version", "castable append (one file)", "make demo, fresh clone"),
            (),
            ("deltalake, Python: write_deltalake(mode='append')",),
        ),
        (
            "catalog-load",
            "catalog_load.md",
            ("| ",),
            (
                "Starlette on uvicorn (castable catalog serve)",
                "Starlette on uvicorn, bearer token required",
                "standard library threading server (before)",
            ),
            (),
            ("answers/s",),
        ),
        (
            "nested",
            "nested.md",
            ("| ",),
            ("castable append", "pyarrow write_table", "castable scan().to_arrow()", "pyarrow read_table"),
            (),
            ("append within 1.2x of pyarrow", "scan within 1.2x of pyarrow"),
        ),
        (
            "keys",
            "keys.md",
            ("| local |", "| shaped S3 |"),
            ("growing", "scattered"),
            (),
            ("within 1.5x of an unenforced one",),
        ),
        (
            "partitions",
            "partitions.md",
            ("| ",),
            ("castable, partitioned by day(ts)", "castable, unpartitioned", "pyiceberg, partitioned by day(ts)"),
            (),
            ("scan reads only that day's files: **met**",),
        ),
        (
            "schema",
            "schema.md",
            ("| local |", "| moto |"),
            ("10", "100"),
            (),
            (),
        ),
        (
            "database",
            "database.md",
            ("| local |", "| moto |"),
            ("transaction over 10 tables", "database"),
            (),
            (),
        ),
        (
            "shaped",
            "shaped.md",
            ("| ",),
            ("castable", "deltalake", "pyarrow dataset", "pyiceberg", "duckdb (2 threads)", "duckdb (16 threads)"),
            ("shaped.png",),
            ("## full scan after 1,000 deletes", "## 1-row append", "castable speed / fastest peer"),
        ),
        (
            "small-appends",
            "small_appends.md",
            ("| ",),
            ("castable (inline, default)", "castable, compacted", "DuckLake (inlining, default)"),
            (),
            ("within 2x DuckLake with inlining",),
        ),
        (
            "iceberg",
            "iceberg.md",
            ("| ",),
            ("10", "100", "castable", "pyiceberg", "DuckDB iceberg_scan"),
            (),
            ("publication cost stays O(change)", "**met**"),
        ),
        (
            "workflow-scale",
            "workflow_scale.md",
            ("| erasure |", "| maintenance |", "| maintain-due |"),
            ("SUCCEEDED",),
            (),
            ("complete within every limit: **met**",),
        ),
        (
            "commit-scale",
            "commit_scale.md",
            ("| ",),
            ("one directory (listed)", "a directory per file (HEAD each)"),
            (),
            ("commits through the commit function and completes within",),
        ),
        (
            "filelist-check",
            "filelist_check.md",
            ("| ",),
            ("without the check (before)", "with the check"),
            (),
            ("checked and committed within the function's timeout",),
        ),
        (
            "changes",
            "changes.md",
            ("| local |", "| shaped S3 |"),
            ("castable", "deltalake", "DuckLake"),
            (),
            ("## Flatness", "### castable / fastest peer", "stay flat from 100,000 to 1,000,000 rows"),
        ),
        (
            "scale",
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
    benchmark: str,
    report: str,
    row_prefixes: tuple[str, ...],
    systems: tuple[str, ...],
    plots: tuple[str, ...],
    also: tuple[str, ...],
) -> None:
    run = subprocess.run(
        [sys.executable, *command(benchmark), "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
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
            *command("register"),
            "--files",
            "2",
            "--rows",
            "1000",
            "--repeats",
            "1",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    rows = [line for line in (tmp_path / "register.md").read_text().splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[2:]] == ["| local", "| moto"]


def test_the_shaping_proxy_holds_each_response_and_paces_each_connection() -> None:
    """The stand-in for S3's latency and per-connection bandwidth shapes what it claims to: a
    response waits for the latency, a body comes at the bandwidth, and connections in parallel
    each get the bandwidth (no overall cap); the counters see every request and byte."""
    with shaped_s3(latency=0.1, bandwidth=10e6) as s3:
        direct = boto3.client("s3", endpoint_url=s3.direct, region_name="us-east-1")
        direct.create_bucket(Bucket="shaping")
        direct.put_object(Bucket="shaping", Key="k", Body=bytes(2_000_000))
        client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1")
        started = time.perf_counter()
        client.head_object(Bucket="shaping", Key="k")
        assert 0.1 <= time.perf_counter() - started < 0.5
        s3.reset()
        started = time.perf_counter()
        assert len(client.get_object(Bucket="shaping", Key="k")["Body"].read()) == 2_000_000
        one = time.perf_counter() - started
        assert one >= 0.1 + 0.2 * 0.9, "2 MB at 10 MB/s after 100 ms"
        counted = s3.stats()
        assert counted["requests"] == {"GET": 1} and counted["bytes_out"] == 2_000_000
        s3.reset()
        started = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            sizes = list(pool.map(lambda _: len(client.get_object(Bucket="shaping", Key="k")["Body"].read()), range(4)))
        four = time.perf_counter() - started
        assert sizes == [2_000_000] * 4
        assert four < 2 * one, f"four connections at once took {four:.2f} s, one took {one:.2f} s"
        assert s3.stats()["peak_in_flight"] >= 2
