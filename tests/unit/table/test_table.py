"""The behavioural suite of the Table API, on the local store and on S3 over HTTP."""

from __future__ import annotations

import pickle
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.faults import FaultyStore
from helpers.tables import EVENTS, FILES_ONLY, events, snapshot_of

import castable
from castable.errors import TableAlreadyExistsError, TableNotFoundError, VersionNotFoundError
from castable.format import tombstone
from castable.tables import load_table

SMALL = {"write.target-file-size-bytes": 10_000, "write.row-group-size-bytes": 8_000}


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> castable.Table:
    uri, options = table_uri
    return castable.create_table(uri, EVENTS, primary_key="id", properties=SMALL, storage_options=options)


def ids(t: castable.Table, **kwargs: object) -> list[int]:
    return sorted(t.scan(["id"], **kwargs).to_arrow().column("id").to_pylist())


def test_create_open_and_exists(table_uri: tuple[str, dict | None]) -> None:
    uri, options = table_uri
    with pytest.raises(TableNotFoundError):
        castable.open_table(uri, storage_options=options)
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    assert t.version == 0 and t.primary_key == "id"
    with pytest.raises(TableAlreadyExistsError):
        castable.create_table(uri, EVENTS, storage_options=options)
    opened = castable.open_table(uri, storage_options=options)
    assert opened.schema.equals(EVENTS)
    assert opened.scan().to_arrow().num_rows == 0
    assert opened.scan().count() == 0


def test_append_streams_into_files_and_row_groups(table: castable.Table) -> None:
    version = table.append(events(0, 5000)).version
    assert version == 1
    m = table.manifest
    assert len(m.data_files) > 1, "target file size must split the input"
    assert all(f.row_groups > 1 for f in m.data_files[:-1]), "row-group target must split files"
    assert sum(f.rows for f in m.data_files) == 5000
    got = table.scan().to_arrow().sort_by("id")
    assert got.equals(events(0, 5000))
    assert table.scan().count() == 5000
    stats = m.data_files[0].stats["id"]
    assert stats["min"] == 0 and stats["nulls"] == 0


def test_append_accepts_readers_batches_and_pandas(table: castable.Table) -> None:
    reader = pa.RecordBatchReader.from_batches(EVENTS, events(0, 100).to_batches(max_chunksize=10))
    table.append(reader)
    table.append(events(100, 110).to_batches()[0])
    table.append(events(110, 120).to_pandas())
    table.append(iter(events(120, 130).to_batches()))
    assert ids(table) == list(range(130))


def test_append_reorders_columns(table: castable.Table) -> None:
    data = events(0, 10).select(["value", "id", "category"])
    table.append(data)
    assert ids(table) == list(range(10))


def test_key_range_delete_reads_no_data(table: castable.Table) -> None:
    table.append(events(0, 5000))
    table.store.stats.reset()
    version = table.delete("id BETWEEN 1000 AND 1999").version
    counts = table.store.stats.snapshot()
    assert counts.get("PUT") == 4, counts  # the tombstone, its manifest segment, the manifest, the pointer
    assert counts.get("GET", 0) == 0 and counts.get("OPEN", 0) == 0, counts
    assert ids(table) == [*range(1000), *range(2000, 5000)]
    assert ids(table, version=version - 1) == list(range(5000))


