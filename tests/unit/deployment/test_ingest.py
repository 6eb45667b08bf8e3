"""Ingest of landed files (castable.deployment.ingest) on a local bucket: no Lambda, no SQS, no
server. The handler over it, under the deployment's roles and against S3, is tested in
tests/integration/aws (test_lambdas.py, test_iam.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.damaged import damaged
from helpers.tables import EVENTS, events, parquet_bytes

import castable
from castable.deployment.ingest import Intake, LandingArea
from castable.store import LocalStore
from castable.table import Table
from castable.tables import load_table

BUCKET = "landing-bucket"


class Counts:
    """What an intake counts, as ``(name, value, target)``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, str | None]] = []

    def __call__(self, name: str, value: int, target: str | None) -> None:
        self.seen.append((name, value, target))

    def total(self, name: str) -> int:
        return sum(value for n, value, _ in self.seen if n == name)


class Dying(LandingArea):
    """A landing area whose removals never happen: the invocation died after its commit."""

    def remove(self, key: str) -> None:
        pass


@pytest.fixture
def bucket(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "bucket")


@pytest.fixture
def table(bucket: LocalStore) -> Table:
    t = castable.create_table(f"{bucket.uri}/tables/events", EVENTS, primary_key="id")
    t.append(events(0, 10))
    return t


def ingest(bucket: LocalStore, *keys: str, counts: Counts | None = None) -> list[str]:
    """Receive each key (message ``m<i>``) and commit, as one batch; the messages to retry."""
    intake = Intake(LandingArea(bucket, BUCKET), count=counts or Counts())
    for i, key in enumerate(keys):
        intake.receive(f"m{i}", BUCKET, key)
    return intake.commit(set())


def ids(t: Table) -> list[int]:
    return sorted(load_table(t.store).scan(["id"]).to_arrow().column("id").to_pylist())


def under(bucket: LocalStore, prefix: str) -> set[str]:
    return {o.key for o in bucket.list(prefix)}


def reason(bucket: LocalStore, key: str) -> str:
    doc = json.loads(bucket.get(f"landing-failed/{key}.reason.json").data)
    assert doc["source"] == key
    return str(doc["reason"])


def test_a_tables_share_lands_in_one_commit_and_its_bad_files_are_dead_lettered(
    bucket: LocalStore, table: Table
) -> None:
    """Parquet, CSV and gzipped JSON Lines append in one commit, each once however often it was
    delivered; unreadable, ill-typed and wrong-schema files go to the dead-letter prefix with
    their reason; what is not a data file is left where it is."""
    bucket.put("landing/events/a.parquet", parquet_bytes(events(100, 105)))
    bucket.put("landing/events/b.csv", b"id,category,value\n200,x,1\n201,,2.5\n")
    bucket.put("landing/events/c.jsonl.gz", gzip.compress(b'{"id": 300, "category": "y"}\n'))
    bucket.put("landing/events/corrupt.parquet", b"not parquet")
    bucket.put("landing/events/bad.csv", b"id,category,value\n400,a,one\n")
    bucket.put("landing/events/wrong.parquet", parquet_bytes(pa.table({"id": pa.array([1], pa.int32())})))
    bucket.put("landing/events/_SUCCESS", b"")
    keys = ["a.parquet", "b.csv", "c.jsonl.gz", "corrupt.parquet", "bad.csv", "wrong.parquet", "_SUCCESS", "a.parquet"]
    counts = Counts()
    assert ingest(bucket, *(f"landing/events/{k}" for k in keys), counts=counts) == []
    assert ids(table) == [*range(10), *range(100, 105), 200, 201, 300]
    assert load_table(table.store).version == table.version + 1, "one commit for the share"
    assert under(bucket, "landing/") == {"landing/events/_SUCCESS"}
    assert under(bucket, "landing-failed/") == {
        f"landing-failed/landing/events/{k}{suffix}"
        for k in ("corrupt.parquet", "bad.csv", "wrong.parquet")
        for suffix in ("", ".reason.json")
    }
    assert reason(bucket, "landing/events/corrupt.parquet").startswith("not a readable parquet file")
    assert reason(bucket, "landing/events/bad.csv").startswith("landing/events/bad.csv, row 1, column 'value'")
    assert counts.total("RowsIngested") == 8
    assert [t for n, _, t in counts.seen if n == "FilesDeadLettered"] == [table.uri] * 3, "counted for the table"
    assert counts.total("RecordsSkipped") == 1, "the _SUCCESS marker"
    assert ingest(bucket, "landing/events/a.parquet") == [], "a file already ingested is gone: nothing again"
    assert ids(table) == [*range(10), *range(100, 105), 200, 201, 300]


