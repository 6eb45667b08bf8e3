"""The on-storage format, byte for byte: what a second implementation would read."""

from __future__ import annotations

import base64
import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.tables import EVENTS, events
from pyroaring import BitMap

import castable
from castable.format import tombstone
from castable.format.layout import POINTER_KEY, manifest_key, new_data_key, new_tombstone_key, version_of_manifest_key


def test_layout_keys() -> None:
    assert manifest_key(123) == "manifest/v00000000000000000123.json"
    assert version_of_manifest_key(manifest_key(123)) == 123
    assert version_of_manifest_key("manifest/other.json") is None
    assert new_data_key().startswith("data/") and new_data_key().endswith(".parquet")
    assert new_tombstone_key().startswith("tombstone/") and new_tombstone_key().endswith(".del")
    assert len(new_data_key().split("/")) == 6


def test_tombstone_encoding_is_json_lines_with_portable_roaring() -> None:
    entries = [
        tombstone.RowGroupDelete("data/a.parquet", 0),
        tombstone.RowGroupDelete("data/a.parquet", 3, BitMap([0, 5, 17, 1042])),
        tombstone.KeyRangeDelete("data/b.parquet", 10, None),
    ]
    data = tombstone.encode(entries)
    lines = [json.loads(line) for line in data.decode().splitlines()]
    assert lines[0] == {"castable_tombstone": 1}
    assert lines[1] == {"file": "data/a.parquet", "row_group": 0}
    assert lines[3] == {"file": "data/b.parquet", "pk_min": 10, "pk_max": None}
    raw = base64.b64decode(lines[2]["positions"])
    assert BitMap.deserialize(raw) == BitMap([0, 5, 17, 1042])
    # Portable roaring format: cookie 12346 (no run containers) as little-endian uint32.
    assert int.from_bytes(raw[:4], "little") in (12346, 12347) or raw[:2] == (12347).to_bytes(2, "little")
    assert tombstone.decode(data, key="t") == entries


def test_key_lists_are_one_pk_in_line_per_file_under_header_2() -> None:
    entries = [
        tombstone.KeyRangeDelete("data/a.parquet", 7, 7),
        tombstone.KeyRangeDelete("data/a.parquet", 3, 3),
        tombstone.KeyRangeDelete("data/b.parquet", 5, 9),
        tombstone.KeyRangeDelete("data/b.parquet", 11, 11),
    ]
    data = tombstone.encode(entries)
    lines = [json.loads(line) for line in data.decode().splitlines()]
    assert lines == [
        {"castable_tombstone": 2},
        {"file": "data/b.parquet", "pk_min": 5, "pk_max": 9},
        {"file": "data/a.parquet", "pk_in": [7, 3]},
        {"file": "data/b.parquet", "pk_in": [11]},
    ]
    assert tombstone.decode(data, key="t") == [
        tombstone.KeyRangeDelete("data/b.parquet", 5, 9),
        tombstone.KeyPointsDelete("data/a.parquet", (7, 3)),
        tombstone.KeyPointsDelete("data/b.parquet", (11,)),
    ], "a pk_in line reads back as one entry, and encodes as it was"
    assert tombstone.encode(tombstone.decode(data, key="t")) == data
    assert json.loads(tombstone.encode(entries[2:3]).splitlines()[0]) == {"castable_tombstone": 1}
    for bad in ('{"file": "f", "pk_in": 3}', '{"file": "f", "pk_in": [1, null]}'):
        with pytest.raises(castable.CorruptObjectError, match="pk_in"):
            tombstone.decode(f'{{"castable_tombstone": 2}}\n{bad}\n'.encode(), key="t")


@pytest.mark.parametrize(
    ("key_type", "keys", "deleted"),
    [
        (pa.int64(), [-5, 0, 3, 7, 10**12, 11], [7, -5, 11, 7, 99]),
        (pa.int32(), [1, 2, 3, 4], [3, 9, 1]),
        (pa.string(), ["a", "b", "c"], ["c", "zz", "a"]),
    ],
)
def test_deleted_key_lists_mask_exactly_their_keys(key_type: pa.DataType, keys: list, deleted: list) -> None:
    """The single-key mask (a binary search for integer keys, a set lookup otherwise) and key
    ranges together hit exactly the deleted keys, keys beyond both ends of the list included."""
    deletes = tombstone.FileDeletes()
    deletes.add(tombstone.KeyPointsDelete("f", tuple(deleted[:2])), key_type)
    deletes.add(tombstone.KeyRangeDelete("f", deleted[2], deleted[2]), key_type)
    for k in deleted[3:]:
        deletes.add(tombstone.KeyPointsDelete("f", (k,)), key_type)
    column = pa.chunked_array([pa.array(keys[:2], key_type), pa.array(keys[2:], key_type)])
    assert deletes.key_mask(column).tolist() == [k in deleted for k in keys]


