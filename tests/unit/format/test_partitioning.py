"""Partitioned tables (castable.format.partitioning, castable.read.partitions): Iceberg's
transforms value for value (the spec's own test vectors, and iceberg-rust's implementation in
pyiceberg-core over random values), spec evolution as Iceberg assigns ids, pruning that never
loses a row (random rows and filters against pyarrow over every row), a delete of whole
partitions that reads no data file, and compaction that never mixes partitions."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyiceberg.transforms as iceberg_transforms
import pyiceberg.types as iceberg_types
import pyiceberg_core.transform as rust
import pytest
from helpers.objects import plain
from helpers.reads import Reads
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.partitioning import PartitionField as IcebergField
from pyiceberg.partitioning import PartitionSpec as IcebergSpec
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.typedef import Record

import castable
from castable.errors import InvalidInputError
from castable.format.evolution import with_ids
from castable.format.layout import partition_folder
from castable.format.partitioning import PartitionField, Partitioning, PartitionSpec, Transform, encode_partition
from castable.iceberg import publish
from castable.inputs.partitions import parse_partition_by
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.store.cache import clear_caches

UTC = dt.UTC


@pytest.mark.parametrize(
    ("values", "expected"),
    [  # the Iceberg spec, Appendix B: 32-bit hash requirements
        (pa.array([34], pa.int32()), 2017239379),
        (pa.array([34], pa.int64()), 2017239379),
        (pa.array([Decimal("14.20")], pa.decimal128(9, 2)), -500754589),
        (pa.array([dt.date(2017, 11, 16)], pa.date32()), -653330422),
        (pa.array([dt.time(22, 31, 8)], pa.time64("us")), -662762989),
        (pa.array([dt.datetime(2017, 11, 16, 22, 31, 8)], pa.timestamp("us")), -2047944441),
        (pa.array([dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=UTC)], pa.timestamp("us", tz="UTC")), -2047944441),
        (pa.array(["iceberg"]), 1210000089),
        (pa.array([bytes([0, 1, 2, 3])], pa.binary()), -188683207),
        (pa.array([bytes([0, 1, 2, 3])], pa.binary(4)), -188683207),
    ],
)
def test_bucket_hashes_as_the_iceberg_spec_says(values: pa.Array, expected: int) -> None:
    n = 1_000_003
    assert Transform("bucket", n).apply(values).to_pylist() == [(expected & 0x7FFFFFFF) % n]


def test_a_uuid_kept_as_16_bytes_hashes_as_the_spec_says() -> None:
    raw = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes
    assert Transform("bucket", 1 << 30).apply(pa.array([raw], pa.binary(16))).to_pylist() == [
        (1488055340 & 0x7FFFFFFF) % (1 << 30)
    ]


MICROS = st.integers(-(2**50), 2**50)
ARRAYS: dict[str, tuple[pa.DataType, Any]] = {
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "string": (pa.string(), st.text(max_size=12)),
    "date": (pa.date32(), st.integers(-100_000, 100_000)),
    "timestamp": (pa.timestamp("us"), MICROS),
    "timestamptz": (pa.timestamp("us", tz="UTC"), MICROS),
    "decimal": (pa.decimal128(12, 3), st.decimals(-(10**8), 10**8, places=3, allow_nan=False)),
    "binary": (pa.binary(), st.binary(max_size=10)),
}


def _array(kind: str, values: list[Any]) -> pa.Array:
    t, _ = ARRAYS[kind]
    if pa.types.is_date32(t):
        return pa.array(values, pa.int32()).cast(t)
    if pa.types.is_timestamp(t):
        return pa.array(values, pa.int64()).cast(t)
    return pa.array(values, t)


@st.composite
def columns(draw: st.DrawFn) -> tuple[str, pa.Array]:
    kind = draw(st.sampled_from(sorted(ARRAYS)))
    values = draw(st.lists(st.one_of(st.none(), ARRAYS[kind][1]), max_size=30))
    return kind, _array(kind, values)


@settings(max_examples=200, deadline=None)
@given(columns(), st.integers(1, 40))
def test_every_transform_gives_what_iceberg_rust_gives(column: tuple[str, pa.Array], width: int) -> None:
    kind, values = column
    theirs: dict[str, Any] = {"identity": rust.identity, "void": rust.void, "bucket": lambda a: rust.bucket(a, width)}
    if kind in ("int64", "int32", "string", "decimal", "binary"):
        theirs["truncate"] = lambda a: rust.truncate(a, width)
    if kind in ("date", "timestamp", "timestamptz"):
        theirs |= {"year": rust.year, "month": rust.month, "day": rust.day}
    if kind in ("timestamp", "timestamptz"):
        theirs["hour"] = rust.hour
    for name, transform in theirs.items():
        ours = Transform(name, width if name in ("bucket", "truncate") else None)
        assert ours.refusal(values.type) is None
        expected = transform(values)
        if pa.types.is_date32(expected.type):  # iceberg-rust gives day as a date; castable keeps days
            expected = expected.cast(pa.int32())
        assert ours.apply(values).to_pylist() == expected.cast(ours.result_type(values.type)).to_pylist(), name


ICEBERG_TYPES: dict[str, iceberg_types.PrimitiveType] = {
    "int64": iceberg_types.LongType(),
    "int32": iceberg_types.IntegerType(),
    "string": iceberg_types.StringType(),
    "date": iceberg_types.DateType(),
    "timestamp": iceberg_types.TimestampType(),
    "timestamptz": iceberg_types.TimestamptzType(),
    "decimal": iceberg_types.DecimalType(12, 3),
    "binary": iceberg_types.BinaryType(),
}


def _iceberg_transform(name: str, width: int) -> iceberg_transforms.Transform[Any, Any]:
    if name == "bucket":
        return iceberg_transforms.BucketTransform(width)
    kinds: dict[str, type[iceberg_transforms.Transform[Any, Any]]] = {
        "void": iceberg_transforms.VoidTransform,
        "year": iceberg_transforms.YearTransform,
        "month": iceberg_transforms.MonthTransform,
        "day": iceberg_transforms.DayTransform,
        "hour": iceberg_transforms.HourTransform,
    }
    return kinds[name]()


def _internal(values: pa.Array) -> list[Any]:
    """Values as pyiceberg's transforms take them (days and microseconds as integers)."""
    if pa.types.is_date32(values.type):
        return values.cast(pa.int32()).to_pylist()
    if pa.types.is_timestamp(values.type):
        return values.cast(pa.int64()).to_pylist()
    return values.to_pylist()