def test_a_file_another_invocation_appended_is_not_appended_again(bucket: LocalStore, table: Table) -> None:
    """The first intake commits and dies before removing its files: the next one finds the file's
    source id in the table's recent commits, appends only what is new and removes both."""

    bucket.put("landing/events/a.parquet", parquet_bytes(events(100, 105)))
    first = Intake(Dying(bucket, BUCKET))
    first.receive("m0", BUCKET, "landing/events/a.parquet")
    assert first.commit(set()) == []
    bucket.put("landing/events/b.parquet", parquet_bytes(events(200, 205)))
    assert ingest(bucket, "landing/events/a.parquet", "landing/events/b.parquet") == []
    assert ids(table) == [*range(10), *range(100, 105), *range(200, 205)]
    assert under(bucket, "landing/") == set()


def test_objects_outside_a_landing_prefix_are_skipped_untouched(bucket: LocalStore, table: Table) -> None:
    bucket.put("elsewhere/x.parquet", parquet_bytes(events(100, 105)))
    bucket.put("landing/x.parquet", parquet_bytes(events(100, 105)))
    before = {o.key: o.etag for o in bucket.list()}
    counts = Counts()
    intake = Intake(LandingArea(bucket, BUCKET), count=counts)
    for key in ("elsewhere/x.parquet", "landing/x.parquet", "landing/events/../events/_latest_manifest"):
        intake.receive("m0", BUCKET, key)
    intake.receive("m1", "someone-elses-bucket", "landing/events/x.parquet")
    assert intake.commit(set()) == []
    assert {o.key: o.etag for o in bucket.list()} == before
    assert counts.seen == [("RecordsSkipped", 1, None)] * 4


def test_files_for_a_name_with_no_table_nor_database_are_dead_lettered(bucket: LocalStore) -> None:
    bucket.put("landing/nosuch/x.parquet", parquet_bytes(events(0, 1)))
    bucket.put("landing/nosuch/_SUCCESS", b"")
    assert ingest(bucket, "landing/nosuch/x.parquet", "landing/nosuch/_SUCCESS") == []
    why = reason(bucket, "landing/nosuch/x.parquet")
    assert (
        why
        == f"no table tables/nosuch nor database databases/nosuch in {bucket.uri}/ to land landing/nosuch/x.parquet in"
    )
    assert under(bucket, "landing/") == {"landing/nosuch/_SUCCESS"}


def test_a_file_whose_page_does_not_decode_is_dead_lettered_and_the_rest_commit_once(
    bucket: LocalStore, table: Table
) -> None:
    bucket.put("landing/events/a.parquet", parquet_bytes(events(100, 105)))
    bucket.put("landing/events/bad.parquet", damaged(events(5000, 15000), "page checksum"))
    assert ingest(bucket, "landing/events/a.parquet", "landing/events/bad.parquet") == []
    assert ids(table) == [*range(10), *range(100, 105)]
    assert load_table(table.store).version == table.version + 1
    assert "landing/events/bad.parquet does not decode" in reason(bucket, "landing/events/bad.parquet")


def test_a_failed_commit_returns_that_tables_messages_alone(bucket: LocalStore, table: Table) -> None:
    """A share whose commit fails is retried by its messages (those not failed already); another
    table's share lands."""
    other = castable.create_table(f"{bucket.uri}/tables/other", EVENTS)

    class Unreachable(LandingArea):
        def remove(self, key: str) -> None:
            if key.startswith("landing/events/"):
                raise castable.StoreError("S3 unreachable")
            super().remove(key)

    bucket.put("landing/events/a.parquet", parquet_bytes(events(100, 105)))
    bucket.put("landing/events/b.parquet", parquet_bytes(events(200, 205)))
    bucket.put("landing/other/c.parquet", parquet_bytes(events(300, 305)))
    counts = Counts()
    intake = Intake(Unreachable(bucket, BUCKET), count=counts)
    for i, key in enumerate(["landing/events/a.parquet", "landing/other/c.parquet", "landing/events/b.parquet"]):
        intake.receive(f"m{i}", BUCKET, key)
    assert intake.commit({"m2"}) == ["m0"]
    assert ("IngestFailures", 1, table.uri) in counts.seen
    assert ids(other) == list(range(300, 305)) and under(bucket, "landing/other/") == set()


