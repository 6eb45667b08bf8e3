"""Schema evolution: each change on both stores, files of several schema generations read
together, pruning and deletes across changes, conflicts with writers on the old schema."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.tables import EVENTS, FILES_ONLY, events, other, snapshot_of

import castable
from castable.errors import CommitConflictError, InvalidInputError, SchemaMismatchError
from castable.format.evolution import FIELD_ID, field_id, widens

SMALL = {"write.target-file-size-bytes": 10_000, "write.row-group-size-bytes": 4_000}


@pytest.fixture(params=["files", "inline"])
def table(table_uri: tuple[str, dict | None], request: pytest.FixtureRequest) -> castable.Table:
    """Every write a Parquet file, or the small ones kept inline (the default): rows kept under
    an older schema are read through their field ids either way."""
    uri, options = table_uri
    props = {**SMALL, **(FILES_ONLY if request.param == "files" else {})}
    t = castable.create_table(uri, EVENTS, primary_key="id", properties=props, storage_options=options)
    t.append(events(0, 100))
    return t


def rows(t: castable.Table, **kwargs: object) -> list[dict]:
    return sorted(t.scan(**kwargs).to_arrow().to_pylist(), key=lambda r: r["id"])


def test_new_tables_give_each_column_an_id_and_write_it_into_the_files(table: castable.Table) -> None:
    assert [field_id(f) for f in table.schema] == [1, 2, 3]
    f = table.manifest.data_files[0]
    stored = f.inline.schema if f.inline is not None else None  # inline rows keep them in their segment
    written = stored or pq.read_schema(table.store.open_input(f.path, size=f.size, etag=f.etag))
    assert [x.metadata[FIELD_ID] for x in written] == [b"1", b"2", b"3"]
    assert not any(b"castable" in k for x in written for k in (x.metadata or {}))


def test_add_column_reads_old_rows_as_null_or_the_default(table: castable.Table) -> None:
    before = table.version
    version = table.alter().add_column("note", pa.string()).add_column("score", pa.int32(), default=7).commit().version
    assert version == before + 1 and table.schema.names == ["id", "category", "value", "note", "score"]
    assert table.manifest.commit.summary == {"changes": ["add note string", "add score int32"]}
    table.append(
        events(100, 102)
        .append_column("note", pa.array(["n", None]))
        .append_column("score", pa.array([1, 2], pa.int32()))
    )
    got = rows(table)
    assert got[0] == {"id": 0, "category": "a", "value": 0.0, "note": None, "score": 7}
    assert got[100]["note"] == "n" and got[100]["score"] == 1 and got[101]["note"] is None
    assert len(got) == 102
    assert table.scan(filter="score = 7").count() == 100  # the default is a value filters see


def test_rename_touches_no_data_and_filters_prune_old_files_by_their_statistics(table: castable.Table) -> None:
    before = {o.key for o in table.store.list("data/")}
    table.alter().rename_column("value", "amount").commit()
    assert {o.key for o in table.store.list("data/")} == before
    table.append(pa.table({"id": [1000], "category": ["z"], "amount": [1e6]}))
    assert rows(table, filter="amount > 1000") == [{"id": 1000, "category": "z", "amount": 1e6}]
    scan = table.scan(filter="amount > 1000")
    assert [f.path for f in scan.files()] == [table.manifest.data_files[-1].path], "old files pruned by stats"
    assert table.scan(filter="amount BETWEEN 10 AND 10.5").count() == 2  # old files, by the new name
    with pytest.raises(castable.InvalidPredicateError):
        table.scan(filter="value > 1")


def test_a_dropped_column_never_comes_back_even_under_its_old_name(table: castable.Table) -> None:
    table.alter().drop_column("category").commit()
    assert "category" not in table.schema.names and rows(table)[1] == {"id": 1, "value": 0.5}
    table.alter().add_column("category", pa.string()).commit()
    assert {r["category"] for r in rows(table)} == {None}
    table.compact()
    assert {r["category"] for r in rows(table)} == {None}
    assert field_id(table.schema.field("category")) == 4


def test_a_dropped_columns_id_is_not_given_again_by_a_handle_opened_later(table: castable.Table) -> None:
    table.alter().drop_column("value").commit()
    reopened = castable.open_table(table.uri, storage_options=_options(table))
    reopened.alter().add_column("later", pa.int64()).commit()
    assert field_id(reopened.schema.field("later")) == 4, "id 3 belonged to the dropped column"


def test_a_handle_that_changed_the_schema_deletes_after_another_handles_append(table: castable.Table) -> None:
    table.alter().add_column("extra", pa.string()).commit()
    other(table).append(events(100, 101).append_column("extra", pa.array(["x"])))
    table.delete("id = 5")
    assert 5 not in [r["id"] for r in rows(table.refresh())] and len(rows(table)) == 100


def test_widening_keeps_values_and_statistics_ordering(table_uri: tuple[str, dict | None]) -> None:
    uri, options = table_uri
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("n", pa.int32()),
            pa.field("f", pa.float32()),
            pa.field("d", pa.date32()),
            pa.field("m", pa.decimal128(5, 2)),
        ]
    )
    t = castable.create_table(uri, schema, primary_key="id", storage_options=options)
    old = pa.table(
        {
            "id": [1, 2],
            "n": pa.array([-5, 2_000_000_000], pa.int32()),
            "f": pa.array([1.5, 2.5], pa.float32()),
            "d": pa.array([dt.date(2020, 1, 1), dt.date(2020, 1, 2)]),
            "m": pa.array([Decimal("1.25"), Decimal("999.99")], pa.decimal128(5, 2)),
        },
        schema=schema,
    )
    t.append(old)
    with t.alter() as change:
        change.widen_column("n", pa.int64()).widen_column("f", pa.float64())
        change.widen_column("d", pa.timestamp("us")).widen_column("m", pa.decimal128(12, 2))
    t.append(
        pa.table(
            {
                "id": [3],
                "n": [2**40],
                "f": [1e300],
                "d": [dt.datetime(2020, 1, 1, 12)],
                "m": [Decimal("1234567.89")],
            },
            schema=pa.schema([pa.field("id", pa.int64(), nullable=False), *[t.schema.field(c) for c in "nfdm"]]),
        )
    )
    got = rows(t)
    assert [r["n"] for r in got] == [-5, 2_000_000_000, 2**40]
    assert got[0]["d"] == dt.datetime(2020, 1, 1) and got[2]["m"] == Decimal("1234567.89")
    assert [r["id"] for r in rows(t, filter="n > 2000000000")] == [3]
    assert [r["id"] for r in rows(t, filter="n < 0")] == [1]
    assert [r["id"] for r in rows(t, filter="d > TIMESTAMP '2020-01-01 06:00:00'")] == [2, 3]
    first = t.manifest.data_files[0]
    assert first.column_stats("d", t.schema).max.as_py() == dt.datetime(2020, 1, 2)  # date stats read as timestamps
    assert [f.path for f in t.scan(filter="n > 2000000000").files()] == [t.manifest.data_files[1].path]


@pytest.mark.parametrize(
    ("old", "new", "ok"),
    [
        (pa.int8(), pa.int16(), True),
        (pa.int32(), pa.int64(), True),
        (pa.int64(), pa.int32(), False),
        (pa.uint8(), pa.int16(), True),
        (pa.uint32(), pa.int32(), False),
        (pa.float32(), pa.float64(), True),
        (pa.float64(), pa.float32(), False),
        (pa.int32(), pa.float64(), False),
        (pa.decimal128(5, 2), pa.decimal128(9, 2), True),
        (pa.decimal128(5, 2), pa.decimal128(9, 3), False),
        (pa.date32(), pa.timestamp("us"), True),
        (pa.date32(), pa.timestamp("us", "UTC"), False),
        (pa.timestamp("us"), pa.date32(), False),
        (pa.string(), pa.large_string(), True),
        (pa.string(), pa.int64(), False),
    ],
)
def test_only_lossless_widening_is_allowed(old: pa.DataType, new: pa.DataType, ok: bool) -> None:
    assert widens(old, new) is ok


def test_make_nullable_and_reorder(table_uri: tuple[str, dict | None]) -> None:
    uri, options = table_uri
    t = castable.create_table(
        uri,
        pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("c", pa.string(), nullable=False)]),
        primary_key="id",
        storage_options=options,
    )
    t.append(pa.table({"id": [1], "c": ["x"]}, schema=t.schema))
    t.alter().make_nullable("c").reorder(["c", "id"]).commit()
    assert t.schema.names == ["c", "id"] and t.schema.field("c").nullable
    t.append(pa.table({"c": pa.array([None], pa.string()), "id": [2]}))
    assert t.scan().to_arrow().to_pylist() == [{"c": "x", "id": 1}, {"c": None, "id": 2}]


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda u: u.widen_column("value", pa.float32()), SchemaMismatchError, "only widening"),
        (lambda u: u.drop_column("id"), InvalidInputError, "primary key"),
        (lambda u: u.widen_column("id", pa.decimal128(30, 0)), InvalidInputError, "primary key"),
        (lambda u: u.make_nullable("id"), InvalidInputError, "primary key"),
        (lambda u: u.rename_column("nope", "x"), InvalidInputError, "unknown column 'nope'"),
        (lambda u: u.rename_column("value", "category"), InvalidInputError, "already taken"),
        (lambda u: u.add_column("id", pa.int64()), InvalidInputError, "already taken"),
        (lambda u: u.add_column("n", pa.int64(), default="x"), InvalidInputError, "is not a int64"),
        (lambda u: u.reorder(["value", "value"]), InvalidInputError, "twice"),
        (lambda u: u, InvalidInputError, "no changes"),
    ],
)
def test_bad_changes_are_refused_and_leave_the_table_as_it_was(
    table: castable.Table, change: object, error: type, message: str
) -> None:
    before = snapshot_of(table.store)
    with pytest.raises(error, match=message):
        change(table.alter()).commit()  # type: ignore[operator]
    assert snapshot_of(table.store) == before


def test_time_travel_reads_each_version_with_its_own_schema(table: castable.Table) -> None:
    v0 = table.version
    table.alter().rename_column("category", "kind").drop_column("value").commit()
    old = table.scan(version=v0).to_arrow()
    assert old.schema.names == ["id", "category", "value"] and old.num_rows == 100
    assert table.scan().to_arrow().schema.names == ["id", "kind"]
    table.restore(v0)
    assert table.schema.names == ["id", "category", "value"] and rows(table)[1]["value"] == 0.5
    table.alter().add_column("extra", pa.int8()).commit()
    assert field_id(table.schema.field("extra")) == 4, "ids stay unique across a restore"


def test_tombstones_and_erase_keep_working_across_schema_changes(table: castable.Table) -> None:
    table.delete("id < 10")
    table.alter().rename_column("id", "key").rename_column("value", "v").commit()
    assert table.primary_key == "key" and table.count() == 90
    table.delete("key BETWEEN 10 AND 19")
    table.upsert(pa.table({"key": [20], "category": ["u"], "v": [-1.0]}))
    report = table.erase("v > 40", mode="rewrite")
    assert report.rows_erased == 19
    got = rows_by(table, "key")
    assert [r["key"] for r in got] == list(range(20, 81))
    assert got[0] == {"key": 20, "category": "u", "v": -1.0}


def rows_by(t: castable.Table, key: str) -> list[dict]:
    return sorted(t.scan().to_arrow().to_pylist(), key=lambda r: r[key])


def test_an_append_on_the_old_schema_rebases_onto_an_added_column(table: castable.Table) -> None:
    stale = other(table)
    table.alter().add_column("note", pa.string()).widen_column("id", pa.int64()).commit()
    version = stale.append(events(100, 110)).version  # written with the old schema, committed on the new
    assert version == table.version + 1
    fresh = other(table)
    assert fresh.schema.names[-1] == "note" and fresh.count() == 110
    assert fresh.scan(filter="value >= 50", columns=["id"]).count() == 10
    last = fresh.manifest.data_files[-1]
    assert last.stats["value"]["max"] == 54.5, "statistics re-keyed to the new schema"


def test_other_operations_on_the_old_schema_conflict_and_commit_nothing(table: castable.Table) -> None:
    stale = [other(table) for _ in range(3)]  # a handle adopts the newer version when its commit fails
    table.alter().rename_column("value", "amount").commit()
    before = snapshot_of(table.store)
    with pytest.raises(CommitConflictError, match="schema"):
        stale[0].delete("value > 10")
    with pytest.raises(CommitConflictError, match="schema"):
        stale[1].upsert(events(0, 1))
    with pytest.raises(CommitConflictError, match="schema"):
        stale[2].append(pa.table({"id": [500], "category": ["a"], "value": [1.0], "new": [1]}), schema_mode="merge")
    after = snapshot_of(table.store)
    assert {k: v for k, v in after.items() if k.startswith(("manifest/", "segment/", "_"))} == {
        k: v for k, v in before.items() if k.startswith(("manifest/", "segment/", "_"))
    }, "no version committed; what the plans wrote is gc's to sweep"


def test_append_schema_mode_merge_adds_new_columns_in_the_same_commit(table: castable.Table) -> None:
    v = table.version
    with pytest.raises(SchemaMismatchError, match="unknown columns"):
        table.append(pa.table({"id": [200], "category": ["a"], "value": [1.0], "tag": ["t"]}))
    assert table.version == v
    version = table.append(pa.table({"id": [200], "value": [1.0], "tag": ["t"]}), schema_mode="merge").version
    assert version == v + 1 and table.schema.names == ["id", "category", "value", "tag"]
    assert table.manifest.commit.summary["columns_added"] == ["tag"]
    assert rows(table, filter="id = 200") == [{"id": 200, "category": None, "value": 1.0, "tag": "t"}]
    assert table.scan(filter="tag IS NULL").count() == 100
    with pytest.raises(InvalidInputError, match="schema_mode"):
        table.append(events(0, 1), schema_mode="loose")  # type: ignore[arg-type]


def test_files_without_ids_resolve_by_the_name_at_the_version_they_were_added(tmp_path: object) -> None:
    """A format-1 table upgraded, then altered: its old files carry no field ids; a file
    registered from another engine after the rename uses the new name."""
    uri = str(tmp_path / "legacy")  # type: ignore[operator]
    t = castable.create_table(uri, EVENTS, primary_key="id", format_version=1)
    t.append(events(0, 10))
    t.upgrade()
    assert field_id(t.schema.field("id")) is None
    t.alter().rename_column("value", "amount").drop_column("category").commit()
    t.alter().add_column("category", pa.string()).commit()
    foreign = tmp_path / "legacy" / "data" / "foreign.parquet"  # type: ignore[operator]
    pq.write_table(pa.table({"id": [50], "amount": [7.0], "category": ["new"]}), foreign)
    t.add_files(["data/foreign.parquet"])
    got = sorted(t.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert got[1] == {"id": 1, "amount": 0.5, "category": None}, "the old category never comes back"
    assert got[-1] == {"id": 50, "amount": 7.0, "category": "new"}
    assert t.scan(filter="amount > 4").count() == 2
    assert [field_id(f) for f in t.schema] == [1, 3, 4]


def test_a_format_1_table_must_be_upgraded_first(tmp_path: object) -> None:
    t = castable.create_table(str(tmp_path / "v1"), EVENTS, format_version=1)  # type: ignore[operator]
    with pytest.raises(InvalidInputError, match="upgrade"):
        t.alter().add_column("x", pa.int8()).commit()


def test_a_full_scan_over_three_schema_generations(table_uri: tuple[str, dict | None]) -> None:
    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    rng = np.random.default_rng(1)
    t.append(events(0, 1000))
    t.alter().rename_column("value", "v").widen_column("id", pa.int64()).add_column("w", pa.float64()).commit()
    t.append(
        pa.table({"id": np.arange(1000, 2000), "category": ["x"] * 1000, "v": rng.random(1000), "w": rng.random(1000)})
    )
    t.alter().drop_column("category").add_column("category", pa.large_string()).commit()
    t.append(
        pa.table({"id": np.arange(2000, 3000), "v": rng.random(1000), "category": ["y"] * 1000}), schema_mode="merge"
    )
    got = t.scan().to_arrow()
    assert got.num_rows == 3000 and got.schema.names == ["id", "v", "w", "category"]
    assert got.column("category").null_count == 2000
    assert sorted(got.column("id").to_pylist()) == list(range(3000))


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (pa.field("v", pa.int64(), metadata={FIELD_ID: b"x"}), "invalid literal"),
        (pa.field("v", pa.int64(), metadata={FIELD_ID: b"2", b"castable:names": b"[oops"}), "Expecting value"),
        (pa.field("v", pa.int64(), metadata={FIELD_ID: b"2", b"castable:names": b'[["w", 0]]'}), "name history"),
        (pa.field("v", pa.int64(), metadata={FIELD_ID: b"2", b"castable:default": b'"abc"'}), "abc"),
        (pa.field("id", pa.int64()), "some columns have field ids"),
        (pa.field("v", pa.int64(), metadata={FIELD_ID: b"1"}), "repeat"),
    ],
)
def test_a_manifest_with_malformed_column_metadata_is_refused(
    table: castable.Table, field: pa.Field, message: str
) -> None:
    import base64
    import json

    from castable.format.layout import manifest_key
    from castable.format.manifest import Manifest

    doc = json.loads(table.store.get(manifest_key(table.version)).data)
    first = pa.field("id", pa.int64(), nullable=False, metadata={FIELD_ID: b"1"})
    bad = pa.schema(
        [first, field] if field.name != "id" else [field, pa.field("v", pa.int64(), metadata={FIELD_ID: b"2"})]
    )
    doc["schema"]["arrow"] = base64.b64encode(bad.serialize().to_pybytes()).decode()
    with pytest.raises(castable.CorruptObjectError, match=message):
        Manifest.from_json(json.dumps(doc).encode(), key="manifest/v1.json", store=table.store)


def test_a_registered_file_with_another_engines_field_ids_is_read_by_name(table: castable.Table) -> None:
    """Field ids that are not castable's (a file from an Iceberg writer, say) are not trusted."""
    table.alter().rename_column("category", "kind").commit()
    foreign = pa.schema(
        [
            pa.field("value", pa.float64(), metadata={FIELD_ID: b"1"}),
            pa.field("id", pa.int64(), nullable=False, metadata={FIELD_ID: b"2"}),
            pa.field("kind", pa.string(), metadata={FIELD_ID: b"3"}),
        ]
    )
    data = pa.table({"value": [2.0], "id": [7000], "kind": ["k"]}, schema=foreign)
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink)
    table.store.put("data/foreign.parquet", sink.getvalue().to_pybytes())
    table.add_files(["data/foreign.parquet"])
    assert rows(table, filter="id = 7000") == [{"id": 7000, "kind": "k", "value": 2.0}]


