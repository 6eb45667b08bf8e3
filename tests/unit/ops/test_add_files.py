"""Registering Parquet files written by other engines, on both stores."""

from __future__ import annotations

import io
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.filelists import LIES, lying_entry
from helpers.tables import events, keyed_events, snapshot_of

import castable
from castable.errors import EmptyWriteError, FileMismatchError, InvalidInputError, SchemaMismatchError
from castable.format.manifest import DataFile
from castable.format.properties import TableProperties
from castable.parquet.writer import write_data_files
from castable.table import Table
from castable.tables import load_table


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> Table:
    return keyed_events(table_uri, 10)


def upload(t: Table, key: str, data: pa.Table) -> str:
    buf = io.BytesIO()
    pq.write_table(data, buf, row_group_size=50)
    t.store.put(key, buf.getvalue())
    return key


def ids(t: Table) -> list[int]:
    return sorted(t.scan(["id"]).to_arrow().column("id").to_pylist())


def test_files_written_elsewhere_are_appended_in_one_commit(table: Table) -> None:
    a = upload(table, "data/spark/part-0.parquet", events(100, 300))
    b = upload(table, "data/spark/part-1.parquet", events(300, 400))
    version = table.add_files([a, f"{table.uri}/{b}"], commit_id="job-1").version
    assert version == 2
    assert ids(table) == [*range(10), *range(100, 400)]
    added = {f.path: f for f in table.manifest.data_files}
    assert added[a].rows == 200 and added[a].row_groups == 4 and added[a].stats["id"]["min"] == 100
    assert table.manifest.commit.summary["registered"] is True
    assert load_table(table.store).add_files([a, b], commit_id="job-1").version == 2, (
        "a retried job commits nothing twice"
    )
    table.delete("id BETWEEN 150 AND 160")
    assert len(ids(table)) == 10 + 300 - 11


@pytest.mark.parametrize(
    ("paths", "error", "match"),
    [
        ([], EmptyWriteError, "no files"),
        (["elsewhere/x.parquet"], InvalidInputError, "data prefix"),
        (["data/../manifest/x.parquet"], InvalidInputError, "data prefix"),
        (["s3://other-bucket/data/x.parquet"], InvalidInputError, "data prefix"),
        (["data/missing.parquet"], InvalidInputError, "does not exist"),
        (["data/notes.txt"], InvalidInputError, "not a .parquet"),
        (["data/corrupt.parquet"], InvalidInputError, "not valid Parquet"),
        (["data/wrong.parquet"], SchemaMismatchError, "category"),
        (["data/ok.parquet", "data/ok.parquet"], InvalidInputError, "twice"),
    ],
)
def test_bad_registrations_change_nothing(table: Table, paths: list[str], error: type, match: str) -> None:
    table.store.put("data/corrupt.parquet", b"PAR1 not really PAR1")
    upload(table, "data/wrong.parquet", pa.table({"id": pa.array([1], pa.int64()), "category": [1], "value": [1.0]}))
    upload(table, "data/ok.parquet", events(50, 60))
    before = snapshot_of(table.store)
    with pytest.raises(error, match=match):
        table.add_files(paths)
    assert snapshot_of(table.store) == before


def test_a_file_cannot_be_registered_twice(table: Table) -> None:
    key = upload(table, "data/once.parquet", events(50, 60))
    table.add_files([key])
    with pytest.raises(InvalidInputError, match="already part"):
        table.add_files([key])
    assert ids(table) == [*range(10), *range(50, 60)]


def written_elsewhere(t: Table, start: int, stop: int) -> list[DataFile]:
    """Entries as castable's writer returns them in another process (a Spark executor)."""
    props = TableProperties.parse({**t.properties, "write.row-group-size-bytes": "2000"})
    return write_data_files(t.store, events(start, stop).to_batches(), t.schema, props)