def test_a_tables_ingest_properties_upsert_a_change_feed(bucket: LocalStore, table: Table) -> None:
    table.set_properties({"ingest.mode": "upsert", "ingest.op-column": "op"})
    feed = events(2, 5).append_column("op", pa.array(["u", "d", "c"]))
    bucket.put("landing/events/0001.parquet", parquet_bytes(feed.set_column(2, "value", pa.array([20.0, 0.0, 40.0]))))
    bucket.put("landing/events/0002.csv", b"id,category,value,op\n4,z,41,u\n50,n,5,c\n")
    assert ingest(bucket, "landing/events/0001.parquet", "landing/events/0002.csv") == []
    fresh = load_table(table.store)
    got = {r["id"]: r["value"] for r in fresh.scan().to_arrow().to_pylist()}
    assert 3 not in got and got[2] == 20.0 and got[4] == 41.0 and got[50] == 5.0
    assert fresh.history(limit=1)[0].operation == "upsert" and fresh.version == table.version + 1


def test_merge_mode_adds_the_columns_a_file_brings_before_its_append(bucket: LocalStore, table: Table) -> None:
    table.set_properties({"ingest.schema-mode": "merge"})
    bucket.put(
        "landing/events/new.parquet", parquet_bytes(events(200, 202).append_column("source", pa.array(["x", "y"])))
    )
    assert ingest(bucket, "landing/events/new.parquet") == []
    fresh = load_table(table.store)
    assert fresh.schema.names[-1] == "source" and [h.operation for h in fresh.history(2)] == ["append", "alter"]


LINES = pa.schema([pa.field("order_id", pa.int64(), nullable=False), pa.field("qty", pa.int64())])


@pytest.fixture
def shop(bucket: LocalStore) -> castable.Database:
    db = castable.create_database(f"{bucket.uri}/databases/shop")
    db.create_table("orders", EVENTS, primary_key="id")
    db.create_table("lines", LINES)
    return db


def land_batch(bucket: LocalStore, manifest: object) -> str:
    bucket.put("landing/shop/b1/orders.parquet", parquet_bytes(events(1, 3)))
    bucket.put("landing/shop/b1/lines.parquet", parquet_bytes(pa.table({"order_id": [1, 2], "qty": [5, 6]}, LINES)))
    bucket.put("landing/shop/b1/batch.manifest.json", json.dumps(manifest).encode())
    return "landing/shop/b1/batch.manifest.json"


def test_a_batch_manifest_appends_to_several_tables_in_one_database_commit(
    bucket: LocalStore, shop: castable.Database
) -> None:
    key = land_batch(bucket, {"tables": {"orders": ["orders.parquet"], "lines": ["lines.parquet"]}})
    before = shop.version
    assert ingest(bucket, "landing/shop/b1/orders.parquet") == []
    assert shop.refresh().version == before, "a data file waits for its manifest"
    assert ingest(bucket, key) == []
    assert shop.refresh().version == before + 1
    snap = shop.snapshot()
    assert snap.table("orders").count() == 2 and snap.table("lines").count() == 2
    assert under(bucket, "landing/") == set()


def test_a_batch_manifest_another_invocation_committed_is_removed_and_not_committed_again(
    bucket: LocalStore, shop: castable.Database
) -> None:
    key = land_batch(bucket, {"tables": {"orders": ["orders.parquet"], "lines": ["lines.parquet"]}})
    first = Intake(Dying(bucket, BUCKET))
    first.receive("m0", BUCKET, key)
    version = shop.refresh().version
    assert ingest(bucket, key) == []
    assert shop.refresh().version == version and shop.snapshot().table("orders").count() == 2
    assert under(bucket, "landing/") == set()


@pytest.mark.parametrize(
    ("manifest", "why"),
    [
        ({"tables": {"orders": ["orders.parquet"], "nope": ["lines.parquet"]}}, "has no table 'nope'"),
        ({"tables": {"orders": ["../../elsewhere.parquet"]}}, "outside the landing prefix"),
        ({"tables": {"orders": ["orders.parquet"], "lines": ["missing.parquet"]}}, "does not exist"),
        ({"tables": {"orders": ["orders.parquet"], "lines": ["orders.parquet"]}}, "does not match the table"),
        ({"files": ["orders.parquet"]}, "not a batch manifest"),
        ({"tables": {}}, "tables does not name a table"),
        ({"tables": {"orders": [1]}}, "the files of table 'orders' are not a list of names"),
        ([], "not an object"),
    ],
)
def test_a_bad_batch_manifest_is_dead_lettered_with_its_files_and_commits_nothing(
    bucket: LocalStore, shop: castable.Database, manifest: object, why: str
) -> None:
    key = land_batch(bucket, manifest)
    before = shop.version
    assert ingest(bucket, key) == []
    assert shop.refresh().version == before
    assert why in reason(bucket, key)
    assert "landing/shop/b1/batch.manifest.json" not in under(bucket, "landing/")
