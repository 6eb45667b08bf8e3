"""The change feed in Spark: ``read_changes`` (Spark 4 here, Spark 3.5 through its own
interpreter, as EMR 7 runs it), the data source's ``readChangeFeed`` batch read, the Spark 4
streaming source (restarted from its checkpoint between commits, a commit landing while a batch
runs: every change once, in version order) and Spark 3.5's ``foreach_changes`` loop (a failure
between a range's commit and its checkpoint hands the same range, with the same id, again)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers import ROOT
from helpers.spark import local_session

import castable
from castable.spark import read_changes

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark")]

SPARK35_PYTHON = ROOT / ".venv-spark35" / "bin" / "python"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.large_string())])


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local Spark 4 session for the module."""
    session = local_session("castable-changes")
    yield session
    session.stop()


def rows(ids: list[int], v: str = "x") -> pa.Table:
    return pa.table({"id": ids, "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


def history(uri: str, options: dict[str, str] | None = None) -> castable.Table:
    """A table whose versions append, upsert, delete, update, compact and erase."""
    props = {"write.inline.max-bytes": "0"}
    t = castable.create_table(uri, SCHEMA, primary_key="id", properties=props, storage_options=options)
    t.append(rows(list(range(10))))
    t.append(rows(list(range(10, 20))))
    t.upsert(rows([1, 15, 30], "u"))
    t.delete("id IN (2, 3)")
    t.update({"v": "'w'"}, where="id >= 18")
    t.compact(min_file_size=1 << 30)
    t.erase("id = 4")
    return t


def changed(records: list[Any]) -> list[tuple[Any, ...]]:
    """Change rows as sorted (version, type, id, value) tuples."""
    return sorted((r["_commit_version"], r["_change_type"], r["id"], r["v"]) for r in records)


def test_read_changes_is_the_library_feed(spark: Any, tmp_path: Path) -> None:
    t = history(str(tmp_path / "t"))
    for start, end in [(0, None), (3, 5), (6, 6), (t.version + 1, None)]:
        want = changed(t.changes(start, end).to_arrow().to_pylist())
        assert changed([r.asDict() for r in read_changes(spark, t.uri, start, end).collect()]) == want, (start, end)
    got = read_changes(spark, t.uri, 3, columns=["id"], filter="_change_type = 'update_postimage'")
    assert got.columns == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    assert sorted(r.id for r in got.collect()) == [1, 15, 18, 19, 30]
    batch = spark.read.format("castable").option("readChangeFeed", "true").option("startingVersion", 2)
    both = batch.option("endingVersion", 4).load(t.uri)
    assert changed([r.asDict() for r in both.collect()]) == changed(t.changes(2, 4).to_arrow().to_pylist())
    with pytest.raises(Exception, match="needs startingVersion"):
        spark.read.format("castable").option("readChangeFeed", "true").load(t.uri).collect()


@pytest.mark.s3
def test_read_changes_and_foreach_changes_on_s3(spark: Any, s3_bucket: str, s3_options: dict[str, str]) -> None:
    """From S3 (the moto server): Spark tasks reach the table, and the loop's checkpoint, through
    the storage options."""
    from castable.spark import foreach_changes

    t = history(f"s3://{s3_bucket}/tables/changes", s3_options)
    got = read_changes(spark, t.uri, 0, storage_options=s3_options).collect()
    assert changed([r.asDict() for r in got]) == changed(t.changes(0).to_arrow().to_pylist())
    handed: list[tuple[str, int]] = []
    checkpoint = f"s3://{s3_bucket}/checkpoints/changes.json"
    foreach_changes(spark, t.uri, lambda df, b: handed.append((b, df.count())), checkpoint, storage_options=s3_options)
    assert handed == [(f"{t.manifest.table_uuid}:0-{t.version}", len(got))]
    assert foreach_changes(spark, t.uri, lambda df, b: None, checkpoint, storage_options=s3_options) == []


def test_the_stream_delivers_every_change_once_in_version_order(spark: Any, tmp_path: Path) -> None:
    """A stream from version 0 with a checkpoint, a version a micro-batch: stopped and
    restarted between commits, and a commit landing while a batch runs."""
    t = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id")
    t.append(rows([1, 2, 3]))
    t.upsert(rows([2, 4], "u"))
    batches: list[tuple[int, list[tuple[Any, ...]]]] = []
    landed: list[int] = []

    def sink(df: Any, batch_id: int) -> None:
        batches.append((batch_id, changed([r.asDict() for r in df.collect()])))
        if not landed:  # a commit lands while this batch runs: it is the next batch's
            landed.append(t.delete("id = 1").version)

    def run() -> None:
        stream = (
            spark.readStream.format("castable")
            .option("readChangeFeed", "true")
            .option("startingVersion", 0)
            .option("maxVersionsPerTrigger", 1)
            .load(t.uri)
        )
        query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "cp"))
        query.trigger(availableNow=True).start().awaitTermination()

    run()
    t.update({"v": "'z'"}, where="id = 3")
    t.compact(min_file_size=1 << 30)
    t.append(rows([9]))
    run()
    run()  # nothing new: no batch
    seen = [row for _, rows_ in batches for row in rows_]
    assert seen == changed(t.changes(0).to_arrow().to_pylist())
    versions = [sorted({r[0] for r in rows_}) for _, rows_ in batches if rows_]
    assert versions == sorted(versions) and all(len(v) == 1 for v in versions)
    assert landed and [landed[0]] in versions

    inserts = (
        spark.readStream.format("castable")
        .option("startingVersion", 0)
        .load(t.uri)
        .writeStream.format("memory")
        .queryName("inserts")
        .trigger(availableNow=True)
        .start()
    )
    inserts.awaitTermination()
    got = spark.sql("SELECT * FROM inserts").collect()
    assert sorted(r.id for r in got) == [1, 2, 3, 4, 9] and spark.sql("SELECT * FROM inserts").columns == ["id", "v"]


