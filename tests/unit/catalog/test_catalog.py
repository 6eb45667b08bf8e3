"""The Iceberg REST catalog (``castable.catalog``) driven by a real client, pyiceberg's
``RestCatalog``, over HTTP: every write it makes is a castable commit that castable reads back,
every refused request leaves the table as it was, and conflicts answer 409."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers.iceberg_commits import equality_delete_commit, position_delete_commit
from helpers.rest_catalog import Served, held_commit
from helpers.tables import snapshot_of
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    ValidationException,
)
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual
from pyiceberg.manifest import ManifestWriter
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, ListType, LongType, MapType, NestedField, StringType, StructType

import castable

JSON = {"Content-Type": "application/json"}
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": pa.array(["a", "b", "c"], pa.string())})


@contextmanager
def lying_manifests(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """pyiceberg's manifests, inside the block, say each file holds one row more than it does."""
    real_add = ManifestWriter.add_entry

    def lying(self: ManifestWriter, entry: Any) -> ManifestWriter:
        entry.data_file[4] = entry.data_file.record_count + 1  # record_count
        return real_add(self, entry)

    with monkeypatch.context() as m:
        m.setattr(ManifestWriter, "add_entry", lying)
        yield


def rows(table: castable.Table) -> list[tuple[Any, ...]]:
    data = table.refresh().to_arrow()
    return sorted(zip(*(data.column(n).to_pylist() for n in data.column_names), strict=True))


def iceberg_rows(table: Any) -> list[tuple[Any, ...]]:
    data = table.refresh().scan().to_arrow()
    return sorted(zip(*(data.column(n).to_pylist() for n in data.column_names), strict=True))


def test_namespaces_are_folders(served: Served, tmp_path: Path) -> None:
    cat = served.client()
    cat.create_namespace("sales", {"owner": "ana"})
    cat.create_namespace(("sales", "eu"))
    cat.create_namespace("shop", {"castable.database": "true"})
    with pytest.raises(NamespaceAlreadyExistsError):
        cat.create_namespace("sales")
    assert cat.list_namespaces() == [("sales",), ("shop",)]
    assert cat.list_namespaces("sales") == [("sales", "eu")]
    assert cat.load_namespace_properties("sales") == {"owner": "ana"}
    assert cat.namespace_exists("sales") and not cat.namespace_exists("nowhere")
    summary = cat.update_namespace_properties("sales", removals={"owner", "absent"}, updates={"team": "x"})
    assert (summary.updated, summary.removed, summary.missing) == (["team"], ["owner"], ["absent"])
    assert cat.load_namespace_properties("sales") == {"team": "x"}
    with pytest.raises(NamespaceNotEmptyError):
        cat.drop_namespace("sales")
    cat.drop_namespace(("sales", "eu"))
    assert cat.list_namespaces("sales") == []
    with pytest.raises(NoSuchNamespaceError):
        cat.list_tables("nowhere")

    # A database namespace: its tables commit through the database's log.
    t = cat.create_table("shop.orders", schema=ROWS.schema)
    t.append(ROWS)
    db = castable.open_database(str(tmp_path / "wh" / "shop"))
    assert db.tables() == ["orders"] and db.version == 2
    assert rows(db.table("orders")) == [(1, "a"), (2, "b"), (3, "c")]
    assert cat.list_tables("shop") == [("shop", "orders")]
    # ... and a drop is one database version, its files going with it
    cat.create_table("shop.gone", schema=ROWS.schema).append(ROWS)
    with pytest.raises(Exception, match="a table of a castable database leaves it with its files"):
        cat.drop_table("shop.gone")
    cat.purge_table("shop.gone")
    assert cat.list_tables("shop") == [("shop", "orders")] and not cat.table_exists("shop.gone")
    assert db.refresh().history(1)[0].operation == "drop_table" and db.tables() == ["orders"]
    assert not list(db.store.child("gone").list()), "no object of it is left"

    # Tables castable made are in the catalog too, and a table is no namespace.
    castable.create_table(str(tmp_path / "wh" / "sales" / "made"), ROWS.schema).append(ROWS)
    assert cat.list_tables("sales") == [("sales", "made")]
    assert iceberg_rows(cat.load_table("sales.made")) == [(1, "a"), (2, "b"), (3, "c")]
    assert ("sales", "made") not in cat.list_namespaces("sales")


