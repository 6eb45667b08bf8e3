"""Versioned buckets and Object Lock (issue: files the world writes, part 4): a versioned bucket
keeps a noncurrent copy of every object deleted, so castable deletes every version of what it
removes (gc, expire, compaction's replaced files, purge), purge deletes copies others left, and
verification lists object versions; erase is refused on a bucket with Object Lock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pyarrow as pa
import pytest
from helpers.s3servers import new_bucket
from helpers.tables import FILES_ONLY

import castable
from castable.format.layout import POINTER_KEY
from castable.maintenance.erase import noncurrent_copies
from castable.table import Table
from castable.tables import load_table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("email", pa.string())])
SECRET = "someone-private@example.com"


def bucket(endpoint: str, *, versioning: str | None = "Enabled", lock: bool = False) -> str:
    return new_bucket(endpoint, versioning=None if lock else versioning, lock=lock)


def table_with_secret(endpoint: str, name: str, files: int = 3, properties: dict[str, str] | None = None) -> Table:
    """Three appends of 100 rows, one row a secret: kept inline (the default), or data files."""
    options = {"endpoint_url": endpoint, "region": "us-east-1"}
    t = castable.create_table(
        f"s3://{name}/people", SCHEMA, primary_key="id", storage_options=options, properties=properties
    )
    for f in range(files):
        ids = list(range(f * 100, f * 100 + 100))
        t.append(
            pa.table({"id": ids, "email": [SECRET if i == 5 else f"u{i}@example.com" for i in ids]}, schema=SCHEMA)
        )
    return t


def versions(endpoint: str, name: str) -> list[dict[str, Any]]:
    """Every version and delete marker in the bucket, each with its body if it has one."""
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    out = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=name):
        for v in page.get("Versions", []):
            body = s3.get_object(Bucket=name, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
            out.append({"key": v["Key"], "latest": v["IsLatest"], "body": body})
        out += [{"key": m["Key"], "latest": m["IsLatest"], "body": None} for m in page.get("DeleteMarkers", [])]
    return out


def noncurrent(endpoint: str, name: str) -> list[str]:
    """Keys with a noncurrent version or delete marker, the pointer's overwritten versions aside."""
    return sorted(
        {v["key"] for v in versions(endpoint, name) if not v["latest"] and not v["key"].endswith(POINTER_KEY)}
    )


@pytest.mark.parametrize("status", ["Enabled", "Suspended"])
def test_maintenance_leaves_no_noncurrent_copy(s3_endpoint: str, status: str) -> None:
    """Compaction replaces files, expiry drops versions, gc deletes what only they referenced: in a
    versioned bucket (or one whose versioning was suspended) every version of each goes."""
    name = bucket(s3_endpoint, versioning="Enabled")
    t = table_with_secret(s3_endpoint, name, files=4)
    t.delete("id < 50")
    if status == "Suspended":
        boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").put_bucket_versioning(
            Bucket=name, VersioningConfiguration={"Status": "Suspended"}
        )
    rows = t.scan().to_arrow().sort_by("id")
    t.compact()
    t.expire(retain_versions=1)
    report = t.gc(orphan_grace=timedelta(0))
    assert report.objects, "gc deleted what only the expired versions referenced"
    assert noncurrent(s3_endpoint, name) == []
    assert load_table(t.store).scan().to_arrow().sort_by("id").equals(rows)


def test_purge_deletes_every_version_and_copies_others_left(s3_endpoint: str) -> None:
    name = bucket(s3_endpoint)
    t = table_with_secret(s3_endpoint, name, properties=FILES_ONLY)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    # Another tool copied a data file aside and deleted the copy: the bucket keeps it as a noncurrent version.
    (first, *_) = sorted(f.path for f in t.manifest.data_files)
    s3.copy_object(Bucket=name, Key="people/data/aside.parquet", CopySource={"Bucket": name, "Key": f"people/{first}"})
    s3.delete_object(Bucket=name, Key="people/data/aside.parquet")
    assert noncurrent_copies(t.store) == ["data/aside.parquet"]

    report = t.erase("id = 5", purge=True)
    assert report.purge is not None and report.purge.verified, report.purge
    assert report.purge.noncurrent_deleted == 2, "the aside copy's version and its delete marker"
    assert report.purge.noncurrent == [] and noncurrent(s3_endpoint, name) == []
    assert not [v["key"] for v in versions(s3_endpoint, name) if v["body"] and SECRET.encode() in v["body"]]
    assert load_table(t.store).scan(filter="id = 5").to_arrow().num_rows == 0


def test_verification_lists_a_copy_left_behind(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A noncurrent copy the purge did not delete is reported, and the purge is not verified."""
    name = bucket(s3_endpoint)
    t = table_with_secret(s3_endpoint, name)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    s3.put_object(Bucket=name, Key="people/tombstone/aside.del", Body=SECRET.encode())
    s3.delete_object(Bucket=name, Key="people/tombstone/aside.del")
    report = t.erase("id = 5")
    monkeypatch.setattr(type(t.store), "delete_noncurrent", lambda self, prefix: 0)
    purged = t.purge_erased(report)
    assert not purged.verified and purged.noncurrent == ["tombstone/aside.del"]
    assert purged.summary()["noncurrent_copies"] == ["tombstone/aside.del"]


def test_unversioned_bucket_deletes_without_listing_versions(s3_endpoint: str) -> None:
    """Versioning is asked once per process and bucket; a bucket without it pays no listing per delete."""
    name = bucket(s3_endpoint, versioning=None)
    t = table_with_secret(s3_endpoint, name)
    t.delete("id < 50")
    t.compact()
    t.expire(retain_versions=1)
    t.store.stats.reset()
    report = t.gc(orphan_grace=timedelta(0))
    assert report.objects
    counts = t.store.stats.snapshot()
    assert counts.get("DELETE_BATCH") == 1 and counts.get("GET_BUCKET_SETTING", 0) <= 1
    assert noncurrent(s3_endpoint, name) == []


def test_erase_is_refused_on_a_bucket_with_object_lock(s3_endpoint: str) -> None:
    name = bucket(s3_endpoint, lock=True)
    t = table_with_secret(s3_endpoint, name)
    before = versions(s3_endpoint, name)
    with pytest.raises(castable.ObjectLockedError, match="Object Lock"):
        t.erase("id = 5")
    with pytest.raises(castable.ObjectLockedError):
        t.erase("id = 5", mode="splice", purge=True)
    assert versions(s3_endpoint, name) == before, "nothing was written"
    assert load_table(t.store).scan(filter="id = 5").to_arrow().num_rows == 1
    t.delete("id = 5")  # a soft delete needs no object to go away: still allowed
    assert load_table(t.store).scan(filter="id = 5").to_arrow().num_rows == 0


def test_database_erase_is_refused_on_a_bucket_with_object_lock(s3_endpoint: str) -> None:
    name = bucket(s3_endpoint, lock=True)
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    db = castable.create_database(f"s3://{name}/db", storage_options=options)
    t = db.create_table("people", SCHEMA, primary_key="id")
    t.append(pa.table({"id": [1, 5], "email": ["a@example.com", SECRET]}, schema=SCHEMA))
    version = db.refresh().version
    with pytest.raises(castable.ObjectLockedError):
        db.erase({"people": "id = 5"})
    assert db.refresh().version == version
