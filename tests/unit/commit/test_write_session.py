"""Every write runs in a write session (``castable.commit.handle``): a retried commit id is
answered before the write runs, and the session's uploads in flight are waited for when it ends
and travel with its change to the commit point, explicitly (no thread-local state)."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import castable
from castable.commit.handle import Handle, WriteSession, committed_result, write_operation
from castable.commit.written import WriteResult
from castable.store import ObjectInfo, StoreError
from castable.store.local import LocalStore
from castable.table import handle_of


class SlowStore(LocalStore):
    """A local store that predicts ETags from content (as S3 does) and holds every data-file
    PUT until released, so an upload in flight is observable."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.release = threading.Event()
        self.fail = False

    def content_etag(self, data: bytes) -> str | None:
        return hashlib.md5(data).hexdigest()

    def put(self, key: str, data: bytes, **kwargs: Any) -> ObjectInfo:
        if key.startswith("data/"):
            self.release.wait(10)
            if self.fail:
                raise StoreError(f"{key}: connection reset (injected)")
        return replace(super().put(key, data, **kwargs), etag=hashlib.md5(data).hexdigest())


def test_a_retried_commit_id_is_answered_without_running_the_write(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    version = table.append(pa.table({"id": [1]}), commit_id="once").version
    ran: list[WriteSession] = []

    @write_operation(committed_result)
    def write(t: Handle, session: WriteSession, value: int) -> WriteResult:
        ran.append(session)
        return WriteResult(value, session.commit_id, "test")

    first = write(handle_of(table), "once", 99)
    assert first.version == version and first.retried and first.rows_added == 1 and first.commit_id == "once"
    assert ran == []
    assert write(handle_of(table), "new", 99).version == 99
    assert [s.commit_id for s in ran] == ["new"] and ran[0].committed_as is None


def test_the_retry_answer_sees_the_handle_and_the_arguments(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    version = table.append(pa.table({"id": [1]}), commit_id="once").version

    def retried(t: Handle, session: WriteSession, label: str) -> str:
        return f"{label}@{session.committed_as} of {t.version}"

    @write_operation(retried)
    def write(t: Handle, session: WriteSession, label: str) -> str:
        raise AssertionError("a retry runs nothing")

    assert write(handle_of(table), "once", "x") == f"x@{version} of {version}"
    assert write.__name__ == "write" and write.__doc__ is None


def test_leaving_a_session_waits_for_its_uploads_and_raises_their_failure(tmp_path: Path) -> None:
    store = SlowStore(tmp_path / "s")
    session = WriteSession("c", None)
    with session:
        info = session.uploads.put(store, "data/a.parquet", b"abc")
        assert not store.exists("data/a.parquet"), "the upload is in flight"
        store.release.set()
    assert store.exists("data/a.parquet") and info.etag == hashlib.md5(b"abc").hexdigest()

    store.release.clear()
    store.fail = True
    with pytest.raises(StoreError, match="injected"), WriteSession("d", None) as failing:
        failing.uploads.put(store, "data/b.parquet", b"def")
        store.release.set()


def test_a_write_that_fails_keeps_its_own_error_over_its_uploads(tmp_path: Path) -> None:
    store = SlowStore(tmp_path / "s")
    store.fail = True
    store.release.set()
    with pytest.raises(ValueError, match="the write's own"), WriteSession("c", None) as session:
        session.uploads.put(store, "data/a.parquet", b"abc")
        raise ValueError("the write's own error")


def test_sessions_on_two_threads_keep_their_uploads_apart(tmp_path: Path) -> None:
    store = SlowStore(tmp_path / "s")
    store.release.set()
    sessions = [WriteSession(f"c{i}", None) for i in range(2)]

    def write(i: int) -> None:
        with sessions[i]:
            sessions[i].uploads.put(store, f"data/{i}.parquet", bytes([i]) * 10)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.exists("data/0.parquet") and store.exists("data/1.parquet")
    assert sessions[0].uploads is not sessions[1].uploads
