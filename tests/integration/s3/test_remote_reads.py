"""Reads from S3 as S3 rewards them: one client per process, the open's requests overlapped,
large ranges fetched as parallel pieces, and row groups read ahead by a byte budget.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/read/test_remote_reads.py)."""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers.tables import FILES_ONLY
from unit.read.test_remote_reads import SCHEMA, id_rows

import castable
from castable.errors import CorruptObjectError
from castable.format.layout import POINTER_KEY, manifest_key
from castable.read.scan import LOCAL_READAHEAD, REMOTE_READAHEAD, REMOTE_READAHEAD_BYTES
from castable.store import S3Store, ranges, shared_s3_client


def test_scans_read_ahead_a_few_row_groups_locally_and_a_byte_budget_from_s3(
    tmp_path: Path, s3_bucket: str, s3_options: dict[str, str]
) -> None:
    local = castable.create_table(str(tmp_path / "t"), SCHEMA).scan()
    assert (local.readahead, local.readahead_bytes) == (LOCAL_READAHEAD, 0) == (2, 0)
    remote = castable.create_table(f"s3://{s3_bucket}/r", SCHEMA, storage_options=s3_options).scan()
    assert (remote.readahead, remote.readahead_bytes) == (REMOTE_READAHEAD, REMOTE_READAHEAD_BYTES) == (16, 64 << 20)


def test_one_client_per_options_and_environment(s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    first = shared_s3_client(s3_options)
    assert shared_s3_client(dict(s3_options)) is first
    assert shared_s3_client({**s3_options, "max_attempts": 3}) is not first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "someone-else")
    assert shared_s3_client(s3_options) is not first, "new credentials in the environment get a new client"


def _client_id(options: dict[str, str], queue: multiprocessing.Queue[int]) -> None:
    queue.put(id(shared_s3_client(options)))


def test_a_forked_child_makes_its_own_client(s3_options: dict[str, str]) -> None:
    parent = shared_s3_client(s3_options)
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[int] = context.Queue()
    child = context.Process(target=_client_id, args=(s3_options, queue))
    child.start()
    assert queue.get(timeout=60) != id(parent)
    child.join(30)
    assert child.exitcode == 0


@contextmanager
def _gets(store: S3Store, delay: float = 0.0) -> Iterator[list[str]]:
    """The key of each GET sent on the store's (shared) client meanwhile, each held ``delay``
    before it is sent (see :func:`_together`)."""
    sent: list[str] = []

    def hook(request: Any, **_: Any) -> None:
        if request.method == "GET":
            key = request.url.split("?")[0].rsplit("/", 1)[-1]
            sent.append(key)
            _HELD.append((key, time.perf_counter(), time.perf_counter() + delay))
            time.sleep(delay)

    store.client.meta.events.register("before-send.s3", hook)
    try:
        yield sent
    finally:
        store.client.meta.events.unregister("before-send.s3", hook)


def test_open_reads_the_manifest_and_looks_for_the_next_together(s3_bucket: str, s3_options: dict[str, str]) -> None:
    """Two round trips to the newest version: the pointer, then its manifest and the next one's."""
    uri = f"s3://{s3_bucket}/t"
    castable.create_table(uri, SCHEMA, primary_key="id", storage_options=s3_options).append(id_rows(0, 10))
    store = castable.open_table(uri, storage_options=s3_options).store
    assert isinstance(store, S3Store)
    _HELD.clear()
    with _gets(store, delay=0.3) as keys:
        table = castable.open_table(uri, storage_options=s3_options)
    assert table.version == 1
    names = [k.rsplit("/", 1)[-1] for k in (manifest_key(1), manifest_key(2))]
    assert keys[0] == POINTER_KEY and sorted(keys[1:]) == sorted(names)
    assert _together(*names), "the manifest and the next version's were asked for at once"


_HELD: list[tuple[str, float, float]] = []


def _together(*prefixes: str) -> bool:
    """Whether a GET of a key starting with each prefix was held at one moment, all at once."""
    spans = [next((a, b) for key, a, b in _HELD if key.startswith(p)) for p in prefixes]
    return max(a for a, _ in spans) < min(b for _, b in spans)


def test_a_scan_after_deletes_reads_its_segments_together_and_its_footer_beside_its_tombstone(
    s3_bucket: str, s3_options: dict[str, str]
) -> None:
    uri = f"s3://{s3_bucket}/deleted"
    t = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=s3_options, properties=FILES_ONLY)
    t.append(id_rows(0, 1000))
    t.delete("id IN (3, 500)")
    castable.clear_caches()
    fresh = castable.open_table(uri, storage_options=s3_options)
    assert isinstance(fresh.store, S3Store)
    segments = [r.path.rsplit("/", 1)[-1] for r in (*fresh.manifest.data_files.refs, *fresh.manifest.tombstones.refs)]
    tombstone = fresh.manifest.tombstones[0].path.rsplit("/", 1)[-1]
    data = fresh.manifest.data_files[0].path.rsplit("/", 1)[-1]
    castable.clear_caches()  # the names were read from the segments: forget them again
    fresh = castable.open_table(uri, storage_options=s3_options)
    assert isinstance(fresh.store, S3Store)
    _HELD.clear()
    with _gets(fresh.store, delay=0.3):
        assert fresh.scan().to_arrow().num_rows == 998
    assert len(segments) == 2 and _together(*segments), "the data and tombstone segments were read at once"
    assert _together(tombstone, data), "the first footer was read beside the tombstone"


