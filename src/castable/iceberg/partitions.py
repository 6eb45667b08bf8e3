"""castable's partition specs and values as Iceberg's (docs/iceberg.md): the specs of the table
metadata, and each file's partition tuple in its manifest entry, in the representation pyiceberg's
Avro writer takes (dates as days, timestamps as their unit since the epoch, decimals as
``Decimal``, binary as bytes); and back, for the files an engine commits through the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyiceberg.partitioning import PartitionSpec as IcebergSpec
from pyiceberg.typedef import Record

from castable.format.entries import DataFile
from castable.format.partitioning import Partitioning, PartitionSpec, source_field
from castable.format.stats import JsonValue


def iceberg_spec(partitioning: Partitioning, spec_id: int) -> IcebergSpec:
    """Spec ``spec_id`` as pyiceberg's writers take it (castable keeps Iceberg's JSON form of it,
    which the metadata lists as it is)."""
    return IcebergSpec.model_validate(partitioning.spec(spec_id).to_json())


def partition_record(f: DataFile, partitioning: Partitioning, schema: pa.Schema) -> Record:
    """The partition tuple of ``f``'s manifest entry (empty for an unpartitioned file)."""
    if not f.partition:
        return Record()
    spec = partitioning.spec(f.spec_id)
    return Record(*(_iceberg_value(v, i, spec, schema) for i, v in enumerate(f.partition)))


def _iceberg_value(value: JsonValue | None, index: int, spec: PartitionSpec, schema: pa.Schema) -> Any:
    if value is None:
        return None
    f = spec.fields[index]
    t = f.transform.result_type(source_field(schema, f.source_id).type)
    if pa.types.is_decimal(t):
        return Decimal(str(value))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return bytes.fromhex(str(value))
    return value


def castable_values(record: Record | None, spec: PartitionSpec, schema: pa.Schema) -> tuple[JsonValue | None, ...]:
    """An Iceberg partition tuple of ``spec`` as castable keeps a file's partition values."""
    if record is None or not spec.fields:
        return ()
    values: Sequence[Any] = [record[i] for i in range(len(record))]
    out: list[JsonValue | None] = []
    for f, v in zip(spec.fields, values, strict=True):
        t = f.transform.result_type(source_field(schema, f.source_id).type)
        if v is None:
            out.append(None)
        elif isinstance(v, bytes):
            out.append(v.hex())
        elif isinstance(v, Decimal):
            out.append(str(v))
        elif pa.types.is_date32(t) or pa.types.is_timestamp(t):
            out.append(_epoch_count(v, t))
        else:
            out.append(v)
    return tuple(out)


def _epoch_count(value: Any, t: pa.DataType) -> int:
    """A date or timestamp partition value as the integer castable keeps (days, or units)."""
    if isinstance(value, int):
        return value
    return int(pa.scalar(value, t).cast(pa.int32() if pa.types.is_date32(t) else pa.int64()).as_py())
