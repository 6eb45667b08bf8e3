"""Hard deletes: splice and rewrite produce valid Parquet without the rows, on both stores."""

from __future__ import annotations

import datetime
import decimal
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers.faults import FaultyStore, SimulatedCrash, before_first, once
from helpers.tables import EVENTS, events, snapshot_of

import castable
from castable.format.manifest import DataFile
from castable.maintenance.splice import SpliceNotPossibleError
from castable.store import ObjectStore, StoreError
from castable.table import Table
from castable.tables import load_table

MIB = 1024 * 1024
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("payload", pa.binary()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("cat", pa.dictionary(pa.int32(), pa.string())),
        pa.field("tags", pa.list_(pa.int32())),
        pa.field("info", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        pa.field("maybe", pa.int32()),
    ]
)


def rows(start: int, stop: int) -> pa.Table:
    """Rows with ~100 random bytes each, so files are large even compressed."""
    ids = np.arange(start, stop)
    rng = np.random.default_rng(start)
    n = len(ids)
    payload = pa.Array.from_buffers(
        pa.binary(),
        n,
        [None, pa.py_buffer(np.arange(0, 100 * (n + 1), 100, dtype=np.int32)), pa.py_buffer(rng.bytes(100 * n))],
    )
    epoch = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "key": pa.array([f"user-{i:08d}-secret" for i in ids]),
            "payload": payload,
            "ts": pa.array([epoch + datetime.timedelta(seconds=int(i)) for i in ids], pa.timestamp("us", tz="UTC")),
            "amount": pa.array([decimal.Decimal(int(i)) / 100 for i in ids], pa.decimal128(12, 2)),
            "cat": pa.array([("red", "green", "blue")[i % 3] for i in ids]).dictionary_encode(),
            "tags": pa.array([[int(i), int(i) % 7] for i in ids], pa.list_(pa.int32())),
            "info": pa.array([{"x": int(i), "y": str(i)} for i in ids], SCHEMA.field("info").type),
            "maybe": pa.array([None if i % 5 == 0 else int(i) for i in ids], pa.int32()),
        },
        schema=SCHEMA,
    )


def make(
    uri_options: tuple[str, dict | None], n: int = 120_000, *, rg_bytes: int = 2 * MIB, codec: str = "zstd"
) -> Table:
    uri, options = uri_options
    props = {"write.row-group-size-bytes": rg_bytes, "write.parquet.compression": codec}
    t = castable.create_table(uri, SCHEMA, primary_key="id", properties=props, storage_options=options)
    t.append(rows(0, n))
    return t


def ids_of(t: Table, **kwargs: object) -> list[int]:
    return sorted(t.scan(["id"], **kwargs).to_arrow().column("id").to_pylist())


def check_parquet(store: ObjectStore, f: DataFile, expected_ids: list[int]) -> None:
    """The file is valid Parquet: every column of every row group reads, stats match, DuckDB agrees."""
    data = store.get(f.path).data
    assert len(data) == f.size
    pf = pq.ParquetFile(pa.BufferReader(data))
    assert pf.metadata.num_rows == f.rows == len(expected_ids)
    assert pf.metadata.num_row_groups == f.row_groups
    got = []
    for i in range(pf.num_row_groups):
        table = pf.read_row_group(i)
        assert table.num_rows == pf.metadata.row_group(i).num_rows
        assert table.schema.equals(SCHEMA)
        for j in range(pf.metadata.num_columns):
            stats = pf.metadata.row_group(i).column(j).statistics
            name = pf.metadata.row_group(i).column(j).path_in_schema
            if stats is not None and stats.has_min_max and name in ("id", "key", "maybe"):
                column = table.column(name)
                assert stats.min == pc.min(column).as_py() and stats.max == pc.max(column).as_py()
                assert stats.null_count == column.null_count
        got += table.column("id").to_pylist()
        table.column("payload").to_pylist()
    assert sorted(got) == expected_ids
    with tempfile.NamedTemporaryFile(suffix=".parquet") as tmp:
        Path(tmp.name).write_bytes(data)
        ((count, total),) = duckdb.sql(f"SELECT count(*), sum(id) FROM '{tmp.name}'").fetchall()
        assert count == len(expected_ids) and (total or 0) == sum(expected_ids)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_splice_one_row_of_a_row_group(table_uri: tuple[str, dict | None], where: str) -> None:
    t = make(table_uri)
    f = t.manifest.data_files[0]
    assert f.row_groups >= 5 and f.size > 10 * MIB
    target = {"first": 7, "middle": 60_000, "last": 119_990}[where]
    report = t.erase(f"id = {target}", mode="splice")
    assert report.rows_erased == 1 and [e.method for e in report.files] == ["splice"]
    expected = [i for i in range(120_000) if i != target]
    assert ids_of(t) == expected
    (new,) = t.manifest.data_files
    check_parquet(t.store, new, expected)
    transfer = report.transfer
    assert transfer.copied > 5 * MIB, "unchanged bytes are copied server-side"
    assert transfer.downloaded < 2 * 5 * MIB + 2 * MIB, "only the row group, its widening and the footer"
    assert ids_of(t, version=report.version - 1) == list(range(120_000)), "time travel still sees the old file"