SPARK_35 = """
import json, sys
from pyspark.sql import SparkSession
from castable.spark import foreach_changes, read_changes
import castable
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
uri, checkpoint = sys.argv[1:3]
t = castable.open_table(uri)
got = [[r["_commit_version"], r["_change_type"], r["id"], r["v"]] for r in read_changes(spark, uri, 0).collect()]
handed = []
def fail_after_commit(df, batch_id):
    handed.append([batch_id, df.count()])
    if len(handed) == 2:
        raise RuntimeError("lost between the commit and the checkpoint")
try:
    foreach_changes(spark, uri, fail_after_commit, checkpoint, max_versions=2)
except RuntimeError:
    pass
foreach_changes(spark, uri, lambda df, b: handed.append([b, df.count()]), checkpoint, max_versions=2)
print(json.dumps({"changes": sorted(got), "handed": handed}))
"""


def test_spark_35_reads_changes_and_follows_them(tmp_path: Path) -> None:
    """Under pyspark 3.5 (EMR 7): ``read_changes`` as the library reads, and ``foreach_changes``
    handing each range once but for the range whose checkpoint was lost, handed again with its id."""
    if not SPARK35_PYTHON.exists():
        pytest.fail(f"{SPARK35_PYTHON} is missing: `make test` builds it (pyspark 3.5, as on EMR 7.x)")
    t = history(str(tmp_path / "t"))
    env = {**os.environ, "PYSPARK_PYTHON": str(SPARK35_PYTHON), "PYSPARK_DRIVER_PYTHON": str(SPARK35_PYTHON)}
    command = [str(SPARK35_PYTHON), "-c", SPARK_35, t.uri, str(tmp_path / "checkpoint.json")]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert sorted(tuple(r) for r in out["changes"]) == changed(t.changes(0).to_arrow().to_pylist())
    uuid = t.manifest.table_uuid
    ranges = [(0, 1), (2, 3), (2, 3), (4, 5), (6, 7)]
    assert [h[0] for h in out["handed"]] == [f"{uuid}:{a}-{b}" for a, b in ranges]
    assert [h[1] for h in out["handed"]] == [t.changes(a, b).count() for a, b in ranges]


def test_a_keyless_update_on_spark_pairs_each_row_with_its_new_value(spark: Any, tmp_path: Path) -> None:
    """Spark's update writes the changed rows in the library's order whatever order its tasks
    finish in, so the change feed pairs each old row of a keyless table with its new one."""
    from castable.spark import update

    schema = pa.schema([("rid", pa.int64()), ("k", pa.int64())])
    props = {"write.target-file-size-bytes": 4_000, "write.row-group-size-bytes": 2_000}
    t = castable.create_table(str(tmp_path / "t"), schema, properties=props)
    for start in range(0, 4_000, 500):
        ids = list(range(start, start + 500))
        t.append(pa.table({"rid": ids, "k": [i % 5 for i in ids]}, schema=schema))
    t.append(pa.table({"rid": [9_000, 9_001], "k": [1, 2]}, schema=schema))  # inline
    v = update(spark, t.uri, {"k": "k + 100"}, "k = 1").version
    got = castable.open_table(t.uri).changes(v).to_arrow().to_pylist()
    assert len(got) == 2 * (800 + 1)
    for pre, post in zip(got[0::2], got[1::2], strict=True):
        assert (pre["_change_type"], post["_change_type"]) == ("update_preimage", "update_postimage")
        assert (post["rid"], post["k"]) == (pre["rid"], 101)