@settings(max_examples=200, deadline=None)
@given(columns(), st.integers(1, 40), st.sampled_from(["ev ent", "a=b&c", "naïve/ü", "plain"]))
def test_a_partitions_folder_is_named_as_pyiceberg_names_it(
    column: tuple[str, pa.Array], width: int, name: str
) -> None:
    """Every derived transform of every type: the same ``name=value`` folders as pyiceberg's
    ``partition_to_path`` (Iceberg's human strings, form-encoded, names escaped)."""
    kind, values = column
    their_schema = IcebergSchema(iceberg_types.NestedField(1, name, ICEBERG_TYPES[kind], required=False))
    names = ["void", "bucket"]
    names += ["year", "month", "day"] if kind in ("date", "timestamp", "timestamptz") else []
    names += ["hour"] if kind in ("timestamp", "timestamptz") else []
    for transform_name in names:
        transform = Transform(transform_name, width if transform_name == "bucket" else None)
        field = PartitionField(1, 1000, f"{name} {transform_name}", transform)
        theirs = _iceberg_transform(transform_name, width)
        their_spec = IcebergSpec(IcebergField(1, 1000, theirs, f"{name} {transform_name}"))
        apply = theirs.transform(ICEBERG_TYPES[kind])
        ours = encode_partition(transform.apply(values), field)
        for value, internal in zip(ours, _internal(values), strict=True):
            expected = their_spec.partition_to_path(Record(apply(internal)), their_schema)
            assert PartitionSpec(1, (field,)).path([value]) == expected, (transform_name, internal)


