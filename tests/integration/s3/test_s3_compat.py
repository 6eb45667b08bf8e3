"""castable on S3 implementations other than moto: LocalStack's own S3 provider, which honours
every condition castable relies on, and s3rver, which ignores If-None-Match and If-Match and so
must be refused before anything is written."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.s3servers import S3RVER_KEY, new_bucket
from helpers.tables import EVENTS, events, snapshot_of
from unit.maintenance.test_erase import check_parquet, ids_of, make, rows

import castable
from castable.store import S3Store, make_s3_client, store_from_uri
from castable.store.probe import probe_conditional_writes


@pytest.fixture
def localstack_uri(localstack_endpoint: str) -> tuple[str, dict[str, str]]:
    return f"s3://{new_bucket(localstack_endpoint)}/tables/t", {
        "endpoint_url": localstack_endpoint,
        "region": "us-east-1",
    }


@pytest.fixture
def s3rver_uri(s3rver_endpoint: str) -> tuple[str, dict[str, str]]:
    keys = {"aws_access_key_id": S3RVER_KEY, "aws_secret_access_key": S3RVER_KEY}
    options = {"endpoint_url": s3rver_endpoint, "region": "us-east-1", **keys}
    return f"s3://{new_bucket(s3rver_endpoint, **keys)}/tables/t", options


@pytest.mark.xdist_group("localstack")
@pytest.mark.slow
def test_localstack_lifecycle(localstack_uri: tuple[str, dict[str, str]]) -> None:
    """Create, append, delete, splice-erase (multipart with range copies, 5 MiB parts), purge,
    compact, expire, gc and time travel against LocalStack's S3."""
    t = make(localstack_uri)
    assert probe_conditional_writes(t.store).safe
    t.delete("id BETWEEN 10 AND 19")
    report = t.erase("id = 60000", mode="splice")
    assert report.rows_erased == 1 and report.files[0].method == "splice"
    check_parquet(t.store, t.manifest.data_files[0], [i for i in range(120_000) if i != 60000])
    purge = t.purge_erased(report)
    assert purge.verified
    t.append(rows(200_000, 200_010))
    assert t.compact(min_file_size=10**9).files_rewritten
    t.expire(retain_versions=1)
    t.gc(orphan_grace=timedelta(0))
    expected = [i for i in range(120_000) if not 10 <= i < 20 and i != 60000] + list(range(200_000, 200_010))
    uri, options = localstack_uri
    assert ids_of(castable.open_table(uri, storage_options=options)) == expected


def test_a_store_that_ignores_conditional_writes_is_refused_before_anything_is_written(
    s3rver_uri: tuple[str, dict[str, str]],
) -> None:
    uri, options = s3rver_uri
    with pytest.raises(castable.UnsafeStoreError) as info:
        castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    assert "If-None-Match" in str(info.value) and "If-Match" in str(info.value)
    assert snapshot_of(store_from_uri(uri, options)) == {}, "nothing of the table was written"


def test_a_database_on_a_store_that_ignores_conditional_writes_is_refused(
    s3rver_uri: tuple[str, dict[str, str]],
) -> None:
    uri, options = s3rver_uri
    with pytest.raises(castable.UnsafeStoreError):
        castable.create_database(uri, storage_options=options)
    assert snapshot_of(store_from_uri(uri, options)) == {}, "nothing of the database was written"
    single = castable.create_database(uri, storage_options={**options, "single_writer": True})
    single.create_table("t", EVENTS, primary_key="id").append(events(0, 3))
    unsafe = castable.open_database(uri, storage_options=options)
    before = snapshot_of(unsafe.store)
    with pytest.raises(castable.UnsafeStoreError):
        unsafe.table("t").append(events(3, 4))
    with pytest.raises(castable.UnsafeStoreError), unsafe.transaction() as tx:
        tx.table("t").delete("id = 1")
    assert snapshot_of(unsafe.store) == before, "a writer that did not opt in wrote nothing"


def test_single_writer_mode_works_and_refuses_a_second_create(s3rver_uri: tuple[str, dict[str, str]]) -> None:
    """A user with exactly one writer may opt in; a second create still overwrites nothing, and a
    writer that did not opt in is refused before it uploads a data file."""
    uri, options = s3rver_uri
    single = {**options, "single_writer": True}
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=single)
    t.append(events(0, 10))
    t.delete("id < 3")
    assert ids_of(t) == list(range(3, 10))
    before = snapshot_of(t.store)
    with pytest.raises(castable.TableAlreadyExistsError):
        castable.create_table(uri, EVENTS, storage_options=single)
    unsafe = castable.open_table(uri, storage_options=options)
    with pytest.raises(castable.UnsafeStoreError):
        unsafe.append(events(10, 20))
    assert snapshot_of(t.store) == before


def test_probe_results_are_kept_per_endpoint_and_bucket(
    s3rver_uri: tuple[str, dict[str, str]], s3_endpoint: str
) -> None:
    """One probe per process and store: a second handle on the same bucket sends no probe."""
    uri, options = s3rver_uri
    bucket = uri.split("/")[2]
    store = S3Store(bucket, "other", make_s3_client(options), single_writer=True)
    store.check_conditional_writes()
    store.stats.reset()
    store.check_conditional_writes()
    assert store.stats.snapshot().get("PUT", 0) == 0
    moto_store = S3Store(new_bucket(s3_endpoint), "t", make_s3_client({"endpoint_url": s3_endpoint}))
    moto_store.check_conditional_writes()
    assert moto_store.stats.snapshot()["PUT"] >= 4, "another endpoint is probed on its own"
