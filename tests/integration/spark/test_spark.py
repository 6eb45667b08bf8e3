"""Spark in local mode against S3 on the moto server: the ingest job (Spark 4 in-process, Spark
3.5 through spark-submit) committing directly and through the commit Lambda, and the castable
data source reading and writing beside the library. A replace write (upsert, overwrite, overwrite
where) must leave the same rows as the library's own on a twin table."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ROOT
from helpers.spark import local_session
from helpers.tables import EVENTS, FILES_ONLY, events, snapshot_of

import castable
from castable.ops.register import read_file_list
from castable.read.snapshot import Snapshot
from castable.spark.ingest import ingest
from castable.spark.ingest import main as ingest_main
from castable.spark.remote import invoke_commit
from castable.table import Table
from castable.tables import load_table

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark")]

SPARK35_PYTHON = ROOT / ".venv-spark35" / "bin" / "python"
SMALL_FILES = {"write.target-file-size-bytes": 6_000, "write.row-group-size-bytes": 3_000}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local Spark 4 session for the module."""
    session = local_session("castable-tests")
    yield session
    session.stop()


@pytest.fixture
def options(s3_options: dict[str, str]) -> dict[str, str]:
    return s3_options


@pytest.fixture
def table(s3_bucket: str, options: dict[str, str]) -> Table:
    return castable.create_table(
        f"s3://{s3_bucket}/events", EVENTS, primary_key="id", properties=SMALL_FILES, storage_options=options
    )


@pytest.fixture
def files_table(s3_bucket: str, options: dict[str, str]) -> Table:
    """A table like ``table`` whose every write is a data file, none kept inline: for tests of
    how Spark splits and groups files."""
    props = {**SMALL_FILES, **FILES_ONLY}
    return castable.create_table(
        f"s3://{s3_bucket}/files", EVENTS, primary_key="id", properties=props, storage_options=options
    )


@pytest.fixture
def twin(s3_bucket: str, options: dict[str, str]) -> Table:
    """A table like ``table`` at another prefix, for the library to do what Spark does to ``table``."""
    return castable.create_table(
        f"s3://{s3_bucket}/twin", EVENTS, primary_key="id", properties=SMALL_FILES, storage_options=options
    )


def changed(start: int, stop: int) -> pa.Table:
    """Rows with ids in [start, stop) whose category differs from ``events``'s."""
    rows = events(start, stop)
    return rows.set_column(1, "category", pa.array(["new"] * rows.num_rows, pa.string()))


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    """A multi-file Parquet source: ids 0..2999 in three files."""
    root = tmp_path / "landing"
    root.mkdir()
    for i in range(3):
        pq.write_table(events(i * 1000, i * 1000 + 1000), root / f"part-{i}.parquet")
    return root


def storage_args(options: dict[str, str]) -> list[str]:
    return [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]


def ids(t: Table, **kwargs: Any) -> list[int]:
    return sorted(load_table(t.store).scan(["id"], **kwargs).to_arrow().column("id").to_pylist())


def spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def paths(t: Table) -> set[str]:
    return {f.path for f in t.manifest.data_files}


def library_rows(t: Table, **kwargs: Any) -> list[tuple[Any, ...]]:
    data = load_table(t.store).scan(**kwargs).to_arrow()
    return sorted(zip(*(data.column(n).to_pylist() for n in data.column_names), strict=True))


# ---------------------------------------------------------------------- ingest job


def test_job_appends_a_multi_file_dataset_in_one_commit(
    spark: Any, table: Table, landing: Path, options: dict[str, str]
) -> None:
    argv = ["--source", str(landing), "--table", table.uri, "--commit-id", "load-1", "--direct", "--partitions", "3"]
    result = ingest_main([*argv, *storage_args(options)], spark=spark)
    latest = load_table(table.store)
    assert (result.version, latest.version, result.already_committed) == (1, 1, False)
    assert result.rows == 3000 and result.files == len(latest.manifest.data_files) > 3
    assert ids(table) == list(range(3000))
    assert library_rows(table) == sorted(
        zip(*(events(0, 3000).column(n).to_pylist() for n in EVENTS.names), strict=True)
    )
    for f in latest.manifest.data_files:
        meta = pq.read_metadata(latest.store.open_input(f.path, size=f.size, etag=f.etag))
        assert f.path.startswith("data/") and f.stats and meta.num_row_groups == f.row_groups
        assert f.size < 2 * SMALL_FILES["write.target-file-size-bytes"]
    entry = latest.history(limit=1)[0]
    assert (entry.commit_id, entry.summary["rows_added"]) == ("load-1", 3000)


def test_job_rerun_with_the_same_commit_id_adds_nothing(
    spark: Any, table: Table, landing: Path, options: dict[str, str]
) -> None:
    argv = ["--source", str(landing), "--table", table.uri, "--commit-id", "load-1", "--direct", *storage_args(options)]
    first = ingest_main(argv, spark=spark)
    before = snapshot_of(table.store)
    again = ingest_main(argv, spark=spark)
    assert again.already_committed and again.version == first.version and again.rows == 3000
    assert snapshot_of(table.store) == before


def test_job_commits_through_the_commit_lambda(
    spark: Any, table: Table, landing: Path, options: dict[str, str], commit_function: str
) -> None:
    argv = ["--source", str(landing), "--table", table.uri, "--commit-id", "emr-7", *storage_args(options)]
    result = ingest_main([*argv, "--commit-function", commit_function], spark=spark)
    assert (result.version, result.rows, result.already_committed) == (1, 3000, False)
    assert ids(table) == list(range(3000))
    assert load_table(table.store).history(limit=1)[0].summary["registered"] is True
    (listed,) = [o.key for o in table.store.list("data/_file_lists/")]
    committed = [replace(f, added_version=0) for f in load_table(table.store).manifest.data_files]
    assert sorted(read_file_list(table.store, listed, table.schema), key=str) == sorted(committed, key=str), (
        "the executors' entries, statistics and all, went to the function as one object"
    )
    before = snapshot_of(table.store)
    again = ingest_main([*argv, "--commit-function", commit_function], spark=spark)
    assert again.already_committed and snapshot_of(table.store) == before
    table.gc(orphan_grace=timedelta(0))
    assert not list(table.store.list("data/_file_lists/")), "gc takes the list, which nothing refers to"


def test_job_upserts_through_the_commit_lambda(
    spark: Any, table: Table, twin: Table, landing: Path, options: dict[str, str], commit_function: str
) -> None:
    for t in (table, twin):
        t.append(changed(2000, 4000))
    argv = ["--source", str(landing), "--table", table.uri, "--commit-id", "up-1", "--mode", "upsert"]
    argv += [*storage_args(options), "--commit-function", commit_function]
    result = ingest_main(argv, spark=spark)
    twin.upsert(events(0, 3000))
    assert (result.mode, result.version, result.rows, result.already_committed) == ("upsert", 2, 3000, False)
    assert library_rows(table) == library_rows(twin)
    assert load_table(table.store).history(limit=1)[0].operation == "upsert"
    before = snapshot_of(table.store)
    again = ingest_main(argv, spark=spark)
    assert (again.mode, again.version, again.already_committed) == ("upsert", 2, True)
    assert snapshot_of(table.store) == before