def test_pyiceberg_writes_and_castable_reads(served: Served) -> None:
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=ROWS.schema, properties={"owner": "ana", "write.delete.mode": "copy-on-write"})
    assert t.location() == served.castable("db", "t").uri.rstrip("/")
    t.append(ROWS)
    ct = served.castable("db", "t")
    assert rows(ct) == [(1, "a"), (2, "b"), (3, "c")] == iceberg_rows(t)

    t.delete(EqualTo("id", 2))  # copy-on-write: the file is rewritten
    assert rows(ct) == [(1, "a"), (3, "c")] == iceberg_rows(t)
    t.overwrite(pa.table({"id": pa.array([9], pa.int64()), "s": pa.array(["z"], pa.string())}))
    assert rows(ct) == [(9, "z")] == iceberg_rows(t)
    t.append(ROWS)
    t.delete(GreaterThanOrEqual("id", 9))  # a whole file: Iceberg's delete operation
    assert rows(ct) == [(1, "a"), (2, "b"), (3, "c")] == iceberg_rows(t)

    with t.update_schema() as change:
        change.add_column("n", LongType())
        change.rename_column("s", "name")
    assert ct.refresh().schema.names == ["id", "name", "n"]
    t.append(pa.table({"id": pa.array([4], pa.int64()), "name": ["d"], "n": pa.array([40], pa.int64())}))
    assert rows(ct) == [(1, "a", None), (2, "b", None), (3, "c", None), (4, "d", 40)] == iceberg_rows(t)
    with t.update_schema() as change:
        change.delete_column("n")
    assert rows(ct) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")] == iceberg_rows(t)

    with t.transaction() as tx:
        tx.set_properties(team="x")
        tx.remove_properties("owner")
    assert ct.refresh().properties["team"] == "x" and "owner" not in ct.properties
    assert ct.properties["iceberg.write.delete.mode"] == "copy-on-write"  # a name in castable's namespace
    status, full = served.raw("GET", "/v1/namespaces/db/tables/t")
    status_refs, refs = served.raw("GET", "/v1/namespaces/db/tables/t?snapshots=refs")
    assert status == status_refs == 200 and len(full["metadata"]["snapshots"]) == ct.version > 1
    assert [s["snapshot-id"] for s in refs["metadata"]["snapshots"]] == [ct.version]
    assert served.raw("GET", "/v1/namespaces/db/tables/t?snapshots=some")[0] == 400
    loaded = cat.load_table("db.t").properties
    assert loaded["team"] == "x" and loaded["write.delete.mode"] == "copy-on-write" and "owner" not in loaded

    # Every castable feature keeps working on what the engine wrote.
    history = [(h.version, h.operation) for h in ct.history()]
    assert [op for _, op in history][::-1] == [
        "create", "append", "overwrite", "overwrite", "append", "delete", "alter", "append", "alter", "set-properties"
    ]  # fmt: skip
    changes = ct.changes(2, 2).to_arrow()
    assert sorted(zip(changes["id"].to_pylist(), changes["_change_type"].to_pylist(), strict=True)) == [(2, "delete")]
    ct.delete("id = 1")
    ct.compact()
    assert iceberg_rows(t) == [(2, "b"), (3, "c"), (4, "d")] == rows(ct)
    assert cat.load_table("db.t").metadata.current_snapshot_id == ct.version  # castable numbers the snapshots


def test_a_stale_client_gets_409_and_pyiceberg_retries(served: Served) -> None:
    cat = served.client()
    cat.create_namespace("db")
    cat.create_table("db.t", schema=ROWS.schema)
    first, second = cat.load_table("db.t"), cat.load_table("db.t")
    first.append(ROWS.slice(0, 1))
    second.append(ROWS.slice(1, 1))  # built on version 0: 409, and pyiceberg appends again on version 1
    served.castable("db", "t").append(ROWS.slice(2, 1))
    first.append(pa.table({"id": pa.array([4], pa.int64()), "s": ["d"]}))  # behind a castable commit
    ct = served.castable("db", "t")
    assert rows(ct) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")] and ct.version == 4

    stale = cat.load_table("db.t")
    ct.append(ROWS.slice(0, 1))  # the schema stays: a schema change asserts only the schema's id
    with stale.update_schema() as change:
        change.add_column("n", LongType())
    assert ct.refresh().version == 6 and ct.schema.names == ["id", "s", "n"]
    stale = cat.load_table("db.t")
    ct.add_columns([pa.field("m", pa.int64())])
    with pytest.raises(CommitFailedException), stale.update_schema() as change:  # pyiceberg does not retry this
        change.add_column("o", LongType())
    assert ct.refresh().version == 7 and ct.schema.names == ["id", "s", "n", "m"]


def test_a_repeated_commit_lands_once(served: Served) -> None:
    """A commit whose answer was lost, sent again, is recognised by its snapshot id."""
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=ROWS.schema)
    sent: list[tuple[str, bytes]] = []
    real = t.catalog._session.post

    def recording(url: str, *args: Any, **kwargs: Any) -> Any:
        sent.append((url, kwargs.get("data") or b""))
        return real(url, *args, **kwargs)

    t.catalog._session.post = recording  # type: ignore[method-assign]
    t.append(ROWS)
    ct = served.castable("db", "t")
    assert ct.version == 1
    url, body = sent[-1]
    status, answer = served.raw("POST", url.removeprefix(served.uri), json.loads(body))
    assert status == 200 and answer["metadata"]["current-snapshot-id"] == 1
    assert ct.refresh().version == 1 and rows(ct) == [(1, "a"), (2, "b"), (3, "c")]