def test_entries_written_by_castable_keep_their_statistics(table: Table) -> None:
    files = written_elsewhere(table, 100, 400)
    table.store.stats.reset()
    version = table.add_files(files, commit_id="spark-job").version
    requests = table.store.stats.snapshot()
    assert requests.get("GET", 0) + requests.get("OPEN", 0) == 1, "a written entry's footer is read, and nothing more"
    assert ids(table) == [*range(10), *range(100, 400)]
    added = [f for f in table.manifest.data_files if f.added_version == version]
    assert [(f.path, f.stats) for f in added] == [(f.path, f.stats) for f in files]


def test_a_written_entry_must_describe_the_object(table: Table) -> None:
    (f,) = written_elsewhere(table, 100, 120)
    before = snapshot_of(table.store)
    for bad, match in [
        (replace(f, etag="other"), "ETag"),
        (replace(f, size=f.size + 1), "bytes"),
        (replace(f, path="data/2026/none.parquet"), "does not exist"),
        (replace(f, path="manifest/v1.parquet"), "data prefix"),
        (replace(f, rows=0), "no rows"),
    ]:
        with pytest.raises(InvalidInputError, match=match):
            table.add_files([bad])
    assert snapshot_of(table.store) == before


@pytest.mark.parametrize("lie", LIES)
def test_an_entry_that_disagrees_with_its_footer_refuses_the_whole_commit(table: Table, lie: str) -> None:
    """What an executor says of a file is checked against the file's footer: a wrong row count
    (count() would report it, and a scan fail), a false key range (a filter would skip rows the
    file holds), a wrong null or row-group count, another schema. One such entry among true ones
    refuses the commit, naming the file and what disagreed, and the table is exactly as it was."""
    true = written_elsewhere(table, 200, 260)
    bad = lying_entry(table, lie)
    before, version = snapshot_of(table.store), table.version
    files = [f.path for f in table.manifest.data_files]
    error, message = LIES[lie]
    with pytest.raises(error, match=re.escape(bad.path)) as refused:
        table.add_files([*true, bad], commit_id="executor-lies")
    assert message in str(refused.value)
    assert snapshot_of(table.store) == before
    after = load_table(table.store)
    assert after.version == version and [f.path for f in after.manifest.data_files] == files
    assert after.count() == 10 and ids(after) == list(range(10))
    assert after.add_files(true, commit_id="executor-lies").version == version + 1, "the refused commit left no trace"


def copies(t: Table, directory: str, n: int, name: str = "part") -> list[DataFile]:
    """``n`` entries as a Spark job's executors leave them in one directory (copies of one file)."""
    (f,) = written_elsewhere(t, 100, 120)
    body = t.store.get(f.path).data
    keys = [f"{directory}/{name}-{i:05d}.parquet" for i in range(n)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: t.store.put(k, body), keys))
    return [replace(f, path=k, etag=t.store.head(k).etag) for k in keys]


def test_many_written_entries_in_a_directory_are_checked_by_listing_it(table: Table) -> None:
    """A Spark job's files: one LIST request per 1,000 instead of a HEAD each (200,000 files,
    200 requests), and a listing checks as a HEAD does."""
    files = copies(table, "data/job-7", 150)
    before = snapshot_of(table.store)
    for bad, match in [
        ([*files[:-1], replace(files[-1], etag="other")], "ETag"),
        ([*files[:-1], replace(files[-1], size=files[-1].size + 1)], "bytes"),
        ([*files, replace(files[0], path="data/job-7/part-99999.parquet")], "does not exist"),
    ]:
        with pytest.raises(InvalidInputError, match=match):
            table.add_files(bad)
    assert snapshot_of(table.store) == before
    table.store.stats.reset()
    table.add_files(files, commit_id="job-7")
    requests = table.store.stats.snapshot()
    assert requests.get("HEAD", 0) == 0 and requests["LIST"] == 1
    assert table.count() == 10 + 150 * 20


def test_a_listing_gives_way_to_heads_in_a_directory_of_many_other_files(table: Table) -> None:
    """Files of a job that share their directory with many more: the listing stops once the
    others outnumber them (twice their number and 1,000 more), the rest are checked by HEAD."""
    copies(table, "data/shared", 1_400, name="a-other")
    files = copies(table, "data/shared", 150, name="z-job")
    table.store.stats.reset()
    table.add_files(files, commit_id="job-8")
    assert table.store.stats.snapshot()["HEAD"] == 150
    assert table.count() == 10 + 150 * 20


