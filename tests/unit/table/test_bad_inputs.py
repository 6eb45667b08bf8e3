"""Every bad input gets a clear, catchable error and leaves the table exactly as it was."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.tables import EVENTS, FILES_ONLY, events, snapshot_of

import castable
from castable.errors import (
    CastableError,
    CorruptObjectError,
    EmptyWriteError,
    InvalidInputError,
    InvalidPredicateError,
    SchemaMismatchError,
)
from castable.format.layout import POINTER_KEY, manifest_key
from castable.table import Table
from castable.tables import load_table


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> Table:
    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, properties=FILES_ONLY)
    t.append(events(0, 100))
    t.delete("id < 5")
    return t


def unchanged(t: Table, action, error: type[Exception], match: str | None = None) -> None:  # type: ignore[no-untyped-def]
    before = snapshot_of(t.store)
    with pytest.raises(error, match=match):
        action()
    assert snapshot_of(t.store) == before


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (pa.table({"id": pa.array(["1"]), "category": ["a"], "value": [1.0]}), "column 'id' is string"),
        (pa.table({"id": pa.array([1], pa.int64()), "value": [1.0]}), "missing column 'category'"),
        (pa.table({"id": [1], "category": ["a"], "value": [1.0], "x": [1]}), "unknown columns"),
        (pa.table({"id": pa.array([None], pa.int64()), "category": ["a"], "value": [1.0]}), "not nullable"),
    ],
)
def test_wrong_schema(table: Table, data: pa.Table, match: str) -> None:
    unchanged(table, lambda: table.append(data), SchemaMismatchError, match)


def test_wrong_schema_in_a_later_batch_writes_nothing_visible(table: Table) -> None:
    good = events(100, 110).to_batches()[0]
    bad = pa.record_batch({"id": pa.array(["1"]), "category": ["a"], "value": [1.0]})
    with pytest.raises(SchemaMismatchError):
        table.append(iter([good, bad]))
    assert load_table(table.store).version == table.version
    assert table.refresh().scan().count() == 95


def test_a_stream_that_fails_after_files_were_written_leaves_none(table_uri: tuple[str, dict | None]) -> None:
    """Small files and row groups, so several files are out before the bad batch comes: they
    are deleted again."""
    uri, options = table_uri
    sizes = {"write.target-file-size-bytes": "4096", "write.row-group-size-bytes": "1024", **FILES_ONLY}
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, properties=sizes)
    good = [events(i * 100, i * 100 + 100).to_batches()[0] for i in range(20)]
    bad = pa.record_batch({"id": pa.array(["1"]), "category": ["a"], "value": [1.0]})
    written: list[str] = []
    real = t.store.delete_many

    def spy(keys: list[str]) -> None:
        written.extend(keys)
        real(keys)

    t.store.delete_many = spy  # type: ignore[method-assign]
    unchanged(t, lambda: t.append(iter([*good, bad])), SchemaMismatchError, "column 'id' is string")
    assert len(written) > 1, "files were out before the bad batch"


@pytest.mark.parametrize("data", [EVENTS.empty_table(), pa.RecordBatchReader.from_batches(EVENTS, []), iter([])])
def test_empty_append(table: Table, data: object) -> None:
    unchanged(table, lambda: table.append(data), EmptyWriteError)


@pytest.mark.parametrize("data", ["text", 42, {"id": [1]}, [1, 2]])
def test_not_arrow_data(table: Table, data: object) -> None:
    unchanged(table, lambda: table.append(data), InvalidInputError)


@pytest.mark.parametrize(
    ("predicate", "match"),
    [
        ("nope = 1", "unknown column 'nope'"),
        ("id = ", "cannot parse"),
        ("id = 'abc'", "not a valid int64"),
        ("id = 1.5", "not a valid int64"),
        ("id = other", "unknown column 'other'.*single quotes: 'other'"),
        ("category = a", "unknown column 'a'.*single quotes: 'a'"),
        ("id = value", "comparing two columns"),
        ("id = = 3", r"^cannot parse predicate 'id = = 3': .* at column 6 near '='$"),
        ("category = 'a", r"^cannot parse predicate [^\x1b]*$"),
        ("id = NULL", "IS NULL"),
        ("id + 1 > 3", "column"),
        ("value LIKE 'a%'", "string column"),
        ("", "SQL string"),
        ("id IN (SELECT 1)", "subqueries"),
    ],
)
def test_bad_predicates(table: Table, predicate: str, match: str) -> None:
    unchanged(table, lambda: table.delete(predicate), InvalidPredicateError, match)
    with pytest.raises(InvalidPredicateError):
        table.scan(filter=predicate)


def test_bad_arrow_expressions(table: Table) -> None:
    unchanged(table, lambda: table.delete(pc.field("nope") > 1), InvalidPredicateError, "nope")
    with pytest.raises(InvalidPredicateError):
        table.scan(filter=pc.field("id") + 1)


def test_unknown_projection(table: Table) -> None:
    with pytest.raises(InvalidInputError, match="unknown columns"):
        table.scan(["id", "nope"])


def test_malformed_pointer(table: Table) -> None:
    """Every version still reads; writes are refused with the way out, and ``repair`` fixes it."""
    for garbage in [b"not json", b"{}", b'{"version": -1}', b'{"version": "3"}']:
        table.store.put(POINTER_KEY, garbage)
        before = snapshot_of(table.store)
        damaged = castable.open_table(table.uri, storage_options=_options(table))
        assert damaged.damage is not None and "_latest_manifest is malformed" in damaged.damage
        assert damaged.scan().count() == 95 and damaged.scan(version=1).count() == 100
        with pytest.raises(CorruptObjectError, match="castable repair"):
            load_table(table.store).append(events(200, 201))
        assert snapshot_of(table.store) == before
    assert damaged.repair() == 2 and damaged.damage is None
    damaged.append(events(200, 201))
    assert castable.open_table(table.uri, storage_options=_options(table)).scan().count() == 96


def test_pointer_naming_a_missing_manifest(table: Table) -> None:
    table.store.put(POINTER_KEY, json.dumps({"version": 40}).encode())
    before = snapshot_of(table.store)
    damaged = castable.open_table(table.uri, storage_options=_options(table))
    assert "names version 40" in (damaged.damage or "")
    with pytest.raises(CorruptObjectError, match="names version 40"):
        damaged.delete("id = 7")
    assert snapshot_of(table.store) == before


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda d: b"{truncated",
        lambda d: json.dumps({**d, "format_version": 99}).encode(),
        lambda d: json.dumps({**d, "format": "delta"}).encode(),
        lambda d: json.dumps({k: v for k, v in d.items() if k not in ("data_files", "segments")}).encode(),
        lambda d: json.dumps({**d, "version": 7}).encode(),
        lambda d: json.dumps({**d, "schema": {"arrow": "!!"}}).encode(),
        lambda d: json.dumps({**d, "data_files": [{"path": "x"}], "segments": [{"path": "x"}]}).encode(),
        lambda d: json.dumps({**d, "primary_key": ["missing"]}).encode(),
    ],
)
def test_malformed_manifest(table: Table, corrupt) -> None:  # type: ignore[no-untyped-def]
    """The newest version cannot be read: it and every write are refused with the way out,
    older versions and history still read, and ``repair`` commits the newest readable forward."""
    key = manifest_key(table.version)
    doc = json.loads(table.store.get(key).data)
    table.store.delete(key)
    table.store.put(key, corrupt(doc))
    before = snapshot_of(table.store)
    damaged = castable.open_table(table.uri, storage_options=_options(table))
    with pytest.raises(CorruptObjectError, match=f"{key}.*versions up to 1 can still be read.*castable repair"):
        damaged.scan()
    with pytest.raises(CorruptObjectError, match="castable repair"):
        load_table(table.store).append(events(200, 201))
    assert damaged.scan(version=1).count() == 100
    assert [(h.version, h.operation) for h in damaged.history()] == [(2, "unreadable"), (1, "append"), (0, "create")]
    assert snapshot_of(table.store) == before
    assert damaged.repair(commit_id="fix") == 3
    assert damaged.history(limit=1)[0].summary == {"restored_from": 1, "unreadable_versions": [2]}
    assert damaged.scan().count() == 100 and damaged.repair() == 3
    with pytest.raises(CorruptObjectError, match="gc cannot tell which files version 2 references"):
        damaged.gc()


def test_corrupt_data_file_is_reported(table: Table) -> None:
    f = table.manifest.data_files[0]
    table.store.put(f.path, b"PAR1 this is not parquet PAR1")
    with pytest.raises(CorruptObjectError):
        load_table(table.store).scan().to_arrow()


def test_a_data_page_garbled_in_place_is_a_corrupt_object(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Bit rot: the footer is intact, size and ETag unchanged, a data page garbled; the scan
    names the object instead of leaking pyarrow's OSError."""
    import os

    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")
    t.append(events(0, 5000))
    f = t.manifest.data_files[0]
    path = tmp_path / "t" / f.path
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[8:2000] = bytes(1992)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(CorruptObjectError, match=f"data file {f.path} .* does not decode"):
        castable.open_table(str(tmp_path / "t")).to_arrow()


