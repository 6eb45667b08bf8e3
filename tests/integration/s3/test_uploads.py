"""A write's last object uploads while its commit writes its segments (``castable.store.uploads``):
the manifest is written only once the upload is out, with the ETag the segment names, and an
upload that fails or comes back with another ETag fails the commit with nothing committed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.tables import EVENTS, FILES_ONLY, events

import castable
from castable.format.layout import manifest_key
from castable.format.segment import SEGMENT_PREFIX
from castable.store import ObjectInfo, StoreError
from castable.store import s3 as s3_store
from castable.store.s3 import S3Store

pytestmark = pytest.mark.s3

Put = Callable[..., ObjectInfo]


class Recorder:
    """Every PUT of the test's S3 stores: when it began and ended, by key; data file and
    tombstone PUTs slowed (or failed) so overlaps show."""

    def __init__(self, put: Put, slow: float = 0.3, fail: bool = False) -> None:
        self.put, self.slow, self.fail = put, slow, fail
        self.spans: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()

    def __call__(self, store: S3Store, key: str, data: bytes, **kwargs: Any) -> ObjectInfo:
        start = time.monotonic()
        try:
            if key.startswith(("data/", "tombstone/")):
                time.sleep(self.slow)
                if self.fail:
                    raise StoreError(f"{key}: connection reset (injected)")
            return self.put(store, key, data, **kwargs)
        finally:
            with self.lock:
                self.spans.append((key, start, time.monotonic()))

    def rounds(self) -> int:
        """Round trips one after another: runs of PUTs that overlap in time count once."""
        count, end = 0, float("-inf")
        for _, a, b in sorted(self.spans, key=lambda s: s[1]):
            if a >= end:
                count += 1
            end = max(end, b) if a < end else b
        return count

    def span(self, prefix: str) -> tuple[float, float]:
        found = [(a, b) for key, a, b in self.spans if key.startswith(prefix)]
        assert len(found) == 1, (prefix, self.spans)
        return found[0]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Recorder]]:
    def install(**kwargs: Any) -> Recorder:
        recorder = Recorder(S3Store.put, **kwargs)

        def put(store: S3Store, key: str, data: bytes, **options: Any) -> ObjectInfo:
            return recorder(store, key, data, **options)

        monkeypatch.setattr(S3Store, "put", put)
        return recorder

    yield install


@pytest.fixture
def table(s3_bucket: str, s3_options: dict[str, str]) -> castable.Table:
    table = castable.create_table(
        f"s3://{s3_bucket}/t", EVENTS, primary_key="id", properties=FILES_ONLY, storage_options=s3_options
    )
    table.append(events(0, 1000))
    return table


def _objects(table: castable.Table) -> set[str]:
    return {o.key for o in table.store.list()}


@pytest.mark.parametrize(
    ("write", "uploaded"),
    [
        (lambda t: t.append(events(1000, 3000)), "data/"),
        (lambda t: t.delete("value < 100"), "tombstone/"),
        (lambda t: t.upsert(events(500, 1500)), "data/"),
    ],
    ids=["append", "delete", "upsert"],
)
def test_the_last_object_uploads_while_the_segments_are_written_and_before_the_manifest(
    table: castable.Table,
    recorder: Callable[..., Recorder],
    write: Callable[[castable.Table], castable.WriteResult],
    uploaded: str,
    s3_options: dict[str, str],
) -> None:
    before = table.scan().to_arrow()
    record = recorder()
    version = write(table).version
    upload = record.span(uploaded)
    segments = [(a, b) for key, a, b in record.spans if key.startswith(SEGMENT_PREFIX)]
    manifest = record.span(manifest_key(version))
    assert segments, record.spans
    assert all(a < upload[1] for a, _ in segments), "each segment PUT began while the upload was in flight"
    assert manifest[0] >= upload[1], "the manifest is written only once the upload is out"
    assert record.rounds() == 3, "objects and segments, then the manifest, then the pointer"
    castable.clear_caches()
    reopened = castable.open_table(table.uri, storage_options=s3_options)
    entries = [*reopened.snapshot().manifest.data_files, *reopened.snapshot().manifest.tombstones]
    for entry in entries:  # every ETag a segment names is the object's own
        assert reopened.store.head(entry.path).etag == entry.etag
    rows = reopened.scan().to_arrow().sort_by("id")
    assert rows.num_rows != before.num_rows
    assert rows.equals(table.scan().to_arrow().sort_by("id"))


def test_a_failed_upload_fails_the_commit_and_leaves_the_table_as_it_was(
    table: castable.Table, recorder: Callable[..., Recorder], s3_options: dict[str, str]
) -> None:
    rows, objects, version = table.scan().to_arrow(), _objects(table), table.version
    recorder(fail=True)
    with pytest.raises(StoreError, match="injected"):
        table.append(events(1000, 3000))
    castable.clear_caches()
    reopened = castable.open_table(table.uri, storage_options=s3_options)
    assert reopened.version == version
    assert reopened.scan().to_arrow().equals(rows)
    assert _objects(reopened) == objects, "the segments the attempt wrote are deleted again"


def test_an_etag_other_than_predicted_fails_the_commit_then_uploads_are_not_predicted(
    table: castable.Table, monkeypatch: pytest.MonkeyPatch, s3_options: dict[str, str]
) -> None:
    """As on a bucket that encrypts with KMS after it was first seen to give MD5 ETags."""
    rows, version = table.scan().to_arrow(), table.version
    assert table.store.content_etag(b"x") is not None, "moto's ETags are MD5s, as S3's are"
    monkeypatch.setattr(s3_store, "_md5_etag", lambda data: '"00000000000000000000000000000000"')
    with pytest.raises(StoreError, match="KMS"):
        table.append(events(1000, 3000))
    assert castable.open_table(table.uri, storage_options=s3_options).scan().to_arrow().equals(rows)
    assert table.store.content_etag(b"x") is None
    assert table.append(events(1000, 3000)).version == version + 1, "a retry uploads first, and commits"
    assert table.count() == rows.num_rows + 2000


def test_a_transaction_never_names_an_object_whose_upload_failed(
    s3_bucket: str, s3_options: dict[str, str], recorder: Callable[..., Recorder]
) -> None:
    db = castable.create_database(f"s3://{s3_bucket}/db", storage_options=s3_options)
    orders = db.create_table("orders", EVENTS, properties=FILES_ONLY)
    recorder(fail=True, slow=0.0)
    with pytest.raises(StoreError, match="injected"), db.transaction() as tx:
        tx.table("orders").append(events(0, 2000))
    assert orders.refresh().count() == 0
    assert db.refresh().history(limit=1)[0].operation != "transaction"
