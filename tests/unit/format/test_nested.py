"""Field ids inside nested columns (castable.format.nested, docs/format.md section 4.1): given as
Iceberg gives them, kept by every change, written into Parquet files, never shown in a scan."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema, assign_fresh_schema_ids, index_by_id
from pyiceberg.types import NestedField

import castable
from castable.format.evolution import FIELD_ID, SchemaUpdate, check_ids, last_column_id, with_all_ids, with_ids
from castable.format.nested import nested_ids, without_nested_metadata

PRIMITIVES = st.sampled_from([pa.int32(), pa.int64(), pa.string(), pa.float64(), pa.bool_(), pa.date32()])


def _types(depth: int) -> st.SearchStrategy[pa.DataType]:
    if depth == 0:
        return PRIMITIVES
    inner = _types(depth - 1)
    names = st.lists(st.sampled_from("abcdef"), min_size=1, max_size=3, unique=True)
    structs = st.builds(lambda ns, ts: pa.struct(list(zip(ns, ts, strict=False))), names, st.lists(inner, min_size=3))
    return st.one_of(PRIMITIVES, structs, inner.map(pa.list_), st.builds(pa.map_, PRIMITIVES, inner))


SCHEMAS = st.lists(_types(3), min_size=1, max_size=4).map(
    lambda ts: pa.schema([(f"c{i}", t) for i, t in enumerate(ts)])
)


@settings(max_examples=60, deadline=None)
@given(SCHEMAS)
def test_a_new_tables_ids_are_the_ones_iceberg_gives(schema: pa.Schema) -> None:
    ours = with_ids(schema)
    iceberg = pyarrow_to_schema(ours, format_version=2)
    assert iceberg == assign_fresh_schema_ids(iceberg)
    given_ids = [f.field_id for f in _all_fields(iceberg)]
    assert sorted(given_ids) == list(range(1, len(given_ids) + 1)) and last_column_id(ours) == len(given_ids)
    check_ids(ours)


def _all_fields(schema: Schema) -> list[NestedField]:
    return list(index_by_id(schema).values())


def test_a_column_added_takes_its_id_then_its_fields_ids() -> None:
    schema = with_ids(pa.schema([("id", pa.int64()), ("p", pa.struct([("a", pa.int64())]))]))
    assert last_column_id(schema) == 3
    added, _ = (
        SchemaUpdate()
        .add_column("q", pa.list_(pa.struct([("x", pa.int32()), ("y", pa.string())])))
        .apply(schema, (), 1)
    )
    assert [_id(added.field("q")), *nested_ids(added.field("q").type)] == [4, 5, 6, 7]
    assert nested_ids(added.field("p").type) == [3] and last_column_id(added) == 7


def test_nested_fields_made_before_ids_get_theirs_at_the_next_change_and_keep_them() -> None:
    """A schema whose columns have ids and whose nested fields have none (a table made before
    castable gave them): the next schema change gives them ids after the last one, and every
    later change keeps them."""
    old = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={FIELD_ID: b"1"}),
            pa.field("p", pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))]), metadata={FIELD_ID: b"2"}),
        ]
    )
    assert nested_ids(with_ids(old).field("p").type) == [None, None, None], "reads give no ids of their own"
    changed, _ = SchemaUpdate().add_column("n", pa.int32()).apply(old, (), 5)
    assert nested_ids(changed.field("p").type) == [3, 4, 5] and _id(changed.field("n")) == 6
    again, _ = SchemaUpdate().rename_column("n", "m").apply(changed, (), 6)
    assert nested_ids(again.field("p").type) == [3, 4, 5] and with_all_ids(again) is again


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ([("a", pa.struct([pa.field("x", pa.int32(), metadata={FIELD_ID: b"1"})]), 1)], "field ids repeat"),
        (
            [("a", pa.struct([pa.field("x", pa.int32(), metadata={FIELD_ID: b"2"}), ("y", pa.int32())]), 1)],
            "some of its nested fields have ids and some do not",
        ),
    ],
)
def test_ids_that_repeat_or_are_missing_inside_a_column_are_malformed(fields: list, problem: str) -> None:
    schema = pa.schema([pa.field(n, t, metadata={FIELD_ID: str(i).encode()}) for n, t, i in fields])
    with pytest.raises(ValueError, match=problem):
        check_ids(schema)


def test_files_hold_the_nested_ids_and_scans_show_none(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))]))])
    table = castable.create_table(str(tmp_path / "t"), schema, properties={"write.inline.max-bytes": 0})
    table.append(pa.table({"id": [1], "p": [{"a": 2, "b": ["x"]}]}, schema=schema))
    written = pq.read_schema(next((tmp_path / "t" / "data").rglob("*.parquet")))
    assert nested_ids(written.field("p").type) == [3, 4, 5]
    got = table.scan().to_arrow()
    assert got.schema.equals(schema, check_metadata=True) and nested_ids(got.schema.field("p").type) == [None] * 3
    assert without_nested_metadata(table.schema.field("p").type).equals(schema.field("p").type)


def _id(f: pa.Field) -> int:
    return int(f.metadata[FIELD_ID])


PAYLOAD = pa.struct([("user", pa.struct([("id", pa.int64()), ("name", pa.string())])), ("tags", pa.list_(pa.string()))])
NESTED = pa.schema([pa.field("id", pa.int64(), nullable=False), ("payload", PAYLOAD)])
ROWS = pa.table(
    {"id": [1, 2, 3], "payload": [{"user": {"id": 7, "name": "a"}, "tags": ["x"]}, {"user": None, "tags": []}, None]},
    schema=NESTED,
)


def _table(tmp_path: Path) -> castable.Table:
    t = castable.create_table(str(tmp_path / "t"), NESTED, primary_key="id", properties={"write.inline.max-bytes": 0})
    t.append(ROWS)
    return t


def test_fields_inside_a_struct_are_renamed_added_dropped_and_widened_by_id_with_no_data_rewritten(
    tmp_path: Path,
) -> None:
    t = _table(tmp_path)
    files = {f.path for f in t.manifest.data_files}
    with t.alter() as change:
        change.rename_column(("payload", "user"), "person").add_column(("payload", "person", "age"), pa.int32())
        change.drop_column(("payload", "tags")).add_column(("payload", "tags"), pa.string())  # a new field, not the old
    t.alter().widen_column(("payload", "person", "age"), pa.int64()).make_nullable(("payload", "person", "id")).commit()
    assert {f.path for f in t.refresh().manifest.data_files} == files, "no data file rewritten"
    assert t.scan().to_arrow().sort_by("id").column("payload").to_pylist() == [
        {"person": {"id": 7, "name": "a", "age": None}, "tags": None},
        {"person": None, "tags": None},
        None,
    ]
    assert nested_ids(t.schema.field("payload").type) == [3, 5, 6, 8, 9]
    assert t.scan(version=1).to_arrow().equals(ROWS), "the old version reads as it was"
    assert t.scan(["id"], filter="payload.person.name = 'a'").to_arrow().column("id").to_pylist() == [1]


def test_a_file_without_ids_is_read_by_the_names_its_fields_had_when_it_was_added(tmp_path: Path) -> None:
    """A file registered from another writer (no field ids, nested or not), then a field inside
    a struct renamed, and another dropped and added again under its name: the renamed field
    is found under its old name, the re-added one is NULL in the old file (never the old values)."""
    t = castable.create_table(str(tmp_path / "t"), NESTED, primary_key="id")
    path = tmp_path / "t" / "data" / "theirs.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(ROWS, path)
    t.add_files(["data/theirs.parquet"])
    t.alter().rename_column(("payload", "user"), "person").drop_column(("payload", "tags")).commit()
    t.alter().add_column(("payload", "tags"), pa.list_(pa.string())).commit()
    assert t.scan().to_arrow().sort_by("id").column("payload").to_pylist() == [
        {"person": {"id": 7, "name": "a"}, "tags": None},
        {"person": None, "tags": None},
        None,
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.add_column(("payload", "user", "id"), pa.int32()), "field name 'id' is already taken"),
        (lambda c: c.rename_column(("payload", "nope"), "x"), "unknown field 'payload.nope'"),
        (lambda c: c.drop_column(("payload", "user", "id")).drop_column(("payload", "user", "name")), "keeps at least"),
        (lambda c: c.widen_column(("payload", "user", "id"), pa.int32()), "only widening keeps every value"),
        (
            lambda c: c.add_column(("payload", "tags", "x"), pa.int32()),
            "payload.tags is list<item: string>: its element is widened or made nullable",
        ),
        (lambda c: c.add_column(("payload", "user", "x"), pa.int32(), default=1), "added without a default"),
    ],
)
def test_a_change_that_cannot_be_made_inside_a_struct_is_refused_and_changes_nothing(
    tmp_path: Path, change: object, message: str
) -> None:
    t = _table(tmp_path)
    with pytest.raises((castable.CastableError, ValueError), match=message):
        change(t.alter()).commit()  # type: ignore[operator]
    assert t.refresh().version == 1


def test_a_field_dropped_and_added_again_under_its_name_and_type_never_shows_the_old_values(tmp_path: Path) -> None:
    """The struct's type is the same by names and types before and after; only the ids tell
    the new field from the old, so a file of the old one reads NULL in it."""
    t = _table(tmp_path)
    t.alter().drop_column(("payload", "user", "name")).commit()
    t.alter().add_column(("payload", "user", "name"), pa.string()).commit()
    assert t.schema.field("payload").type.equals(PAYLOAD)
    users = [p and p["user"] for p in t.scan().to_arrow().sort_by("id").column("payload").to_pylist()]
    assert users == [{"id": 7, "name": None}, None, None]