def test_a_partitions_folders_stop_at_the_first_field_that_holds_the_datas_values() -> None:
    """Identity and truncate values are the data's own: an erasure removes them from every object,
    and a key cannot be rewritten, so no folder names them (nor any field after them)."""
    fields = [("day", "d"), ("identity", "email"), ("bucket", "b"), ("truncate", "t")]
    spec = PartitionSpec(
        1,
        tuple(
            PartitionField(1, 1000 + i, n, Transform(t, 4 if t in ("bucket", "truncate") else None))
            for i, (t, n) in enumerate(fields)
        ),
    )
    assert spec.path([20_000, "someone@example.org", 3, "some"]) == "d=2024-10-04"
    assert spec.path([None, "x", 3, "x"]) == "d=null"
    assert PartitionSpec(1, spec.fields[1:]).path(["someone@example.org", 3, "some"]) == ""


def test_a_partition_path_too_long_for_storage_or_out_of_range_is_left_out() -> None:
    """Past 200 bytes a folder, past 512 a path, or a day Python cannot write: no folders (the
    file then lies with unpartitioned ones), never a key S3 or a file system refuses."""

    def bucket(*names: str) -> PartitionSpec:
        return PartitionSpec(
            1, tuple(PartitionField(1, 1000 + i, n, Transform("bucket", 8)) for i, n in enumerate(names))
        )

    assert bucket("x" * 198).path([3]) == "x" * 198 + "=3"
    assert bucket("x" * 199).path([3]) == ""
    assert bucket("é" * 34).path([3]) == ""  # 34 characters, 204 bytes escaped
    assert bucket(*["x" * 130] * 4).path([1, 2, 3, 4]) == ""
    assert bucket(*["x" * 100] * 4).path([1, 2, 3, 4]).count("/") == 3
    day = PartitionSpec(1, (PartitionField(1, 1000, "d", Transform("day")),))
    assert day.path([3_000_000]) == "" and day.path([0]) == "d=1970-01-01"


@pytest.mark.parametrize(
    ("key", "folder"),
    [
        ("data/ts_day=2026-12-04/id_bucket=3/2026/12/04/17/f.parquet", "ts_day=2026-12-04/id_bucket=3"),
        ("data/2026/12/04/17/f.parquet", ""),
        ("data/inline/f.parquet", ""),
        ("data/name=a+b/00000-0-f.parquet", "name=a+b"),  # as Spark's Iceberg writer names them
        ("tombstone/2026/12/04/17/f.del", ""),
    ],
)
def test_a_data_files_partition_folder_is_read_from_its_key(key: str, folder: str) -> None:
    assert partition_folder(key) == folder


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["year", "month", "day", "hour"]), MICROS, st.sampled_from(["s", "ms", "us", "ns"]))
def test_a_temporal_partition_value_bounds_every_row_in_it(name: str, micros: int, unit: str) -> None:
    per = {"s": 10**-6, "ms": 10**-3, "us": 1, "ns": 1000}[unit]
    t = pa.timestamp(unit, tz="UTC")
    value = pa.array([int(micros * per)], pa.int64()).cast(t)
    transform = Transform(name)
    p = transform.apply(value)[0].as_py()
    bounds = transform.bounds(p, t)
    assert bounds is not None
    lo, hi = bounds
    assert lo <= value.cast(pa.int64())[0].as_py() <= hi
    for edge, inside in ((lo, True), (hi, True), (lo - 1, False), (hi + 1, False)):
        moved = transform.apply(pa.array([edge], pa.int64()).cast(t))[0].as_py()
        assert (moved == p) is inside