def test_corrupt_tombstone_is_reported(table: Table) -> None:
    t = table.manifest.tombstones[0]
    table.store.put(t.path, b"garbage")
    with pytest.raises(CorruptObjectError):
        load_table(table.store).scan().to_arrow()


def test_missing_data_file_is_reported(table: Table) -> None:
    table.store.delete(table.manifest.data_files[0].path)
    with pytest.raises(CorruptObjectError):
        load_table(table.store).scan().count()


@pytest.mark.parametrize(
    ("uri", "kwargs"),
    [
        ("ftp://host/x", {}),
        ("s3://", {}),
        ("/tmp/x", {"storage_options": {"endpoint_url": "http://x"}}),
        ("s3://bucket/x", {"storage_options": {"bogus": "1"}}),
    ],
)
def test_bad_uris(uri: str, kwargs: dict) -> None:
    with pytest.raises(InvalidInputError):
        castable.open_table(uri, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"primary_key": "nope"}, "not in the schema"),
        ({"primary_key": ["id", "category"]}, "single-column"),
        ({"primary_key": "value"}, "must be an integer"),
        ({"properties": {"write.target-file-size-bytes": "big"}}, "integer"),
        ({"properties": {"write.parquet.compression": "rar"}}, "one of"),
        ({"properties": {"commit.timeout-seconds": 0}}, "positive number"),
        ({"properties": {"commit.timeout-seconds": "soon"}}, "positive number"),
        ({"properties": {"write.target-file-size": 1024}}, "did you mean 'write.target-file-size-bytes'"),
        ({"properties": {"commit.max-attempts": 10}}, "unknown table property 'commit.max-attempts'"),
    ],
)
def test_bad_create_arguments(tmp_path, kwargs: dict, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError, match=match):
        castable.create_table(str(tmp_path / "t"), EVENTS, **kwargs)
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("*.json"))


