"""castable refuses stores that break its commit protocol, and copes with stores that bend it.

The probe, run on every backend; a store that ignores conditional writes (in-process here,
s3rver in test_s3_compat.py); a Ceph-like S3 API that wants bare ETags in ``If-Match`` and
returns none from CompleteMultipartUpload; manifests of another table; a stale handle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError
from helpers.faults import FaultyStore, once
from helpers.tables import EVENTS, events, snapshot_of

import castable
from castable.commit.pointer import read_pointer
from castable.errors import CorruptObjectError, UnsafeStoreError
from castable.format.layout import POINTER_KEY, manifest_key
from castable.store import LocalStore, ObjectInfo, ObjectStore, S3Store, StoreUnavailableError, UploadedPart
from castable.store.probe import PROBE_PREFIX, PROBES, probe_conditional_writes, settle_conditional_writes
from castable.table import Table
from castable.tables import create_table_at


class IgnoringStore(LocalStore):
    """A local store that accepts If-None-Match and If-Match and ignores them, as s3rver does."""

    def put(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> ObjectInfo:
        return super().put(key, data)


def test_probe_passes_every_real_backend_and_leaves_nothing(store: ObjectStore) -> None:
    found = probe_conditional_writes(store)
    assert found.safe and found.if_none_match and found.if_match_stale
    assert not list(store.list(PROBE_PREFIX))


def test_probe_names_what_a_store_ignores(tmp_path: Path) -> None:
    found = probe_conditional_writes(IgnoringStore(tmp_path))
    assert not found.safe
    assert found.problems() == [
        "If-None-Match: * did not stop a PUT over an existing object",
        "If-Match with a stale ETag did not stop a PUT",
    ]


def test_create_refuses_an_existing_table_before_writing_anything(tmp_path: Path) -> None:
    """Even on a store whose If-None-Match cannot be trusted, a second create overwrites nothing."""
    store = IgnoringStore(tmp_path)
    create_table_at(store, EVENTS, primary_key="id").append(events(0, 5))
    before = snapshot_of(store)
    with pytest.raises(castable.TableAlreadyExistsError):
        create_table_at(store, EVENTS)
    assert snapshot_of(store) == before


def test_manifests_of_another_table_are_reported(table_uri: tuple[str, dict | None]) -> None:
    """A version overwritten by another table's writer is corruption, not data."""
    uri, options = table_uri
    mine = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    mine.append(events(0, 5))
    stale = castable.open_table(uri, storage_options=options)
    mine.append(events(5, 10))
    doc = json.loads(mine.store.get(manifest_key(2)).data)
    doc["table_uuid"] = "00000000-0000-0000-0000-000000000000"
    mine.store.delete(manifest_key(2))
    mine.store.put(manifest_key(2), json.dumps(doc).encode())
    with pytest.raises(CorruptObjectError, match="belongs to table 00000000"):
        stale.scan(version=2)
    assert "belongs to table 00000000" in (stale.refresh().damage or "")
    assert stale.version == 1
    with pytest.raises(CorruptObjectError, match="belongs to table 00000000"):
        stale.scan()
    with pytest.raises(CorruptObjectError, match="belongs to table 00000000"):
        stale.append(events(10, 11))


def test_a_handle_far_behind_commits_on_its_second_attempt(table_uri: tuple[str, dict | None]) -> None:
    """One lost PUT takes a stale writer to the newest version, however far behind it was."""
    uri, options = table_uri
    castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    stale = castable.open_table(uri, storage_options=options)
    busy = castable.open_table(uri, storage_options=options)
    for i in range(120):
        busy.append(events(i, i + 1))
    puts: list[str] = []

    def count(op: str, key: str) -> None:
        if op == "put" and key.startswith("manifest/"):
            puts.append(key)

    writer = Table.standalone(FaultyStore(stale.store, count), stale.manifest)
    assert writer.append(events(1000, 1001)).version == 121
    assert puts == [manifest_key(1), manifest_key(121)]
    assert castable.open_table(uri, storage_options=options).count() == 121


@pytest.mark.parametrize("action", ["lose-response", "fail"])
def test_an_ambiguous_pointer_update_is_read_back_not_given_up(table_uri: tuple[str, dict | None], action: str) -> None:
    """A 500 on the pointer's If-Match PUT may or may not have landed: the writer reads the
    pointer again and finishes the move either way."""
    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, storage_options=options)
    writer = Table.standalone(FaultyStore(t.store, once("put", POINTER_KEY, action)), t.manifest)
    assert writer.append(events(0, 3)).version == 1
    assert read_pointer(t.store).version == 1