def test_several_row_groups_and_files(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri)
    t.append(rows(200_000, 320_000))
    report = t.erase("id IN (3, 50000, 50001, 119999, 250000) OR key = 'user-00300000-secret'", mode="splice")
    gone = {3, 50000, 50001, 119999, 250000, 300000}
    assert report.rows_erased == len(gone)
    assert len(report.files) == 2 and all(len(e.row_groups_edited) >= 1 for e in report.files)
    expected = [i for i in [*range(120_000), *range(200_000, 320_000)] if i not in gone]
    assert ids_of(t) == expected
    for f in t.manifest.data_files:
        lo, hi = f.stats["id"]["min"], f.stats["id"]["max"]
        check_parquet(t.store, f, [i for i in expected if lo <= i <= hi])


def test_large_row_groups_need_no_widening(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri, n=200_000, rg_bytes=8 * MIB)
    report = t.erase("id = 100000", mode="splice")
    assert report.transfer.uploaded >= 5 * MIB
    check_parquet(t.store, t.manifest.data_files[0], [i for i in range(200_000) if i != 100000])


def test_small_file_is_rewritten(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri, n=20_000)
    assert t.manifest.data_files[0].size < 5 * MIB
    before = snapshot_of(t.store)
    with pytest.raises(SpliceNotPossibleError):
        t.erase("id = 5", mode="splice")
    assert {k: v for k, v in snapshot_of(t.store).items() if not k.startswith("data/")} == {
        k: v for k, v in before.items() if not k.startswith("data/")
    }
    report = t.erase("id = 5")
    assert [e.method for e in report.files] == ["rewrite"]
    check_parquet(t.store, t.manifest.data_files[0], [i for i in range(20_000) if i != 5])


def test_forced_rewrite(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri)
    report = t.erase("id = 5", mode="rewrite")
    assert [e.method for e in report.files] == ["rewrite"] and report.transfer.copied == 0
    assert ids_of(t) == [i for i in range(120_000) if i != 5]


def test_all_rows_of_a_row_group_and_later_tombstones(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri)
    t.delete("id = 119000")
    md = pq.ParquetFile(pa.BufferReader(t.store.get(t.manifest.data_files[0].path).data)).metadata
    first_rg_rows = md.row_group(0).num_rows
    report = t.erase(f"id < {first_rg_rows}", mode="splice")
    (new,) = t.manifest.data_files
    assert new.row_groups == md.num_row_groups - 1
    expected = [i for i in range(first_rg_rows, 120_000) if i != 119000]
    assert ids_of(t) == expected
    assert report.rows_erased == first_rg_rows
    t.delete("id = 119500")
    assert ids_of(t) == [i for i in expected if i != 119500]


def test_erase_removes_earlier_tombstoned_rows_and_keeps_other_deletes(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri)
    t.delete("key IN ('user-00000010-secret', 'user-00090000-secret')")
    t.delete("id BETWEEN 20 AND 25")
    report = t.erase("id = 30", mode="splice")
    (new,) = t.manifest.data_files
    data = pq.read_table(pa.BufferReader(t.store.get(new.path).data), columns=["id"]).column("id").to_pylist()
    assert 10 not in data and 30 not in data and not set(range(20, 26)) & set(data), (
        "tombstoned rows of the edited group are gone physically"
    )
    assert 90000 in data, "rows of other row groups stay, still tombstoned"
    expected = [i for i in range(120_000) if i not in {10, 90000, 30, *range(20, 26)}]
    assert ids_of(t) == expected
    assert report.rows_erased == 1


@pytest.mark.parametrize("codec", ["snappy", "zstd", "none"])
def test_codecs(tmp_path: Path, codec: str) -> None:
    t = make((str(tmp_path / "t"), None), codec=codec)
    t.erase("id = 60000", mode="splice")
    (new,) = t.manifest.data_files
    meta = pq.ParquetFile(pa.BufferReader(t.store.get(new.path).data)).metadata
    assert {meta.row_group(0).column(j).compression for j in range(meta.num_columns)} == {
        codec.upper() if codec != "none" else "UNCOMPRESSED"
    }
    check_parquet(t.store, new, [i for i in range(120_000) if i != 60000])


