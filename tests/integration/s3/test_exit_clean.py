"""A scan of an S3 table leaves nothing of its files to Arrow's own threads.

An S3 data file is a ``pa.PythonFile`` over boto3, and every read returns Python bytes. When one
of Arrow's threads read such a file, or released it or its bytes after the scan had returned, it
needed the GIL; once the interpreter had begun to exit that aborted the process
(``terminate called without an active exception``: ``castable scan`` on S3, about 1 run in 20
under load). Arrow's threads call into Python as ``threading._DummyThread``s, so these tests
record the thread of every read and every release.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from helpers.tables import EVENTS, FILES_ONLY, events

import castable
from castable.store import ranges


@pytest.fixture
def foreign(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What Arrow's own threads did with S3 files (reads, releases); empty when all is well."""
    seen: list[str] = []

    def note(what: str) -> None:
        thread = threading.current_thread()
        if isinstance(thread, threading._DummyThread):
            seen.append(f"{what} on {thread.name}")

    class Chunk(bytes):
        def __del__(self) -> None:
            note("bytes released")

    read: Callable[..., bytes] = ranges.RangeReader.read
    init: Callable[..., None] = ranges.RangeReader.__init__

    def tracked_init(self: ranges.RangeReader, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        weakref.finalize(self, note, "file released")

    def tracked_read(self: ranges.RangeReader, size: int = -1) -> bytes:
        note("read")
        return Chunk(read(self, size))

    monkeypatch.setattr(ranges.RangeReader, "__init__", tracked_init)
    monkeypatch.setattr(ranges.RangeReader, "read", tracked_read)
    return seen


@pytest.mark.parametrize("keyed", [False, True])
def test_s3_scans_read_and_release_files_on_python_threads(
    s3_bucket: str, s3_options: dict[str, str], foreign: list[str], keyed: bool
) -> None:
    uri = f"s3://{s3_bucket}/t"
    table = castable.create_table(
        uri,
        EVENTS,
        primary_key="id" if keyed else None,
        properties={"write.row-group-size-bytes": 4096},
        storage_options=s3_options,
    )
    table.append(events(0, 3000))
    table.delete("id BETWEEN 1000 AND 1099")  # some row groups are read masked, the others clean
    t = castable.open_table(uri, storage_options=s3_options)
    assert t.scan().count() == 2900
    assert t.scan(["value"], "id < 1050").to_arrow().num_rows == 1000
    assert next(iter(t.scan().to_batches())).num_rows > 0  # abandoned midway, as `castable scan` does
    assert sum(b.num_rows for b in t.scan(filter="category = 'a'").to_reader()) == 750 - 25
    del t, table
    gc.collect()
    assert foreign == []


def test_s3_scans_fetch_each_row_group_in_one_coalesced_get(
    s3_bucket: str, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read on the caller's thread, a row group's column chunks still cost one GET, not one per
    column; a file small enough is read whole, in one GET with its footer."""
    uri = f"s3://{s3_bucket}/t"
    table = castable.create_table(
        uri, EVENTS, properties={"write.row-group-size-bytes": 4096, **FILES_ONLY}, storage_options=s3_options
    )
    table.append(events(0, 3000))
    t = castable.open_table(uri, storage_options=s3_options)
    (f,) = t.snapshot().manifest.data_files
    groups = t.snapshot().footer(f).num_row_groups
    assert groups > 2
    castable.clear_caches()
    t.store.stats.reset()
    assert t.scan().to_arrow().equals(events(0, 3000))
    assert t.store.stats.requests["GET"] == 1, "footer and rows of a small file in one GET"
    monkeypatch.setattr("castable.read.snapshot.WHOLE_FILE_BYTES", 0)  # as for a file over 1 MiB
    castable.clear_caches()
    t.store.stats.reset()
    assert t.scan().to_arrow().equals(events(0, 3000))
    assert t.store.stats.requests["GET"] == 1 + groups  # the footer, then one per row group
    t.store.stats.reset()
    assert t.scan(["value"], "category = 'b'").to_arrow().num_rows == 750
    assert t.store.stats.requests["GET"] == groups, "the footer is read once per process"