def test_key_list_delete_reads_no_data(table: castable.Table, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        table.append(events(i * 2000, i * 2000 + 2000))
    keys = [3, 1999, 2000, 4321, 5999, 3, 99_999]
    table.store.stats.reset()
    version = table.delete(f"id IN ({', '.join(map(str, keys))})").version
    counts = table.store.stats.snapshot()
    assert counts.get("PUT") == 4 and counts.get("GET", 0) == counts.get("OPEN", 0) == 0, counts  # as above
    entries = tombstone.decode(table.store.get(table.manifest.tombstones[-1].path).data, key="t")
    assert sorted(k for e in entries for k in e.keys) == [3, 1999, 2000, 4321, 5999]  # type: ignore[union-attr]
    assert ids(table) == [i for i in range(6000) if i not in keys]
    assert table.delete("id IN (99999, 100000)").version == version, "keys outside every file commit nothing"
    table.compact(min_file_size=1 << 30, delete_ratio=0.0)
    table.erase("id = 2001")
    assert ids(table) == [i for i in range(6000) if i not in {*keys, 2001}]
    monkeypatch.setattr("castable.ops.delete.MAX_KEY_POINTS", 2)
    castable.clear_caches()  # small files read whole from S3 are kept: make the delete fetch its keys
    table.store.stats.reset()
    table.delete("id IN (10, 11, 12)")
    assert table.store.stats.snapshot().get("OPEN", 0) + table.store.stats.snapshot().get("GET", 0) > 0
    assert table.manifest.commit.summary["rows_deleted"] == 3
    assert ids(table) == [i for i in range(6000) if i not in {*keys, 2001, 10, 11, 12}]


def test_point_and_strict_range_deletes(table: castable.Table) -> None:
    table.append(events(0, 100))
    table.delete("id = 7")
    table.delete("id > 95")
    table.delete("id < 2")
    assert ids(table) == [i for i in range(2, 96) if i != 7]


def test_predicate_delete_uses_bitmaps_and_counts(table: castable.Table) -> None:
    table.append(events(0, 2000))
    version = table.delete("category = 'b' AND value < 500").version
    summary = table.manifest.commit.summary
    expected_gone = {i for i in range(2000) if i % 4 == 1 and i * 0.5 < 500}
    assert summary["rows_deleted"] == len(expected_gone)
    assert ids(table) == [i for i in range(2000) if i not in expected_gone]
    again = table.delete("category = 'b' AND value < 500").version
    assert again == version, "deleting already deleted rows commits nothing"


def test_delete_with_arrow_expression(table: castable.Table) -> None:
    table.append(events(0, 300))
    table.delete(pc.field("value") >= 100.0)
    assert ids(table) == list(range(200))


def test_whole_row_groups_and_files_drop_without_reading(table: castable.Table) -> None:
    table.append(events(0, 5000))
    files_before = len(table.manifest.data_files)
    table.delete("id >= 0")
    assert table.manifest.data_files == ()
    assert table.manifest.commit.summary["files_removed"] == files_before
    assert table.scan().count() == 0


def test_delete_of_nulls_and_not_null(table: castable.Table) -> None:
    table.append(events(0, 40))
    table.delete("category IS NULL")
    assert ids(table) == [i for i in range(40) if i % 4 != 3]
    table.delete("category NOT IN ('a')")
    assert ids(table) == [i for i in range(40) if i % 4 == 0]


def test_filters_and_projection(table: castable.Table) -> None:
    table.append(events(0, 3000))
    table.delete("id BETWEEN 100 AND 199")
    got = table.scan(["id", "category"], "id BETWEEN 50 AND 250 AND category IN ('a', 'b')").to_arrow()
    assert got.column_names == ["id", "category"]
    expected = [i for i in range(50, 251) if not 100 <= i <= 199 and i % 4 in (0, 1)]
    assert sorted(got.column("id").to_pylist()) == expected
    expr = table.scan(["value"], pc.field("id") < 10).to_arrow()
    assert sorted(expr.column("value").to_pylist()) == [i * 0.5 for i in range(10)]
    assert table.scan(filter="category LIKE 'c%'").count() == 750 - 25
    assert table.scan(filter="id >= 2990").to_pandas().shape == (10, 3)


def test_scan_prunes_files_by_manifest_statistics(table: castable.Table) -> None:
    table.append(events(0, 5000))
    s = table.scan(filter="id BETWEEN 10 AND 20")
    assert len(s.files()) == 1
    table.store.stats.reset()
    assert s.count() == 11
    opened = table.store.stats.snapshot()
    assert opened.get("OPEN", 0) + opened.get("GET", 0) <= 4, opened


def test_reader_streams_batches(table: castable.Table) -> None:
    table.append(events(0, 5000))
    reader = table.scan().to_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema.equals(EVENTS)
    assert sum(b.num_rows for b in reader) == 5000


def test_snapshot_isolation_for_a_reader_holding_a_version(table: castable.Table) -> None:
    table.append(events(0, 100))
    held = table.scan()
    other = castable.open_table(table.uri, storage_options=_options(table))
    other.append(events(100, 200))
    other.delete("id < 50")
    assert held.count() == 100
    assert sorted(held.to_arrow().column("id").to_pylist()) == list(range(100))
    assert table.refresh().scan().count() == 150


def test_time_travel_by_version_and_time(table: castable.Table) -> None:
    states: list[tuple[int, datetime, list[int]]] = []
    model: list[int] = []
    for step in range(4):
        time.sleep(0.01)
        table.append(events(step * 10, step * 10 + 10))
        model += list(range(step * 10, step * 10 + 10))
        table.delete(f"id = {step * 10}")
        model.remove(step * 10)
        states.append((table.version, table.manifest.created_at, list(model)))
    for version, created, expected in states:
        assert ids(table, version=version) == expected
        assert ids(table, as_of=created) == expected
        assert ids(table, as_of=created + timedelta(microseconds=1)) == expected
    with pytest.raises(VersionNotFoundError):
        table.scan(version=99)
    with pytest.raises(VersionNotFoundError):
        table.scan(as_of=datetime(2000, 1, 1, tzinfo=UTC))


def test_history_accounts_for_every_commit(table: castable.Table) -> None:
    table.append(events(0, 10), commit_id="load-1")
    table.delete("id = 3")
    h = table.history()
    assert [e.version for e in h] == [2, 1, 0]
    assert [e.operation for e in h] == ["delete", "append", "create"]
    assert h[1].commit_id == "load-1" and h[1].summary["rows_added"] == 10
    assert len(table.history(limit=2)) == 2


def test_commit_id_makes_retries_idempotent(table: castable.Table) -> None:
    v1 = table.append(events(0, 10), commit_id="job-42").version
    fresh = castable.open_table(table.uri, storage_options=_options(table))
    assert fresh.append(events(0, 10), commit_id="job-42").version == v1
    assert fresh.delete("id = 1", commit_id="job-42").version == v1
    assert fresh.scan().count() == 10
    assert fresh.refresh().version == v1


def test_created_at_is_monotonic(table: castable.Table) -> None:
    for i in range(5):
        table.append(events(i, i + 1))
    times = cast(list[datetime], [e.timestamp for e in table.history()])  # every version is readable
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)


