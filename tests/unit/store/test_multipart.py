"""Multipart upload with server-side range copy, on the local emulation and S3 over HTTP.

These are the S3 rules the splice relies on: UploadPartCopy of an inclusive byte range
pinned to the source ETag, the 5 MiB minimum for every part but the last (EntityTooSmall
at completion), If-None-Match on completion, and abort leaving nothing behind.
"""

from __future__ import annotations

import os

import pytest

from castable.store import (
    MIN_PART_SIZE,
    ObjectNotFoundError,
    ObjectStore,
    PartTooSmallError,
    PreconditionFailedError,
)

MIB = 1024 * 1024


@pytest.fixture
def source(store: ObjectStore) -> tuple[bytes, str]:
    data = os.urandom(12 * MIB)
    return data, store.put("src.bin", data).etag


def test_copy_ranges_and_upload_assemble_a_new_object(store: ObjectStore, source: tuple[bytes, str]) -> None:
    data, etag = source
    uid = store.create_multipart("out.bin")
    p1 = store.upload_part_copy("out.bin", uid, 1, "src.bin", (0, 5 * MIB + 3), source_etag=etag)
    p2 = store.upload_part("out.bin", uid, 2, b"x" * MIN_PART_SIZE)
    p3 = store.upload_part_copy("out.bin", uid, 3, "src.bin", (11 * MIB, 12 * MIB), source_etag=etag)
    info = store.complete_multipart("out.bin", uid, [p1, p2, p3])
    expected = data[: 5 * MIB + 3] + b"x" * MIN_PART_SIZE + data[11 * MIB :]
    assert store.get("out.bin").data == expected
    assert info.size == len(expected) == store.head("out.bin").size
    assert not list(store.list_multipart_uploads())
    assert store.stats.bytes_copied == 5 * MIB + 3 + MIB


def test_small_non_last_part_is_refused(store: ObjectStore, source: tuple[bytes, str]) -> None:
    _, etag = source
    uid = store.create_multipart("out.bin")
    p1 = store.upload_part("out.bin", uid, 1, b"small")
    p2 = store.upload_part_copy("out.bin", uid, 2, "src.bin", (0, MIB), source_etag=etag)
    with pytest.raises(PartTooSmallError):
        store.complete_multipart("out.bin", uid, [p1, p2])
    assert [u.upload_id for u in store.list_multipart_uploads()] == [uid]
    store.abort_multipart("out.bin", uid)
    assert not list(store.list_multipart_uploads())
    with pytest.raises(ObjectNotFoundError):
        store.head("out.bin")


def test_small_last_part_is_fine(store: ObjectStore) -> None:
    uid = store.create_multipart("one.bin")
    p = store.upload_part("one.bin", uid, 1, b"tiny")
    store.complete_multipart("one.bin", uid, [p])
    assert store.get("one.bin").data == b"tiny"


def test_copy_is_pinned_to_the_source_etag(store: ObjectStore, source: tuple[bytes, str]) -> None:
    uid = store.create_multipart("out.bin")
    with pytest.raises(PreconditionFailedError):
        store.upload_part_copy("out.bin", uid, 1, "src.bin", (0, MIB), source_etag='"stale"')
    store.abort_multipart("out.bin", uid)


def test_completion_never_overwrites(store: ObjectStore, source: tuple[bytes, str]) -> None:
    store.put("taken.bin", b"original")
    uid = store.create_multipart("taken.bin")
    p = store.upload_part("taken.bin", uid, 1, b"new")
    with pytest.raises(PreconditionFailedError):
        store.complete_multipart("taken.bin", uid, [p])
    assert store.get("taken.bin").data == b"original"
    store.abort_multipart("taken.bin", uid)
    assert not list(store.list_multipart_uploads())


def test_list_uploads_by_prefix(store: ObjectStore) -> None:
    a = store.create_multipart("data/a.parquet")
    store.create_multipart("other/b.bin")
    assert [u.upload_id for u in store.list_multipart_uploads("data/")] == [a]
    for u in list(store.list_multipart_uploads()):
        store.abort_multipart(u.key, u.upload_id)


def test_purge_removes_all_versions(store: ObjectStore) -> None:
    store.put("k", b"1")
    assert store.purge("k") >= 1
    with pytest.raises(ObjectNotFoundError):
        store.get("k")
