"""Apache Iceberg's Java library (iceberg-spark-runtime 1.10.2 on Spark 3.5, the reader of EMR
Spark, Athena and Trino; stricter than pyiceberg and DuckDB) and pyiceberg read seeded random
histories as castable does: every retained version, and the rows appended between versions
(helpers/iceberg_histories.py; bench/bench_iceberg_readers.py runs many more)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.iceberg_histories import History, java_reads, same, static


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_java_iceberg_and_pyiceberg_read_every_version_of_a_random_history_as_castable(
    tmp_path: Path, seed: int
) -> None:
    history = History(str(tmp_path / "t"), seed)
    history.run(40, expire_at=30)
    versions = history.retained()
    spans = history.append_spans(6)
    assert len(versions) >= 8 and spans, "the history retains versions and runs of appends"
    table, metadata = history.table, static(history.table)
    java = java_reads(table.uri, tmp_path, [*map(str, versions), *(f"{a}:{b}" for a, b in spans)])
    for v in versions:
        want = table.scan(version=v).to_arrow()
        same(java[str(v)], want, f"Java v{v}")
        same(metadata.scan(snapshot_id=v).to_arrow(), want, f"pyiceberg v{v}")
    for a, b in spans:
        want = history.added(a, b)
        same(java[f"{a}:{b}"], want, f"Java ({a}, {b}]")
        scan = metadata.incremental_append_scan(from_snapshot_id_exclusive=a, to_snapshot_id_inclusive=b)
        same(scan.to_arrow(), want, f"pyiceberg ({a}, {b}]")