def _options(t: castable.Table) -> dict | None:
    from castable.store import S3Store

    if isinstance(t.store, S3Store):
        return {"endpoint_url": t.store.client.meta.endpoint_url, "region": "us-east-1"}
    return None


def test_scan_tasks_cover_the_scan_exactly_once(table: castable.Table) -> None:
    """Planned tasks (row groups of a file each) read back the scan's rows, deletes and filter applied."""
    t = table
    for i in range(3):
        t.append(events(i * 1000, i * 1000 + 1000))
    t.delete("id BETWEEN 10 AND 20")
    t.delete("id IN (1500, 2500) OR value < 3")
    for columns, where in [(None, None), (["id"], "id > 900 AND category = 'a'")]:
        scan = t.scan(columns, where)
        tasks = scan.plan_tasks(target_bytes=1)
        assert len(tasks) == sum(f.row_groups for f in scan.files())
        pickled = [pickle.loads(pickle.dumps(task)) for task in tasks]
        rows = pa.Table.from_batches([b for task in pickled for b in scan.read_task(task)], schema=scan.schema)
        assert rows.sort_by("id").equals(scan.to_arrow().sort_by("id"))
    whole = t.scan().plan_tasks(target_bytes=1 << 40)
    assert [task.row_groups for task in whole] == [None] * len(t.manifest.data_files)
    with pytest.raises(castable.InvalidInputError, match="positive"):
        t.scan().plan_tasks(0)


def test_file_deletes_mix_single_keys_and_ranges() -> None:
    deletes = tombstone.FileDeletes()
    for lo, hi in [(5, 5), (20, 30), (None, 1), (42, 42)]:
        deletes.add(tombstone.KeyRangeDelete("f", lo, hi), pa.int64())
    keys = pa.array([0, 1, 2, 5, 6, 25, 31, 42, None], pa.int64())
    assert deletes.key_mask(keys).tolist() == [True, True, False, True, False, True, False, True, False]
    assert deletes.touches(0, (40, 45)) and deletes.touches(0, (2, 5)) and deletes.touches(0, (-3, 0))
    assert not deletes.touches(0, (6, 19)) and not deletes.touches(0, (31, 41))
    deletes.add(tombstone.KeyRangeDelete("f", 10, 10), pa.int64())
    assert deletes.touches(0, (6, 19)), "a key added later is seen"