def test_bad_commit_id(table: Table) -> None:
    unchanged(table, lambda: table.append(events(200, 201), commit_id=""), InvalidInputError)


def test_every_error_is_a_castable_error() -> None:
    for cls in (
        CorruptObjectError,
        EmptyWriteError,
        InvalidInputError,
        InvalidPredicateError,
        SchemaMismatchError,
        castable.StoreUnavailableError,
        castable.UnsafeStoreError,
    ):
        assert issubclass(cls, CastableError)


def _options(t: Table) -> dict | None:
    from castable.store import S3Store

    if isinstance(t.store, S3Store):
        return {"endpoint_url": t.store.client.meta.endpoint_url, "region": "us-east-1"}
    return None


KEYED_NULLABLE = pa.schema([("id", pa.int64()), ("name", pa.string())])


def test_duplicate_column_names_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    schema = pa.schema([("id", pa.int64()), ("id", pa.string())])
    with pytest.raises(InvalidInputError, match=r"repeated: \['id'\]"):
        castable.create_table(str(tmp_path / "t"), schema)
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("how", ["append", "add_files"])
def test_null_primary_keys_are_refused(table_uri: tuple[str, dict | None], how: str) -> None:
    """A nullable key column is allowed, a row without a key is not: by append or by add_files."""
    import io

    import pyarrow.parquet as pq

    uri, options = table_uri
    t = castable.create_table(uri, KEYED_NULLABLE, primary_key="id", storage_options=options)
    rows = pa.table({"id": [1, None], "name": ["a", "b"]}, schema=KEYED_NULLABLE)
    if how == "append":
        unchanged(t, lambda: t.append(rows), SchemaMismatchError, "primary key column 'id' holds NULLs")
    else:
        buf = io.BytesIO()
        pq.write_table(rows, buf)
        t.store.put("data/ext/nulls.parquet", buf.getvalue())
        unchanged(t, lambda: t.add_files(["data/ext/nulls.parquet"]), SchemaMismatchError, "holds NULLs")