SCHEMA = with_ids(pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("name", pa.string())]))


def test_spec_evolution_keeps_ids_as_iceberg_does() -> None:
    first = Partitioning().evolved(parse_partition_by(["day(ts)", "bucket(8, id)"], SCHEMA), SCHEMA)
    assert first.default_spec_id == 1 and first.spec(0).fields == ()
    assert [(f.field_id, f.name) for f in first.default.fields] == [(1000, "ts_day"), (1001, "id_bucket")]
    second = first.evolved(parse_partition_by(["bucket(8, id)", "truncate(2, name)"], SCHEMA), SCHEMA)
    assert [(f.field_id, f.name) for f in second.default.fields] == [(1001, "id_bucket"), (1002, "name_trunc")]
    assert second.evolved(parse_partition_by(["days(ts)", "bucket(8, id)"], SCHEMA), SCHEMA).default_spec_id == 1
    assert second.evolved([], SCHEMA).default_spec_id == 0
    assert Partitioning.from_json(second.to_json()) == second


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (["hour(name)"], "does not apply"),
        (["bucket(0, id)"], "positive width"),
        (["day(ts)", "days(ts)"], "same transform"),
        (["nope(id)"], "no such column"),
        (["missing"], "no such column"),
    ],
)
def test_a_bad_partition_field_is_refused_naming_it(tmp_path: Path, fields: list[str], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        castable.create_table(str(tmp_path / "t"), pa.schema(list(SCHEMA)), partition_by=fields)
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("*.json"))


def _rows(n: int, seed: int) -> pa.Table:
    start = dt.datetime(2024, 1, 1, tzinfo=UTC)
    return pa.table(
        {
            "id": pa.array([(i * 7919 + seed) % 1000 if i % 11 else None for i in range(n)], pa.int64()),
            "ts": pa.array(
                [start + dt.timedelta(hours=(i * 37 + seed) % 500) if i % 13 else None for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "name": pa.array([["ab", "abc", "b", "ba", None][(i + seed) % 5] for i in range(n)]),
        }
    )


FILTERS = [
    "id = 5",
    "id IN (1, 2, 3, 500)",
    "id IS NULL",
    "id > 900 OR ts < '2024-01-03'",
    "ts >= '2024-01-05' AND ts < '2024-01-06'",
    "ts > '2024-01-04T13:30:00Z'",
    "ts <= '2024-01-07T02:00:00Z' AND ts >= '2024-01-06T22:59:59.999999Z'",
    "ts < '2024-01-08T05:30:00Z'",
    "ts IS NULL AND name = 'ab'",
    "name = 'abc'",
    "name >= 'b'",
    "NOT (id = 5)",
    "id != 5 AND name IS NOT NULL",
]
SPECS = [["day(ts)", "bucket(4, id)"], ["truncate(100, id)", "name"], ["hour(ts)"], ["month(ts)", "truncate(1, name)"]]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.sampled_from(range(len(SPECS))), min_size=1, max_size=3), st.integers(0, 50), st.sampled_from(FILTERS)
)
def test_pruning_by_partition_never_loses_a_row(
    tmp_path_factory: pytest.TempPathFactory, specs: list[int], seed: int, deleted: str
) -> None:
    """Every filter counts the rows pyarrow finds among all rows, and a delete (which drops the
    files its partitions say match entirely) leaves exactly the others."""
    table = castable.create_table(
        str(tmp_path_factory.mktemp("t")), pa.schema(list(SCHEMA)), partition_by=SPECS[specs[0]]
    )
    every = []
    for i, spec in enumerate(specs):
        if i:
            table.partition_by(SPECS[spec])
        rows = _rows(60, seed + i)
        table.append(rows)
        every.append(rows)
    whole = pa.concat_tables(every)
    for where in FILTERS:
        expected = whole.filter(castable.read.where.parse_predicate(where, table.schema).to_expression())
        assert table.count(filter=where) == expected.num_rows, where
    matched = whole.filter(castable.read.where.parse_predicate(deleted, table.schema).to_expression()).num_rows
    assert table.delete(deleted).rows_deleted == matched
    assert table.count() == whole.num_rows - matched