def test_nothing_matches(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri, n=20_000)
    report = t.erase("id > 999999")
    assert report.version == t.version == 1 and report.rows_erased == 0


@pytest.mark.s3
@pytest.mark.parametrize("step", ["create_multipart", "upload_part", "upload_part_copy", "complete_multipart"])
def test_failure_at_each_multipart_step_leaves_nothing(table_uri: tuple[str, dict | None], step: str) -> None:
    t = make(table_uri)
    before = snapshot_of(t.store)
    faulty = load_table(FaultyStore(t.store, once(step, "data/", "fail")))
    with pytest.raises(StoreError):
        faulty.erase("id = 60000", mode="splice")
    assert not list(t.store.list_multipart_uploads())
    assert snapshot_of(t.store) == before
    assert ids_of(load_table(t.store)) == list(range(120_000))


def test_crash_mid_upload_aborts(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri)
    faulty = load_table(FaultyStore(t.store, once("upload_part", "data/", "crash-before")))
    with pytest.raises(SimulatedCrash):
        faulty.erase("id = 60000", mode="splice")
    assert not list(t.store.list_multipart_uploads())
    assert load_table(t.store).version == t.version


def test_concurrent_soft_delete_is_folded_into_the_erase(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri)
    other = load_table(t.store)

    def meanwhile() -> None:
        other.delete("id = 61000 OR id = 5 OR id = 119999")
        other.delete("id BETWEEN 100 AND 110")

    eraser = load_table(FaultyStore(t.store, before_first("complete_multipart", meanwhile)))
    report = eraser.erase("id = 60000", mode="splice")
    assert report.version == 4
    expected = [i for i in range(120_000) if i not in {60000, 61000, 5, 119999, *range(100, 111)}]
    assert ids_of(load_table(t.store)) == expected, "no concurrent delete is lost"
    assert eraser.manifest.commit.summary["carried_tombstone"]


def test_concurrent_erases_of_the_same_file(table_uri: tuple[str, dict | None]) -> None:
    t = make(table_uri)
    other = load_table(t.store)
    rival = before_first("complete_multipart", lambda: other.erase("id = 70000", mode="splice"))
    eraser = load_table(FaultyStore(t.store, rival))
    eraser.erase("id = 60000", mode="splice")
    assert eraser.manifest.commit.summary["replans"] == 1
    latest = load_table(t.store)
    assert ids_of(latest) == [i for i in range(120_000) if i not in (60000, 70000)]
    (f,) = latest.manifest.data_files
    check_parquet(latest.store, f, [i for i in range(120_000) if i not in (60000, 70000)])


def test_purge_and_byte_level_search(tmp_path: Path) -> None:
    t = make((str(tmp_path / "t"), None), codec="none")
    t.append(rows(200_000, 210_000))
    secrets = [b"user-00060000-secret", b"user-00060001-secret", b"user-00200005-secret"]

    def holders() -> list[str]:
        return [k for k, v in snapshot_of(t.store).items() if any(s in v for s in secrets)]

    assert holders(), "the search finds the keys before erasure"
    report = t.erase("id IN (60000, 60001, 200005)")
    assert report.still_referenced and set(report.to_purge) == set(holders())
    purge = t.purge_erased(report)
    assert purge.verified and purge.versions_expired == [0, 1, 2], "a prefix: version 0 too"
    assert holders() == []
    assert ids_of(t) == [i for i in [*range(120_000), *range(200_000, 210_000)] if i not in (60000, 60001, 200005)]
    assert [h.version for h in t.history()] == [3]


def test_bad_erase_arguments(tmp_path: Path) -> None:
    t = make((str(tmp_path / "t"), None), n=1000)
    with pytest.raises(castable.InvalidInputError):
        t.erase("id = 1", mode="fast")  # type: ignore[arg-type]
    with pytest.raises(castable.InvalidPredicateError):
        t.erase("nope = 1")
    assert t.erase("id = 1", commit_id="gdpr-1").version == 2
    assert t.erase("id = 1", commit_id="gdpr-1").version == 2


def test_row_map_of_an_emptied_row_group() -> None:
    from castable.maintenance.splice import RowMap

    m = RowMap(old_rows=[3, 4], kept={0: np.array([], dtype=np.int64)}, new_row_groups=[("n", 0)], new_rows=[4])
    assert m.locate(0, np.array([0, 2])) == {}
    located = m.locate(1, np.array([1, 3]))
    assert list(located) == [("n", 0)] and located[("n", 0)].tolist() == [1, 3]


