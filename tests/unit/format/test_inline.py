"""Inline entries (docs/format.md section 3.2): small writes keep their rows in the version's data
segment, write no data file, and are data like any other for every read, delete, erase, purge,
compaction and schema change."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.objects import plain

import castable
from castable.errors import CorruptObjectError, InvalidInputError
from castable.format import inline, segment
from castable.format.entries import DataFile
from castable.format.evolution import with_ids
from castable.read.scan import Scan
from castable.store import ObjectStore
from castable.tables import load_table

Uri = tuple[str, dict[str, str] | None]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("score", pa.int32())])


def rows(ids: list[int], prefix: str = "n") -> pa.Table:
    return pa.table(
        {"id": ids, "name": [f"{prefix}{i}" for i in ids], "score": pa.array([i % 7 for i in ids], pa.int32())},
        schema=SCHEMA,
    )


def objects(store: ObjectStore, prefix: str) -> list[str]:
    return [o.key for o in store.list(prefix)]


def ids_of(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def make(table_uri: Uri, **props: int) -> castable.Table:
    uri, options = table_uri
    properties = {f"write.inline.{k.replace('_', '-')}": v for k, v in props.items()}
    return castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options, properties=properties)


@pytest.fixture
def table(table_uri: Uri) -> castable.Table:
    return make(table_uri)


def test_small_appends_write_no_data_file_and_read_back(table: castable.Table) -> None:
    for i in range(12):  # enough single-entry segments to be merged on the way
        table.append(rows([i]))
    assert objects(table.store, "data/") == []
    entries = list(table.manifest.data_files)
    assert all(f.inline is not None and f.path.startswith(inline.INLINE_PREFIX) for f in entries)
    assert table.manifest.data_files.inline_bytes() == sum(f.size for f in entries) > 0
    fresh = load_table(table.store)
    assert ids_of(fresh.scan().to_arrow()) == list(range(12))
    assert fresh.count() == 12 and fresh.scan(filter="id > 8").count() == 3
    assert fresh.scan(["name"], "score = 3").to_arrow().column("name").to_pylist() == ["n3", "n10"]
    assert ids_of(fresh.scan(version=5).to_arrow()) == list(range(5))


def test_inline_segments_are_marked_and_older_segments_still_read(table: castable.Table) -> None:
    table.append(rows(list(range(100)), "big"), commit_id="file")  # 100 rows: still small, inline
    table.alter().add_column("extra", pa.string()).commit()
    table.append(pa.table({"id": [500], "name": ["x"], "score": pa.array([1], pa.int32()), "extra": ["e"]}))
    root = table.store.get(table.manifest.data_files.parts[-1].ref.path).data  # type: ignore[union-attr]
    assert segment.decode(root, "data", key="s").schema.field(segment.INLINE).type == segment.inline_type(table.schema)
    import pyarrow.ipc as ipc

    assert ipc.open_file(pa.py_buffer(root)).schema.metadata[b"castable_segment"] == b"2"


def test_a_write_over_the_threshold_writes_a_file(table_uri: Uri) -> None:
    table = make(table_uri, max_bytes=1000)
    table.append(rows(list(range(1000))))  # 1000 rows: over 1000 bytes of Arrow data
    table.append(rows([5000]))
    kinds = sorted(f.inline is None for f in table.manifest.data_files)
    assert kinds == [False, True] and len(objects(table.store, "data/")) == 1


def test_inlining_off_writes_every_append_as_a_file(table_uri: Uri) -> None:
    table = make(table_uri, max_bytes=0)
    table.append(rows([1]))
    assert len(objects(table.store, "data/")) == 1 and table.manifest.data_files.inline_bytes() == 0


def test_writes_stop_inlining_at_the_versions_cap_and_compaction_flushes(table_uri: Uri) -> None:
    table = make(table_uri, max_total_bytes=3000)
    for i in range(10):
        table.append(rows([i]))
    held = table.manifest.data_files.inline_bytes()
    stored = [f for f in table.manifest.data_files if f.inline is None]
    assert 3000 <= held < 3000 + 2 * max(f.size for f in table.manifest.data_files) and stored
    table.delete("id = 2")
    report = table.compact()
    assert report.files_written and table.manifest.data_files.inline_bytes() == 0
    assert all(f.inline is None for f in table.manifest.data_files)
    assert ids_of(table.scan().to_arrow()) == [i for i in range(10) if i != 2]


def test_deletes_upserts_updates_and_merges_on_inline_rows(table: castable.Table) -> None:
    table.append(rows([1, 2, 3, 4]))
    table.append(rows([5, 6]))
    table.delete("score = 2")  # a position in the first entry
    table.delete(pc.field("id").isin([6]))  # by key
    table.upsert(rows([1, 7], "up"))
    table.update({"name": "'changed'"}, where="id = 3")
    table.merge(rows([4, 8], "m")).when_matched_update_all().when_not_matched_insert_all().execute()
    got = {r["id"]: r["name"] for r in table.scan().to_arrow().to_pylist()}
    assert got == {1: "up1", 3: "changed", 4: "m4", 5: "n5", 7: "up7", 8: "m8"}
    assert objects(table.store, "data/") == []
    scan = Scan(table.snapshot(), None, None)  # the task path: an inline entry read as its Parquet file
    tasks = scan.plan_tasks(1 << 20)
    assert ids_of(pa.Table.from_batches([b for t in tasks for b in scan.read_task(t)], scan.schema)) == sorted(got)
    assert table.scan(filter="id BETWEEN 2 AND 5").count() == 3


def test_inline_rows_follow_every_schema_change(table: castable.Table) -> None:
    for i in range(3):
        table.append(rows([i]))
    table.alter().add_column("flag", pa.bool_(), default=True).commit()
    table.alter().rename_column("name", "label").widen_column("score", pa.int64()).commit()
    table.append(pa.table({"id": [10], "label": ["t"], "score": [70], "flag": [False]}))
    table.alter().drop_column("flag").commit()
    table.alter().add_column("flag", pa.bool_()).commit()  # a new column under an old name: NULL for old rows
    for i in range(11, 20):  # merges segments written under four schemas into one
        table.append(pa.table({"id": [i], "label": [f"l{i}"], "score": [i], "flag": [True]}))
    got = {r["id"]: r for r in table.scan().to_arrow().to_pylist()}
    assert got[0] == {"id": 0, "label": "n0", "score": 0, "flag": None}
    assert got[10] == {"id": 10, "label": "t", "score": 70, "flag": None}
    assert got[15] == {"id": 15, "label": "l15", "score": 15, "flag": True}
    assert table.scan(version=4).to_arrow().to_pylist()[0] == {"id": 0, "name": "n0", "score": 0, "flag": True}
    assert table.scan(filter="label = 'n2'").count() == 1


def test_erase_and_purge_leave_no_byte_of_an_inline_row(table: castable.Table, tmp_path: Path) -> None:
    table.append(rows([1, 2]))
    table.append(pa.table({"id": [3], "name": ["secret-value-xyz"], "score": pa.array([3], pa.int32())}))
    table.append(rows([4]))
    assert any(b"secret-value-xyz" in plain(o.key, table.store.get(o.key).data) for o in table.store.list(""))
    report = table.erase("id = 3")
    assert report.rows_erased == 1 and ids_of(table.scan().to_arrow()) == [1, 2, 4]
    purged = table.purge_erased(report)
    assert purged.verified and not purged.traces and not purged.unchecked
    for o in table.store.list(""):  # segments decoded: zstd would hide the bytes
        assert b"secret-value-xyz" not in plain(o.key, table.store.get(o.key).data), o.key
    assert ids_of(load_table(table.store).scan().to_arrow()) == [1, 2, 4]


def test_inline_entries_round_trip_through_json() -> None:
    entry = inline.entry(rows([1, 2]), with_ids(SCHEMA))
    back = DataFile.from_json(entry.to_json())
    assert back == entry and back.inline is not None and back.inline.equals(entry.inline)
    assert DataFile.from_json(rows_entry := {k: v for k, v in entry.to_json().items() if k != "inline"}).inline is None
    assert rows_entry["path"] == entry.path


def test_a_segment_whose_inline_column_is_not_rows_is_refused() -> None:
    bad = pa.table({"path": ["p"], "size": [1], "etag": ["e"], "rows": [1], "row_groups": [1], "added_version": [0]})
    bad = bad.append_column("stats", pa.array([{}], pa.struct([]))).append_column(segment.INLINE, pa.array([b"x"]))
    data = segment.encode(bad, "data")
    with pytest.raises(CorruptObjectError, match="inline column"):
        segment.decode(data, "data", key="segment/x.arrow")


@pytest.mark.parametrize("value", ["-1", "lots", "1.5"])
def test_bad_inline_properties_are_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(InvalidInputError, match=r"write\.inline\.max-bytes"):
        castable.create_table(str(tmp_path / "t"), SCHEMA, properties={"write.inline.max-bytes": value})
    assert not (tmp_path / "t").exists()
