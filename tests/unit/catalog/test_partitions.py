"""Partitioned and sorted tables through the catalog, driven by pyiceberg: a table created with a partition
spec (Spark's ``PARTITIONED BY (days(ts), bucket(16, id))``), files pyiceberg writes partition by
partition keeping their partition tuples, the spec evolved by a client, castable's own writes
beside, and every version reading the same rows in castable and pyiceberg; a file whose manifest
entry names a partition its rows are not in is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from helpers.rest_catalog import Served
from pyiceberg.exceptions import BadRequestError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import NullOrder, SortDirection, SortOrder
from pyiceberg.table.sorting import SortField as IcebergSortField
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "ts", TimestamptzType(), required=False),
    NestedField(3, "region", StringType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(2, 1000, DayTransform(), "ts_day"),
    PartitionField(1, 1001, BucketTransform(4), "id_bucket"),
)
START = datetime(2024, 3, 1, tzinfo=UTC)


def rows(n: int, offset: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(offset, offset + n), pa.int64()),
            "ts": pa.array([START + timedelta(hours=7 * i) for i in range(n)], pa.timestamp("us", tz="UTC")),
            "region": pa.array(["eu", "us", "ap"][i % 3] for i in range(n)),
        }
    )


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_a_table_created_partitioned_by_a_client_holds_its_files_partitions(served: Served) -> None:
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table("db.events", schema=SCHEMA, partition_spec=SPEC)
    assert [(f.name, str(f.transform)) for f in t.spec().fields] == [("ts_day", "day"), ("id_bucket", "bucket[4]")]
    t.append(rows(40))
    ct = served.castable("db", "events")
    files = list(ct.manifest.data_files)
    assert len(files) > 4 and all(f.partition for f in files)
    day = {f.partition[0] for f in files}
    assert day == {
        (START + timedelta(hours=7 * i)).date().toordinal() - datetime(1970, 1, 1).toordinal() for i in range(40)
    }
    # castable's own writes of the same rows partition alike (its bucket is pyiceberg-core's)
    ct.append(rows(40))
    mine = [f for f in ct.manifest.data_files if f.added_version == ct.version]
    assert {f.partition for f in mine} == {f.partition for f in files}
    # pruning by day and bucket: id 3 is in one file of pyiceberg's and one of castable's
    one_day = f"ts >= '{START.isoformat()}' AND ts < '{(START + timedelta(days=1)).isoformat()}'"
    assert len(ct.scan(filter=f"id = 3 AND {one_day}").files()) == 2
    assert ids(ct.to_arrow(filter=f"id = 3 AND {one_day}")) == [3, 3]
    t.refresh()
    assert ids(t.scan().to_arrow()) == ids(ct.to_arrow())
    # the client evolves the spec: later files are partitioned by region, earlier ones keep theirs
    with t.update_spec() as update:
        update.remove_field("id_bucket")
        update.add_field("region", IdentityTransform(), "region")
    assert ct.refresh().partitioning.default.spec_id == t.spec().spec_id
    t.append(rows(9, offset=200))
    ct.refresh()
    newest = [f for f in ct.manifest.data_files if f.added_version == ct.version]
    assert {f.spec_id for f in newest} == {t.spec().spec_id}
    assert ct.count(filter="region = 'ap'") == len([i for i in range(40)][2::3]) * 2 + 3
    t.refresh()
    for snapshot in t.snapshots():
        version = snapshot.snapshot_id
        assert ids(t.scan(snapshot_id=version).to_arrow()) == ids(ct.to_arrow(version=version))


def test_a_file_in_the_wrong_partition_is_refused(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = served.client()
    cat.create_namespace("db")
    t = cat.create_table(
        "db.events", schema=SCHEMA, partition_spec=PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day"))
    )
    import pyiceberg.io.pyarrow as writing

    real = writing._determine_partitions

    def shifted(*args: Any, **kwargs: Any) -> Any:  # each day's rows written as the next day's
        out = list(real(*args, **kwargs))
        for p in out:
            p.partition_key.__dict__["partition"] = Record(p.partition_key.partition[0] + 1)
        return out

    ct = served.castable("db", "events")
    before = ct.version
    monkeypatch.setattr(writing, "_determine_partitions", shifted)
    with pytest.raises(BadRequestError, match="outside that partition"):
        t.append(rows(5))
    assert ct.refresh().version == before


def test_a_sort_order_a_client_declares_is_the_one_castable_writes_in(served: Served) -> None:
    """Spark's ``WRITE ORDERED BY``: a create with a write order, then a replaced order; castable's
    own writes and compactions follow the current one, and the metadata says so."""
    cat = served.client()
    cat.create_namespace("db")
    order = SortOrder(IcebergSortField(source_id=3, transform=IdentityTransform(), direction=SortDirection.DESC))
    t = cat.create_table("db.sorted", schema=SCHEMA, sort_order=order)
    ct = served.castable("db", "sorted")
    assert [(f.source_id, f.direction, f.null_order) for f in ct.sorting.default.fields] == [(3, "desc", "nulls-last")]
    ct.append(rows(30))
    assert ct.to_arrow().column("region").to_pylist() == sorted(rows(30).column("region").to_pylist(), reverse=True)
    t.refresh()
    assert t.sort_order().order_id == ct.sorting.default_order_id
    with t.update_sort_order() as replace:
        replace.asc("id", IdentityTransform(), NullOrder.NULLS_LAST)
    ct.refresh()
    assert [(f.source_id, f.direction, f.null_order) for f in ct.sorting.default.fields] == [(1, "asc", "nulls-last")]
    ct.append(rows(5, offset=100)[::-1])
    assert [f.sort_order_id for f in ct.manifest.data_files] == [1, ct.sorting.default_order_id]
    assert ct.to_arrow().column("id").to_pylist()[-5:] == list(range(100, 105))