def test_refused_requests_change_nothing(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=ROWS.schema)
    t.append(ROWS)
    ct = served.castable("db", "t")
    before = (ct.version, rows(ct))

    def unchanged() -> None:
        assert (ct.refresh().version, rows(ct)) == before

    with lying_manifests(monkeypatch), pytest.raises(BadRequestError, match="the manifest says 4 rows"):
        t.append(ROWS)
    unchanged()

    with pytest.raises(Exception, match="castable tables have one branch"):
        t.manage_snapshots().create_branch(t.current_snapshot().snapshot_id, "dev").commit()
    with pytest.raises(Exception, match="castable tables have one branch"):
        t.manage_snapshots().create_tag(t.current_snapshot().snapshot_id, "v1").commit()
    snapshot = t.current_snapshot().snapshot_id
    wrong_id = {"type": "struct", "schema-id": 7, "fields": [*ROWS_FIELDS, LONG_9]}
    for updates, match in (
        ([{"action": "set-location", "location": "file:///elsewhere"}], "a castable table stays where it is"),
        ([{"action": "add-schema", "schema": wrong_id}, {"action": "set-current-schema", "schema-id": -1}], "id 9"),
        ([{"action": "remove-snapshots", "snapshot-ids": [snapshot]}], "castable expire"),
        ([{"action": "upgrade-format-version", "format-version": 3}], "format version 2"),
        (
            [{"action": "add-spec", "spec": {"fields": [HOUR_OF_TEXT]}}, {"action": "set-default-spec", "spec-id": -1}],
            "does not apply",
        ),
    ):
        status, answer = served.raw("POST", "/v1/namespaces/db/tables/t", {"requirements": [], "updates": updates})
        assert status in (400, 406) and match in answer["error"]["message"], answer
    unchanged()

    for bad in (
        {"name": "p", "schema": ROWS_SCHEMA, "partition-spec": {"spec-id": 0, "fields": [HOUR_OF_TEXT]}},
        {
            "name": "q",
            "schema": ROWS_SCHEMA,
            "partition-spec": {"spec-id": 0, "fields": [{**HOUR_OF_TEXT, "source-id": 7}]},
        },
        {"name": "f3", "schema": ROWS_SCHEMA, "properties": {"format-version": "3"}},
        {"name": "elsewhere", "schema": ROWS_SCHEMA, "location": "file:///tmp/elsewhere"},
        {"name": "t", "schema": ROWS_SCHEMA, "stage-create": True},  # a staged create of a table that exists
        {"name": "o", "schema": ROWS_SCHEMA, "write-order": {"order-id": 1, "fields": [{**ASCENDING, "source-id": 7}]}},
    ):
        status, answer = served.raw("POST", "/v1/namespaces/db/tables", bad)
        assert status in (400, 406, 409), answer
    assert cat.list_tables("db") == [("db", "t")]
    with pytest.raises(Exception, match="does not support endpoint"):  # the config lists no rename
        cat.rename_table("db.t", "db.u")
    status, answer = served.raw("POST", "/v1/tables/rename", {"source": {}, "destination": {}})
    assert status == 406 and "rename is refused" in answer["error"]["message"]
    unchanged()
    cat.purge_table("db.t")
    with pytest.raises(NoSuchTableError):
        cat.load_table("db.t")
    assert cat.list_tables("db") == []


def test_a_drop_keeps_the_files_until_a_purge_and_register_brings_the_table_back(served: Served) -> None:
    """DROP TABLE without PURGE: the table leaves the catalog (404, not listed, its name not
    free), castable's own opens refuse it, gc deletes nothing of it, and its files stay to the
    byte; register with its metadata brings it back with every version; a purge then deletes it."""
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=ROWS.schema)
    t.append(ROWS)
    location = f"{served.warehouse}/db/t"
    kept = {p: p.read_bytes() for p in Path(location).rglob("*") if p.is_file()}
    cat.drop_table("db.t")
    assert cat.list_tables("db") == [] and not cat.table_exists("db.t")
    with pytest.raises(NoSuchTableError):
        cat.load_table("db.t")
    with pytest.raises(castable.TableDroppedError, match="register it in its catalog to bring it back, or purge it"):
        castable.open_table(location)
    with pytest.raises(Exception, match="was dropped with its files kept"):
        cat.create_table("db.t", schema=ROWS.schema)
    assert (
        subprocess.run(
            [str(Path(sys.executable).with_name("castable")), "gc", location], capture_output=True
        ).returncode
        != 0
    )
    changed = [str(p.relative_to(location)) for p, data in kept.items() if not p.exists() or p.read_bytes() != data]
    assert changed == ["_latest_manifest"], "a dropped table's files are kept (its pointer names the drop's version)"
    with pytest.raises(Exception, match="castable registers its own dropped tables only"):
        cat.register_table("db.t", "file:///elsewhere/metadata/v1.metadata.json")
    back = cat.register_table("db.t", f"file://{location}/metadata/v1.metadata.json")
    assert iceberg_rows(back) == [(1, "a"), (2, "b"), (3, "c")] and cat.list_tables("db") == [("db", "t")]
    assert rows(castable.open_table(location)) == [(1, "a"), (2, "b"), (3, "c")]
    assert not any(k.startswith("castable.") for k in back.properties), "castable's own properties stay hidden"
    with pytest.raises(Exception, match="already exists"):
        cat.register_table("db.t", f"file://{location}/metadata/v1.metadata.json")
    cat.drop_table("db.t")
    cat.purge_table("db.t")  # a dropped table can still be purged
    left = [p for p in Path(location).rglob("*") if p.is_file() and ".castable-locks" not in p.parts]
    assert left == [] and not cat.table_exists("db.t")