def test_an_append_of_a_source_already_consumed_commits_nothing(tmp_path: Path) -> None:
    """Two writers that picked up the same input: the second append, even on a stale handle
    (its commit rebases onto the first), raises CommitConflictError and leaves the table as it was."""
    uri = str(tmp_path / "t")
    first = castable.create_table(uri, EVENTS, primary_key="id")
    stale = castable.open_table(uri)
    first.append(events(0, 5), source_ids=["file-a", "file-b"])
    before = {k: v for k, v in snapshot_of(first.store).items() if not k.startswith("data/")}
    with pytest.raises(castable.CommitConflictError, match="already appended"):
        stale.append(events(0, 5), source_ids=["file-b", "file-c"])
    with pytest.raises(castable.CommitConflictError, match="already appended"):
        first.append(events(0, 5), source_ids=["file-a"])
    after = snapshot_of(first.store)
    assert {k: v for k, v in after.items() if not k.startswith("data/")} == before
    assert castable.open_table(uri).scan().count() == 5
    assert stale.append(events(5, 6), source_ids=["file-c"]).version == 2


def test_count_without_a_filter_reads_only_the_files_deletes_name(table_uri: tuple[str, dict | None]) -> None:
    """The manifest holds each file's rows: a file no delete names is counted without a request."""
    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, properties=FILES_ONLY)
    for block in range(4):
        t.append(events(block * 100, block * 100 + 100))
    t.delete("id < 10 OR id = 250")
    touched = set(t.scan().snapshot.deletes_for(t.manifest.data_files))
    seen: list[str] = []
    counting = load_table(FaultyStore(t.store, lambda op, key: seen.append(key)))
    assert counting.count() == 389
    read = {key for key in seen if key.startswith("data/")}
    assert read and read <= touched and len(touched) == 2, "only the files the deletes name are read"
    assert counting.count(filter="id >= 390") == 10, "a filter still reads what it needs"


def test_count_of_inline_rows_reads_no_data_object(table_uri: tuple[str, dict | None]) -> None:
    """Rows kept inline are counted from the manifest, or with deletes from the segments read
    with it: no data object is read, none exists."""
    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    for block in range(4):
        t.append(events(block * 100, block * 100 + 100))
    t.delete("id < 10 OR id = 250")
    seen: list[str] = []
    counting = load_table(FaultyStore(t.store, lambda op, key: seen.append(key)))
    assert counting.count() == 389 and counting.count(filter="id >= 390") == 10
    assert not [key for key in seen if key.startswith("data/")]


@pytest.mark.parametrize("inline", [True, False])
def test_results_carry_none_of_castables_field_metadata(tmp_path: Path, inline: bool) -> None:
    """Ids and former names are the table's own: rows read out and written elsewhere (Parquet,
    another table) must not take them along."""
    props = {} if inline else FILES_ONLY
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id", properties=props)
    t.append(events(0, 10))
    t.alter().rename_column("value", "amount").commit()
    schemas = [
        t.scan().schema,
        t.scan().to_arrow().schema,
        t.to_arrow().schema,
        t.scan().to_reader().schema,
        next(iter(t.scan().to_batches())).schema,
        t.changes(0).to_arrow().schema,
    ]
    for schema in schemas:
        assert not schema.metadata and all(f.metadata is None for f in schema), schema
    assert t.schema.field("amount").metadata, "the table's own schema keeps them"


def test_a_table_is_created_from_data_in_the_types_other_engines_hold(tmp_path: Path) -> None:
    import pandas as pd
    import polars as pl

    frame = pd.DataFrame(
        {"id": [1, 2], "at": pd.to_datetime(["2024-01-01", "2024-01-02"]), "kind": pd.Categorical(["x", "y"])}
    )
    t = castable.create_table(str(tmp_path / "pandas"), frame, primary_key="id")
    assert (t.version, t.scan().count(), t.history()[0].result.rows_added) == (1, 2, 2)
    assert [str(f.type) for f in t.schema] == ["int64", "timestamp[us]", "string"]
    streamed = castable.create_table(str(tmp_path / "stream"), iter(events(0, 30).to_batches(max_chunksize=7)))
    assert streamed.scan().count() == 30 and streamed.schema.names == EVENTS.names
    polars = castable.create_table(str(tmp_path / "polars"), pl.DataFrame({"s": ["a", None]}))
    assert polars.schema.field("s").type == pa.string()
    empty = castable.create_table(str(tmp_path / "empty"), EVENTS.empty_table())
    assert empty.version == 0 and empty.schema.names == EVENTS.names
    with pytest.raises(castable.InvalidInputError, match=r"\['x'\] hold only NULLs"):
        castable.create_table(str(tmp_path / "nulls"), pa.table({"x": [None]}))
    assert not (tmp_path / "nulls").exists()