def test_erase_one_file_at_a_time_then_purge_by_paths(table_uri: tuple[str, dict | None]) -> None:
    from castable.maintenance.erase import purge_objects

    t = make(table_uri, n=20_000)
    t.append(rows(50_000, 70_000))
    predicate = "id IN (5, 60000)"
    affected = [f.path for f in t.scan(filter=predicate).files()]
    assert len(affected) == 2
    old = {f.path: f.added_version for f in t.manifest.data_files}
    for path in affected:
        t.erase(predicate, files=[path], commit_id=f"gdpr-7/{path}")
    assert ids_of(t) == [i for i in [*range(20_000), *range(50_000, 70_000)] if i not in (5, 60000)]
    from castable.read.where import parse_predicate

    report = purge_objects(t.store, old, t.version, parse_predicate(predicate, t.schema))
    assert report.verified and sorted(report.objects_deleted) == sorted(old)


def test_purge_never_touches_live_files(tmp_path: Path) -> None:
    from castable.maintenance.erase import purge_objects

    t = make((str(tmp_path / "t"), None), n=1000)
    (f,) = t.manifest.data_files
    report = purge_objects(t.store, {f.path: f.added_version}, t.version, None)
    assert report.objects_deleted == [] and report.versions_expired == []
    assert ids_of(t) == list(range(1000))


def test_erasing_a_file_that_was_compacted_away_erases_its_rows_where_they_went(tmp_path: Path) -> None:
    t = make((str(tmp_path / "t"), None), n=2000)
    t.append(rows(5000, 6000))
    stale = [f.path for f in t.scan(filter="id = 5").files()]
    load_table(t.store).compact(min_file_size=10**9)
    report = load_table(t.store).erase("id = 5", files=stale)
    assert report.rows_erased == 1
    latest = load_table(t.store)
    assert 5 not in ids_of(latest) and len(ids_of(latest)) == 2999


def test_an_erasure_and_its_purge_say_in_words_what_they_did(tmp_path: Path) -> None:
    """What the CLI prints for people: what was erased and committed, which versions the purge
    expired and where time travel now starts, what it deleted, and whether it verified."""
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")
    t.append(events(0, 100))
    t.append(events(100, 200))
    kept = t.erase("id = 150")
    said = kept.described()
    assert said.startswith("erased 1 row from 1 data file, committed as version 3; "), said
    assert said.endswith("; version 2 holds the erased rows until a purge expires them"), said
    purged = t.erase("id = 7", purge=True)
    assert purged.purge is not None and purged.purge.versions_expired == [0, 1, 2, 3]
    words = purged.described()
    assert "expired versions 0-3, time travel now starts at 4; deleted 1 data file and " in words, words
    assert words.endswith("; verified: no trace")
    assert t.erase("id = 7").described() == "nothing erased: no row matched (the table stays at version 4)"


@pytest.mark.parametrize(("mode", "threshold"), [("rewrite", 0.5), ("splice", 0.5), ("rewrite", -1.0)])
def test_an_erase_purges_and_verifies_across_versions_that_named_its_column_otherwise(
    tmp_path: Path, mode: str, threshold: float
) -> None:
    """The erase's predicate names the column as the table names it now; retained versions from
    before a rename (and back) named it otherwise (an erase that matches nothing expires none of
    them). The purge's search for remaining rows reads each version under its own names, by
    field id, and finds none: it failed with "No match for FieldRef" on the versions that said
    `amount` (found by the model-based test)."""
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")
    t.append(events(0, 50))
    column = "value"
    t.alter().rename_column(column, "amount").commit()
    t.append(events(50, 100).rename_columns(["id", "category", "amount"]))
    t.alter().rename_column("amount", column).commit()
    before = t.count()
    matching = t.scan(["id"], f"{column} < {threshold}").to_arrow().num_rows
    report = t.erase(f"{column} < {threshold}", mode=mode, purge=True)  # type: ignore[arg-type]
    assert report.purge is not None and report.purge.verified, report.purge
    assert t.refresh().count() == before - matching
    assert t.scan(["id"], f"{column} < {threshold}").to_arrow().num_rows == 0


def test_an_erase_purges_and_verifies_versions_from_before_the_table_had_field_ids(tmp_path: Path) -> None:
    """A format-1 version's schema has no field ids; the purge's search reads it by name, as a
    scan reads its files. Matched by id, every column of such a version looked like the last one
    (`category = 'b'` was put to `value`, a float: "'<' not supported between 'str' and 'float'",
    found by the model-based test)."""
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id", format_version=1)
    t.append(events(0, 20))
    t.upgrade()
    t.append(events(20, 40))
    category = t.scan(["category"]).to_arrow().column(0)[0].as_py()
    matching = t.scan(["id"], f"category = '{category}'").to_arrow().num_rows
    before = t.count()
    report = t.erase(f"category = '{category}'", purge=True)
    assert report.purge is not None and report.purge.verified, report.purge
    assert t.refresh().count() == before - matching > 0