def test_a_rollback_of_main_restores_the_older_version(served: Served) -> None:
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=ROWS.schema)
    t.append(ROWS)
    first = t.current_snapshot().snapshot_id
    t.append(ROWS)
    assert len(iceberg_rows(t)) == 6
    t.manage_snapshots().rollback_to_snapshot(first).commit()
    assert iceberg_rows(t) == [(1, "a"), (2, "b"), (3, "c")]
    table = served.castable("db", "t")
    assert table.count() == 3 and table.history()[0].operation == "restore"
    assert t.current_snapshot().snapshot_id == table.version


ROWS_FIELDS = [
    {"id": 1, "name": "id", "type": "long", "required": False},
    {"id": 2, "name": "s", "type": "string", "required": False},
]
ROWS_SCHEMA = {"type": "struct", "schema-id": 0, "fields": ROWS_FIELDS}
LONG_9 = {"id": 9, "name": "x", "type": "long", "required": False}
ASCENDING = {"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
HOUR_OF_TEXT = {"source-id": 2, "field-id": 1000, "name": "s_hour", "transform": "hour"}


def test_a_castable_commit_between_load_and_commit_is_a_conflict_not_a_rebase(served: Served) -> None:
    """A copy-on-write delete planned on version 1 must not land on a version 2 that changed its
    file: the catalog answers 409, and pyiceberg, retrying, finds castable's delete (published
    as a position delete file) in its way and gives up."""
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=ROWS.schema)
    t.append(ROWS)
    ct = served.castable("db", "t")
    ct.delete("id = 3")
    with pytest.raises(ValidationException, match="conflicting delete files"):
        t.delete(EqualTo("id", 2))  # planned on the version before castable's delete
    assert rows(ct) == [(1, "a"), (2, "b")]
    cat.load_table("db.t").delete(EqualTo("id", 2))
    assert rows(ct) == [(1, "a")]


def test_castable_catalog_serve(tmp_path: Path) -> None:
    castable.create_table(str(tmp_path / "wh" / "db" / "t"), ROWS.schema).append(ROWS)
    command = str(Path(sys.executable).with_name("castable"))
    proc = subprocess.Popen(
        [command, "catalog", "serve", str(tmp_path / "wh"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        uri = line.strip().rsplit(" ", 1)[-1]
        assert line.startswith("Iceberg REST catalog of") and uri.startswith("http://127.0.0.1:"), line
        cat = RestCatalog("castable", uri=uri)
        assert cat.list_tables("db") == [("db", "t")]
        assert iceberg_rows(cat.load_table("db.t")) == [(1, "a"), (2, "b"), (3, "c")]
        cat.load_table("db.t").append(pa.table({"id": pa.array([4], pa.int64()), "s": ["d"]}))
        assert castable.open_table(str(tmp_path / "wh" / "db" / "t")).count() == 4
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    # an access log line per request: the client, the request line, the status
    assert re.search(r"127\.0\.0\.1:\d+ - \"GET /v1/namespaces/db/tables HTTP/1\.1\" 200", err), err
    assert re.search(r"\"POST /v1/namespaces/db/tables/t HTTP/1\.1\" 200", err), err


def test_iceberg_string_type_reads_as_castable_strings(served: Served) -> None:
    """pyiceberg's strings are large strings in Arrow; castable takes them under its string type."""
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=ROWS.schema)
    t.append(ROWS)
    with t.update_schema() as change:
        change.add_column("note", StringType())
    ct = served.castable("db", "t")
    ct.append(pa.table({"id": [7], "s": ["g"], "note": ["n"]}))
    assert (7, "g", "n") in iceberg_rows(t)


def test_equality_deletes_on_the_primary_key_become_key_list_tombstones(served: Served) -> None:
    """An engine's equality delete file on the table's primary key (Flink's upserts) is a
    castable tombstone of those keys' rows, planned from the key statistics as castable's own
    deletes by key; one on another column is refused and changes nothing."""
    cat = served.client()
    cat.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True), NestedField(2, "s", StringType()), identifier_field_ids=[1]
    )
    t = cat.create_table("db.k", schema=schema)
    arrow = t.schema().as_arrow()
    t.append(pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}, schema=arrow))
    t.append(pa.table({"id": [4, 5], "s": ["d", "e"]}, schema=arrow))
    ct = served.castable("db", "k")
    assert ct.primary_key == "id" and ct.version == 2

    status, answer = served.raw("POST", "/v1/namespaces/db/tables/k", equality_delete_commit(t, ["x"], field_id=2))
    assert status == 400 and "primary key 'id' (field 1)" in answer["error"]["message"]
    assert ct.refresh().version == 2
    status, answer = served.raw("POST", "/v1/namespaces/db/tables/k", equality_delete_commit(t, [2, 5, 9]))
    assert status == 200, answer
    assert rows(ct) == [(1, "a"), (3, "c"), (4, "d")] == iceberg_rows(cat.load_table("db.k"))
    assert ct.history()[0].operation == "delete" and ct.history()[0].summary["tombstone"]
    changes = ct.changes(3).to_arrow()
    assert sorted(zip(changes["id"].to_pylist(), changes["_change_type"].to_pylist(), strict=True)) == [
        (2, "delete"),
        (5, "delete"),
    ]


