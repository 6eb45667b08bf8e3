"""Format version 2: segments, their encoding, the merge policy, sharing across versions,
upgrade from version 1, expiry and garbage collection over segments (issue 16)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers.tables import EVENTS, events, other, snapshot_of

import castable
from castable.errors import CorruptObjectError
from castable.format import segment
from castable.format.entries import DataFile, TombstoneFile
from castable.format.filelist import RUN_LIMIT, SEGMENT_TARGET, merge_plan
from castable.format.layout import manifest_key
from castable.read.where import parse_predicate
from castable.tables import load_table

SMALL = {"write.target-file-size-bytes": 64 * 1024}

WIDE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("day", pa.date32()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("ratio", pa.float64()),
        pa.field("flag", pa.bool_()),
        pa.field("blob", pa.binary()),
    ]
)


def wide_entries() -> list[DataFile]:
    """Entries with every statistics shape: bounds of each type, no bounds, nulls only."""
    full = {
        "id": {"min": -5, "max": 9_000_000_000, "nulls": 0},
        "name": {"min": "", "max": "zz\u00e9", "nulls": 3},
        "at": {"min": 1_700_000_000_000_000, "max": 1_700_000_000_000_001, "nulls": 0},
        "day": {"min": 19_000, "max": 19_500, "nulls": 1},
        "amount": {"min": "-12.50", "max": "99999999.99", "nulls": 0},
        "ratio": {"min": -1.5, "max": 2.25, "nulls": 0},
        "flag": {"min": False, "max": True, "nulls": 2},
        "blob": {"nulls": 7},
    }
    sparse = {"id": {"min": 1, "max": 1, "nulls": 0}, "ratio": {"nulls": 0}}
    return [
        DataFile("data/a.parquet", 100, '"e1"', 10, 1, full, added_version=3),
        DataFile("data/b.parquet", 200, '"e2"', 20, 2, sparse, added_version=4),
        DataFile("data/c.parquet", 300, '"e3"', 30, 3, {}, added_version=5),
    ]


def test_data_segment_round_trips_every_statistic() -> None:
    entries = wide_entries()
    data = segment.encode(segment.data_table(entries, WIDE), "data")
    back = segment.data_files(segment.decode(data, "data", key="s"), WIDE)
    assert [(f.path, f.size, f.etag, f.rows, f.row_groups, f.added_version) for f in back] == [
        (f.path, f.size, f.etag, f.rows, f.row_groups, f.added_version) for f in entries
    ]
    assert [f.stats for f in back] == [f.stats for f in entries]
    for f in back:  # statistics decode to the same typed values as version 1's JSON does
        for name in f.stats:
            assert f.column_stats(name, WIDE) == entries[back.index(f)].column_stats(name, WIDE)


def test_data_segment_is_zstd_arrow_ipc_with_typed_statistics() -> None:
    data = segment.encode(segment.data_table(wide_entries(), WIDE), "data")
    reader = pa.ipc.open_file(pa.py_buffer(data))
    assert reader.schema.metadata == {b"castable_segment": b"1", b"kind": b"data"}
    stats = reader.schema.field("stats").type
    assert stats.field("amount").type.field("min").type == pa.decimal128(10, 2)
    assert stats.field("at").type.field("max").type == pa.timestamp("us", tz="UTC")
    assert [f.name for f in stats.field("blob").type] == ["nulls"]
    assert b"zstd" in data or reader.read_all().num_rows == 3  # compressed body, readable by pyarrow alone


def test_summary_is_conservative() -> None:
    """A segment's bounds are the union of its files' bounds, and absent when one file has none."""
    rows, size, stats = segment.summarize(segment.data_table(wide_entries()[:2], WIDE), "data", WIDE)
    assert (rows, size) == (30, 300)
    assert stats["id"] == {"min": -5, "max": 9_000_000_000, "nulls": 0}
    assert "name" not in stats  # file b has neither bounds nor a null count for it
    assert stats["ratio"] == {"nulls": 0}  # bounds unknown in b: no bounds
    assert segment.summarize(segment.data_table(wide_entries(), WIDE), "data", WIDE) == (60, 600, {})


def test_tombstone_and_commit_segments_round_trip() -> None:
    tombstones = [TombstoneFile("tombstone/x.del", 9, '"t"', ("data/a.parquet", "data/b.parquet"), None, 2)]
    data = segment.encode(segment.tombstone_table(tombstones), "tombstone")
    assert segment.tombstone_files(segment.decode(data, "tombstone", key="t")) == tombstones
    commits = segment.decode(segment.encode(segment.commits_table([("a", 1), ("b", 2)]), "commits"), "commits", key="c")
    assert commits.to_pylist() == [{"commit_id": "a", "version": 1}, {"commit_id": "b", "version": 2}]


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"not arrow at all", "is not a valid data segment"),
        (segment.encode(segment.commits_table([("a", 1)]), "commits"), "a commits segment, not a data segment"),
        (segment.encode(segment.data_table(wide_entries(), WIDE).drop_columns(["etag"]), "data"), "column etag"),
        (segment.encode(pa.table({"x": [1]}), "data"), "column path"),
    ],
)
def test_malformed_segments_are_refused(blob: bytes, message: str) -> None:
    with pytest.raises(CorruptObjectError, match=message):
        segment.decode(blob, "data", key="segment/x.arrow")


def test_merge_plan_keeps_few_segments_per_tier() -> None:
    counts: list[int] = []
    rewritten = 0
    for _ in range(5000):  # 5,000 one-file appends
        counts.append(1)
        plan = merge_plan(counts)
        rewritten += sum(sum(counts[a:b]) for a, b in plan if b - a > 1)
        counts = [sum(counts[a:b]) for a, b in plan]
    assert sum(counts) == 5000
    tiers: dict[int, int] = {}
    for c in counts:
        tiers[(c.bit_length() - 1) // 3] = tiers.get((c.bit_length() - 1) // 3, 0) + 1
    assert all(n <= RUN_LIMIT for n in tiers.values()), tiers
    assert len(counts) <= 5 * RUN_LIMIT
    assert rewritten / 5000 < 5  # each entry rewritten about once per tier: O(log) amortised


def test_merge_plan_never_merges_full_segments() -> None:
    assert merge_plan([SEGMENT_TARGET] * 20 + [1]) == [(i, i + 1) for i in range(21)]


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> castable.Table:
    uri, options = table_uri
    return castable.create_table(uri, EVENTS, primary_key="id", properties=SMALL, storage_options=options)


def root(t: castable.Table, version: int | None = None) -> dict:
    return json.loads(t.store.get(manifest_key(t.version if version is None else version)).data)


def test_new_tables_are_version_2_and_share_segments(table: castable.Table) -> None:
    assert root(table)["format_version"] == 2 and root(table)["segments"] == []
    table.append(events(0, 100))
    first = [s["path"] for s in root(table)["segments"]]
    table.store.stats.reset()
    table.append(events(100, 101))
    written = table.store.stats.snapshot()
    assert written["PUT"] == 3  # one segment (holding the row: a small write is kept inline), the root, the pointer
    second = [s["path"] for s in root(table)["segments"]]
    assert second[: len(first)] == first and len(second) == len(first) + 1
    assert table.count() == 101 and table.count(version=table.version - 1) == 100


def test_small_appends_merge_and_reads_stay_exact(table: castable.Table) -> None:
    for i in range(30):
        table.append(events(i, i + 1))
    doc = root(table)
    assert len(doc["segments"]) <= 2 * RUN_LIMIT
    assert sum(s["entries"] for s in doc["segments"]) == 30
    assert sorted(table.to_arrow().column("id").to_pylist()) == list(range(30))
    for v in (1, 9, 10, 29):  # every version still reads its own files
        assert table.count(version=v) == v


def test_segment_summaries_prune_whole_segments(table: castable.Table, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        table.append(events(i * 1000, i * 1000 + 1000))
    doc = root(table)
    assert [s["stats"]["id"]["min"] for s in doc["segments"]] == [0, 1000, 2000]
    decoded: list[str] = []
    decode = segment.decode

    def recording_decode(data: bytes, kind: segment.Kind, *, key: str) -> pa.Table:
        decoded.append(key)
        return decode(data, kind, key=key)

    monkeypatch.setattr(segment, "decode", recording_decode)
    castable.clear_caches()  # as another process reads it: this one keeps the segments it wrote
    assert other(table).count(filter="id = 1500") == 1
    assert decoded == [doc["segments"][1]["path"]]  # the other two are pruned by their summaries, unread


def test_a_process_reads_back_no_small_segment_it_wrote(table: castable.Table, monkeypatch: pytest.MonkeyPatch) -> None:
    """A handle opened afresh for each commit (a catalog request, a warm Lambda) merges the tail
    segment the process wrote last from memory: only the pointer and manifests are read."""
    table.append(events(0, 10))
    read: list[str] = []
    get = table.store.get

    def recording_get(key: str, **kwargs: Any) -> Any:
        read.append(key)
        return get(key, **kwargs)

    monkeypatch.setattr(table.store, "get", recording_get)
    for i in range(1, 3 * RUN_LIMIT):  # enough appends that small segments merge, more than once
        other(table).append(events(i * 10, i * 10 + 10))
    assert len(root(table)["segments"]) < 3 * RUN_LIMIT, "segments were merged"
    assert read and not [key for key in read if key.startswith("segment/")], read
    assert other(table).count() == 30 * RUN_LIMIT


def test_deletes_rewrite_only_the_segment_that_changed(table: castable.Table) -> None:
    for i in range(3):
        table.append(events(i * 1000, i * 1000 + 1000))
    before = [s["path"] for s in root(table)["segments"]]
    table.delete("id >= 1000 AND id < 2000")  # every file of the middle segment, whole
    after = root(table)
    kept = [s["path"] for s in after["segments"] if s["kind"] == "data"]
    assert before[0] in kept and before[2] in kept and before[1] not in kept
    assert table.count() == 2000


def test_recent_commit_ids_spill_to_one_segment_and_stay_idempotent(table: castable.Table) -> None:
    for i in range(70):
        table.append(events(i, i + 1), commit_id=f"c{i}")
    doc = root(table)
    assert doc["commits_segment"] is not None and len(doc["recent_commits"]) < 64
    fresh = other(table)
    assert fresh.append(events(0, 1), commit_id="c0").version == 1  # the first commit, recognised from the segment
    assert fresh.version == 70 and fresh.count() == 70


def test_a_corrupt_segment_is_reported_and_leaves_the_table_as_it_was(table: castable.Table) -> None:
    table.append(events(0, 10))
    path = root(table)["segments"][0]["path"]
    table.store.delete(path)
    table.store.put(path, b"garbage")
    before = snapshot_of(table.store)
    castable.clear_caches()  # as another process reads it: this one keeps the segments it wrote
    fresh = other(table)
    with pytest.raises(CorruptObjectError, match=f"segment {path} is missing or changed"):
        fresh.to_arrow()
    with pytest.raises(CorruptObjectError, match="segment"):
        fresh.delete("id = 3")
    assert snapshot_of(table.store) == before


def test_upgrade_rewrites_a_version_1_table_in_one_commit(table_uri: tuple[str, dict | None]) -> None:
    uri, options = table_uri
    t = castable.create_table(
        uri, EVENTS, primary_key="id", properties=SMALL, storage_options=options, format_version=1
    )
    for i in range(3):
        t.append(events(i * 100, i * 100 + 100), commit_id=f"a{i}")
    t.delete("id < 50")
    assert root(t)["format_version"] == 1 and "data_files" in root(t)
    files = {f.path for f in t.manifest.data_files}
    version = t.upgrade(commit_id="up").version
    doc = root(t, version)
    assert doc["format_version"] == 2 and "data_files" not in doc
    assert {f.path for f in other(t).manifest.data_files} == files
    assert t.count() == 250 and t.count(version=version - 1) == 250 and t.count(version=1) == 100
    assert t.upgrade().version == version  # already upgraded: nothing committed
    assert t.append(events(0, 1), commit_id="a1").version == 2  # ids from before the upgrade still count
    assert t.history()[0].operation == "upgrade"


def test_expire_and_gc_remove_unreferenced_segments(table: castable.Table) -> None:
    for i in range(12):
        table.append(events(i * 10, i * 10 + 10))
    table.compact()
    table.expire(retain_versions=1)
    report = table.gc(orphan_grace=timedelta(0))
    gone = [k for k in report.objects if k.startswith("segment/")]
    assert gone, report.objects
    referenced = {s["path"] for s in root(table)["segments"]}
    left = {i.key for i in table.store.list("segment/")}
    assert referenced <= left and not (set(gone) & left)
    assert table.count() == 120


def test_gc_keeps_segments_of_retained_versions(table: castable.Table) -> None:
    table.append(events(0, 10))
    table.append(events(10, 20))
    table.delete("id < 5")
    table.compact()
    table.gc(orphan_grace=timedelta(0))
    for v in range(table.version + 1):
        assert table.count(version=v) == [0, 10, 20, 15, 15][v]


def test_segment_slices_cover_every_file_once_and_prune_like_the_scan(table: castable.Table) -> None:
    for i in range(3):
        table.append(events(i * 1000, i * 1000 + 1000))
    for i in range(10):
        table.append(events(5000 + i, 5001 + i))
    snapshot = table.snapshot()
    slices = snapshot.segment_slices(None, 20_000)
    assert slices is not None and len(slices) > len(snapshot.manifest.data_files.parts)
    listed = [f.path for s in slices for f in snapshot.slice_files(s, None)]
    assert sorted(listed) == sorted(f.path for f in snapshot.manifest.data_files)
    query = parse_predicate("id BETWEEN 900 AND 1100", EVENTS)
    pruned = snapshot.segment_slices(query, 20_000)
    assert pruned is not None and len(pruned) < len(slices)  # whole segments ruled out by their summaries
    found = sorted(f.path for s in pruned for f in snapshot.slice_files(s, query))
    assert found == sorted(f.path for f in snapshot.prune_files(query))


def test_version_1_has_no_segment_slices(tmp_path: Path) -> None:
    t = castable.create_table(str(tmp_path), EVENTS, format_version=1)
    t.append(events(0, 10))
    assert t.snapshot().segment_slices(None, 1) is None


def test_a_version_1_reader_is_refused_clearly(table: castable.Table, monkeypatch: pytest.MonkeyPatch) -> None:
    import castable.format.manifest as manifest

    monkeypatch.setattr(manifest, "FORMAT_VERSIONS", (1,))
    monkeypatch.setattr(manifest, "LATEST_FORMAT_VERSION", 1)
    with pytest.raises(CorruptObjectError, match="format version 2 is newer than this castable reads"):
        other(table)


def test_statistics_of_decimals_and_timestamps_prune_in_segments(tmp_path: object) -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("at", pa.timestamp("us", tz="UTC")),
            ("amount", pa.decimal128(10, 2)),
        ]
    )
    t = castable.create_table(str(tmp_path), schema, primary_key="id")
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(3):
        t.append(pa.table({"id": [i], "at": [base + timedelta(days=i)], "amount": [Decimal(f"{i}.50")]}, schema=schema))
    assert t.count(filter="amount > 1.00") == 2
    assert t.count(filter="at >= '2026-01-02 00:00:00+00:00'") == 2


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda d: {**d, "segments": [{**d["segments"][0], "kind": "index"}]}, "segment kind 'index'"),
        (lambda d: {**d, "segments": [{**d["segments"][0], "path": "data/x.parquet"}]}, "is not under segment/"),
        (lambda d: {**d, "segments": [{k: v for k, v in d["segments"][0].items() if k != "etag"}]}, "etag"),
        (lambda d: {**d, "segments": [{**d["segments"][0], "kind": "commits"}]}, "commits segment is listed"),
        (lambda d: {**d, "commits_segment": {**d["segments"][0]}}, "commits_segment .* is a data segment"),
        (lambda d: {k: v for k, v in d.items() if k != "segments"}, "segments"),
    ],
)
def test_a_malformed_root_is_refused_and_changes_nothing(table: castable.Table, corrupt, message: str) -> None:  # type: ignore[no-untyped-def]
    table.append(events(0, 10))
    key, doc = manifest_key(table.version), root(table)
    table.store.delete(key)
    table.store.put(key, json.dumps(corrupt(doc)).encode())
    before = snapshot_of(table.store)
    with pytest.raises(CorruptObjectError, match=message):
        load_table(table.store).manifest_at(table.version)
    with pytest.raises(CorruptObjectError):
        load_table(table.store).append(events(10, 11))
    assert snapshot_of(table.store) == before
