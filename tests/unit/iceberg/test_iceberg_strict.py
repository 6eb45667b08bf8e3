"""Published Iceberg metadata as the strictest readers take it (issue 50): a name mapping that
names each name once, whatever the rename history; each file ``ADDED`` in one snapshot only, so
incremental readers are exact; only the type promotions Iceberg v2 has; every type castable
stores published exactly or refused with ``IcebergPublishError``, never blocking later versions;
position deletes sorted by path; metrics on delete files, so every ``inspect`` table of
pyiceberg reads."""

from __future__ import annotations

import datetime
import decimal
import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.iceberg_histories import register
from helpers.tables import FILES_ONLY
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import StaticTable
from pyiceberg.table.name_mapping import parse_mapping_from_json

import castable
from castable.format.layout import ICEBERG_HINT, ICEBERG_PREFIX
from castable.iceberg import IcebergPublishError, publish
from castable.read.snapshot import Snapshot

KEYED = pa.schema([pa.field("id", pa.int64(), nullable=False), ("x", pa.string()), ("y", pa.string())])


def _static(table: castable.Table) -> StaticTable:
    return StaticTable.from_metadata(f"{table.uri}/{ICEBERG_PREFIX}v{table.version}.metadata.json")


def _hint(table: castable.Table) -> int:
    return int(table.store.get(ICEBERG_HINT).data)


def _rows(ids: list[int], schema: pa.Schema = KEYED) -> pa.Table:
    return pa.table(
        {f.name: pa.array(ids, f.type) if f.name == "id" else [f"{f.name}{i}" for i in ids] for f in schema},
        schema=schema,
    )


def test_the_name_mapping_names_each_name_once_after_names_are_reused_and_swapped(tmp_path: Path) -> None:
    """Java Iceberg refuses a mapping that lists one name under two ids (``Multiple entries with
    same key``): a name used again after a rename, and two swapped names, belong to their
    current owners; a name no other column has had stays with the column that had it."""
    table = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id")
    table.append(_rows([1, 2]))
    with table.alter() as change:
        change.rename_column("x", "tmp").rename_column("y", "x")
    table.alter().rename_column("tmp", "y").commit()  # x and y swapped
    table.alter().rename_column("x", "z").add_column("x", pa.int64()).commit()  # x used again
    publish(table)
    mapping = parse_mapping_from_json(_static(table).properties["schema.name-mapping.default"])
    names = [n for field in mapping for n in field.names]
    assert len(names) == len(set(names)), f"a name under two ids: {mapping}"
    ids = {f.name: f.field_id for f in _static(table).schema().fields}
    assert {n: f.field_id for f in mapping for n in f.names} == {**ids, "tmp": ids["y"]}
    got = _static(table).scan().to_arrow().sort_by("id")
    assert got.to_pylist() == table.scan().to_arrow().sort_by("id").to_pylist()


def test_a_file_is_added_by_one_snapshot_only_and_incremental_append_scans_are_exact(tmp_path: Path) -> None:
    """One-row appends whose segments merge (the ninth merges them), a compaction and a delete
    between them: every data file is ``ADDED`` in exactly one manifest entry, under the snapshot
    that added it, and pyiceberg's incremental append scan between any two snapshots reads exactly the rows the
    appends between them added (a merged segment's old files had come twice)."""
    table = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id", properties=FILES_ONLY)
    added: dict[int, set[int]] = {}
    for i in range(14):
        table.append(_rows([i]))
        added[table.version] = {i}
        if i == 11:
            table.compact()
        if i == 8:
            table.delete("id = 3")
        publish(table)
    static = _static(table)
    snapshots = [s.snapshot_id for s in static.snapshots()]
    entries = static.inspect.entries()
    adds = [e for e in entries.to_pylist() if e["status"] == ManifestEntryStatus.ADDED.value]
    by_path = [e["data_file"]["file_path"] for e in adds]
    assert len(by_path) == len(set(by_path)), "a file ADDED in two manifests"
    rng = random.Random(50)
    pairs = [(snapshots[0], snapshots[-1]), *itertools.pairwise(snapshots)]
    pairs += [tuple(sorted(rng.sample(snapshots, 2))) for _ in range(12)]  # type: ignore[misc]
    for start, end in pairs:
        got = static.incremental_append_scan(from_snapshot_id_exclusive=start, to_snapshot_id_inclusive=end)
        ids = got.select("id").to_arrow().column("id").to_pylist()
        want = sorted(i for v, rows in added.items() if start < v <= end for i in rows)
        assert sorted(ids) == want, f"({start}, {end}]"