def test_a_file_is_registered_under_one_spelling_only(table: Table) -> None:
    import io

    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(events(500, 510), buf)
    table.store.put("data/ext/a.parquet", buf.getvalue())
    table.add_files(["data/ext/a.parquet"])
    unchanged(table, lambda: table.add_files(["data/./ext/a.parquet"]), InvalidInputError, "canonical form")
    assert table.count() == 105


def test_odd_arguments_get_castable_errors(table: Table, tmp_path) -> None:  # type: ignore[no-untyped-def]
    unchanged(table, lambda: table.scan(filter="id IN ()"), InvalidPredicateError, "at least one value")
    unchanged(table, lambda: table.scan(version="1"), InvalidInputError, "integer")  # type: ignore[arg-type]
    plain = tmp_path / "plain-file"
    plain.write_text("not a table")
    with pytest.raises(castable.TableNotFoundError):
        castable.open_table(str(plain))


def test_an_unreachable_endpoint_is_a_store_unavailable_error() -> None:
    """botocore's EndpointConnectionError becomes castable's StoreUnavailableError, cause kept."""
    options = {"endpoint_url": "http://127.0.0.1:9", "region": "us-east-1", "max_attempts": 1}
    with pytest.raises(castable.StoreUnavailableError, match="endpoint_url") as info:
        castable.open_table("s3://bucket/table", storage_options=options)
    assert type(info.value.__cause__).__name__ == "EndpointConnectionError"


def test_scan_arguments_in_the_forms_people_write(table: Table) -> None:
    """``as_of`` as ISO 8601 text works like a datetime; a comma-separated string of columns is
    refused with the list to write instead of being read as letters."""
    now = table.manifest.created_at.isoformat()
    assert table.scan(as_of=now).count() == table.scan(as_of=table.manifest.created_at).count() == 95
    with pytest.raises(InvalidInputError, match="ISO 8601"):
        table.scan(as_of="last tuesday")
    with pytest.raises(InvalidInputError, match=r"\['id', 'value'\]"):
        table.scan("id,value")  # type: ignore[arg-type]


def test_missing_versions_say_why(table: Table) -> None:
    from castable.errors import VersionNotFoundError

    with pytest.raises(VersionNotFoundError, match=r"version 9 .* does not exist \(the newest is 2\)"):
        table.scan(version=9)
    table.expire(retain_versions=1)
    with pytest.raises(VersionNotFoundError, match=r"version 1 .* has expired .* from 2 to 2"):
        table.scan(version=1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format_version": None}, "not a valid manifest: .*format_version is None, not a version number"),
        ({"format_version": "1"}, "not a valid manifest: .*format_version is '1', not a version number"),
        ({"format_version": 7}, "format version 7 is newer than this castable reads \\(2\\); upgrade castable"),
    ],
)
def test_manifest_format_version_messages(table: Table, change: dict, message: str) -> None:
    """A manifest without a usable format version is corrupt; only a newer version asks for an upgrade."""
    key = manifest_key(table.version)
    doc = {**json.loads(table.store.get(key).data), **change}
    table.store.delete(key)
    table.store.put(key, json.dumps(doc).encode())
    with pytest.raises(CorruptObjectError, match=message):
        castable.open_table(table.uri, storage_options=_options(table)).scan()


@pytest.mark.parametrize(
    "action",
    [
        lambda t: t.scan(filter="categroy = 'a'"),
        lambda t: t.scan(["id", "categroy"]),
        lambda t: t.update({"categroy": "'b'"}),
        lambda t: t.append(pa.table({"id": [1], "categroy": ["a"], "value": [1.0]})),
        lambda t: t.alter().rename_column("categroy", "kind").commit(),
    ],
    ids=["filter", "columns", "update", "append", "alter"],
)
def test_an_unknown_column_is_named_with_the_nearest_known_one(table: Table, action) -> None:  # type: ignore[no-untyped-def]
    unchanged(table, lambda: action(table), CastableError, "did you mean 'category'")