def test_a_delete_of_whole_partitions_reads_no_data_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = castable.create_table(str(tmp_path / "t"), pa.schema(list(SCHEMA)), partition_by=["day(ts)", "name"])
    table.append(_rows(400, 1))
    before = table.count()
    days = table.count(filter="ts >= '2024-01-03' AND ts < '2024-01-05' AND name = 'ab'")
    clear_caches()
    reads = Reads(monkeypatch)
    result = castable.open_table(str(tmp_path / "t")).delete("ts >= '2024-01-03' AND ts < '2024-01-05' AND name = 'ab'")
    assert reads.data == [] and days > 0
    assert result.rows_deleted == days and result.files_removed > 0 and table.refresh().count() == before - days
    assert table.count(filter="name = 'ab' AND ts >= '2024-01-03' AND ts < '2024-01-05'") == 0


def test_a_scan_of_one_day_opens_only_that_days_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = castable.create_table(str(tmp_path / "t"), pa.schema(list(SCHEMA)), partition_by=["day(ts)"])
    table.append(_rows(400, 2))
    one_day = "ts >= '2024-01-04' AND ts < '2024-01-05'"
    planned = table.scan(filter=one_day).files()
    assert len(planned) == 1 and len(table.manifest.data_files) > 15
    clear_caches()
    reads = Reads(monkeypatch)
    assert (
        castable.open_table(str(tmp_path / "t")).count(filter=one_day)
        == _rows(400, 2).filter(castable.read.where.parse_predicate(one_day, table.schema).to_expression()).num_rows
    )
    assert set(reads.data) == {planned[0].path}


def test_compaction_merges_files_of_one_partition_only(tmp_path: Path) -> None:
    table = castable.create_table(
        str(tmp_path / "t"), pa.schema(list(SCHEMA)), partition_by=["day(ts)"], properties={"write.inline.max-bytes": 0}
    )
    for seed in range(4):
        table.append(_rows(100, seed))
    rows = table.to_arrow()
    before = {f.partition for f in table.manifest.data_files}
    report = table.compact()
    assert len(report.files_rewritten) > len(before)
    after = list(table.manifest.data_files)
    assert {f.partition for f in after} == before and len(after) == len(before)
    for f in after:  # every row of a file is of the file's day
        if f.partition[0] is not None:
            assert f.stats["ts"]["min"] // 86_400_000_000 == f.stats["ts"]["max"] // 86_400_000_000 == f.partition[0]
    assert sorted(table.to_arrow().column("id").to_pylist(), key=str) == sorted(rows.column("id").to_pylist(), key=str)
    assert table.compact().files_rewritten == []  # one file per partition: nothing left to gain


def test_a_partitions_files_lie_in_its_folder_through_writes_erasures_and_compaction(tmp_path: Path) -> None:
    """Listing ``data/<partition path>/`` lists a partition's files: appends put them there, an
    erasure's spliced file and a compaction's merged one stay there, and evolution starts new
    folders for the new spec (old files keep theirs)."""
    table = castable.create_table(
        str(tmp_path / "t"),
        pa.schema(list(SCHEMA)),
        partition_by=["day(ts)", "bucket(2, id)"],
        properties={"write.inline.max-bytes": 0},
    )
    for seed in range(3):
        table.append(_rows(60, seed))

    def placed() -> dict[str, str]:
        spec = {s.spec_id: s for s in table.partitioning.specs}
        return {f.path: spec[f.spec_id].path(f.partition) for f in table.manifest.data_files}

    assert all(partition_folder(path) == folder != "" for path, folder in placed().items())
    assert any(path.startswith("data/ts_day=2024-01-02/id_bucket=") for path in placed())
    assert table.erase("id = 5").rows_erased > 0
    table.compact()
    assert all(partition_folder(path) == folder for path, folder in placed().items())
    table.partition_by(["month(ts)"])
    table.append(_rows(30, 9))
    assert any(path.startswith("data/ts_month=2024-01/2") for path in placed())
    assert all(partition_folder(path) == folder for path, folder in placed().items())


