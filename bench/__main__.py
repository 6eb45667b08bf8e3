"""One runner for the benchmarks, grouped by theme: ``python -m bench`` lists them,
``python -m bench NAME [ARGS...]`` runs one (its arguments after the name), ``python -m bench
--all`` runs every benchmark ``make bench`` runs.

Each benchmark is a script of this folder, run as ``make bench`` always ran it: with this
interpreter, from this folder, printing medians and ratios measured side by side and writing
its report under ``results/``. ``HELPERS`` are the modules the benchmarks run or import (side-venv
halves, spawned measurements, shared code), not benchmarks; ``tests/unit/project/test_bench_runner.py``
checks that every script here is one or the other.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Benchmark:
    """A benchmark script, its theme, and the arguments ``make bench`` gives it; ``not_in_all``
    says why ``--all`` leaves it out (its own make target, or what it needs)."""

    theme: str
    script: str
    summary: str
    args: tuple[str, ...] = ()
    not_in_all: str | None = None


BENCHMARKS: dict[str, Benchmark] = {
    "core": Benchmark("reads and writes", "bench_core.py", "deletes at 1M and 10M rows, scans, appends"),
    "shaped": Benchmark("reads and writes", "bench_shaped.py", "reads on S3 with its latency, against the peers"),
    "small-appends": Benchmark("reads and writes", "bench_small_appends.py", "many small appends, against DuckLake"),
    "erase": Benchmark("reads and writes", "bench_erase.py", "erasing one row: splice against rewrite"),
    "register": Benchmark("reads and writes", "bench_register.py", "add_files: every page decoded or footers only"),
    "changes": Benchmark(
        "reads and writes",
        "bench_changes.py",
        "the change feed, against deltalake's and DuckLake's",
        not_in_all="run by name",
    ),
    "scale": Benchmark(
        "format", "bench_scale.py", "commit, open and gc against the number of files", not_in_all="run by name"
    ),
    "encodings": Benchmark(
        "format",
        "bench_encodings.py",
        "how to store 100,000 manifest entries",
        not_in_all="a design study, run by name",
    ),
    "schema": Benchmark("format", "bench_schema.py", "schema evolution costs", not_in_all="run by name"),
    "maintenance": Benchmark("maintenance", "bench_maintenance.py", "scans before and after compaction, gc cost"),
    "contention": Benchmark("concurrency", "bench_contention.py", "concurrent writers, against deltalake"),
    "faults": Benchmark("concurrency", "bench_faults.py", "commits over a lossy network"),
    "database": Benchmark(
        "concurrency", "bench_database.py", "what one commit point for several tables costs", not_in_all="run by name"
    ),
    "iceberg": Benchmark("iceberg", "bench_iceberg.py", "what Iceberg publication costs a commit"),
    "iceberg-readers": Benchmark("iceberg", "bench_iceberg_readers.py", "Iceberg readers over random histories"),
    "catalog": Benchmark(
        "iceberg", "bench_catalog.py", "commits through castable's REST catalog", not_in_all="needs Spark 3.5 and Java"
    ),
    "filelist-check": Benchmark(
        "deployment", "bench_filelist_check.py", "checking a file list against footers", args=("--files", "20000")
    ),
    "workflow-scale": Benchmark("deployment", "bench_workflow_scale.py", "both workflows at Step Functions' limits"),
    "ingest-memory": Benchmark("deployment", "bench_ingest_memory.py", "the ingest function's peak memory"),
    "bundle-size": Benchmark("deployment", "bundle_size.py", "the Lambda bundle's size and cold imports"),
    "commit-scale": Benchmark(
        "deployment", "bench_commit_scale.py", "a Spark job's commit at scale, with latency", not_in_all="run by name"
    ),
    "deployment": Benchmark(
        "deployment",
        "bench_deployment.py",
        "the fixed-size deployment against the per-table one",
        not_in_all="needs a worktree of the per-table revision",
    ),
    "deployment-templates": Benchmark(
        "deployment",
        "bench_deployment_templates.py",
        "template size against the number of tables",
        not_in_all="needs a worktree of the per-table revision",
    ),
    "spark": Benchmark("spark", "bench_spark.py", "the Spark ingest job and reads in local mode"),
    "spark-plan": Benchmark(
        "spark", "bench_spark_plan.py", "planning a Spark read of many files", not_in_all="run by name"
    ),
}
"""Every benchmark by name. ``make compare`` (``python -m compare`` in this folder) is the
twenty-minute comparison against deltalake and pyiceberg, a package of its own."""

HELPERS = {
    "benchlib.py": "code the benchmarks share",
    "catalog_spark.py": "bench_catalog.py's Spark side, in the Spark 3.5 venv",
    "ducklake_changes.py": "bench_changes.py's DuckLake side, in the DuckDB 1.5 venv",
    "ducklake_small.py": "bench_small_appends.py's DuckLake side, in the DuckDB 1.5 venv",
    "scale_measure.py": "one configuration of bench_scale.py, in a process of its own",
    "scale_tables.py": "the synthetic tables of bench_scale.py",
    "shaped_duckdb.py": "bench_shaped.py's DuckDB side, in the DuckDB 1.5 venv",
    "shaped_s3.py": "S3 with its latency: moto behind a shaping proxy",
}


def listing() -> str:
    """The benchmarks by theme, one line each."""
    lines = []
    for theme in dict.fromkeys(b.theme for b in BENCHMARKS.values()):
        lines.append(f"{theme}:")
        for name, b in BENCHMARKS.items():
            if b.theme == theme:
                note = "" if b.not_in_all is None else f"  (not in --all: {b.not_in_all})"
                lines.append(f"  {name:22s} {b.summary}{note}")
    return "\n".join(lines)


def run(name: str, args: list[str]) -> int:
    """Run benchmark ``name`` with ``args`` (``make bench``'s own when none are given)."""
    bench = BENCHMARKS[name]
    command = [sys.executable, bench.script, *(args or bench.args)]
    print(f"== {name}: {' '.join(command[1:])}", flush=True)
    return subprocess.run(command, cwd=HERE).returncode


def main(argv: list[str]) -> int:
    if not argv:
        print(listing())
        return 0
    if argv == ["--all"]:
        failed = [name for name, b in BENCHMARKS.items() if b.not_in_all is None and run(name, []) != 0]
        if failed:
            print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1 if failed else 0
    name, *args = argv
    if name not in BENCHMARKS:
        print(f"no benchmark {name!r}; `python -m bench` lists them", file=sys.stderr)
        return 2
    return run(name, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