class CephLikeClient:
    """The few S3 calls a probe and a multipart upload make, answered as Ceph radosgw 16.2 does:
    ``If-Match`` must carry the ETag without quotes, and CompleteMultipartUpload returns no ETag."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.parts: dict[int, bytes] = {}
        self.meta = type("Meta", (), {"endpoint_url": "http://ceph.invalid"})()
        self.sent_if_match: list[str] = []

    @staticmethod
    def _fail(code: str, status: int) -> ClientError:
        return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "op")

    def _store(self, key: str, data: bytes) -> str:
        etag = f'"{abs(hash(data)):032x}"'
        self.objects[key] = (data, etag)
        return etag

    def put_object(self, Bucket: str, Key: str, Body: bytes, IfNoneMatch: str = "", IfMatch: str = "") -> Any:
        if IfNoneMatch and Key in self.objects:
            raise self._fail("PreconditionFailed", 412)
        if IfMatch:
            self.sent_if_match.append(IfMatch)
            if Key not in self.objects or self.objects[Key][1].strip('"') != IfMatch:
                raise self._fail("PreconditionFailed", 412)
        return {"ETag": self._store(Key, Body)}

    def head_object(self, Bucket: str, Key: str) -> Any:
        if Key not in self.objects:
            raise self._fail("404", 404)
        data, etag = self.objects[Key]
        return {"ContentLength": len(data), "ETag": etag}

    def delete_object(self, Bucket: str, Key: str) -> Any:
        self.objects.pop(Key, None)

    def get_bucket_versioning(self, Bucket: str) -> Any:
        return {}  # never versioned

    def create_multipart_upload(self, Bucket: str, Key: str) -> Any:
        return {"UploadId": "u1"}

    def upload_part(self, Bucket: str, Key: str, UploadId: str, PartNumber: int, Body: bytes) -> Any:
        self.parts[PartNumber] = Body
        return {"ETag": f'"part{PartNumber}"'}

    def complete_multipart_upload(self, Bucket: str, Key: str, UploadId: str, **kwargs: Any) -> Any:
        self._store(Key, b"".join(self.parts[n] for n in sorted(self.parts)))
        return {"ETag": ""}


def test_a_store_that_wants_bare_etags_is_detected_and_served() -> None:
    client = CephLikeClient()
    store = S3Store("bare-etags", "t", client)
    store.check_conditional_writes()
    first = store.put("ptr", b"1", if_none_match=True)
    assert first.etag.startswith('"'), "ETags are kept in S3's quoted form"
    second = store.put("ptr", b"2", if_match=first.etag)
    assert client.sent_if_match[-1] == first.etag.strip('"')
    assert second.etag != first.etag


def test_an_empty_multipart_etag_is_read_back_with_head() -> None:
    client = CephLikeClient()
    store = S3Store("empty-etags", "t", client)
    upload = store.create_multipart("big")
    part = store.upload_part("big", upload, 1, b"abc")
    info = store.complete_multipart("big", upload, [UploadedPart(part.number, part.etag, part.size)])
    assert info.etag == client.objects["t/big"][1] and info.etag


def test_a_store_without_versioning_support_deletes_plainly() -> None:
    """A store that does not implement GetBucketVersioning has no versions to delete: a plain
    delete, not an error."""

    class NoVersioningClient(CephLikeClient):
        def get_bucket_versioning(self, Bucket: str) -> Any:
            raise self._fail("NotImplemented", 501)

    client = NoVersioningClient()
    store = S3Store("no-versioning", "t", client)
    store.put("k", b"1")
    store.delete("k")
    assert "t/k" not in client.objects


def test_a_store_that_ignores_conditions_is_refused_unless_single_writer() -> None:
    class IgnoringClient(CephLikeClient):
        def put_object(self, Bucket: str, Key: str, Body: bytes, IfNoneMatch: str = "", IfMatch: str = "") -> Any:
            return {"ETag": self._store(Key, Body)}

    refused = S3Store("ignoring", "t", IgnoringClient())
    with pytest.raises(UnsafeStoreError, match=r"If-None-Match.*If-Match.*single_writer"):
        refused.check_conditional_writes()
    S3Store("ignoring", "t", IgnoringClient(), single_writer=True).check_conditional_writes()


def test_a_store_that_refuses_quoted_etags_but_ignores_a_bare_stale_one_is_refused() -> None:
    """Its quoted stale check passes by accident (every quoted ETag is refused); the stale ETag is
    sent bare, the form castable would then use, and the store lets it through."""

    class BareIgnoringClient(CephLikeClient):
        def put_object(self, Bucket: str, Key: str, Body: bytes, IfNoneMatch: str = "", IfMatch: str = "") -> Any:
            if IfMatch.startswith('"') or (IfNoneMatch and Key in self.objects):
                raise self._fail("PreconditionFailed", 412)
            return {"ETag": self._store(Key, Body)}

    found = probe_conditional_writes(S3Store("bare-ignoring", "t", BareIgnoringClient()))
    assert found.if_match_unquoted and not found.if_match_quoted
    assert not found.if_match_stale and not found.safe
    with pytest.raises(UnsafeStoreError, match="stale ETag"):
        S3Store("bare-ignoring", "t", BareIgnoringClient()).check_conditional_writes()


def test_a_stale_condition_answered_with_a_server_error_counts_as_not_honoured() -> None:
    """Ceph answers some losing If-Match races with 500: a client cannot tell that from a lost
    answer to a PUT that landed, so only 412 counts."""

    class ErroringClient(CephLikeClient):
        def put_object(self, Bucket: str, Key: str, Body: bytes, IfNoneMatch: str = "", IfMatch: str = "") -> Any:
            if IfMatch and self.objects.get(Key, (b"", ""))[1].strip('"') != IfMatch.strip('"'):
                raise self._fail("InternalError", 500)
            return super().put_object(Bucket, Key, Body, IfNoneMatch, IfMatch)

    found = probe_conditional_writes(S3Store("erroring", "t", ErroringClient()))
    assert found.if_match_unquoted and not found.if_match_stale and not found.safe


class UnansweringClient(CephLikeClient):
    """An honest store whose answers to chosen probe PUTs never arrive (the connection fails on
    every retry of the SDK): ``lose`` counts down over the PUTs of the given bodies."""

    def __init__(self, bodies: set[bytes], lose: int) -> None:
        super().__init__()
        self.bodies = bodies
        self.lose = lose
        self.probes = 0

    def put_object(self, Bucket: str, Key: str, Body: bytes, IfNoneMatch: str = "", IfMatch: str = "") -> Any:
        if Body == b"0":
            self.probes += 1
        if IfMatch:
            IfMatch = IfMatch.strip('"')
        answer = super().put_object(Bucket, Key, Body, IfNoneMatch, IfMatch)
        if Body in self.bodies and self.lose > 0:
            self.lose -= 1
            raise ConnectionClosedError(endpoint_url="http://ceph.invalid")
        return answer


def test_a_probe_whose_answers_never_arrive_forms_no_verdict() -> None:
    """Answers lost on every retry: no verdict (a ``StoreUnavailableError`` that blames no one),
    nothing remembered, and the next check probes again and finds the store safe."""
    client = UnansweringClient({b"2"}, lose=PROBES)
    store = S3Store("unanswering", "t", client)
    with pytest.raises(StoreUnavailableError, match="no verdict was formed") as raised:
        store.check_conditional_writes()
    assert "single_writer" not in str(raised.value) and not isinstance(raised.value, UnsafeStoreError)
    assert client.probes == PROBES
    store.check_conditional_writes()
    assert client.probes == PROBES + 1, "the failed verdict was not cached"


def test_a_probe_with_one_lost_answer_is_run_again() -> None:
    client = UnansweringClient({b"2"}, lose=1)
    found = settle_conditional_writes(S3Store("one-lost", "t", client))
    assert found.safe and found.clean and client.probes == 2


def test_a_store_is_called_unsafe_only_after_two_clean_probes() -> None:
    class IgnoringClient(CephLikeClient):
        probes = 0

        def put_object(self, Bucket: str, Key: str, Body: bytes, IfNoneMatch: str = "", IfMatch: str = "") -> Any:
            self.probes += Body == b"0"
            return {"ETag": self._store(Key, Body)}

    client = IgnoringClient()
    found = settle_conditional_writes(S3Store("ignoring-twice", "t", client))
    assert not found.safe and found.clean and client.probes == 2
