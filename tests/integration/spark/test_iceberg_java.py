"""Apache Iceberg's Java library (iceberg-spark-runtime 1.10.2 on Spark 3.5, the reader of EMR
Spark, Athena and Trino; stricter than pyiceberg and DuckDB), iceberg-rust (pyiceberg-core 0.11)
and pyiceberg read seeded random histories as castable does: every retained version, and (Java,
pyiceberg) the rows appended between versions, and every pyiceberg inspect table reads
(helpers/iceberg_histories.py: every kind of rename, files registered without ids, purge;
bench/iceberg/iceberg_readers.py runs many more, DuckDB too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.iceberg_histories import History, differences, java_plan, java_reads, rust_reads, same, static
from helpers.nested import nested_history


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 21])
def test_java_rust_and_pyiceberg_read_every_version_of_a_random_history_as_castable(tmp_path: Path, seed: int) -> None:
    history = History(str(tmp_path / "t"), seed)
    history.run(40, expire_at=30)
    assert len(history.retained()) >= 8 and history.choose_spans(6), "versions retained and runs of appends"
    assert {"register", "purge", "erase", "refused"} <= history.kinds and history.renames >= 4
    parted = History(str(tmp_path / "partitioned"), seed, partitioned=True)
    parted.run(30)
    assert len(parted.table.partitioning.specs) >= 3, "the spec evolved"
    nested = nested_history(str(tmp_path / "nested"))
    versions = list(range(1, nested.version + 1))
    plan, plan_parted = java_plan(history), java_plan(parted)
    nested_plan = [(nested.uri, str(v)) for v in versions]
    java = java_reads(tmp_path / "java", plan + plan_parted + nested_plan)  # one JVM for all three
    rust = rust_reads(tmp_path / "rust", history.table, history.retained())
    assert differences(history, java[: len(plan)], rust) == []
    rust_parted = rust_reads(tmp_path / "rust-partitioned", parted.table, parted.retained())
    assert differences(parted, java[len(plan) : len(plan) + len(plan_parted)], rust_parted) == []
    for v, got in zip(versions, java[len(plan) + len(plan_parted) :], strict=True):
        same(got, nested.scan(version=v).to_arrow(), f"Java, nested v{v}")
    # iceberg-rust reconciles a file's struct with the table's by position, not id: a version
    # whose files predate a change inside a struct fails to read (apache/iceberg-rust#2617,
    # open); the versions before the change and the compacted last one it reads.
    readable = [v for v in versions if "user" in nested.snapshot(v).schema.field("payload").type.names] + [
        nested.version
    ]
    for v, got in zip(readable, rust_reads(tmp_path / "rust-nested", nested, readable), strict=True):
        same(got, nested.scan(version=v).to_arrow(), f"iceberg-rust, nested v{v}")
    inspect = static(history.table).inspect
    for read in (inspect.entries, inspect.files, inspect.manifests, inspect.all_manifests, inspect.all_files):
        assert read().num_rows > 0, read.__name__
    for read in (inspect.snapshots, inspect.history, inspect.refs, inspect.partitions, inspect.metadata_log_entries):
        read()