def test_an_engines_append_of_a_live_key_to_an_enforced_table_is_a_400(served: Served) -> None:
    """A client's duplicate key is its mistake: a 400 naming the keys (which engines report as
    a failed commit, not one of unknown state), and the table is unchanged."""
    cat = served.client()
    cat.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True), NestedField(2, "s", StringType()), identifier_field_ids=[1]
    )
    t = cat.create_table("db.u", schema=schema, properties={"write.primary-key.enforce": "true"})
    arrow = t.schema().as_arrow()
    t.append(pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}, schema=arrow))
    with pytest.raises(BadRequestError, match="already live in version 1: id 3;"):
        t.append(pa.table({"id": [3, 4], "s": ["x", "d"]}, schema=arrow))
    ct = served.castable("db", "u")
    assert ct.version == 1 and rows(ct) == [(1, "a"), (2, "b"), (3, "c")]
    t.refresh().append(pa.table({"id": [4], "s": ["d"]}, schema=arrow))
    assert rows(ct.refresh()) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]


def test_identifier_fields_set_and_dropped_by_a_client_are_the_primary_key(served: Served) -> None:
    cat = served.client()
    cat.create_namespace("db")
    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "k", LongType(), required=True))
    t = cat.create_table("db.i", schema=schema)
    t.append(pa.table({"id": [1, 2], "k": [1, 1]}, schema=t.schema().as_arrow()))
    ct = served.castable("db", "i")
    assert ct.primary_key is None
    with t.update_schema() as update:
        update.set_identifier_fields("id")
    assert ct.refresh().primary_key == "id" and cat.load_table("db.i").schema().identifier_field_ids == [1]
    assert ct.upsert(pa.table({"id": [2], "k": [2]}, schema=ct.schema)).rows_added == 1
    with pytest.raises(BadRequestError, match="single-column primary key"), t.refresh().update_schema() as update:
        update.set_identifier_fields("id", "k")
    with t.refresh().update_schema() as update:
        update.set_identifier_fields()
    assert ct.refresh().primary_key is None and cat.load_table("db.i").schema().identifier_field_ids == []


def test_position_deletes_become_tombstones(served: Served) -> None:
    """A merge-on-read engine's DELETE (a position delete file) is a castable tombstone: the rows
    read as deleted by castable and by Iceberg readers, the change feed names them, and a
    delete file that lies about its rows, or names a row past a file's end, is refused."""
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table("db.t", schema=ROWS.schema)
    t.append(ROWS)
    t.append(pa.table({"id": pa.array([4, 5], pa.int64()), "s": ["d", "e"]}))
    ct = served.castable("db", "t")
    files = {f.file.file_path: f.file.record_count for f in t.scan().plan_files()}
    three = next(p for p, n in files.items() if n == 3)

    for bad, match in (
        (position_delete_commit(t, {three: [1]}, record_count=2), "the manifest says 2 deletes"),
        (position_delete_commit(t, {three: [3]}), "has 3 rows"),
        (position_delete_commit(t, {f"{t.location()}/data/none.parquet": [0]}), "holds no data files"),
        (position_delete_commit(t, {three: [0]}, equality=True), "one-column primary key only"),
    ):
        status, answer = served.raw("POST", "/v1/namespaces/db/tables/t", bad)
        assert status == 400 and match in answer["error"]["message"], answer
    assert ct.refresh().version == 2

    status, answer = served.raw("POST", "/v1/namespaces/db/tables/t", position_delete_commit(t, {three: [0, 2]}))
    assert status == 200, answer
    assert rows(ct) == [(2, "b"), (4, "d"), (5, "e")] == iceberg_rows(cat.load_table("db.t"))
    assert ct.history()[0].operation == "delete"
    changes = ct.changes(3).to_arrow()
    assert sorted(zip(changes["id"].to_pylist(), changes["_change_type"].to_pylist(), strict=True)) == [
        (1, "delete"),
        (3, "delete"),
    ]
    fourth = next(p for p, n in files.items() if n == 2)  # spelt as Java engines spell local files
    status, answer = served.raw(
        "POST", "/v1/namespaces/db/tables/t", position_delete_commit(t.refresh(), {fourth: [1]}, hadoop=True)
    )
    assert status == 200, answer
    assert rows(ct) == [(2, "b"), (4, "d")]
    ct.compact()  # castable's maintenance takes the engine's deletes as its own
    assert rows(ct) == [(2, "b"), (4, "d")] == iceberg_rows(cat.load_table("db.t"))

    # What the engine wrote beside castable (manifests, manifest lists, delete files) is garbage.
    root = Path(ct.uri.removeprefix("file://"))
    metadata = [p for p in (root / "metadata").iterdir() if p.is_file()]  # castable's names: v<K>.metadata.json, ...
    engines = {p for p in metadata if "castable" not in p.name and not p.name.startswith(("v", "version-hint"))}
    engines |= set((root / "data").glob("*-deletes.parquet"))
    assert {p.name.rsplit("-", 1)[-1] for p in engines} >= {"deletes.parquet", "m0.avro"}
    ct.expire(retain_versions=1)
    report = ct.gc(orphan_grace=timedelta(0))
    assert {p for p in engines if p.exists()} == set() and report.objects
    assert rows(ct) == [(2, "b"), (4, "d")] == iceberg_rows(cat.load_table("db.t"))
    cat.load_table("db.t").append(pa.table({"id": pa.array([6], pa.int64()), "s": ["f"]}))
    assert rows(ct) == [(2, "b"), (4, "d"), (6, "f")]


