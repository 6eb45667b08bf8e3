"""The object-store contract, run against the local directory and S3 over HTTP alike."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from castable.store import (
    ConcurrentModificationError,
    ObjectNotFoundError,
    ObjectStore,
    PreconditionFailedError,
    StoreError,
)
from castable.store.s3client import translate_error


def test_put_if_absent_refuses_existing_key(store: ObjectStore) -> None:
    first = store.put("a/b.json", b"one", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        store.put("a/b.json", b"two", if_none_match=True)
    blob = store.get("a/b.json")
    assert blob.data == b"one"
    assert blob.etag == first.etag


def test_put_if_match_is_compare_and_swap(store: ObjectStore) -> None:
    v1 = store.put("ptr", b"1", if_none_match=True)
    v2 = store.put("ptr", b"2", if_match=v1.etag)
    assert v2.etag != v1.etag
    with pytest.raises(PreconditionFailedError):
        store.put("ptr", b"3", if_match=v1.etag)
    assert store.get("ptr").data == b"2"


def test_put_if_match_on_missing_key(store: ObjectStore) -> None:
    with pytest.raises((ObjectNotFoundError, PreconditionFailedError)):
        store.put("missing", b"x", if_match='"abc"')


def test_get_range_and_if_match(store: ObjectStore) -> None:
    info = store.put("blob", bytes(range(100)))
    assert store.get("blob", byte_range=(10, 20)).data == bytes(range(10, 20))
    assert store.get("blob", if_match=info.etag).data == bytes(range(100))
    with pytest.raises(PreconditionFailedError):
        store.get("blob", if_match='"not-the-etag"')


def test_missing_objects(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFoundError):
        store.get("nope")
    with pytest.raises(ObjectNotFoundError):
        store.head("nope")
    store.delete("nope")


def test_list_is_sorted_and_prefixed(store: ObjectStore) -> None:
    for key in ["manifest/v2.json", "manifest/v1.json", "data/x.parquet", "manifestx"]:
        store.put(key, b"x")
    assert [i.key for i in store.list("manifest/")] == ["manifest/v1.json", "manifest/v2.json"]
    assert [i.key for i in store.list("manifest")] == ["manifest/v1.json", "manifest/v2.json", "manifestx"]
    assert len(list(store.list(""))) == 4
    store.delete("manifestx")
    assert [i.key for i in store.list("manifest")] == ["manifest/v1.json", "manifest/v2.json"]


def test_staged_write_publishes_on_success_only(store: ObjectStore) -> None:
    with store.staged_write("data/f.bin") as staged:
        staged.path.write_bytes(b"payload")
    assert staged.info is not None and staged.info.size == 7
    assert store.head("data/f.bin").etag == staged.info.etag
    with pytest.raises(RuntimeError), store.staged_write("data/g.bin") as staged:
        staged.path.write_bytes(b"partial")
        raise RuntimeError("writer failed")
    with pytest.raises(ObjectNotFoundError):
        store.head("data/g.bin")


def test_open_input_checks_size_and_etag(store: ObjectStore) -> None:
    from castable.errors import CorruptObjectError

    info = store.put("file", b"0123456789")
    f = store.open_input("file", size=10, etag=info.etag)
    f.seek(3)
    assert f.read(4) == b"3456"
    with pytest.raises(CorruptObjectError):
        store.open_input("file", size=10, etag='"other"').read(1)


def test_request_accounting(store: ObjectStore) -> None:
    store.stats.reset()
    store.put("k", b"abc")
    store.get("k")
    counts = store.stats.snapshot()
    assert counts["PUT"] == 1 and counts["GET"] == 1
    assert counts["bytes_out"] == 3 and counts["bytes_in"] == 3


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("PreconditionFailed", 412, PreconditionFailedError),
        ("ConditionalRequestConflict", 409, ConcurrentModificationError),
        ("NoSuchKey", 404, ObjectNotFoundError),
        ("InternalError", 500, StoreError),
    ],
)
def test_s3_error_translation(code: str, status: int, expected: type[Exception]) -> None:
    error = ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")
    assert type(translate_error(error, "k")) is expected
