"""The erasure workflow's steps as library calls, on the local store (the workflow itself runs
in tests/integration/aws/test_workflows.py): what a request names, its checks, its preview, one
plan for several tables under their common root, a receipt, and the verification."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.tables import EVENTS, events

import castable
from castable.deployment import erasure
from castable.maintenance.erase import read_erasure_plan
from castable.store import store_from_uri


@pytest.fixture
def shop(tmp_path: Path) -> castable.Database:
    db = castable.create_database(str(tmp_path / "shop"))
    db.create_table("orders", EVENTS, primary_key="id").append(events(0, 100))
    db.create_table("returns", EVENTS, primary_key="id").append(events(50, 60))
    return db


def test_a_request_names_a_table_or_a_databases_tables(shop: castable.Database, tmp_path: Path) -> None:
    (one,) = erasure.targets(f"{shop.uri}/orders", "id = 1")
    assert one.uri == f"{shop.uri}/orders" and one.table.count() == 100 and one.predicate == "id = 1"
    both = erasure.targets(database=shop.uri, tables={"orders": "id < 55", "returns": "id < 55"})
    assert [t.uri for t in both] == [f"{shop.uri}/orders", f"{shop.uri}/returns"]
    with pytest.raises(castable.TableNotFoundError):
        erasure.targets(database=shop.uri, tables={"nope": "id = 1"})
    with pytest.raises(castable.InvalidInputError, match="either table and predicate"):
        erasure.targets(table=f"{shop.uri}/orders")


def test_validate_and_preview_change_nothing(shop: castable.Database) -> None:
    request = erasure.targets(database=shop.uri, tables={"orders": "id < 55", "returns": "id < 55"})
    before = shop.version
    assert erasure.validate(request) == 2
    previewed = erasure.preview(request, "gdpr-1")
    assert previewed["rows"] == 55 + 5 and [t["rows"] for t in previewed["tables"]] == [55, 5]
    assert previewed["dry_run"] is True and previewed["commit_id"] == "gdpr-1"
    with pytest.raises(castable.InvalidPredicateError, match="unknown column"):
        erasure.validate(erasure.targets(f"{shop.uri}/orders", "nope = 1"))
    assert castable.open_database(shop.uri).version == before


def test_one_plan_for_several_tables_under_their_common_root(shop: castable.Database) -> None:
    assert erasure.common_root(["s3://b/a/x", "s3://b/a/y/z", "s3://b/a/x2"]) == "s3://b/a"
    assert erasure.common_root(["s3://b/t"]) == "s3://b/t"
    items = [(f"{shop.uri}/orders", "id = 1"), (f"{shop.uri}/returns", "id = 55")]
    root, key, files = erasure.plan(items, "gdpr-2")
    planned = read_erasure_plan(store_from_uri(root), key)
    assert root == shop.uri and files == len(planned) == 2
    assert {(f.table, f.predicate) for f in planned} == set(items)


def test_a_receipt_is_kept_under_its_table_and_verification_finds_rows_still_there(shop: castable.Database) -> None:
    uri = f"{shop.uri}/orders"
    receipt = erasure.keep_receipt(uri, "gdpr-3", {"rows": 1})
    assert receipt.startswith(f"{uri}/receipts/")
    assert store_from_uri(uri).get(receipt.removeprefix(f"{uri}/")).data
    found = erasure.verify(uri, "id = 1")
    assert found["verified"] is False and found["remaining_matches"]
    assert erasure.verify(uri, "id = 1000")["verified"] is True
