"""Hard deletes: splice and rewrite produce valid Parquet without the rows, on both stores.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/maintenance/test_erase.py)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from unit.maintenance.test_erase import ids_of, make

from castable.tables import load_table


@pytest.mark.s3
def test_purge_in_a_versioned_bucket(s3_bucket: str, s3_options: dict, s3_endpoint: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    t = make((f"s3://{s3_bucket}/gdpr", s3_options), codec="none")
    secret = b"user-00060000-secret"
    report = t.erase("id = 60000", purge=True)
    assert report.purge is not None and report.purge.verified
    assert report.purge.object_versions_deleted >= 1
    found = []
    for page in client.get_paginator("list_object_versions").paginate(Bucket=s3_bucket):
        for v in page.get("Versions", []):
            body = client.get_object(Bucket=s3_bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
            if secret in body:
                found.append(v["Key"])
    assert found == []
    assert 60000 not in ids_of(t)


@pytest.mark.slow
def test_processes_erasing_and_deleting_the_same_file(table_uri: tuple[str, dict | None]) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from helpers.workers import erase_or_delete

    t = make(table_uri)
    uri, options = table_uri
    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(erase_or_delete, [uri] * 4, [options] * 4, range(4)))
    erased = {i for w, ids in enumerate(results) if w % 2 == 0 for i in ids}
    deleted = {i for w, ids in enumerate(results) if w % 2 for i in ids}
    latest = load_table(t.store)
    assert ids_of(latest) == [i for i in range(120_000) if i not in erased | deleted], "no delete lost"
    (f,) = latest.manifest.data_files
    physical = set(
        pq.read_table(pa.BufferReader(latest.store.get(f.path).data), columns=["id"]).column("id").to_pylist()
    )
    assert not physical & erased, "no erased row comes back"
    assert len([h for h in latest.history() if h.operation == "erase"]) == 6
