"""Bloom filters (``write.parquet.bloom-filter-columns``): written by pyarrow, read by castable's
own check, which must never say a present value is absent, and skips row groups for points."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import castable
from castable.errors import InvalidInputError
from castable.read.bloom import BloomFilter, plain_values, xxh64
from castable.read.where import parse_predicate

ROWS = 60_000


def test_xxh64_matches_the_reference_vectors() -> None:
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    assert xxh64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1  # over 32 bytes


def typed_columns() -> pa.Table:
    ids = np.random.default_rng(7).permutation(2 * ROWS)
    return pa.table(
        {
            "i64": pa.array(ids, pa.int64()),
            "i32": pa.array(ids, pa.int32()),
            "u32": pa.array(ids, pa.uint32()),
            "f64": pa.array(ids * 0.5, pa.float64()),
            "f32": pa.array(ids * 0.25, pa.float32()),
            "s": pa.array([f"key-{i}" for i in ids]),
            "b": pa.array([i.to_bytes(6, "big") for i in ids.tolist()], pa.binary()),
            "d": pa.array(ids, pa.int32()).cast(pa.date32()),
            "ts": pa.array(ids, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        }
    )


def test_every_value_written_may_be_contained_and_few_others_are() -> None:
    """pyarrow's filters, one per column type castable encodes: no false negative at all, and
    about the false-positive rate the filter was sized for."""
    table = typed_columns()
    sink = io.BytesIO()
    pq.write_table(
        table, sink, row_group_size=ROWS, bloom_filter_options={c: {"ndv": ROWS} for c in table.column_names}
    )
    data = sink.getvalue()
    group = pq.read_metadata(io.BytesIO(data)).row_group(0)
    for i, name in enumerate(table.column_names):
        chunk = group.column(i)
        start, length = chunk.bloom_filter_offset, chunk.bloom_filter_length
        bloom = BloomFilter.decode(data[start : start + length])
        inside = table.column(name).slice(0, ROWS).combine_chunks()
        outside = table.column(name).slice(ROWS, 5_000).combine_chunks()
        encoded = plain_values(inside)
        assert encoded is not None and all(bloom.may_contain(v) for v in encoded), name
        false_positives = sum(map(bloom.may_contain, plain_values(outside) or []))
        assert false_positives < 0.05 * len(outside), (name, false_positives)
        assert not bloom.lacks_all(inside.slice(100, 3)) and bloom.lacks_all(outside.slice(0, 1)) in (True, False)


def test_what_is_no_filter_rules_nothing_out() -> None:
    with pytest.raises(ValueError, match="bloom filter"):
        BloomFilter.decode(b"\xff" * 64)
    assert plain_values(pa.array([1], pa.decimal128(5, 2))) is None


def keyed(tmp_path: Path, name: str, **props: object) -> castable.Table:
    schema = pa.schema([pa.field("id", pa.string(), nullable=False), ("n", pa.int64()), ("tag", pa.string())])
    keys = [f"{x:016x}" for x in np.random.default_rng(11).integers(0, 2**62, 4 * ROWS)]
    properties = {"write.row-group-size-bytes": 1_500_000, **props}
    table = castable.create_table(str(tmp_path / name), schema, primary_key="id", properties=properties)
    table.append(pa.table({"id": keys, "n": np.arange(4 * ROWS), "tag": ["t"] * (4 * ROWS)}, schema=schema))
    return table


def test_point_reads_skip_the_row_groups_whose_filter_lacks_the_points(tmp_path: Path) -> None:
    """Random keys: every row group's min/max spans them all, so statistics rule nothing out;
    the filters leave the row group that holds the key (and rarely a false positive)."""
    with_filter = keyed(tmp_path, "bloom", **{"write.parquet.bloom-filter-columns": "id"})
    without = keyed(tmp_path, "plain")
    keys = with_filter.scan(["id"]).to_arrow().column("id").to_pylist()
    queries = [
        f"id = '{keys[5]}'",
        f"id IN ('{keys[70_000]}', '{keys[150_000]}', '2zzzzzzzzzzzzzzz')",
        f"id = '{keys[9]}' AND n >= 0",
        f"id = '{keys[9]}' OR id = '{keys[200_000]}'",
        f"id = '{keys[9]}' OR n = 3",
        "id = '2zzzzzzzzzzzzzzz'",
    ]
    for where in queries:
        assert with_filter.scan(filter=where).to_arrow() == without.scan(filter=where).to_arrow(), where
    snapshot = with_filter.snapshot()
    (f,) = snapshot.manifest.data_files
    footer = snapshot.footer(f)
    assert footer.num_row_groups >= 4
    plain = without.snapshot()
    for where, at_most in [(queries[0], 1), (queries[1], 2), (queries[2], 1), (queries[3], 2), (queries[5], 0)]:
        predicate = parse_predicate(where, snapshot.schema)
        kept = snapshot.row_groups_matching(f, footer, predicate)
        assert len(kept) <= at_most + 1, (where, kept)  # a false positive at most
        (g,) = plain.manifest.data_files
        assert len(plain.row_groups_matching(g, plain.footer(g), predicate)) == footer.num_row_groups, where
    predicate = parse_predicate(queries[4], snapshot.schema)  # n = 3 may be anywhere: nothing ruled out
    assert len(snapshot.row_groups_matching(f, footer, predicate)) == footer.num_row_groups


def test_deletes_by_point_read_only_the_row_groups_that_hold_them(tmp_path: Path) -> None:
    table = keyed(tmp_path, "t", **{"write.parquet.bloom-filter-columns": "tag,id"})
    key = table.scan(["id"], "n = 77").to_arrow().column("id")[0].as_py()
    table.delete(f"id = '{key}' AND tag = 't'")
    assert table.count() == 4 * ROWS - 1 and table.scan(filter=f"id = '{key}'").count() == 0


def test_unknown_bloom_filter_columns_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="bloom-filter-columns names columns the schema lacks"):
        castable.create_table(
            str(tmp_path / "t"),
            pa.schema([("id", pa.int64())]),
            properties={"write.parquet.bloom-filter-columns": "id, nope"},
        )
    assert not (tmp_path / "t").exists()


def test_a_widened_column_keeps_its_point_reads(tmp_path: Path) -> None:
    """A filter hashes values as its file holds them: after ``int32`` widens to ``int64`` the
    older files' filters are probed with 4-byte values (probed with 8, every row group was
    ruled out and a point read found nothing)."""
    schema = pa.schema([("k", pa.int32()), ("n", pa.int64())])
    props = {"write.parquet.bloom-filter-columns": "k", "write.row-group-size-bytes": 1_000_000}
    table = castable.create_table(str(tmp_path / "t"), schema, properties=props)
    keys = np.random.default_rng(3).permutation(ROWS * 2).astype(np.int32)
    table.append(pa.table({"k": keys, "n": np.arange(len(keys))}, schema=schema))
    table.alter().widen_column("k", pa.int64()).commit()
    assert table.scan(filter=f"k = {keys[77]}").to_arrow().column("n").to_pylist() == [77]
    assert table.scan(filter=f"k IN ({keys[5]}, {keys[900]}, -1)").count() == 2
    snapshot = table.snapshot()
    (f,) = snapshot.manifest.data_files
    footer = snapshot.footer(f)
    kept = snapshot.row_groups_matching(f, footer, parse_predicate(f"k = {keys[77]}", snapshot.schema))
    assert footer.num_row_groups >= 2 and 1 <= len(kept) <= 2
