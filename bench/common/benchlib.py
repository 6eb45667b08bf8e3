"""Helpers the benchmarks share (not a benchmark itself): the synthetic event table, timing, a
moto S3 server, and the header and output of every report."""

from __future__ import annotations

import io
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from helpers.s3servers import moto_s3  # tests/helpers, on sys.path by bench/__init__.py

import castable

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("event_time", pa.timestamp("us", tz="UTC")),
        pa.field("payload", pa.binary()),
        pa.field("category", pa.string()),
    ]
)
CHUNK = 1_000_000
ROOT = Path(__file__).resolve().parents[2]
"""The repository's root, where ``python -m bench.THEME.NAME`` runs."""
RESULTS = ROOT / "bench" / "results"
STARTED = time.perf_counter()


def log(message: str) -> None:
    """Progress on stderr, with the elapsed time, so a long run shows where it is."""
    print(f"[{time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


def event_batches(rows: int, seed: int = 42) -> Iterator[pa.RecordBatch]:
    """The synthetic event table: sorted unique ids, ~100 random payload bytes, 8 categories."""
    rng = np.random.default_rng(seed)
    start_us = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1e6)
    categories = pa.array([f"cat-{i}" for i in range(8)])
    for lo in range(0, rows, CHUNK):
        n = min(CHUNK, rows - lo)
        ids = np.arange(lo, lo + n, dtype=np.int64)
        offsets = np.arange(0, 100 * (n + 1), 100, dtype=np.int32)
        payload = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(rng.bytes(100 * n))])
        yield pa.record_batch(
            [
                pa.array(ids),
                pa.array(start_us + ids * 1000, pa.timestamp("us", tz="UTC")),
                payload,
                categories.take(pa.array(rng.integers(0, 8, n))),
            ],
            schema=SCHEMA,
        )


def machine_line(detail: str) -> str:
    """The machine, Python, pyarrow and castable versions and ``detail``: one line for any report."""
    return (
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"pyarrow {pa.__version__}, castable {castable.__version__}. {detail}"
    )


def report_header(title: str, detail: str) -> list[str]:
    """The first lines of every benchmark report: title, date, machine and versions."""
    return [f"# castable {title} ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)", "", machine_line(detail), ""]


def publish(name: str, lines: list[str], results: Path = RESULTS) -> None:
    """Print a report and keep it as <results>/<name>.md (bench/results/ unless told otherwise)."""
    report = "\n".join(lines) + "\n"
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.md").write_text(report)
    print(report)


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def median_time(fn: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    times = [timed(fn)[0] for _ in range(repeats)]
    return statistics.median(times), min(times), max(times)


def fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def moto_server() -> tuple[ExitStack, str]:
    """A moto S3 server on a free loopback port, its conditional writes atomic as on S3 (see
    tests/helpers/s3servers.py); returns what stops it (``close()``) and its endpoint."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    stack = ExitStack()
    return stack, stack.enter_context(moto_s3())


def small_parquet_file(rows: int = 100) -> bytes:
    """One Parquet file of ``rows`` synthetic events (~1.5 KB at 100): the objects a Spark job's
    file list names, put many times over."""
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_batches(list(event_batches(rows))), buf)
    return buf.getvalue()


def commit_function_environment() -> None:
    """The environment the commit function's handler reads, set for a run in this process (no
    tracing, metrics or per-request logs), unless already set."""
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "castable")
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "castable-commit")
