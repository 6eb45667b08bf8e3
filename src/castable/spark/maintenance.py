"""Compaction that runs on a Spark cluster, for tables whose compaction outgrows one machine (or
one Lambda): the driver plans the groups of files worth compacting from the manifest
(``Table.plan_compaction``), each Spark task compacts one group with the library and commits it,
and the driver then merges the tombstones of the files that stay. Spark 3.5 and 4.x.

Each group is its own commit, named by the run's id and the group's files, so the groups commit
side by side (they touch different files: a race only rebases) and a re-run of a run that
stopped part way compacts only the groups it had not: the rest are no longer planned. Tasks
commit with the library, so the cluster needs write access to the table itself (not the job
role of the deployment, which commits only through the commit function).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from castable.spark.files import TableLocation

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_RESULT = pa.schema(
    [("version", pa.int64()), ("rewritten", pa.int64()), ("written", pa.int64()), ("dropped", pa.int64())]
)


@dataclass(frozen=True)
class ClusterCompaction:
    """What a run compacted: the groups, the files each side, the deleted rows dropped."""

    groups: int
    files_rewritten: int
    files_written: int
    rows_dropped: int
    version: int
    """The table's version once every group and the tombstones' merge had committed."""


def group_commit_id(run_id: str, files: list[str]) -> str:
    """The commit id of one group: the run's, and a digest of the group's files."""
    return f"{run_id}-{hashlib.sha256(json.dumps(sorted(files)).encode()).hexdigest()[:16]}"


def compact(
    spark: SparkSession,
    table_uri: str,
    run_id: str,
    *,
    min_file_size: int | None = None,
    delete_ratio: float | None = None,
    sort_by: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ClusterCompaction:
    """Compact the table on the cluster, one Spark task per group of files, each group one
    commit (``Table.compact(files=group)``), then merge the tombstones of the files that stay
    in one more commit. ``run_id`` names the run: running it again finishes what is left."""
    location = TableLocation(table_uri, dict(storage_options or {}) or None)
    table = location.open()
    groups = table.plan_compaction(min_file_size=min_file_size, delete_ratio=delete_ratio)
    results: list[Any] = []
    if groups:
        rows = [(json.dumps(group),) for group in groups]
        work = spark.createDataFrame(rows, "files string").repartition(len(groups))

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            mine = location.open()
            for batch in batches:
                for text in batch.column("files").to_pylist():
                    group = json.loads(text)
                    report = mine.compact_group(group, sort_by=sort_by, commit_id=group_commit_id(run_id, group))
                    counts = [
                        report.version,
                        len(report.files_rewritten),
                        len(report.files_written),
                        report.rows_dropped,
                    ]
                    yield pa.RecordBatch.from_pylist([dict(zip(_RESULT.names, counts, strict=True))], _RESULT)

        schema = "version long, rewritten long, written long, dropped long"
        results = work.mapInArrow(run, schema).collect()
    merged = table.refresh().coalesce_tombstones(commit_id=f"{run_id}-tombstones")
    return ClusterCompaction(
        groups=len(groups),
        files_rewritten=sum(r["rewritten"] for r in results),
        files_written=sum(r["written"] for r in results),
        rows_dropped=sum(r["dropped"] for r in results),
        version=merged.version,
    )
