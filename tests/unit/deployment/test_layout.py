"""Which table of a deployment an object of its bucket belongs to, from the object's key (as the
S3 events the trigger and catalog functions read give it), and where each table lives."""

from __future__ import annotations

import pytest

import castable
from castable.deployment.layout import TableObject, table_object, table_path, table_uri
from castable.format.layout import MANIFEST_PREFIX, POINTER_KEY, TOMBSTONE_PREFIX, manifest_key, new_tombstone_key


def test_a_tables_objects_name_it_and_their_folder_in_both_layouts() -> None:
    tombstone = new_tombstone_key()
    found = table_object("bkt", f"tables/events/{tombstone}")
    assert found == TableObject("bkt", "events", tombstone)
    assert found.uri == "s3://bkt/tables/events"
    assert found.folder == TOMBSTONE_PREFIX and f"{TOMBSTONE_PREFIX}{found.name}" == tombstone
    member = table_object("bkt", f"databases/shop/orders/{manifest_key(1)}")
    assert member == TableObject("bkt", "shop/orders", manifest_key(1))
    assert member.uri == "s3://bkt/databases/shop/orders"
    assert member.folder == MANIFEST_PREFIX and member.name == "v00000000000000000001.json"
    pointer = table_object("bkt", f"tables/events/{POINTER_KEY}")
    assert pointer is not None and pointer.folder == "" and pointer.name == POINTER_KEY, "at the table's root"


def test_a_database_member_is_never_read_as_a_table_nor_the_reverse() -> None:
    """``tables/`` holds tables one level down, ``databases/`` members two levels down: the same
    names under the other root are a folder of a table, or a database's member."""
    nested = table_object("bkt", "tables/shop/orders/manifest/v1.json")
    assert nested is not None and (nested.table, nested.folder) == ("shop", "orders/")
    assert table_object("bkt", "databases/shop/manifest/v1.json") == TableObject("bkt", "shop/manifest", "v1.json")


@pytest.mark.parametrize(
    "key",
    [
        "databases/shop/_database/manifest/v00000000000000000001.json",  # the database's own log
        "databases/shop/_database/_latest_manifest",
        "databases/shop/_x/manifest/v1.json",  # no member's name starts with _
        "databases/shop/-x/manifest/v1.json",
        "databases/shop/orders",  # a member's folder, no object in it
        "databases/shop/orders/",
        "databases/shop",
        "databases/",
        "tables/events",
        "tables/events/",
        "tables/",
        "tables",
        "",
        "landing/events/a.parquet",
        "landing-failed/tables/events/manifest/v1.json",
        "maintenance-due/d-1.json",
        "Tables/events/manifest/v1.json",  # S3 keys are case-sensitive
        "/tables/events/manifest/v1.json",
        "tables//events/manifest/v1.json",  # extra slashes: an empty table name
        "databases//orders/manifest/v1.json",
        "databases/shop//manifest/v1.json",
        "tables/../manifest/v1.json",
        "tables/./manifest/v1.json",
        "databases/../orders/manifest/v1.json",
        "databases/shop/../manifest/v1.json",
    ],
)
def test_keys_that_are_no_tables_object_name_no_table(key: str) -> None:
    assert table_object("bkt", key) is None


def test_extra_slashes_below_a_table_stay_in_its_path() -> None:
    """S3 keys are not paths: ``tombstone//x.del`` is an object of the table whose folder is
    ``tombstone/``; ``events//tombstone/x`` is an object of ``events`` in no folder of its layout."""
    found = table_object("bkt", "tables/events/tombstone//x.del")
    assert found is not None and found.folder == TOMBSTONE_PREFIX and found.name == "/x.del"
    stray = table_object("bkt", "tables/events//tombstone/x.del")
    assert stray is not None and stray.table == "events" and stray.folder == "/"


@pytest.mark.parametrize(
    ("key", "table"),
    [
        ("tables/web logs/manifest/v1.json", "web logs"),
        ("tables/web+logs/manifest/v1.json", "web+logs"),
        ("tables/web%20logs/manifest/v1.json", "web%20logs"),
        ("tables/Web-Logs.v2/manifest/v1.json", "Web-Logs.v2"),
        ("databases/shop%2Fx/orders/manifest/v1.json", "shop%2Fx/orders"),
        ("tables/événements/manifest/v1.json", "événements"),
    ],
)
def test_keys_are_taken_as_s3_spells_them_nothing_is_url_decoded(key: str, table: str) -> None:
    """EventBridge's S3 events carry an object's key as it is (S3's own event notifications to
    SQS, SNS and Lambda URL-encode it, ``+`` for a space): a ``+`` or a ``%20`` is the key's own."""
    found = table_object("bkt", key)
    assert found is not None and found.table == table
    assert found.uri == f"s3://bkt/{key.rpartition('/manifest/')[0]}"


def test_a_tables_key_gives_where_it_lives_and_back() -> None:
    assert table_uri("bkt", "shop/orders") == "s3://bkt/databases/shop/orders"
    assert table_uri("bkt", "events") == "s3://bkt/tables/events"
    for key in ("events", "shop/orders", "Web-Logs.v2", "db/m_1"):
        found = table_object("bkt", f"{table_path(key)}/{POINTER_KEY}")
        assert found is not None and found.table == key and found.uri == table_uri("bkt", key)


@pytest.mark.parametrize("key", ["", "a/b/c", "shop/_database", "shop/", "/orders", "..", "shop/..", "a//b"])
def test_a_key_that_is_no_tables_has_no_location(key: str) -> None:
    with pytest.raises(castable.InvalidInputError, match="not a deployment's table"):
        table_path(key)