def test_a_lagging_pointer_is_followed_only_through_the_same_table(s3_bucket: str, s3_options: dict[str, str]) -> None:
    """Walking forward from a pointer that lags, a version of another table is reported."""
    uri = f"s3://{s3_bucket}/t"
    t = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=s3_options)
    t.append(id_rows(0, 10))
    pointer = t.store.get(POINTER_KEY)
    t.append(id_rows(10, 20))
    t.append(id_rows(20, 30))
    t.store.put(POINTER_KEY, pointer.data)  # the pointer lags at version 1
    assert castable.open_table(uri, storage_options=s3_options).version == 3
    doc = json.loads(t.store.get(manifest_key(3)).data)
    doc["table_uuid"] = "00000000-0000-0000-0000-000000000000"
    t.store.delete(manifest_key(3))
    t.store.put(manifest_key(3), json.dumps(doc).encode())
    t.store.put(POINTER_KEY, pointer.data)
    damaged = castable.open_table(uri, storage_options=s3_options)
    assert "belongs to 00000000" in (damaged.damage or "")
    with pytest.raises(CorruptObjectError, match="belongs to 00000000"):
        damaged.append(id_rows(30, 31))


def test_large_row_groups_are_fetched_as_parallel_pieces_and_read_back_exactly(
    s3_bucket: str, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"s3://{s3_bucket}/pieces"
    rows = id_rows(0, 200_000).cast(SCHEMA)
    t = castable.create_table(
        uri, SCHEMA, primary_key="id", storage_options=s3_options, properties={"write.parquet.compression": "none"}
    )
    t.append(rows)
    size = t.manifest.data_files[0].size
    monkeypatch.setattr(ranges, "_PIECE", 64 * 1024)
    castable.clear_caches()
    fresh = castable.open_table(uri, storage_options=s3_options)
    assert isinstance(fresh.store, S3Store)
    _HELD.clear()
    with _gets(fresh.store, delay=0.05) as sent:
        assert fresh.scan().to_arrow().sort_by("id").equals(rows)
    data_gets = [k for k in sent if k.endswith(".parquet")]
    assert len(data_gets) >= size // (64 * 1024), "each row group came as pieces of at most 64 KiB"
    held = sorted((a, b) for key, a, b in _HELD if key.endswith(".parquet"))
    assert max(sum(a <= t < b for a, b in held) for t, _ in held) >= 4, "pieces were fetched in parallel"
    assert fresh.scan(filter="id BETWEEN 1000 AND 1999").to_arrow().sort_by("id").equals(rows.slice(1000, 1000))


def test_small_files_on_s3_are_read_whole_in_one_get_each(s3_bucket: str, s3_options: dict[str, str]) -> None:
    uri = f"s3://{s3_bucket}/small"
    t = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=s3_options, properties=FILES_ONLY)
    for i in range(5):
        t.append(id_rows(10 * i, 10 * i + 10))
    castable.clear_caches()
    fresh = castable.open_table(uri, storage_options=s3_options)
    assert isinstance(fresh.store, S3Store)
    ranged: list[bytes | None] = []

    def hook(request: Any, **_: Any) -> None:
        if request.method == "GET" and request.url.split("?")[0].endswith(".parquet"):
            ranged.append(request.headers.get("Range"))

    fresh.store.client.meta.events.register("before-send.s3", hook)
    try:
        assert fresh.scan(filter="id >= 15").to_arrow().sort_by("id").equals(id_rows(15, 50).cast(SCHEMA))
    finally:
        fresh.store.client.meta.events.unregister("before-send.s3", hook)
    sizes = {f.size for f in fresh.manifest.data_files}
    whole = [r for r in ranged if r is not None and int(r.decode().rpartition("-")[2]) + 1 in sizes]
    assert len(ranged) == len(whole) == 4, "one GET of the whole small file the filter leaves: footer and rows"
    assert all(r.startswith(b"bytes=0-") for r in whole)


def test_a_small_file_changed_under_a_version_is_reported(s3_bucket: str, s3_options: dict[str, str]) -> None:
    uri = f"s3://{s3_bucket}/changed"
    t = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=s3_options, properties=FILES_ONLY)
    t.append(id_rows(0, 10))
    path = t.manifest.data_files[0].path
    t.store.put(path, bytes(reversed(t.store.get(path).data)))  # as long, other bytes, another ETag
    castable.clear_caches()
    with pytest.raises(CorruptObjectError, match="changed since it was committed"):
        castable.open_table(uri, storage_options=s3_options).scan().to_arrow()


def test_a_short_range_from_the_store_is_reported_not_read(
    s3_bucket: str, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers a ranged GET with fewer bytes (or ignores the range) would shift every
    byte after it: the read is refused as a corrupt object."""
    uri = f"s3://{s3_bucket}/short"
    t = castable.create_table(uri, SCHEMA, storage_options=s3_options, properties={"write.parquet.compression": "none"})
    t.append(id_rows(0, 200_000))
    real = S3Store.get

    def short(self: S3Store, key: str, **kwargs: Any) -> Any:
        blob = real(self, key, **kwargs)
        if kwargs.get("byte_range") and key.endswith(".parquet"):
            return type(blob)(data=blob.data[:-1], etag=blob.etag)
        return blob

    monkeypatch.setattr(S3Store, "get", short)
    castable.clear_caches()
    with pytest.raises(CorruptObjectError, match=r"got \d+ bytes"):
        castable.open_table(uri, storage_options=s3_options).scan().to_arrow()