def test_splice_erase_of_a_file_without_ids_after_a_rename(tmp_path: object) -> None:
    """A spliced copy keeps its source's footer (no ids, old names): it keeps resolving by them."""
    uri = str(tmp_path / "legacy")  # type: ignore[operator]
    t = castable.create_table(uri, EVENTS, primary_key="id", format_version=1)
    n = 700_000
    rng = np.random.default_rng(3)
    t.append(
        pa.table({"id": np.arange(n), "category": rng.choice(["a", "b"], n), "value": rng.random(n)}, schema=EVENTS)
    )
    assert t.manifest.data_files[0].size > 5 * 2**20  # S3 range-copies from objects of 5 MiB up
    t.upgrade()
    t.alter().rename_column("value", "amount").commit()
    report = t.erase("id = 12345", mode="splice")
    assert [e.method for e in report.files] == ["splice"]
    t.alter().rename_column("amount", "v2").commit()
    assert t.count() == n - 1
    assert t.scan(filter="id = 12346").to_arrow().column("v2").null_count == 0
    assert t.scan(filter="v2 >= 0").count() == n - 1


def _options(t: castable.Table) -> dict | None:
    client = getattr(t.store, "client", None)
    return None if client is None else {"endpoint_url": str(client.meta.endpoint_url), "region": "us-east-1"}


@pytest.mark.parametrize("inline_bytes", [0, 65_536], ids=["files", "inline"])
def test_a_column_added_again_under_a_dropped_ones_name_prunes_by_its_own_statistics(
    tmp_path: Path, inline_bytes: int
) -> None:
    """The dropped and the new column share name and type but not their id: segments written
    before must not lend the old column's statistics (no NULL) to the new one (all NULL)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    t = castable.create_table(
        str(tmp_path / "t"), schema, primary_key="id", properties={"write.inline.max-bytes": inline_bytes}
    )
    t.alter().add_column("flag", pa.bool_()).commit()
    for i in range(10):  # enough single-file segments to be merged after the change
        t.append(pa.table({"id": [i], "name": ["a"], "flag": [False]}))
    t.alter().drop_column("flag").commit()
    t.alter().add_column("flag", pa.bool_()).commit()
    t.append(pa.table({"id": [10], "name": ["b"], "flag": [True]}))
    assert t.scan(filter="flag IS NULL").count() == 10
    assert t.scan(filter="flag = false").count() == 0
    assert sorted(r["flag"] is None for r in t.scan().to_arrow().to_pylist()) == [False] + [True] * 10