def test_job_overwrites_the_rows_matching_replace_where(
    spark: Any, table: Table, twin: Table, landing: Path, options: dict[str, str]
) -> None:
    for t in (table, twin):
        t.append(changed(0, 5000))
    argv = ["--source", str(landing), "--table", table.uri, "--direct", "--mode", "overwrite", *storage_args(options)]
    result = ingest_main([*argv, "--commit-id", "day-1", "--replace-where", "id < 3000"], spark=spark)
    twin.overwrite(events(0, 3000), where="id < 3000")
    assert (result.mode, result.version, result.rows) == ("overwrite", 2, 3000)
    assert library_rows(table) == library_rows(twin)
    before = snapshot_of(table.store)
    with pytest.raises(castable.InvalidInputError, match="1000 of the 3000 rows do not match"):
        ingest_main([*argv, "--commit-id", "day-2", "--replace-where", "id < 2000"], spark=spark)
    assert load_table(table.store).version == 2
    table.gc(orphan_grace=timedelta(0))
    assert snapshot_of(table.store) == before


def test_commit_lambda_errors_come_back_as_castable_errors(table: Table, commit_function: str) -> None:
    before = snapshot_of(table.store)
    with pytest.raises(castable.InvalidInputError, match="not under the table's data prefix"):
        invoke_commit(commit_function, table.uri, ["../elsewhere/x.parquet"], "bad-1")
    with pytest.raises(castable.InvalidInputError, match="does not exist"):
        invoke_commit(commit_function, table.uri, ["data/2026/nope.parquet"], "bad-2")
    with pytest.raises(castable.InvalidInputError, match="mode='overwrite' only"):
        invoke_commit(commit_function, table.uri, ["data/2026/nope.parquet"], "bad-3", mode="upsert", where="id > 1")
    assert snapshot_of(table.store) == before


def test_job_with_a_wrong_schema_fails_and_leaves_only_orphans(
    spark: Any, table: Table, tmp_path: Path, options: dict[str, str]
) -> None:
    table.append(events(0, 10))
    before = snapshot_of(table.store)
    bad = tmp_path / "bad"
    bad.mkdir()
    wrong = pa.table({"id": pa.array(["1", "2"]), "category": ["a", "b"], "value": [1.0, 2.0]})
    pq.write_table(wrong, bad / "part-0.parquet")
    argv = ["--source", str(bad), "--table", table.uri, "--commit-id", "bad", "--direct", *storage_args(options)]
    with pytest.raises(Exception, match="column 'id' is string, expected int64"):
        ingest_main(argv, spark=spark)
    pq.write_table(wrong.drop_columns(["value"]), bad / "part-0.parquet")
    with pytest.raises(castable.SchemaMismatchError, match=r"missing \['value'\]"):
        ingest_main(argv, spark=spark)
    assert load_table(table.store).version == table.version
    table.gc(orphan_grace=timedelta(0))
    assert snapshot_of(table.store) == before


def test_job_with_merge_schema_adds_the_new_columns_through_the_commit_lambda(
    spark: Any, table: Table, tmp_path: Path, options: dict[str, str], commit_function: str
) -> None:
    """``--schema-mode merge`` (Spark's mergeSchema): the column the source brings is added in a
    commit of its own, then the rows land with it; a nullable column the source lacks is NULL.
    Without it the same source is refused before anything is written."""
    table.append(events(0, 10))
    landing = tmp_path / "wider"
    landing.mkdir()
    rows = events(100, 110).drop_columns(["value"])
    pq.write_table(rows.append_column("tag", pa.array([f"t{i}" for i in range(10)])), landing / "part-0.parquet")
    argv = ["--source", str(landing), "--table", table.uri, "--commit-id", "wide-1", *storage_args(options)]
    argv += ["--commit-function", commit_function]
    before = snapshot_of(table.store)
    with pytest.raises(castable.SchemaMismatchError, match=r"missing \['value'\], unknown \['tag'\]"):
        ingest_main(argv, spark=spark)
    assert snapshot_of(table.store) == before, "refused before any file is written"
    result = ingest_main([*argv, "--schema-mode", "merge"], spark=spark)
    after = load_table(table.store)
    assert after.schema.names == ["id", "category", "value", "tag"] and result.version == after.version == 3
    assert [h.operation for h in after.history(limit=2)] == ["append", "alter"]
    got = {r["id"]: (r["value"], r["tag"]) for r in after.scan(["id", "value", "tag"]).to_arrow().to_pylist()}
    assert got[5] == (2.5, None) and got[105] == (None, "t5")
    again = ingest_main([*argv, "--schema-mode", "merge"], spark=spark)
    assert again.already_committed and load_table(table.store).version == 3
    with pytest.raises(castable.InvalidInputError, match="schema_mode must be 'strict' or 'merge'"):
        ingest(spark.range(1), table.uri, "wide-2", storage_options=options, schema_mode="wide")  # type: ignore[arg-type]


def test_data_source_merge_schema_adds_columns(spark: Any, table: Table, options: dict[str, str]) -> None:
    table.append(events(0, 10))
    wider = spark.createDataFrame([(100, "a", 1.0, 7)], "id long, category string, value double, score int")
    writer = wider.write.format("castable").mode("append").options(**options)
    with pytest.raises(Exception, match="score"):
        writer.save(table.uri)
    writer.option("mergeSchema", "true").option("commitId", "wider-1").save(table.uri)
    after = load_table(table.store)
    assert after.schema.field("score").type == pa.int32()
    assert after.scan(["id", "score"], filter="id = 100").to_arrow().to_pylist() == [{"id": 100, "score": 7}]
    assert after.scan(["score"], filter="id = 1").to_arrow().column("score").to_pylist() == [None]


def test_compaction_on_the_cluster_keeps_every_row_and_a_rerun_finishes_what_is_left(
    spark: Any, files_table: Table, options: dict[str, str]
) -> None:
    """castable.spark.compact: one Spark task per group of files, each group one commit, then
    the tombstones of the files that stay merged; the rows are the library's before and after."""
    from castable.spark import compact
    from castable.spark.maintenance import group_commit_id

    table = files_table
    for i in range(12):
        table.append(events(i * 100, i * 100 + 100))
    table.delete("id IN (5, 250, 777)")
    table.delete("id BETWEEN 1100 AND 1105")
    before = library_rows(table)
    groups = table.plan_compaction()
    assert len(groups) >= 2
    table.compact_group(groups[0], commit_id=group_commit_id("nightly", groups[0]))  # a run that stopped
    done = compact(spark, table.uri, "nightly", storage_options=options)
    after = load_table(table.store)
    assert library_rows(after) == before
    assert done.groups == len(groups) - 1 and done.files_rewritten == sum(len(g) for g in groups[1:])
    assert len(after.manifest.data_files) < 12 and len(after.manifest.tombstones) <= 1
    assert done.version == after.version
    assert compact(spark, table.uri, "nightly", storage_options=options).groups == 0
    assert load_table(table.store).version == after.version, "a finished run commits nothing more"