def test_what_java_clients_send(served: Served) -> None:
    """Java's catalog sends a new table's field ids from 0 (the server gives fresh ones, as
    Iceberg's catalogs do), looks a metadata table up as a table first (``db.t.snapshots``:
    a 404 that is a table's), and reports metrics."""
    served.client().create_namespace("db")
    zero = [
        {"id": 0, "name": "id", "type": "long", "required": True},
        {"id": 1, "name": "s", "type": "string", "required": False},
    ]
    schema = {"type": "struct", "schema-id": 0, "fields": zero, "identifier-field-ids": [0]}
    status, answer = served.raw("POST", "/v1/namespaces/db/tables", {"name": "t", "schema": schema})
    assert status == 200, answer
    fields = answer["metadata"]["schemas"][0]
    assert [(f["id"], f["name"]) for f in fields["fields"]] == [(1, "id"), (2, "s")] and fields[
        "identifier-field-ids"
    ] == [1]
    assert served.castable("db", "t").primary_key == "id"
    t = served.client().load_table("db.t")
    t.append(pa.table({"id": pa.array([1], pa.int64()), "s": ["a"]}).cast(t.schema().as_arrow()))
    assert rows(served.castable("db", "t")) == [(1, "a")]
    status, answer = served.raw("GET", "/v1/namespaces/db%1Ft/tables/snapshots")
    assert status == 404 and answer["error"]["type"] == "NoSuchTableException"
    status, _ = served.raw("POST", "/v1/namespaces/db/tables/t/metrics", {"report-type": "scan-report"})
    assert status == 204


def test_a_staged_create_lands_whole_or_not_at_all(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """A create transaction (staged: nothing is written until its commit, which asserts the table
    is not there) creates the table with its rows in one request, as Spark's CREATE TABLE AS
    SELECT and DuckDB's CREATE TABLE do; if its rows are refused, no table is left."""
    cat = served.client()
    cat.create_namespace("db")
    with cat.create_table_transaction("db.t", schema=ROWS.schema, properties={"owner": "ana"}) as tx:
        tx.append(ROWS)
        assert not cat.table_exists("db.t")  # staged: nothing written yet
    ct = served.castable("db", "t")
    assert rows(ct) == [(1, "a"), (2, "b"), (3, "c")] == iceberg_rows(cat.load_table("db.t"))
    assert ct.properties["owner"] == "ana" and [h.operation for h in ct.history()] == ["append", "create"]

    with (
        pytest.raises(Exception, match="already exists"),  # a second create of the same table
        cat.create_table_transaction("db.t", schema=ROWS.schema) as tx,
    ):
        tx.append(ROWS)
    assert ct.refresh().version == 1

    with (
        lying_manifests(monkeypatch),
        pytest.raises(BadRequestError, match="the manifest says 4 rows"),
        cat.create_table_transaction("db.u", schema=ROWS.schema) as tx,
    ):
        tx.append(ROWS)
    assert not cat.table_exists("db.u") and cat.list_tables("db") == [("db", "t")]


def test_a_transaction_over_a_databases_tables_is_one_version_all_or_nothing(served: Served) -> None:
    """POST /v1/transactions/commit with the commits pyiceberg built for two tables of a
    database namespace: one database version, sent again it lands once, and when one table
    moved meanwhile (409) neither changes and the engine's data files stay for its retry."""
    cat = served.client()
    cat.create_namespace("shop", {"castable.database": "true"})
    a, b = cat.create_table("shop.a", schema=ROWS.schema), cat.create_table("shop.b", schema=ROWS.schema)
    db = castable.open_database(f"{served.warehouse}/shop")
    changes = [held_commit(a, lambda t: t.append(ROWS.slice(0, 2))), held_commit(b, lambda t: t.append(ROWS))]
    body = {"table-changes": changes}
    assert served.raw("POST", "/v1/transactions/commit", body) == (204, None)
    assert db.refresh().version == 3 and db.history()[0].operation == "transaction"
    assert rows(db.table("a")) == [(1, "a"), (2, "b")] and len(rows(db.table("b"))) == 3
    assert served.raw("POST", "/v1/transactions/commit", body) == (204, None)  # its answer lost: sent again
    assert db.refresh().version == 3

    a, b = cat.load_table("shop.a"), cat.load_table("shop.b")
    changes = [held_commit(a, lambda t: t.append(ROWS.slice(2, 1))), held_commit(b, lambda t: t.delete("id = 1"))]
    db.table("b").append(ROWS.slice(0, 1))  # b moves after the client planned on it
    cat.load_table("shop.b")  # publishes b's newest version, as the commit's check does
    before = snapshot_of(db.store)
    status, answer = served.raw("POST", "/v1/transactions/commit", {"table-changes": changes})
    assert status == 409 and answer["error"]["type"] == "CommitFailedException"
    assert snapshot_of(db.store) == before, "nothing committed, and the engine's files stay for its retry"

    a, b = cat.load_table("shop.a"), cat.load_table("shop.b")
    widen = held_commit(a, lambda t: t.update_schema().add_column("n", LongType()).commit())
    changes = [widen, held_commit(b, lambda t: t.append(ROWS))]
    before = snapshot_of(db.store)
    status, answer = served.raw("POST", "/v1/transactions/commit", {"table-changes": changes})
    assert status == 406 and "schema" in answer["error"]["message"]
    cat.create_namespace("plain")
    for name in ("x", "y"):
        cat.create_table(f"plain.{name}", schema=ROWS.schema)
    plain = [held_commit(cat.load_table(f"plain.{n}"), lambda t: t.append(ROWS)) for n in ("x", "y")]
    status, answer = served.raw("POST", "/v1/transactions/commit", {"table-changes": plain})
    assert status == 406 and "castable.database" in answer["error"]["message"]
    assert snapshot_of(db.store) == before
    assert served.raw("POST", "/v1/transactions/commit", {"table-changes": plain[:1]}) == (204, None)
    assert rows(served.castable("plain", "x")) == [(1, "a"), (2, "b"), (3, "c")]


def test_a_body_that_is_not_a_json_object_is_a_client_error(served: Served) -> None:
    """Every POST route reads an object: anything else, or JSON nested past what a parser
    holds, is a 400 with the error model, never a 500 (the server is left as it was)."""
    served.client().create_namespace("db")
    routes = ["/v1/namespaces", "/v1/namespaces/db/tables", "/v1/namespaces/db/properties", "/v1/transactions/commit"]
    bodies = [b"[]", b'"x"', b"1", b"null", b"[" * 100_000 + b"]" * 100_000]
    for route in routes:
        for body in bodies:
            request = urllib.request.Request(f"{served.uri}{route}", data=body, method="POST", headers=JSON)
            try:
                urllib.request.urlopen(request)
                raise AssertionError(f"{route} accepted {body[:10]!r}")
            except urllib.error.HTTPError as e:
                answer = json.loads(e.read())
                assert e.code == 400 and answer["error"]["type"] == "BadRequestException", (route, body[:10], answer)
    assert served.client().list_namespaces() == [("db",)]


def test_schema_changes_are_matched_by_field_id(served: Served) -> None:
    """A column added and moved in one update lands where the client put it; the primary key
    (the identifier field) renamed is still the key; a table asked for as format version 1 is
    refused, not silently made version 2."""
    cat = served.client()
    cat.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True), NestedField(2, "s", StringType()), identifier_field_ids=[1]
    )
    t = cat.create_table("db.t", schema=schema)
    with t.update_schema() as update:
        update.add_column("x", LongType())
        update.move_first("x")
    assert [f.name for f in t.refresh().schema().fields] == ["x", "id", "s"] == served.castable("db", "t").schema.names
    with t.update_schema() as update:
        update.rename_column("id", "key")
    assert served.castable("db", "t").manifest.primary_key == ("key",)
    assert t.refresh().schema().identifier_field_names() == {"key"}
    with pytest.raises(BadRequestError, match="format version 2"):
        cat.create_table("db.v1", schema=schema, properties={"format-version": "1"})
    assert not cat.table_exists("db.v1")