def test_files_in_another_layout_of_the_same_types_read_as_the_table(table: Table) -> None:
    """Another engine's large_string and nullable key column: the file registers, and every scan
    returns the table's own types (pyarrow's to_arrow used to fail on mixed batch schemas)."""
    other = pa.schema(
        [pa.field("id", pa.int64()), pa.field("category", pa.large_string()), pa.field("value", pa.float64())]
    )
    upload(table, "data/other/part-0.parquet", events(1000, 1010).cast(other))
    table.add_files(["data/other/part-0.parquet"])
    got = table.scan().to_arrow()
    assert got.schema.equals(table.schema)
    assert got.num_rows == table.count() and 1005 in got.column("id").to_pylist()
    filtered = table.scan(["category"], "id >= 1000").to_arrow()
    assert filtered.schema.field("category").type == pa.string() and filtered.num_rows == 10
    table.delete("id = 1003")
    assert table.scan(["id", "category"], "id >= 1000").to_arrow().num_rows == 9


def test_registered_files_upsert_by_key_and_overwrite_a_range(table: Table) -> None:
    changed = events(5, 15).set_column(1, "category", pa.array(["new"] * 10))
    version = table.add_files([upload(table, "data/spark/up.parquet", changed)], mode="upsert", commit_id="up").version
    entry = table.history(limit=1)[0]
    assert entry.operation == "upsert" and entry.summary["registered"]
    assert ids(table) == list(range(15))
    assert table.scan(["category"], "id >= 5").to_arrow().column("category").to_pylist() == ["new"] * 10
    assert table.add_files(["data/spark/up.parquet"], mode="upsert", commit_id="up").version == version
    day = events(100, 103).set_column(1, "category", pa.array(["new"] * 3))
    table.add_files([upload(table, "data/spark/day.parquet", day)], mode="overwrite", where="category = 'new'")
    assert ids(table) == [0, 1, 2, 3, 4, 100, 101, 102]
    table.add_files([upload(table, "data/spark/all.parquet", events(40, 42))], mode="overwrite")
    assert ids(table) == [40, 41]


@pytest.mark.parametrize(
    ("data", "kwargs", "error", "match"),
    [
        (events(0, 3).take([0, 0]), {"mode": "upsert"}, InvalidInputError, "key 0 more than once"),
        (
            events(0, 3),
            {"mode": "overwrite", "where": "id > 1"},
            InvalidInputError,
            "2 of the 3 rows do not match 'id > 1'",
        ),
        (events(0, 3), {"mode": "append", "where": "id > 1"}, InvalidInputError, "mode='overwrite' only"),
        (events(0, 3), {"mode": "merge"}, InvalidInputError, "mode must be one of append, upsert, overwrite"),
        (events(0, 3), {"mode": "overwrite", "where": "nope = 1"}, castable.InvalidPredicateError, "unknown column"),
    ],
)
def test_bad_registration_modes_change_nothing(
    table: Table, data: pa.Table, kwargs: dict, error: type, match: str
) -> None:
    key = upload(table, "data/spark/bad.parquet", data)
    before = snapshot_of(table.store)
    with pytest.raises(error, match=match):
        table.add_files([key], **kwargs)
    assert snapshot_of(table.store) == before


def test_entries_written_before_a_concurrent_add_columns_still_commit(table: Table) -> None:
    """A job's files lack a nullable column another writer added while it ran: they are checked
    against their footers all the same and commit, their rows reading the new column as NULL; a
    lying entry among them is still refused."""
    written, lying = written_elsewhere(table, 200, 260), lying_entry(table, "row count")
    table.add_columns([pa.field("note", pa.string())])
    with pytest.raises(FileMismatchError):
        table.add_files([*written, lying], commit_id="late")
    table.add_files(written, commit_id="late")
    rows = load_table(table.store).scan(filter="id >= 200").to_arrow()
    assert rows.num_rows == sum(f.rows for f in written) and rows["note"].null_count == rows.num_rows