def test_delete_reads_its_files_in_spark_tasks_and_commits_one_tombstone(
    spark: Any, table: Table, twin: Table, options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """castable.spark.delete: the files a predicate must read are read by Spark tasks (the
    driver reads no row: its Snapshot.read raises), and one tombstone deletes what the
    library's own delete deletes on a twin; a re-run with the same commit id adds nothing."""
    from castable.spark import delete

    for i in range(9):
        table.append(events(i * 100, i * 100 + 100))
        twin.append(events(i * 100, i * 100 + 100))
    where = "value > 120 AND category = 'b' OR id BETWEEN 10 AND 14"
    before, rows_before = load_table(table.store), library_rows(table)

    def no_reads_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the driver read rows")

    monkeypatch.setattr(Snapshot, "read", no_reads_here)
    version = delete(spark, table.uri, where, commit_id="spark-delete", storage_options=options).version
    monkeypatch.undo()
    twin.delete(where)
    after = load_table(table.store)
    assert version == after.version == before.version + 1
    assert library_rows(after) == library_rows(twin) != rows_before
    assert len(after.manifest.tombstones) == 1 and paths(after) == paths(before)
    assert delete(spark, table.uri, where, commit_id="spark-delete", storage_options=options).version == version
    assert delete(spark, table.uri, "id < 0", storage_options=options).version == version, "nothing matches: no commit"
    assert load_table(table.store).version == version


def test_a_cluster_delete_whose_files_change_first_is_planned_again_on_the_cluster(
    spark: Any, table: Table, twin: Table, options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer compacts the files the cluster's plan read, after the plan and before its
    commit: the delete is planned again on the newer version (the planner runs twice) and
    deletes the same rows from the compacted file."""
    from castable.spark import delete
    from castable.spark.dml import ClusterPlanner

    for i in range(4):
        table.append(events(i * 100, i * 100 + 100))
        twin.append(events(i * 100, i * 100 + 100))
    where = "value > 120 AND category = 'b'"
    planned = ClusterPlanner.__call__
    versions: list[int] = []

    def racing(self: ClusterPlanner, snapshot: Snapshot, files: list[Any], predicate: Any) -> Any:
        plan = planned(self, snapshot, files, predicate)
        if not versions:
            load_table(table.store).compact()  # replaces every file the plan read
        versions.append(snapshot.manifest.version)
        return plan

    monkeypatch.setattr(ClusterPlanner, "__call__", racing)
    version = delete(spark, table.uri, where, storage_options=options).version
    twin.delete(where)
    assert versions == [4, 5] and version == 6
    assert len(load_table(table.store).manifest.data_files) == 1
    assert library_rows(load_table(table.store)) == library_rows(twin)


def test_update_rewrites_the_matching_rows_in_spark_tasks_in_one_commit(
    spark: Any, table: Table, twin: Table, options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """castable.spark.update: the matching rows are read, changed and written by Spark tasks
    (the driver reads no row), replaced through one tombstone in one commit, leaving what the
    library's own update leaves on a twin; a re-run with the same commit id adds nothing."""
    from castable.spark import update

    for i in range(9):
        table.append(events(i * 100, i * 100 + 100))
        twin.append(events(i * 100, i * 100 + 100))
    where = "value > 120 AND category = 'b' OR id BETWEEN 10 AND 14"
    changes = {"category": "'z'", "value": "value * 2"}
    before, rows_before = load_table(table.store), library_rows(table)

    def no_reads_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the driver read rows")

    monkeypatch.setattr(Snapshot, "read", no_reads_here)
    version = update(spark, table.uri, changes, where, commit_id="spark-update", storage_options=options).version
    monkeypatch.undo()
    twin.update(changes, where)
    after = load_table(table.store)
    assert version == after.version == before.version + 1
    assert library_rows(after) == library_rows(twin) != rows_before
    assert len(after.manifest.tombstones) == 1
    assert paths(before) < paths(after), "every old file kept, new files added"
    assert after.history()[0].summary["rows_updated"] == len(library_rows(twin, filter="category = 'z'"))
    assert (
        update(spark, table.uri, changes, where, commit_id="spark-update", storage_options=options).version == version
    )
    assert update(spark, table.uri, changes, "id < 0", storage_options=options).version == version, "no row: no commit"


def merge_source(spark: Any, start: int, stop: int) -> tuple[pa.Table, Any]:
    """Source rows for ids in [start, stop), every third marked for deletion: as Arrow (for the
    library) and as a Spark DataFrame."""
    rows = changed(start, stop)
    ops = pa.array(["d" if i % 3 == 0 else "u" for i in range(rows.num_rows)])
    rows = rows.append_column("op", ops)
    return rows, spark.createDataFrame(rows.to_pandas())


def test_merge_decides_and_writes_in_spark_tasks_in_one_commit(
    spark: Any, table: Table, twin: Table, options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """castable.spark.merge: the library's clauses (matched delete and update with conditions,
    not-matched insert) decided and the new rows written by Spark tasks (the driver reads no
    row but the keys of small files its key-list delete checks), committed as one tombstone
    plus new files, untouched rows never rewritten: the rows the library's own merge leaves on
    a twin; a re-run with the same commit id adds nothing."""
    from castable.spark import merge

    for i in range(6):
        table.append(events(i * 100, i * 100 + 100))
        twin.append(events(i * 100, i * 100 + 100))
    rows, source = merge_source(spark, 550, 700)  # 50 matched, 100 not

    def clauses(builder: Any) -> Any:
        return (
            builder.when_matched_delete(where="s.op = 'd'")
            .when_matched_update(set={"value": "t.value + s.value", "category": "s.category"})
            .when_not_matched_insert_all(where="s.op != 'd'")
        )

    before = load_table(table.store)
    read = Snapshot.read

    def keys_only(self: Snapshot, f: Any, footer: Any, columns: list[str], row_groups: Any) -> Any:
        assert columns == ["id"], "the driver read rows (a key-list delete may check small files' keys)"
        return read(self, f, footer, columns, row_groups)

    monkeypatch.setattr(Snapshot, "read", keys_only)
    result = clauses(merge(spark, table.uri, source, storage_options=options)).execute(commit_id="spark-merge")
    monkeypatch.undo()
    expected = clauses(twin.merge(rows)).execute()
    after = load_table(table.store)
    counts = (result.rows_deleted, result.rows_updated, result.rows_inserted)
    assert counts == (expected.rows_deleted, expected.rows_updated, expected.rows_inserted)
    assert result.version == after.version == before.version + 1
    assert min(result.rows_deleted, result.rows_updated, result.rows_inserted) > 0
    assert library_rows(after) == library_rows(twin)
    assert len(after.manifest.tombstones) == 1 and paths(before) < paths(after), "old files kept, new added"
    again = clauses(merge(spark, table.uri, source, storage_options=options)).execute(commit_id="spark-merge")
    assert again.version == result.version and load_table(table.store).version == result.version


def test_merge_from_spark_refuses_what_the_library_refuses(spark: Any, table: Table, options: dict[str, str]) -> None:
    """A source key held twice, a NULL key or no clause is refused before anything is written."""
    from castable.errors import InvalidInputError, SchemaMismatchError
    from castable.spark import merge

    table.append(events(0, 10))
    before = load_table(table.store).version
    twice = spark.createDataFrame([(1, "a", 1.0), (1, "b", 2.0)], "id long, category string, value double")
    with pytest.raises(InvalidInputError, match="more than once"):
        merge(spark, table.uri, twice, storage_options=options).when_matched_delete().execute()
    null = spark.createDataFrame([(None, "a", 1.0)], "id long, category string, value double")
    with pytest.raises(SchemaMismatchError, match="NULLs"):
        merge(spark, table.uri, null, storage_options=options).when_matched_delete().execute()
    with pytest.raises(InvalidInputError, match="at least one"):
        merge(spark, table.uri, twice.limit(1), storage_options=options).execute()
    assert load_table(table.store).version == before


def test_job_arguments_are_checked(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("CASTABLE_COMMIT_FUNCTION", raising=False)
    base = ["--source", "x", "--table", "s3://b/t", "--commit-id", "c"]
    for extra, match in [
        ([], "give --commit-function"),
        (["--direct", "--mode", "merge"], "invalid choice: 'merge'"),
        (["--direct", "--schema-mode", "wide"], "invalid choice: 'wide'"),
        (["--direct", "--mode", "upsert", "--replace-where", "id > 1"], "--replace-where applies to --mode overwrite"),
    ]:
        with pytest.raises(SystemExit):
            ingest_main([*base, *extra])
        assert match in capsys.readouterr().err


def on_spark_35(command: list[str], **env: str) -> Any:
    """Run ``command`` with pyspark 3.5 (as EMR 7.x) as Spark's Python; the JSON its last line prints."""
    if not SPARK35_PYTHON.exists():
        pytest.fail(f"{SPARK35_PYTHON} is missing: `make test` builds it (pyspark 3.5, as on EMR 7.x)")
    python = {"PYSPARK_PYTHON": str(SPARK35_PYTHON), "PYSPARK_DRIVER_PYTHON": str(SPARK35_PYTHON)}
    run = subprocess.run(command, env={**os.environ, **python, **env}, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_job_upserts_on_spark_35_with_spark_submit(
    table: Table, twin: Table, landing: Path, options: dict[str, str], commit_function: str, s3_endpoint: str
) -> None:
    for t in (table, twin):
        t.append(changed(2000, 4000))
    submit = SPARK35_PYTHON.parent / "spark-submit"
    argv = ["--source", str(landing), "--table", table.uri, "--commit-id", "emr-35", "--mode", "upsert"]
    argv += storage_args(options)
    job = [str(submit), "--master", "local[2]", str(ROOT / "jobs" / "castable_ingest.py"), *argv]
    result = on_spark_35(job, AWS_ENDPOINT_URL_LAMBDA=s3_endpoint, CASTABLE_COMMIT_FUNCTION=commit_function)
    assert [result[k] for k in ("mode", "version", "rows", "already_committed")] == ["upsert", 2, 3000, False]
    twin.upsert(events(0, 3000))
    assert library_rows(table) == library_rows(twin)
    assert load_table(table.store).history(limit=1)[0].operation == "upsert"
    version = subprocess.run(
        [str(SPARK35_PYTHON), "-c", "import pyspark; print(pyspark.__version__)"], capture_output=True, text=True
    )
    assert version.stdout.startswith("3.5.")


# -------------------------------------------------------------------- data source


def build_history(table: Table) -> dict[int, datetime]:
    """Appends, soft deletes of every kind and an erase; returns each version's commit time."""
    for i in range(4):
        table.append(events(i * 1000, i * 1000 + 1000))
    table.delete("id BETWEEN 100 AND 199")
    table.delete("id IN (1001, 1500, 2999) OR category = 'c' AND id > 3500")
    table.delete("value < 10")
    table.erase("id = 2500", mode="rewrite")
    return {h.version: cast(datetime, h.timestamp) for h in table.history()}  # every version is readable


def test_data_source_reads_what_the_library_reads_at_every_version(
    spark: Any, table: Table, options: dict[str, str]
) -> None:
    times = build_history(table)
    path = table.uri
    latest = spark.read.format("castable").options(**options).load(path)
    assert latest.schema.simpleString() == "struct<id:bigint,category:string,value:double>"
    assert spark_rows(latest) == library_rows(table)
    for version in sorted(times):
        df = spark.read.format("castable").options(**options).option("versionAsOf", version).load(path)
        assert spark_rows(df) == library_rows(table, version=version), version
    as_of = times[3] + (times[4] - times[3]) / 2
    df = spark.read.format("castable").options(**options).option("timestampAsOf", as_of.isoformat()).load(path)
    assert spark_rows(df) == library_rows(table, version=3)


def test_data_source_reads_an_evolved_table_with_each_versions_schema(
    spark: Any, table: Table, options: dict[str, str]
) -> None:
    """Renamed, widened, added, dropped and re-added columns: at every version, both planning
    paths read the rows the library reads, under that version's schema."""
    import pyarrow as pa

    build_history(table)
    table.alter().rename_column("value", "amount").add_column("note", pa.string(), default="old").commit()
    table.append(pa.table({"id": [9000], "category": ["n"], "amount": [1.5], "note": ["new"]}))
    table.alter().drop_column("category").widen_column("note", pa.large_string()).commit()
    table.alter().add_column("category", pa.string()).commit()
    table.append(pa.table({"id": [9001], "amount": [2.5], "note": ["x"], "category": ["again"]}))
    history = load_table(table.store).history()
    for reader in (
        spark.read.format("castable").options(**options),
        spark.read.format("castable").options(**options).option("executorPlanningFiles", "1"),
    ):
        for version in sorted(h.version for h in history)[1:]:
            df = reader.option("versionAsOf", version).load(table.uri)
            assert df.columns == load_table(table.store).manifest_at(version).schema.names, version
            assert spark_rows(df) == library_rows(table, version=version), version
    latest = spark.read.format("castable").options(**options).load(table.uri)
    assert latest.schema.simpleString() == "struct<id:bigint,amount:double,note:string,category:string>"
    assert {r.category for r in latest.collect()} == {None, "again"}, "the dropped column's values never come back"
    query = "amount > 1000 AND note = 'old'"
    pruned = spark.read.format("castable").options(**options).option("filter", query).load(table.uri)
    assert spark_rows(pruned) == library_rows(table, filter=query)


def test_data_source_plans_on_the_executors_from_segment_slices(
    spark: Any, table: Table, options: dict[str, str]
) -> None:
    """With many files (here: any), each task reads a slice of a segment, prunes it and reads
    its files: the same rows as the library, at every version, filtered or not."""
    times = build_history(table)
    for i in range(12):  # enough small appends for the writer to merge segments too
        table.append(events(10_000 + i, 10_001 + i))
    reader = spark.read.format("castable").options(**options).option("executorPlanningFiles", "1")
    sliced = reader.option("maxPartitionBytes", "4000").load(table.uri)
    assert sliced.rdd.getNumPartitions() >= len(load_table(table.store).manifest.data_files.parts)
    assert spark_rows(sliced) == library_rows(table)
    for version in sorted(times)[1:]:
        assert spark_rows(reader.option("versionAsOf", version).load(table.uri)) == library_rows(table, version=version)
    query = "id BETWEEN 2000 AND 3100 AND category = 'a'"
    pruned = reader.option("filter", query).option("columns", "value, id").load(table.uri)
    assert spark_rows(pruned) == library_rows(table, columns=["value", "id"], filter=query)


def test_data_source_splits_files_and_prunes_by_its_options(
    spark: Any, files_table: Table, options: dict[str, str]
) -> None:
    table = files_table
    build_history(table)
    reader = spark.read.format("castable").options(**options).option("maxPartitionBytes", "4000")
    df = reader.load(table.uri)
    files = len(load_table(table.store).manifest.data_files)
    assert df.rdd.getNumPartitions() > files
    query = "id BETWEEN 3000 AND 3100 AND category = 'a'"
    pruned = reader.option("filter", query).option("columns", "value, id").load(table.uri)
    assert pruned.columns == ["value", "id"]
    assert pruned.rdd.getNumPartitions() < files
    assert spark_rows(pruned) == library_rows(table, columns=["value", "id"], filter=query)


def test_a_reused_data_frame_reads_each_query_afresh(spark: Any, table: Table, options: dict[str, str]) -> None:
    build_history(table)
    df = spark.read.format("castable").options(**options).load(table.uri)
    for text in ("id < 10", "category LIKE 'b%' OR id < 5", "NOT (id >= 50)", "category IS NULL AND id IN (3, 1003)"):
        assert spark_rows(df.filter(text)) == library_rows(table, filter=text), text
        assert df.count() == load_table(table.store).count()


def test_spark_appends_and_library_appends_see_each_other(spark: Any, table: Table, options: dict[str, str]) -> None:
    table.append(events(0, 500))
    df = spark.createDataFrame(events(500, 1500))
    df.write.format("castable").options(**options).option("commitId", "spark-1").mode("append").save(table.uri)
    assert ids(table) == list(range(1500))
    assert load_table(table.store).history(limit=1)[0].commit_id == "spark-1"
    before = snapshot_of(table.store)
    df.write.format("castable").options(**options).option("commitId", "spark-1").mode("append").save(table.uri)
    assert snapshot_of(table.store) == before
    load_table(table.store).append(events(1500, 1600))
    load_table(table.store).delete("id < 100")
    read = spark.read.format("castable").options(**options).load(table.uri)
    assert sorted(r.id for r in read.select("id").collect()) == list(range(100, 1600))


def test_spark_writes_a_partitioned_table_a_file_per_partition_per_task(
    spark: Any, s3_bucket: str, options: dict[str, str]
) -> None:
    """Each Spark task writes its rows of each partition to files of their own, with the spec
    and values the library's writer gives the same rows, and a read prunes by them."""
    table = castable.create_table(
        f"s3://{s3_bucket}/parted", EVENTS, partition_by=["category", "bucket(4, id)"], storage_options=options
    )
    spark.createDataFrame(events(0, 400)).repartition(3).write.format("castable").options(**options).mode(
        "append"
    ).save(table.uri)
    written = list(load_table(table.store).manifest.data_files)
    table.refresh().append(events(0, 400))
    mine = [f for f in table.manifest.data_files if f.added_version == table.version]
    assert all(f.partition for f in written) and {f.partition for f in written} == {f.partition for f in mine}
    assert len(mine) == 16 and len(written) <= 3 * 16
    read = spark.read.format("castable").options(**options).load(table.uri).where("category = 'a' AND id = 8")
    assert [r.id for r in read.select("id").collect()] == [8, 8]
    assert len(table.scan(filter="category = 'a' AND id = 8").files()) == 2


def test_data_source_writes_without_commit_id_commit_as_their_rows(
    spark: Any, table: Table, options: dict[str, str]
) -> None:
    """Without commitId a write's id is the application's and its rows' digest. Run again (as a
    retried application does) with one query more before them and in the other order, the same
    writes commit nothing; a write of other rows commits."""
    app = spark.sparkContext.applicationId

    def write(start: int, stop: int, partitions: int) -> None:
        df = spark.createDataFrame(events(start, stop)).repartition(partitions)
        df.write.format("castable").options(**options).mode("append").save(table.uri)

    write(0, 100, 2)
    write(100, 200, 3)
    first = load_table(table.store)
    ids_ = [h.commit_id for h in first.history(limit=2)]
    assert all(i.startswith(f"spark-{app}-") and len(i.rsplit("-", 1)[1]) == 32 for i in ids_), ids_
    assert len(set(ids_)) == 2 and ids(table) == list(range(200))
    spark.range(5).count()  # the retry runs one query more before its writes: its query numbers shift
    write(100, 200, 1)  # and its writes in the other order, split otherwise
    write(0, 100, 4)
    assert load_table(table.store).version == first.version, "a retried write commits nothing"
    write(200, 250, 2)
    assert ids(table) == list(range(250)), "every write exactly once"


def test_data_source_overwrites_and_upserts_as_the_library_does(
    spark: Any, table: Table, twin: Table, options: dict[str, str]
) -> None:
    for t in (table, twin):
        t.append(events(0, 1000))
    steps: list[tuple[pa.Table, str, dict[str, str]]] = [
        (changed(900, 1100), "append", {"upsert": "true"}),
        (changed(100, 300), "overwrite", {"replaceWhere": "id BETWEEN 100 AND 399"}),
        (changed(0, 0), "overwrite", {"replaceWhere": "category = 'c'"}),  # deletes the range
        (events(5000, 5600), "overwrite", {}),
    ]
    for i, (data, mode, extra) in enumerate(steps):
        writer = spark.createDataFrame(data, schema="id long, category string, value double").write
        writer = writer.format("castable").options(**options, **extra).option("commitId", f"step-{i}").mode(mode)
        writer.save(table.uri)
        if extra.get("upsert"):
            twin.upsert(data)
        else:
            twin.overwrite(data, where=extra.get("replaceWhere"))
        assert library_rows(table) == library_rows(twin), i
        before = snapshot_of(table.store)
        writer.save(table.uri)
        assert snapshot_of(table.store) == before, f"step {i} again with its commitId"
    history = [(h.operation, h.commit_id) for h in load_table(table.store).history()]
    assert history[:4] == [
        ("overwrite", "step-3"),
        ("overwrite", "step-2"),
        ("overwrite", "step-1"),
        ("upsert", "step-0"),
    ]
    assert [h.operation for h in twin.history()] == [op for op, _ in history]
    assert len(load_table(table.store).manifest.data_files) > 1


def test_data_source_round_trips_types(spark: Any, s3_bucket: str, options: dict[str, str]) -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("local", pa.timestamp("us")),
            ("day", pa.date32()),
            ("amount", pa.decimal128(12, 2)),
            ("raw", pa.binary()),
            ("small", pa.int32()),
            ("flag", pa.bool_()),
        ]
    )
    t = castable.create_table(f"s3://{s3_bucket}/typed", schema, primary_key="id", storage_options=options)
    base = datetime(2026, 11, 22, 4, 30, tzinfo=UTC)
    data = pa.table(
        {
            "id": [1, 2, 3],
            "ts": [base, base + timedelta(microseconds=1), None],
            "local": [base.replace(tzinfo=None)] * 3,
            "day": [base.date()] * 3,
            "amount": [Decimal("1.25"), None, Decimal("-3.50")],
            "raw": [b"\x00\x01", b"", None],
            "small": [1, None, 3],
            "flag": [True, False, None],
        },
        schema=schema,
    )
    t.append(data)
    df = spark.read.format("castable").options(**options).load(t.uri)
    df.write.format("castable").options(**options).mode("append").save(t.uri)
    back = load_table(t.store).to_arrow()
    assert back.num_rows == 6
    assert back.slice(3).sort_by("id").equals(data) and back.slice(0, 3).equals(data)


def test_data_source_bad_requests_change_nothing(
    spark: Any, table: Table, s3_bucket: str, options: dict[str, str]
) -> None:
    from pyspark.errors import PySparkException

    table.append(events(0, 10))
    before = snapshot_of(table.store)
    df = spark.createDataFrame(events(10, 20))
    for mode, extra, match in [
        ("overwrite", {"upsert": "true"}, r"upsert option goes with mode\('append'\)"),
        ("append", {"replaceWhere": "id >= 10"}, r"replaceWhere applies to mode\('overwrite'\) only"),
        ("overwrite", {"replaceWhere": "nope > 1"}, "unknown column"),
        ("overwrite", {"replaceWhere": "id < 15"}, "5 of the 10 rows do not match"),  # refused at commit
    ]:
        with pytest.raises(PySparkException, match=match):
            df.write.format("castable").options(**options, **extra).mode(mode).save(table.uri)
    twice = spark.createDataFrame(pa.concat_tables([events(10, 20), events(15, 16)]))
    with pytest.raises(PySparkException, match="key 15 more than once"):
        twice.write.format("castable").options(**options).option("upsert", "true").mode("append").save(table.uri)
    assert snapshot_of(table.store) == before, "abort deleted the files of a write refused at commit"
    keyless = castable.create_table(f"s3://{s3_bucket}/keyless", EVENTS, storage_options=options)
    with pytest.raises(PySparkException, match="has none; use append"):
        df.write.format("castable").options(**options).option("upsert", "true").mode("append").save(keyless.uri)
    assert load_table(keyless.store).version == 0
    wrong = spark.createDataFrame([(1, "a")], "id long, category string")
    with pytest.raises(PySparkException, match="missing column 'value'"):
        wrong.write.format("castable").options(**options).mode("append").save(table.uri)
    late = spark.range(0, 4000, numPartitions=4).selectExpr(
        "IF(id = 3999, NULL, id) AS id", "'a' AS category", "CAST(id AS DOUBLE) AS value"
    )
    with pytest.raises(PySparkException, match="'id' is not nullable"):
        late.write.format("castable").options(**options).mode("append").save(table.uri)
    assert load_table(table.store).version == table.version
    with pytest.raises(PySparkException, match="versionAsOf or timestampAsOf"):
        reader = spark.read.format("castable").options(**options)
        reader.option("versionAsOf", 0).option("timestampAsOf", "2026-01-01").load(table.uri).collect()
    with pytest.raises(PySparkException, match=r"version 9 of .* does not exist"):
        spark.read.format("castable").options(**options).option("versionAsOf", 9).load(table.uri).collect()
    with pytest.raises(PySparkException, match=r"TableNotFoundError|no table"):
        spark.read.format("castable").options(**options).load(table.uri + "-missing").collect()
    with pytest.raises(PySparkException, match="unknown column"):
        spark.read.format("castable").options(**options).option("filter", "nope = 1").load(table.uri).collect()
    with pytest.raises(PySparkException, match="unknown columns"):
        spark.read.format("castable").options(**options).option("columns", "id,nope").load(table.uri).collect()
    table.gc(orphan_grace=timedelta(0))
    assert snapshot_of(table.store) == before


def test_concurrent_spark_and_library_writers_lose_nothing(spark: Any, table: Table, options: dict[str, str]) -> None:
    from helpers.workers import append_and_delete, expected_ids

    rounds = 4
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(append_and_delete, table.uri, options, w, rounds) for w in (1, 2)]
        for i in range(4):
            df = spark.createDataFrame(events(100_000 + i * 100, 100_000 + (i + 1) * 100))
            writer = df.write.format("castable").options(**options).option("commitId", f"spark-{i}")
            writer.mode("append").save(table.uri)
        commits = [c for f in futures for c in f.result()]
    want = expected_ids(1, rounds) | expected_ids(2, rounds) | set(range(100_000, 100_400))
    assert ids(table) == sorted(want)
    history = load_table(table.store).history()
    assert [h.version for h in history] == list(range(len(history) - 1, -1, -1))
    recorded = {h.commit_id for h in history}
    assert {c for _, _, c in commits} | {f"spark-{i}" for i in range(4)} <= recorded
    logging.getLogger(__name__).info("%d commits", len(history))


def test_spark_benchmark_runs(tmp_path: Path) -> None:
    """A tiny run of bench/spark/spark.py, so the benchmark cannot rot unnoticed."""
    small = [
        "--rows",
        "20000",
        "--repeats",
        "1",
        "--deleted-keys",
        "1000",
        "--merge-rows",
        "20000",
        "--merge-source",
        "2000",
    ]
    run = subprocess.run(
        [sys.executable, "-m", "bench", "spark", *small, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    report = (tmp_path / "spark.md").read_text()
    assert "| castable job |" in report and "| format('castable') |" in report
    assert "| castable.spark.merge |" in report and "deleted keys |" in report


def test_erase_in_a_file_spark_wrote_leaves_no_trace_and_spark_reads_its_page_indexes(
    spark: Any, tmp_path: Path
) -> None:
    """Spark's own writer (parquet-mr: page indexes, a bloom filter on id) makes the file; the
    splice rebuilds its indexes, the purge finds no trace, and Spark with filter pushdown (which
    reads pages through the column and offset indexes) and DataFusion read the same rows as pyarrow."""
    from unit.maintenance.test_erase_traces import ROWS, datafusion_agrees, name, offset_index_problems

    out = tmp_path / "t" / "data" / "spark"
    df = spark.range(0, ROWS).selectExpr(
        "id", "concat('name-', lpad(cast(id as string), 9, '0')) as name", "cast(id as double) * 0.5 as score"
    )
    (
        df.coalesce(1)
        .write.option("parquet.block.size", 2 * 1024 * 1024)
        .option("parquet.page.size", 64 * 1024)
        .option("parquet.enable.dictionary", "false")
        .option("parquet.bloom.filter.enabled#id", "true")
        .parquet(str(out))
    )
    (written,) = out.glob("part-*.parquet")
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("score", pa.float64()),
        ]
    )
    table = castable.create_table(str(tmp_path / "t"), schema, primary_key="id")
    table.add_files([f"data/spark/{written.name}"])
    victim = 250_000
    report = table.erase(f"id = {victim}", mode="splice", purge=True)

    assert report.summary()["files_spliced"] == 1
    assert report.purge is not None and report.purge.verified and report.purge.traces == {}
    (f,) = table.manifest.data_files
    spliced = tmp_path / "t" / f.path
    data = spliced.read_bytes()
    assert name(victim).encode() not in data and offset_index_problems(data) == []
    expected = pq.read_table(spliced)
    assert expected.num_rows == ROWS - 1
    for lo, hi in [(victim - 100, victim + 100), (ROWS - 5000, ROWS - 4000), (10, 20)]:
        got = spark.read.parquet(str(spliced)).filter(f"id >= {lo} and id < {hi}").select("id", "name").collect()
        ids_ = expected.column("id").to_numpy()
        want = expected.filter(pa.array((ids_ >= lo) & (ids_ < hi)))
        assert sorted((r.id, r.name) for r in got) == sorted(
            zip(want["id"].to_pylist(), want["name"].to_pylist(), strict=True)
        )
    datafusion_agrees(spliced, victim)


# ---------------------------------------------------------------------- native read path (Spark 3.5 and 4)


@pytest.fixture
def local_table(tmp_path: Path) -> Table:
    """A table on the local store: Spark's own reader opens its files (no S3 connector here)."""
    return castable.create_table(str(tmp_path / "events"), EVENTS, primary_key="id", properties=SMALL_FILES)


def native_history(table: Table) -> list[int]:
    """build_history, then an upsert (key-list tombstones), a schema change, a compaction."""
    build_history(table)
    table.upsert(changed(3990, 4010))
    table.delete("id > 3995")  # a key range open above
    table.alter().rename_column("value", "amount").add_column("note", pa.string(), default="-").commit()
    table.append(pa.table({"id": [5000], "category": ["n"], "amount": [2.0], "note": ["new"]}))
    table.delete("id BETWEEN 10 AND 20")
    table.compact(min_file_size=20_000)
    table.delete("id < 5")
    return sorted(h.version for h in load_table(table.store).history())[1:]


NATIVE_35 = """
import json, sys
from pyspark.sql import SparkSession
from castable.spark import read
from castable.spark.read import read_table
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
uri, versions = sys.argv[1], json.loads(sys.argv[2])
out = {}
for v in versions:
    df = read_table(spark, uri, version=v)
    out[v] = [df.columns, sorted([list(r) for r in df.collect()], key=json.dumps)]
read.JVM_SPLIT_PATHS = 1  # the paths handed to the JVM as one string
df = read_table(spark, uri, columns=["amount", "id"], filter="id BETWEEN 100 AND 3000 AND category = 'a'")
out["filtered"] = [df.columns, sorted([list(r) for r in df.collect()], key=json.dumps)]
print(json.dumps(out))
"""


@pytest.mark.parametrize("per_file", [True, False], ids=["bitmap-filters", "anti-joins"])
def test_native_read_matches_the_library_at_every_version(
    spark: Any, local_table: Table, per_file: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deletes applied as one bitmap filter (the default up to 64M rows of files with deletes),
    or as an anti-join keyed by file path and row (beyond)."""
    from castable.spark import read
    from castable.spark.read import read_table

    if not per_file:
        monkeypatch.setattr(read, "MAX_FILTER_WORDS", 0)
    versions = native_history(local_table)
    inline = [
        v
        for v in versions
        if any(f.inline is not None for f in load_table(local_table.store).manifest_at(v).data_files)
    ]
    assert inline, "small writes kept inline (no file Spark could read) are among the versions read"
    for version in versions:
        df = read_table(spark, local_table.uri, version=version)
        assert df.columns == load_table(local_table.store).manifest_at(version).schema.names, version
        assert spark_rows(df) == library_rows(local_table, version=version), version
    query = "id BETWEEN 100 AND 3000 AND category = 'a'"
    df = read_table(spark, local_table.uri, columns=["amount", "id"], filter=query)
    assert df.columns == ["amount", "id"]
    assert spark_rows(df) == library_rows(local_table, columns=["amount", "id"], filter=query)
    empty = read_table(spark, local_table.uri, filter="id > 100000")
    assert empty.count() == 0 and empty.columns == load_table(local_table.store).schema.names


@pytest.mark.parametrize("per_file", [True, False], ids=["bitmap-filters", "anti-joins"])
def test_native_read_deletes_string_keys_that_need_quoting(
    spark: Any, tmp_path: Path, per_file: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleted keys reach Spark as SQL literals: quotes, backslashes, newlines and backticks
    must come through as the very same strings, in a column whose name needs quoting too."""
    import pyarrow.compute as pc

    from castable.spark import read
    from castable.spark.read import read_table

    if not per_file:
        monkeypatch.setattr(read, "MAX_FILTER_WORDS", 0)
    awkward = ["o'brien", "back\\slash", "\\'", "new\nline", "`tick`", "caf\u00e9", "plain", "\\n"]
    schema = pa.schema([pa.field("user `key`", pa.string(), nullable=False), ("n", pa.int64())])
    table = castable.create_table(str(tmp_path / "names"), schema, primary_key="user `key`")
    table.append(pa.table([awkward + [f"k{i}" for i in range(50)], list(range(58))], schema=schema))
    table.delete(pc.field("user `key`").isin(awkward[:6]))  # a key list
    table.delete("n = 57")  # by position
    df = read_table(spark, table.uri)
    assert df.columns == ["user `key`", "n"]
    assert spark_rows(df) == library_rows(table)
    assert sorted(r[0] for r in df.collect()) == sorted(["plain", "\\n"] + [f"k{i}" for i in range(49)])


def test_native_read_plans_in_spark_tasks_and_the_driver_reads_no_footer(
    spark: Any, local_table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Footers, tombstones and key columns are read by Spark tasks, never by the driver: with
    the files listed by the driver, and from ``SLICE_FILES`` with the segments read by the tasks."""
    from castable.spark import read
    from castable.spark.read import read_table

    native_history(local_table)
    expected = library_rows(local_table)
    calls: list[str] = []
    for name in ("footer", "deletes_for", "read", "slice_files"):
        original = getattr(Snapshot, name)

        def counted(self: Snapshot, *args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            calls.append(_name)
            return _original(self, *args, **kw)

        monkeypatch.setattr(Snapshot, name, counted)
    sliced: list[int] = []
    real_slices = Snapshot.segment_slices

    def slices(self: Snapshot, *args: Any, **kw: Any) -> Any:
        sliced.append(1)
        return real_slices(self, *args, **kw)

    monkeypatch.setattr(Snapshot, "segment_slices", slices)
    for slice_files in (read.SLICE_FILES, 1):
        castable.clear_caches()  # planned again
        monkeypatch.setattr(read, "SLICE_FILES", slice_files)
        monkeypatch.setattr(read, "JVM_SPLIT_PATHS", slice_files)  # the second, as one string
        assert spark_rows(read_table(spark, local_table.uri)) == expected
        assert calls == [], f"the driver read {calls}"
    assert sliced, "the second read was planned from segment slices"
    planned = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    assert spark_rows(read_table(spark, local_table.uri)) == expected
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == planned + 1, "read again: no planning"


def test_native_read_tells_many_files_deletes_apart(spark: Any, tmp_path: Path) -> None:
    """Each of many files with key deletes gets its own rows deleted (the filter finds a file's
    bitmap by its name, or by its path where names repeat), a file whose path Spark spells
    otherwise (spaces) is read alone, and the anti-join does the same when the bitmaps outgrow
    the filter."""
    import pyarrow.compute as pc

    from castable.spark import read
    from castable.spark.read import read_table

    table = castable.create_table(str(tmp_path / "many"), EVENTS, primary_key="id", properties=FILES_ONLY)
    for part in range(9):
        table.append(events(part * 100, part * 100 + 100))
    odd = tmp_path / "many" / "data" / "day=2026-01-01 00:00:00"
    odd.mkdir()
    pq.write_table(events(900, 1000), odd / "part 0.parquet")
    table.add_files(["data/day=2026-01-01 00:00:00/part 0.parquet"])
    table.delete(pc.field("id").isin(list(range(3, 1000, 7))))  # a key list in every file
    expected = library_rows(table)
    assert len(expected) == 1000 - len(range(3, 1000, 7))
    assert spark_rows(read_table(spark, table.uri)) == expected  # files told apart by name
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(read, "MAX_FILTER_WORDS", 0)
        assert spark_rows(read_table(spark, table.uri)) == expected
    for i, folder in enumerate(["x", "y"]):  # two files of one name: told apart by path
        (tmp_path / "many" / "data" / folder).mkdir()
        pq.write_table(events(1000 + i * 100, 1100 + i * 100), tmp_path / "many" / "data" / folder / "part-0.parquet")
    table.add_files(["data/x/part-0.parquet", "data/y/part-0.parquet"])
    table.delete(pc.field("id").isin([1001, 1050, 1102, 1199]))
    assert spark_rows(read_table(spark, table.uri)) == library_rows(table)


def test_native_read_of_a_database_at_one_version(spark: Any, tmp_path: Path) -> None:
    """Spark reads each table of a database at one database version: a transaction's rows in
    both tables or in neither, whatever was committed since."""
    from castable.spark.read import read_table

    db = castable.create_database(str(tmp_path / "shop"))
    db.create_table("orders", EVENTS, primary_key="id").append(events(0, 10))
    db.create_table("archive", EVENTS, primary_key="id")
    before = db.version
    with db.transaction() as tx:
        tx.table("orders").delete("id < 3")
        tx.table("archive").append(events(0, 3))
    for version, archived in [(before, []), (tx.version, [0, 1, 2])]:
        snap = db.snapshot(version=version)
        orders = sorted(r["id"] for r in read_table(spark, snap.table("orders")).collect())
        archive = sorted(r["id"] for r in read_table(spark, snap.table("archive")).collect())
        assert (orders, archive) == ([i for i in range(10) if i not in archived], archived), version
    assert read_table(spark, f"{db.uri}/orders").count() == 7, "a member by its URI, at the newest version"


def test_native_read_on_spark_35(local_table: Table) -> None:
    """The same read under pyspark 3.5, as EMR 7 runs it: the rows the library reads."""
    versions = native_history(local_table)
    got = on_spark_35([str(SPARK35_PYTHON), "-c", NATIVE_35, local_table.uri, json.dumps(versions)])

    def rows(t: pa.Table) -> list[list[Any]]:
        return sorted(([v for v in r.values()] for r in t.to_pylist()), key=json.dumps)

    fresh = load_table(local_table.store)
    for version in versions:
        want = fresh.scan(version=version).to_arrow()
        assert got[str(version)] == [want.column_names, rows(want)], version
    want = fresh.scan(["amount", "id"], "id BETWEEN 100 AND 3000 AND category = 'a'").to_arrow()
    assert got["filtered"] == [want.column_names, rows(want)]


def test_every_table_of_a_database_is_a_sql_view_at_one_database_version(spark: Any, tmp_path: Path) -> None:
    """Spark's own Parquet reader reads the views' files (a local database: no Hadoop S3 here)."""
    from castable.spark import register_views

    db = castable.create_database(str(tmp_path / "shop"))
    lines_schema = pa.schema([pa.field("order_id", pa.int64(), nullable=False), ("qty", pa.int64())])
    db.create_table("orders", EVENTS, primary_key="id")
    db.create_table("lines", lines_schema)
    with db.transaction() as tx:
        tx.table("orders").append(events(0, 10))
        tx.table("lines").append(pa.table({"order_id": list(range(10)) * 2, "qty": [1] * 20}, schema=lines_schema))
    then = db.refresh().version
    with db.transaction() as tx:
        tx.table("orders").delete("id < 5")
        tx.table("lines").append(pa.table({"order_id": [100], "qty": [7]}, schema=lines_schema))
    join = "SELECT count(*) AS n FROM {o} o JOIN {l} ln ON ln.order_id = o.id"
    views = register_views(spark, db.uri, version=then, prefix="then_")
    assert views == {"lines": "then_lines", "orders": "then_orders"}
    assert spark.sql(join.format(o="then_orders", l="then_lines")).collect()[0]["n"] == 20
    register_views(spark, db.refresh())
    assert spark.sql(join.format(o="orders", l="lines")).collect()[0]["n"] == 10, "the newest version: 5 orders left"
    assert spark.sql("SELECT sum(qty) AS q FROM lines").collect()[0]["q"] == 27


def test_a_streaming_query_commits_each_micro_batch_once(
    spark: Any, table: Table, tmp_path: Path, options: dict[str, str]
) -> None:
    """foreachBatch with ``stream_sink``: one commit per micro-batch, ids ``<query>-<batch>``; a
    batch Spark replays (same id, after a failure) commits nothing; a restart from the same
    checkpoint picks up only new files."""
    from castable.spark import stream_sink
    from castable.spark.files import spark_schema

    source, checkpoint = tmp_path / "stream", tmp_path / "checkpoint"
    source.mkdir()
    sink = stream_sink(table.uri, "events-stream", storage_options=options)

    def run_once() -> None:
        stream = spark.readStream.schema(spark_schema(EVENTS)).option("maxFilesPerTrigger", 1).parquet(str(source))
        query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
        query.trigger(availableNow=True).start().awaitTermination()

    for i in range(2):
        pq.write_table(events(i * 100, i * 100 + 100), source / f"part-{i}.parquet")
    run_once()
    t = load_table(table.store)
    assert ids(t) == list(range(200))
    assert sorted(h.commit_id for h in t.history() if h.version > 0) == ["events-stream-0", "events-stream-1"]
    before = snapshot_of(table.store)
    sink(spark.createDataFrame(events(0, 100).to_pandas(), spark_schema(EVENTS)), 1)
    assert snapshot_of(table.store) == before, "a replayed batch commits nothing"
    pq.write_table(events(200, 300), source / "part-2.parquet")
    run_once()
    t = load_table(table.store)
    assert ids(t) == list(range(300)) and t.history(limit=1)[0].commit_id == "events-stream-2"
    with pytest.raises(castable.InvalidInputError, match="query must name"):
        stream_sink(table.uri, "a/b")


VIEWS_AND_STREAM_35 = """
import json, sys
from pyspark.sql import SparkSession
from castable.spark import compact, register_views, stream_sink
from castable.spark.files import spark_schema
import castable
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
db_uri, table_uri, source, checkpoint = sys.argv[1:5]
register_views(spark, db_uri)
joined = spark.sql("SELECT count(*) AS n FROM orders o JOIN lines l ON l.order_id = o.id").collect()[0]["n"]
schema = spark_schema(castable.open_table(table_uri).schema)
stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source)
query = stream.writeStream.foreachBatch(stream_sink(table_uri, "s35")).option("checkpointLocation", checkpoint)
query.trigger(availableNow=True).start().awaitTermination()
done = compact(spark, table_uri, "c35")
print(json.dumps({"joined": joined, "groups": done.groups, "rewritten": done.files_rewritten}))
"""


def test_views_and_the_stream_sink_on_spark_35(tmp_path: Path) -> None:
    """register_views, stream_sink and compaction on the cluster under pyspark 3.5, as EMR 7 runs them."""
    db = castable.create_database(str(tmp_path / "shop"))
    lines_schema = pa.schema([pa.field("order_id", pa.int64(), nullable=False), ("qty", pa.int64())])
    db.create_table("orders", EVENTS, primary_key="id").append(events(0, 10))
    db.create_table("lines", lines_schema).append(
        pa.table({"order_id": [1, 1, 2], "qty": [1, 2, 3]}, schema=lines_schema)
    )
    table = castable.create_table(str(tmp_path / "events"), EVENTS, primary_key="id")
    source = tmp_path / "stream"
    source.mkdir()
    for i in range(2):
        pq.write_table(events(i * 100, i * 100 + 100), source / f"part-{i}.parquet")
    script = [str(SPARK35_PYTHON), "-c", VIEWS_AND_STREAM_35, db.uri, table.uri, str(source), str(tmp_path / "cp")]
    assert on_spark_35(script) == {"joined": 3, "groups": 1, "rewritten": 2}
    t = load_table(table.store)
    assert ids(t) == list(range(200)) and len(t.manifest.data_files) == 1
    assert [h.commit_id for h in t.history() if h.version in (1, 2)] == ["s35-1", "s35-0"]
    assert t.history(limit=1)[0].operation == "compact"