NAMED = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("a.b", pa.string()), ("my col", pa.float64()), ("_1st é", pa.int32())]
)
"""Column names as data has them: a dot, a space, a leading `_`, a letter beyond ASCII."""


def test_names_as_data_has_them_through_the_catalog(served: Served) -> None:
    """Namespaces and tables named with dots, spaces, a leading `_`, `=` and letters beyond
    ASCII, with such columns: pyiceberg creates, lists, appends (its Parquet files name the
    columns as Iceberg's writers do, `a_x2Eb`, and castable reads them by field id, with their
    statistics), castable appends, each reads what the other wrote; each name is one folder
    of the documented spelling, and a folder not spelled so is no namespace."""
    cat = served.client()
    cat.create_namespace(("_raw data",))
    cat.create_namespace(("_raw data", "été=2026"))
    namespace = ("_raw data", "été=2026")
    t = cat.create_table((*namespace, "events.v2"), schema=NAMED)
    first = pa.table({"id": [1, 2], "a.b": ["x", "y"], "my col": [0.5, 2.5], "_1st é": [7, 8]}, schema=NAMED)
    t.append(first)
    ct = served.castable("=5Fraw=20data", "=C3=A9t=C3=A9=3D2026", "events=2Ev2")
    assert ct.scan(filter='"my col" > 1').to_arrow().to_pylist() == first.slice(1).to_pylist()
    stats = ct.manifest.data_files[0].stats
    assert {"a.b", "my col", "_1st é"} <= set(stats), stats
    ct.append(pa.table({"id": [3], "a.b": ["z"], "my col": [9.0], "_1st é": [9]}, schema=NAMED))
    # (pyiceberg's Arrow filter reads a dotted name as a nested path: filtered by another column)
    got = cat.load_table((*namespace, "events.v2")).scan(row_filter=EqualTo("my col", 9.0)).to_arrow()
    assert got.column("id").to_pylist() == [3] and got.schema.names == NAMED.names
    assert cat.list_namespaces() == [("_raw data",)] and cat.list_namespaces(("_raw data",)) == [namespace]
    assert cat.list_tables(namespace) == [(*namespace, "events.v2")]
    (Path(served.warehouse) / "=5fraw").mkdir()  # a lower-case escape: no name is spelled so
    (Path(served.warehouse) / "=5fraw" / "_namespace.json").write_text('{"properties": {}}')
    assert cat.list_namespaces() == [("_raw data",)]
    # Java's client sends a level's blanks as '+' in a path, and a listing's parent unencoded
    status, answer = served.raw("GET", "/v1/namespaces/_raw+data%1F%C3%A9t%C3%A9%3D2026/tables/events.v2")
    assert status == 200 and answer["metadata"]["location"].endswith("/=5Fraw=20data/=C3=A9t=C3=A9=3D2026/events=2Ev2")
    assert served.raw("GET", "/v1/namespaces?parent=_raw+data") == (200, {"namespaces": [list(namespace)]})
    cat.drop_table((*namespace, "events.v2"), purge_requested=True)
    assert cat.list_tables(namespace) == []