def test_version_1_manifest_and_pointer_documents(tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id", properties={"team": "x"}, format_version=1)
    t.append(events(0, 10), commit_id="c1")
    pointer = json.loads((tmp_path / "t" / POINTER_KEY).read_bytes())
    assert pointer == {"version": 1, "manifest": manifest_key(1)}
    doc = json.loads((tmp_path / "t" / manifest_key(1)).read_bytes())
    assert doc["format"] == "castable" and doc["format_version"] == 1
    assert doc["version"] == 1 and doc["previous"] == 0
    assert doc["created_at"].endswith("Z")
    assert doc["primary_key"] == ["id"] and doc["properties"] == {"team": "x"}
    assert doc["commit"] == {
        "operation": "append",
        "commit_id": "c1",
        "summary": {"rows_added": 10, "files_added": 1, "bytes_added": doc["data_files"][0]["size"]},
    }
    assert doc["recent_commits"]["c1"] == 1
    schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc["schema"]["arrow"])))
    assert schema.equals(EVENTS)
    assert doc["schema"]["columns"][0] == {"name": "id", "type": "int64", "nullable": False}
    (f,) = doc["data_files"]
    assert set(f) == {"path", "size", "etag", "rows", "row_groups", "stats", "added_version"}
    assert f["stats"]["id"] == {"min": 0, "max": 9, "nulls": 0}
    assert f["stats"]["category"] == {"min": "a", "max": "c", "nulls": 2}
    assert (tmp_path / "t" / f["path"]).stat().st_size == f["size"]


@pytest.mark.parametrize("format_version", [1, 2])
def test_manifest_bytes_are_plain_compact_json_of_the_document(tmp_path, format_version: int) -> None:  # type: ignore[no-untyped-def]
    """The spliced encoding (cached per entry) is exactly ``json.dumps`` of the whole document."""
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id", format_version=format_version)
    for i in range(3):
        t.append(events(i * 10, i * 10 + 10))
    t.delete("id IN (3, 14)")
    t.delete("category IS NULL")
    for version in range(t.version + 1):
        raw = (tmp_path / "t" / manifest_key(version)).read_bytes()
        assert raw == json.dumps(json.loads(raw), separators=(",", ":")).encode()
        assert castable.open_table(str(tmp_path / "t")).manifest_at(version).to_json() == raw


def test_temporal_and_decimal_statistics_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from datetime import date, datetime
    from decimal import Decimal

    schema = pa.schema([("ts", pa.timestamp("ns")), ("d", pa.date32()), ("p", pa.decimal128(8, 3))])
    t = castable.create_table(str(tmp_path / "t"), schema)
    t.append(
        pa.table(
            {
                "ts": pa.array([1, 1_000_000_001], pa.timestamp("ns")),
                "d": [date(2024, 1, 1), date(2024, 2, 1)],
                "p": [Decimal("1.250"), Decimal("3.500")],
            },
            schema=schema,
        )
    )
    stats = t.manifest.data_files[0].stats
    assert stats["ts"] == {"min": 1, "max": 1_000_000_001, "nulls": 0}
    assert stats["d"]["min"] == (date(2024, 1, 1) - date(1970, 1, 1)).days
    assert stats["p"]["max"] == "3.500"
    assert t.scan(filter="ts > TIMESTAMP '1970-01-01 00:00:01'").count() == 1
    assert t.scan(filter="d >= '2024-01-15'").count() == 1
    assert t.scan(filter="p < 2").count() == 1
    assert len(t.scan(filter="ts > '2001-01-01'").files()) == 0
    assert datetime(1970, 1, 1) is not None


@pytest.mark.parametrize(
    "arrow_type",
    [pa.timestamp("s"), pa.timestamp("ms"), pa.timestamp("us", tz="UTC"), pa.timestamp("ns"), pa.date32(), pa.date64()],
)
def test_date_and_time_statistics_come_from_the_physical_values_in_the_files_unit(arrow_type: pa.DataType) -> None:
    """Read from the integers Parquet stores, in the file's own unit (timestamp[s] is stored as
    ms), so nanosecond statistics need no pandas and no unit is mistaken for another."""
    import datetime
    import io

    import pyarrow.parquet as pq

    from castable.format.stats import row_group_stats

    lo, hi = datetime.datetime(2026, 1, 2, 3, 4, 5), datetime.datetime(2026, 3, 4, 5, 6, 7)
    values = pa.array([hi, lo], pa.timestamp("us")).cast(arrow_type)
    buf = io.BytesIO()
    pq.write_table(pa.table({"c": values}), buf)
    metadata = pq.ParquetFile(pa.BufferReader(buf.getvalue())).metadata
    stats = row_group_stats(metadata, 0, pa.schema([("c", arrow_type)]))["c"]
    assert stats.min == pc.min(values) and stats.max == pc.max(values)