def test_erase_and_purge_leave_no_byte_of_a_partition_value(tmp_path: Path) -> None:
    """A value that is a file's partition value (identity and truncate of text) is erased from
    the segments, the manifests and the Iceberg metadata (partition tuples, manifest lists'
    partition summaries) as from the data: no object of the table holds its bytes afterwards."""
    schema = pa.schema([("id", pa.int64()), ("email", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])
    table = castable.create_table(
        str(tmp_path / "t"),
        schema,
        partition_by=["email", "truncate(9, email)", "day(ts)"],
        properties={"publish.iceberg": "true"},
    )
    start = dt.datetime(2026, 11, 1, tzinfo=UTC)
    emails = ["someone@example.org", "secret-person@example.org", "other@example.org"]
    for day in range(3):
        table.append(
            pa.table(
                {"id": [day * 10 + i for i in range(3)], "email": emails, "ts": [start + dt.timedelta(days=day)] * 3},
                schema=schema,
            )
        )
    publish(table)
    secret = b"secret-person@example.org"

    def holding() -> set[str]:
        return {o.key for o in table.store.list("") if b"secret-p" in plain(o.key, table.store.get(o.key).data)}

    before = holding()
    assert any(k.startswith("segment/") for k in before) and any(k.endswith(".avro") for k in before), before
    report = table.erase("email = 'secret-person@example.org'")
    assert report.rows_erased == 3
    purged = table.purge_erased(report)
    assert purged.verified and not purged.traces
    assert holding() == set() and secret
    assert table.count() == 6 and table.count(filter="email = 'someone@example.org'") == 3


def test_a_scans_plan_says_what_partitions_and_statistics_rule_out(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), pa.schema(list(SCHEMA)), partition_by=["day(ts)"])
    table.append(_rows(400, 5))
    one_day = "ts >= '2024-01-04' AND ts < '2024-01-05'"
    plan = table.scan(filter=one_day).explain()
    files = len(table.manifest.data_files)
    assert (plan.files, plan.kept, plan.by_partition + plan.by_statistics) == (files, 1, files - 1)
    assert plan.by_partition == files - 1  # the days' partition values alone rule them out
    assert plan.bytes_kept == sum(f.size for f in table.scan(filter=one_day).files())
    by_id = table.scan(filter="id = 5").explain()
    assert by_id.by_partition == 0 and by_id.kept == len(table.scan(filter="id = 5").files())
    assert "ruled out by partition values" in str(plan)


def test_a_write_larger_than_a_file_is_cut_and_sorted_a_chunk_at_a_time(tmp_path: Path) -> None:
    """Memory stays bounded: past ``write.target-file-size-bytes`` of rows a partitioned, sorted
    write goes on chunk by chunk, each file of one partition and sorted, no row lost."""
    props = {"write.target-file-size-bytes": 16_384, "write.inline.max-bytes": 0}
    table = castable.create_table(
        str(tmp_path / "t"), pa.schema(list(SCHEMA)), partition_by=["bucket(2, id)"], sort_by=["id"], properties=props
    )
    rows = _rows(6000, 7)
    table.append(rows.to_reader(max_chunksize=500))
    files = list(table.manifest.data_files)
    assert len(files) > 4 and {f.partition for f in files} == {(0,), (1,), (None,)}
    for f in files:
        got = Scan(Snapshot(table.store, table.manifest.restricted([f]))).to_arrow().column("id").to_pylist()
        assert got == sorted(got, key=lambda v: (v is not None, v or 0)), f.path
    assert table.count() == 6000