def test_nested_columns_through_the_catalog(served: Served) -> None:
    """pyiceberg creates a table of nested columns (their fields' ids fresh, Iceberg's order),
    appends; castable appends; each reads what the other wrote; schema commits add a nested
    column (keeping the ids the client gave) and rename, add and drop fields inside a struct
    (each by id, no data rewritten), reorder a struct's fields and widen a list's element; making
    a list's elements required is refused and leaves the table as it was."""
    cat = served.client()
    cat.create_namespace("db")
    user = StructType(NestedField(4, "id", LongType()), NestedField(5, "name", StringType()))
    payload = StructType(NestedField(3, "user", user), NestedField(6, "tags", ListType(7, StringType())))
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "payload", payload),
        NestedField(8, "attrs", MapType(9, StringType(), 10, LongType())),
        identifier_field_ids=[1],
    )
    t = cat.create_table("db.ev", schema=schema)
    assert [f.field_id for f in t.schema().find_field("payload").field_type.fields] == [4, 5]
    theirs = [{"id": 1, "payload": {"user": {"id": 7, "name": "a"}, "tags": ["x"]}, "attrs": [("k", 1)]}]
    t.append(pa.Table.from_pylist(theirs, schema=t.schema().as_arrow()))
    ct = served.castable("db", "ev")
    ours = [{"id": 2, "payload": {"user": None, "tags": []}, "attrs": []}]
    ct.append(pa.Table.from_pylist(ours, schema=pa.schema([f.remove_metadata() for f in ct.schema])))
    assert ct.scan().to_arrow().sort_by("id").to_pylist() == theirs + ours
    assert cat.load_table("db.ev").scan().to_arrow().sort_by("id").to_pylist() == theirs + ours

    t = cat.load_table("db.ev")
    with t.update_schema() as change:
        change.add_column("extra", StructType(NestedField(100, "a", IntegerType()), NestedField(101, "b", LongType())))
    extra = cat.load_table("db.ev").schema().find_field("extra")
    assert (extra.field_id, [f.field_id for f in extra.field_type.fields]) == (11, [12, 13])
    with cat.load_table("db.ev").update_schema() as change:
        change.rename_column(("payload", "user"), "person")
        change.add_column(("payload", "user", "age"), IntegerType())
        change.delete_column(("payload", "tags"))
    ct = served.castable("db", "ev")
    assert ct.history(1)[0].summary["changes"] == [
        "drop payload.tags",
        "rename payload.user to person",
        "add payload.person.age int32",
    ]
    person = [r["payload"]["person"] for r in ct.scan().to_arrow().sort_by("id").to_pylist()]
    assert person == [{"id": 7, "name": "a", "age": None}, None]
    read = cat.load_table("db.ev").scan().to_arrow().sort_by("id").to_pylist()
    assert [r["payload"] for r in read] == [{"person": {"id": 7, "name": "a", "age": None}}, {"person": None}]
    with cat.load_table("db.ev").update_schema() as change:
        change.add_column("scores", ListType(98, IntegerType()))
    with cat.load_table("db.ev").update_schema() as change:
        change.move_first(("payload", "person", "age"))
        change.update_column(("scores", "element"), LongType())
    ct = served.castable("db", "ev")
    assert ct.history(1)[0].summary["changes"] == [
        "widen scores.element to int64",
        "reorder payload.person as ['age', 'id', 'name']",
    ]
    read = cat.load_table("db.ev").scan().to_arrow().sort_by("id").to_pylist()
    assert (
        list(read[0]["payload"]["person"])
        == ["age", "id", "name"]
        == list(ct.to_arrow().sort_by("id").to_pylist()[0]["payload"]["person"])
    )
    required = _required_tags(cat)
    before = served.castable("db", "ev").version
    status, answer = served.raw(
        "POST",
        "/v1/namespaces/db/tables/ev",
        {
            "requirements": [],
            "updates": [
                {"action": "add-schema", "schema": required},
                {"action": "set-current-schema", "schema-id": -1},
            ],
        },
    )
    assert status == 400 and "cannot become required" in answer["error"]["message"], answer
    assert served.castable("db", "ev").version == before


def _required_tags(cat: RestCatalog) -> dict[str, Any]:
    """The table's schema as JSON, with the elements of a list made required (a list added for it)."""
    with cat.load_table("db.ev").update_schema() as change:
        change.add_column("tags", ListType(99, StringType(), element_required=False))
    doc = json.loads(cat.load_table("db.ev").schema().model_dump_json(by_alias=True))
    tags = next(f for f in doc["fields"] if f["name"] == "tags")
    tags["type"]["element-required"] = True
    doc["schema-id"] = 99
    return doc