def test_a_widening_iceberg_v2_cannot_read_stops_publication_until_compaction(tmp_path: Path) -> None:
    """date32 to timestamp (castable widens it; Iceberg v2 does not promote it) is refused with
    the way on; int32 to int64 is v2's own promotion and publishes."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.date32()), ("n", pa.int32())])
    table = castable.create_table(str(tmp_path / "t"), schema, primary_key="id", properties=FILES_ONLY)
    table.append(pa.table({"id": [1, 2], "day": [datetime.date(2026, 1, 1), None], "n": [1, 2]}, schema=schema))
    table.alter().widen_column("n", pa.int64()).commit()
    publish(table)
    assert _static(table).scan().to_arrow().column("n").to_pylist() == [1, 2]
    published = table.version
    table.alter().widen_column("day", pa.timestamp("us")).commit()
    with pytest.raises(IcebergPublishError, match=r"holds column 'day' as date32.*compact the table"):
        publish(table)
    assert _hint(table) == published, "readers keep the last version they can read"
    later = pa.schema([schema.field("id"), pa.field("day", pa.timestamp("us")), pa.field("n", pa.int64())])
    table.append(pa.table({"id": [3], "day": [datetime.datetime(2026, 2, 1, 3)], "n": [3]}, schema=later))
    with pytest.raises(IcebergPublishError, match="compact the table"):
        publish(table)
    table.compact(min_file_size=1 << 30)  # both files rewritten into one, the column a timestamp
    publish(table)
    got = _static(table).scan().to_arrow().sort_by("id")
    assert got.column("day").to_pylist() == [datetime.datetime(2026, 1, 1), None, datetime.datetime(2026, 2, 1, 3)]


TYPES: dict[str, tuple[pa.DataType, list[object]]] = {
    "float16": (pa.float16(), [None, None]),
    "date64": (pa.date64(), [datetime.date(2026, 3, 1), None]),
    "time32": (pa.time32("ms"), [datetime.time(1, 2, 3), None]),
    "time64-ns": (pa.time64("ns"), [datetime.time(1, 2, 3), None]),
    "time64-us": (pa.time64("us"), [datetime.time(1, 2, 3, 4), None]),
    "duration": (pa.duration("us"), [datetime.timedelta(seconds=5), None]),
    "timestamp-paris": (
        pa.timestamp("us", tz="Europe/Paris"),
        [datetime.datetime(2026, 3, 1, 12, tzinfo=datetime.UTC), None],
    ),
    "timestamp-ms": (pa.timestamp("ms"), [datetime.datetime(2026, 3, 1, 12, 0, 0, 5000), None]),
    "timestamp-s-utc": (
        pa.timestamp("s", tz="UTC"),
        [datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC), None],
    ),
    "decimal128": (pa.decimal128(12, 3), [decimal.Decimal("1.500"), None]),
    "decimal256": (pa.decimal256(40, 2), [decimal.Decimal("1.50"), None]),
    "large-string": (pa.large_string(), ["a", None]),
    "fixed-binary": (pa.binary(4), [b"abcd", None]),
    "int8": (pa.int8(), [7, None]),
    "uint32": (pa.uint32(), [7, None]),
    "null": (pa.null(), [None, None]),
}


@pytest.mark.parametrize("name", TYPES)
def test_every_type_is_published_exactly_or_refused_without_blocking_later_versions(tmp_path: Path, name: str) -> None:
    """A column of each type, added to a published table: the version is either read by
    pyiceberg exactly as castable reads it, or refused with ``IcebergPublishError`` naming the
    column; then the column is dropped, the files that held it compacted, and that version
    publishes, the hint on it."""
    t, values = TYPES[name]
    table = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id", properties=FILES_ONLY)
    table.append(_rows([1, 2]))
    publish(table)
    table.alter().add_column("c", t).commit()
    with_c = table.schema
    table.append(pa.table({"id": [3, 4], "x": ["x3", "x4"], "y": ["y3", "y4"], "c": pa.array(values, t)}))
    try:
        publish(table)
    except IcebergPublishError as e:
        assert "'c'" in str(e), e
        assert _hint(table) < table.version
    else:
        got = _static(table).scan().to_arrow().sort_by("id")
        want = table.scan().to_arrow().sort_by("id")
        assert got.column("id").equals(want.column("id"))
        assert got.column("c").cast(with_c.field("c").type).to_pylist() == want.column("c").to_pylist(), name
    table.alter().drop_column("c").commit()
    table.append(_rows([5]))
    table.compact(min_file_size=1 << 30)  # a file that holds a column with no Iceberg type is rewritten
    publish(table)
    assert _hint(table) == table.version
    assert sorted(_static(table).scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4, 5]


def test_an_unpublishable_version_never_blocks_expire_or_the_cli(tmp_path: Path) -> None:
    """``expire`` expires and republishes the newest version it can; the CLI says why a version
    is not published, as a castable error, with no traceback."""
    table = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id", properties=FILES_ONLY)
    for i in range(4):
        table.append(_rows([i]))
    publish(table)
    readable = table.version
    table.alter().add_column("h", pa.float16()).commit()
    table.expire(retain_versions=2)
    assert _hint(table) == readable
    assert [s.snapshot_id for s in _static_at(table, readable).snapshots()] == [readable]
    cli = subprocess.run(
        [str(Path(sys.executable).parent / "castable"), "iceberg", "publish", table.uri],
        capture_output=True,
        text=True,
    )
    assert cli.returncode != 0
    assert "16-bit float" in cli.stderr and "Traceback" not in cli.stderr, cli.stderr


def _static_at(table: castable.Table, version: int) -> StaticTable:
    return StaticTable.from_metadata(f"{table.uri}/{ICEBERG_PREFIX}v{version}.metadata.json")


def test_position_deletes_are_sorted_by_path_and_carry_metrics_and_every_inspect_table_reads(
    tmp_path: Path,
) -> None:
    """A tombstone over inline rows (published under ``metadata/inline/``) and files (under
    ``data/``): its position delete file is sorted by ``file_path`` then ``pos``, as the spec
    requires; its manifest entry has the sizes, counts and bounds Java writes, and every
    ``inspect`` table of pyiceberg reads."""
    table = castable.create_table(
        str(tmp_path / "t"), KEYED, primary_key="id", properties={"write.inline.max-bytes": 4096}
    )
    table.append(_rows(list(range(0, 3000))))  # a file
    table.append(_rows([5000, 5001]))  # inline rows
    table.append(_rows(list(range(3000, 6000))))
    table.delete("id IN (5001, 10, 3010, 5000, 2999)")
    publish(table)
    deletes = sorted((tmp_path / "t" / ICEBERG_PREFIX).glob("*-deletes.parquet"))
    assert deletes
    for path in deletes:
        rows = pq.read_table(path).to_pylist()
        keys = [(r["file_path"], r["pos"]) for r in rows]
        assert keys == sorted(keys)
        assert any("/metadata/inline/" in k for k, _ in keys) and any("/data/" in k for k, _ in keys)
    static = _static(table)
    for entry in static.inspect.entries().to_pylist():
        data_file = entry["data_file"]
        assert data_file["column_sizes"] and data_file["value_counts"] and data_file["lower_bounds"], data_file
    inspect = static.inspect
    for read in (
        inspect.snapshots,
        inspect.entries,
        inspect.refs,
        inspect.partitions,
        inspect.manifests,
        inspect.metadata_log_entries,
        inspect.history,
        inspect.files,
        inspect.data_files,
        inspect.delete_files,
        inspect.all_manifests,
        inspect.all_files,
        inspect.all_data_files,
        inspect.all_delete_files,
    ):
        assert read().num_rows > 0, read.__name__
    assert sorted(static.scan().to_arrow().column("id").to_pylist()) == sorted(
        table.scan().to_arrow().column("id").to_pylist()
    )
    assert json.loads(static.properties["schema.name-mapping.default"])


def test_files_without_ids_publish_while_the_name_mapping_finds_their_columns_as_castable_does(tmp_path: Path) -> None:
    """A file registered after two names swapped holds them under their current owners, as the
    name mapping maps them: it publishes and reads right (it was refused while any name had
    belonged to two columns). Once a name of the file is dropped and added again, the mapping
    gives it to the new column, which castable reads as NULL there: refused (readers would read
    the old values as the new column) until a compaction rewrites the file with ids."""
    table = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id", properties=FILES_ONLY)
    table.append(_rows([1]))
    with table.alter() as change:
        change.rename_column("x", "tmp").rename_column("y", "x")
    table.alter().rename_column("tmp", "y").commit()
    plain = pa.schema([f.remove_metadata() for f in table.schema])
    register(table, "swapped", pa.table({"id": [3], "y": ["x3"], "x": ["y3"]}, schema=plain))
    publish(table)
    got = _static(table).scan().to_arrow().sort_by("id")
    assert got.select(["id", "x", "y"]) == table.scan().to_arrow().sort_by("id").select(["id", "x", "y"])
    published = table.version
    table.alter().drop_column("y").commit()
    table.alter().add_column("y", pa.string()).commit()
    with pytest.raises(IcebergPublishError, match=r"swapped.parquet has no field ids.*'y'.*compact"):
        publish(table)
    assert _hint(table) == published
    table.compact(min_file_size=1 << 30)
    publish(table)
    got = _static(table).scan().to_arrow().sort_by("id")
    assert got.column("y").to_pylist() == [None, None]
    assert got.column("x").to_pylist() == ["y1", "y3"]


TIMESTAMPS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("s", pa.timestamp("s")),
        ("ms", pa.timestamp("ms")),
        ("ms_utc", pa.timestamp("ms", tz="UTC")),
    ]
)


def timestamp_rows(ids: list[int]) -> pa.Table:
    base = datetime.datetime(2026, 3, 1, 12)
    return pa.table(
        {
            "id": ids,
            "s": [base + datetime.timedelta(seconds=i) for i in ids],
            "ms": [base + datetime.timedelta(milliseconds=7 * i) for i in ids],
            "ms_utc": [(base + datetime.timedelta(milliseconds=i)).replace(tzinfo=datetime.UTC) for i in ids],
        },
        schema=TIMESTAMPS,
    )


def test_a_timestamp_microseconds_cannot_hold_is_refused_and_the_table_is_unchanged(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), TIMESTAMPS, primary_key="id", properties=FILES_ONLY)
    table.append(timestamp_rows([1]))
    before = table.version
    far = timestamp_rows([2]).set_column(1, "s", pa.array([300_000 * 365 * 86_400], pa.int64()).cast(pa.timestamp("s")))
    with pytest.raises(castable.InvalidInputError, match="microseconds"):
        table.append(far)
    assert table.refresh().version == before and table.count() == 1
    assert sorted(p.name for p in Path(table.uri.removeprefix("file://"), "data").rglob("*.parquet")) == sorted(
        Path(f.path).name for f in table.manifest.data_files
    )


class _Counting:
    """A table whose ``snapshot`` calls for older versions are counted (what a publication reads)."""

    def __init__(self, table: castable.Table) -> None:
        self.table, self.older = table, 0
        self.store, self.version = table.store, table.version

    def snapshot(self, version: int | None = None) -> Snapshot:
        self.older += version is not None and version < self.version
        return self.table.snapshot(version)


def test_a_schema_change_reads_older_versions_only_when_it_maps_a_registered_files_name_anew(tmp_path: Path) -> None:
    """The metadata lists the names files without ids hold (``castable.names-without-ids``): a
    schema change that maps none of them otherwise reads no older version (a 1,000-version
    table published it in 23 s where the commit took 1, reading every version); one that maps
    such a name to a new column looks through the published snapshots and leaves out those
    that hold the file."""
    table = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id", properties=FILES_ONLY)
    table.append(_rows([1]))
    register(table, "plain", pa.table({"id": [2], "x": ["x2"], "y": ["y2"]}, schema=pa.schema(KEYED)))
    for i in range(3, 6):
        table.append(_rows([i]))
    publish(table)
    assert json.loads(_static(table).properties["castable.names-without-ids"]) == ["id", "x", "y"]
    table.alter().add_column("z", pa.int64()).commit()
    counting = _Counting(table)
    publish(counting)
    assert counting.older == 0
    table.alter().rename_column("y", "y_old").commit()
    table.alter().add_column("y", pa.string()).commit()  # the file's y now names another column
    with pytest.raises(IcebergPublishError, match=r"plain\.parquet has no field ids"):
        publish(table)
    table.compact(min_file_size=1 << 30)
    counting = _Counting(table)
    publish(counting)
    listed = [s.snapshot_id for s in _static(table).metadata.snapshots]
    assert counting.older > 0 and listed == [1, table.version], listed  # version 1 holds no registered file
    got = _static(table).scan().to_arrow().sort_by("id")
    assert got.column("y_old").to_pylist() == [f"y{i}" for i in range(1, 6)] and got.column("y").null_count == 5


def test_a_compaction_rewrites_a_lone_file_that_is_not_in_the_tables_layout(tmp_path: Path) -> None:
    """The way on that refusals name works when the file is the table's only small one: a clean
    file alone is rewritten if its columns are not as castable writes them now (no ids here)."""
    table = castable.create_table(str(tmp_path / "t"), KEYED, primary_key="id", properties=FILES_ONLY)
    register(table, "only", pa.table({"id": [1, 2], "x": ["x1", "x2"], "y": ["y1", "y2"]}, schema=pa.schema(KEYED)))
    table.alter().drop_column("y").commit()
    table.alter().add_column("y", pa.string()).commit()
    with pytest.raises(IcebergPublishError, match=r"only\.parquet has no field ids"):
        publish(table)
    assert table.plan_compaction(min_file_size=1 << 30) == [["data/registered/only.parquet"]]
    assert table.compact(min_file_size=1 << 30).files_rewritten == ["data/registered/only.parquet"]
    publish(table)
    assert _static(table).scan().to_arrow().sort_by("id").column("y").to_pylist() == [None, None]
    clean = table.plan_compaction(min_file_size=1 << 30)
    assert clean == [] and table.compact(min_file_size=1 << 30).files_rewritten == [], "a file in the layout stays"
