"""One runner for the benchmarks, grouped by theme: ``python -m bench`` lists them,
``python -m bench NAME [ARGS...]`` runs one (its arguments after the name), ``python -m bench
--all`` runs every benchmark ``make bench`` runs. Run it from the repository's root.

Each theme is a package of this folder (``reads/``, ``format/``, ``maintenance/``,
``concurrency/``, ``iceberg/``, ``deployment/``, ``spark/``), and benchmark NAME is the module
``bench/THEME/NAME.py`` (dashes as underscores); ``common/`` holds what no one benchmark owns. A
benchmark runs as a module, ``python -m bench.THEME.NAME``, with this interpreter and from the
repository's root, so every module of bench/ imports another by its full name
(``from bench.common.benchlib import ...``); it prints medians and ratios measured side by side
and writes its report under ``results/``. ``HELPERS`` are the modules the benchmarks run or
import (side-venv halves, spawned measurements, shared code), not benchmarks;
``tests/unit/project/test_bench_runner.py`` checks that every module here is one or the other.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Benchmark:
    """A benchmark: its theme, its script (relative to bench/), and the arguments ``make bench``
    gives it; ``not_in_all`` says why ``--all`` leaves it out (its own make target, or what it needs)."""

    theme: str
    script: str
    summary: str
    args: tuple[str, ...] = ()
    not_in_all: str | None = None

    @property
    def module(self) -> str:
        """The script as a module of the bench package: ``bench.reads.core`` for ``reads/core.py``."""
        return "bench." + self.script.removesuffix(".py").replace("/", ".")


BENCHMARKS: dict[str, Benchmark] = {
    "core": Benchmark("reads and writes", "reads/core.py", "deletes at 1M and 10M rows, scans, appends"),
    "shaped": Benchmark("reads and writes", "reads/shaped.py", "reads on S3 with its latency, against the peers"),
    "small-appends": Benchmark("reads and writes", "reads/small_appends.py", "many small appends, against DuckLake"),
    "erase": Benchmark("reads and writes", "reads/erase.py", "erasing one row: splice against rewrite"),
    "partitions": Benchmark(
        "reads and writes", "reads/partitions.py", "one day of a partitioned table on shaped S3, against pyiceberg"
    ),
    "register": Benchmark("reads and writes", "reads/register.py", "add_files: every page decoded or footers only"),
    "keys": Benchmark("reads and writes", "reads/keys.py", "appends to a table that enforces its key, and without"),
    "cli": Benchmark(
        "reads and writes",
        "reads/cli.py",
        "the command line's start, a one-file append and make demo, against deltalake",
    ),
    "changes": Benchmark(
        "reads and writes",
        "reads/changes.py",
        "the change feed, against deltalake's and DuckLake's",
        not_in_all="run by name",
    ),
    "scale": Benchmark(
        "format", "format/scale.py", "commit, open and gc against the number of files", not_in_all="run by name"
    ),
    "encodings": Benchmark(
        "format",
        "format/encodings.py",
        "how to store 100,000 manifest entries",
        not_in_all="a design study, run by name",
    ),
    "schema": Benchmark("format", "format/schema.py", "schema evolution costs", not_in_all="run by name"),
    "nested": Benchmark("format", "format/nested.py", "appends and scans of nested columns, against pyarrow"),
    "maintenance": Benchmark("maintenance", "maintenance/maintenance.py", "scans before and after compaction, gc cost"),
    "contention": Benchmark("concurrency", "concurrency/contention.py", "concurrent writers, against deltalake"),
    "faults": Benchmark("concurrency", "concurrency/faults.py", "commits over a lossy network"),
    "database": Benchmark(
        "concurrency",
        "concurrency/database.py",
        "what one commit point for several tables costs",
        not_in_all="run by name",
    ),
    "iceberg": Benchmark("iceberg", "iceberg/iceberg.py", "what Iceberg publication costs a commit"),
    "iceberg-readers": Benchmark("iceberg", "iceberg/iceberg_readers.py", "Iceberg readers over random histories"),
    "catalog": Benchmark(
        "iceberg",
        "iceberg/catalog.py",
        "commits through castable's REST catalog",
        not_in_all="needs Spark 3.5 and Java",
    ),
    "catalog-load": Benchmark(
        "iceberg", "iceberg/catalog_load.py", "loadTable requests per second the served catalog answers"
    ),
    "filelist-check": Benchmark(
        "deployment", "deployment/filelist_check.py", "checking a file list against footers", args=("--files", "20000")
    ),
    "workflow-scale": Benchmark(
        "deployment", "deployment/workflow_scale.py", "both workflows at Step Functions' limits"
    ),
    "ingest-memory": Benchmark("deployment", "deployment/ingest_memory.py", "the ingest function's peak memory"),
    "bundle-size": Benchmark("deployment", "deployment/bundle_size.py", "the Lambda bundle's size and cold imports"),
    "commit-scale": Benchmark(
        "deployment",
        "deployment/commit_scale.py",
        "a Spark job's commit at scale, with latency",
        not_in_all="run by name",
    ),
    "deployment": Benchmark(
        "deployment",
        "deployment/deployment.py",
        "the fixed-size deployment against the per-table one",
        not_in_all="needs a worktree of the per-table revision",
    ),
    "deployment-templates": Benchmark(
        "deployment",
        "deployment/deployment_templates.py",
        "template size against the number of tables",
        not_in_all="needs a worktree of the per-table revision",
    ),
    "spark": Benchmark("spark", "spark/spark.py", "the Spark ingest job and reads in local mode"),
    "spark-plan": Benchmark(
        "spark", "spark/spark_plan.py", "planning a Spark read of many files", not_in_all="run by name"
    ),
}
"""Every benchmark by name. ``make compare`` (``python -m bench.compare``) is the twenty-minute
comparison against deltalake and pyiceberg, a package of its own."""

HELPERS = {
    "common/benchlib.py": "code the benchmarks share",
    "common/shaped_s3.py": "S3 with its latency: moto behind a shaping proxy",
    "reads/shaped_duckdb.py": "shaped.py's DuckDB side, in the DuckDB 1.5 venv",
    "reads/ducklake_small.py": "small_appends.py's DuckLake side, in the DuckDB 1.5 venv",
    "reads/ducklake_changes.py": "changes.py's DuckLake side, in the DuckDB 1.5 venv",
    "reads/changes_measure.py": "what changes.py measures: the growing tables' reads, the peers' tables and reads",
    "reads/changes_report.py": "changes.py's report",
    "format/scale_measure.py": "one configuration of scale.py, in a process of its own",
    "format/scale_tables.py": "the synthetic tables of scale.py",
    "iceberg/catalog_spark.py": "catalog.py's Spark side, in the Spark 3.5 venv",
    "iceberg/catalog_load_clients.py": "catalog_load.py's clients, in a process of their own",
    "deployment/deployment_ingest.py": "deployment.py's ingest under one load, in a process of either revision's tree",
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
    command = [sys.executable, "-m", bench.module, *(args or bench.args)]
    print(f"== {name}: {' '.join(command[1:])}", flush=True)
    return subprocess.run(command, cwd=ROOT).returncode


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
