"""The hand-written footer code, to the byte: Thrift round trips, relocation, part planning."""

from __future__ import annotations

import datetime
import decimal
import io
import itertools
import struct

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from castable.maintenance.parts import Copy, CopyPart, Data, UploadPart, plan_parts
from castable.parquet.footer import Footer, copy_struct, relocate_row_group, row_group_span, with_row_groups
from castable.parquet.thrift import decode_struct, encode_struct

MIB = 1024 * 1024


def sample() -> pa.Table:
    n = 3000
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "s": pa.array([f"v{i % 50}" for i in range(n)]).dictionary_encode(),
            "b": pa.array([bytes([i % 256]) * 5 for i in range(n)], pa.binary()),
            "l": pa.array([[i, i + 1] for i in range(n)]),
            "st": pa.array([{"x": i, "y": str(i)} for i in range(n)]),
            "d": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(12, 2)),
            "ts": pa.array([datetime.datetime(2025, 1, 1) + datetime.timedelta(seconds=i) for i in range(n)]),
            "n": pa.array([None if i % 3 else i for i in range(n)], pa.int32()),
        }
    )


def footer_bytes(data: bytes) -> bytes:
    n = struct.unpack("<I", data[-8:-4])[0]
    return data[-8 - n : -8]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"compression": "snappy"},
        {"write_page_index": True},
        {"write_statistics": False},
        {"data_page_version": "2.0", "compression": "gzip"},
        {"use_dictionary": False, "compression": "none"},
    ],
)
def test_pyarrow_footers_round_trip_byte_for_byte(options: dict) -> None:
    buf = io.BytesIO()
    pq.write_table(sample(), buf, row_group_size=700, **options)
    raw = footer_bytes(buf.getvalue())
    decoded, used = decode_struct(raw)
    assert used == len(raw)
    assert encode_struct(decoded) == raw
    footer = Footer.from_tail(buf.getvalue(), len(buf.getvalue()))
    assert footer.serialize() == buf.getvalue()[footer.offset :]


def test_duckdb_footer_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "d.parquet"
    duckdb.sql(
        f"COPY (SELECT range AS a, range::VARCHAR AS s, [range, 1] AS l FROM range(20000)) TO '{path}' "
        "(FORMAT PARQUET, ROW_GROUP_SIZE 5000)"
    )
    raw = footer_bytes(path.read_bytes())
    assert encode_struct(decode_struct(raw)[0]) == raw


def test_relocation_moves_every_offset() -> None:
    buf = io.BytesIO()
    pq.write_table(sample(), buf, row_group_size=700)
    data = buf.getvalue()
    footer = Footer.from_tail(data, len(data))
    pad = b"\0" * 1000
    row_groups = [copy_struct(rg) for rg in footer.row_groups]
    for rg in row_groups:
        relocate_row_group(rg, lambda p: p + len(pad))
    shifted = (
        data[:4] + pad + data[4 : footer.offset] + Footer(with_row_groups(footer.metadata, row_groups), 0).serialize()
    )
    table = pq.read_table(pa.BufferReader(shifted))
    assert table.equals(pq.read_table(pa.BufferReader(data)))
    spans = [row_group_span(rg) for rg in row_groups]
    assert spans[0][0] == 4 + len(pad)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans)), "row groups stay contiguous"


def test_row_group_spans_tile_the_data_section() -> None:
    buf = io.BytesIO()
    pq.write_table(sample(), buf, row_group_size=1000)
    data = buf.getvalue()
    footer = Footer.from_tail(data, len(data))
    spans = [footer.row_group_span(i) for i in range(len(footer.row_groups))]
    assert spans[0][0] == 4 and spans[-1][1] == footer.offset


def test_bad_tails_are_refused() -> None:
    from castable.parquet.footer import FooterError

    with pytest.raises(FooterError):
        Footer.from_tail(b"not parquet at all", 18)
    with pytest.raises(FooterError):
        Footer.from_tail(b"\xff\xff\x00\x00PAR1", 8)


def sizes(parts: list) -> list[tuple[str, int]]:  # type: ignore[type-arg]
    return [("copy", p.source.size) if isinstance(p, CopyPart) else ("upload", p.size) for p in parts]


def test_plan_keeps_big_ranges_as_server_side_copies() -> None:
    parts = plan_parts([Copy(0, 100 * MIB), Data(b"x" * 6 * MIB), Copy(110 * MIB, 200 * MIB), Data(b"f" * 100)])
    assert sizes(parts) == [("copy", 100 * MIB), ("upload", 6 * MIB), ("copy", 90 * MIB), ("upload", 100)]


def test_plan_widens_a_small_edited_part_with_the_next_range() -> None:
    parts = plan_parts([Copy(0, 100 * MIB), Data(b"x" * MIB), Copy(101 * MIB, 200 * MIB), Data(b"f")])
    assert sizes(parts) == [("copy", 100 * MIB), ("upload", 5 * MIB), ("copy", 95 * MIB), ("upload", 1)]
    widened = parts[1]
    assert isinstance(widened, UploadPart)
    assert widened.pieces[1] == Copy(101 * MIB, 105 * MIB)


def test_plan_swallows_ranges_too_small_to_copy() -> None:
    parts = plan_parts(
        [Copy(0, 4), Data(b"x" * MIB), Copy(MIB, 3 * MIB), Data(b"y" * MIB), Copy(10 * MIB, 30 * MIB), Data(b"f")]
    )
    assert sizes(parts) == [("upload", 5 * MIB), ("copy", 19 * MIB + 4), ("upload", 1)]
    assert parts[0].pieces[:3] == (Copy(0, 4), Data(b"x" * MIB), Copy(MIB, 3 * MIB))  # type: ignore[union-attr]


def test_plan_every_part_but_the_last_is_big_enough() -> None:
    import random

    rng = random.Random(1)
    for _ in range(300):
        segments, pos = [], 0
        for _ in range(rng.randint(1, 6)):
            n = rng.choice([4, MIB, 3 * MIB, 6 * MIB, 40 * MIB])
            segments.append(Copy(pos, pos + n))
            pos += n + rng.choice([0, MIB])
            segments.append(Data(b"e" * rng.choice([0, 10, MIB, 7 * MIB])))
        segments.append(Data(b"footer"))
        parts = plan_parts(segments)
        assert all(s >= 5 * MIB for _, s in sizes(parts)[:-1])
        total = sum(s.size for s in segments)
        assert sum(s for _, s in sizes(parts)) == total


def test_plan_splits_copies_over_the_maximum_part_size() -> None:
    parts = plan_parts([Copy(0, 12 * 1024 * MIB), Data(b"f")], max_size=5 * 1024 * MIB)
    assert [k for k, _ in sizes(parts)] == ["copy", "copy", "copy", "upload"]
    assert sum(s for _, s in sizes(parts)) == 12 * 1024 * MIB + 1
