"""Iceberg commits that pyiceberg cannot make, written as an engine writes them: a snapshot
whose delete manifest lists a position delete file (what merge-on-read engines such as Spark
and DuckDB commit for DELETE and UPDATE), as the body of a REST commit request."""

from __future__ import annotations

import io
import random
import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.avro.codecs import AvroCompressionCodec
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest_list,
)
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from castable.iceberg.manifests import POSITION_DELETES, DeleteManifestWriter


def position_delete_commit(
    table: Table,
    deletes: dict[str, list[int]],
    *,
    record_count: int | None = None,
    hadoop: bool = False,
    equality: bool = False,
) -> Any:
    """The commit request body of a snapshot of ``table`` (a pyiceberg table, at the version it
    was loaded) that deletes rows by position: ``deletes`` maps a data file's location to the
    0-based positions of its deleted rows. ``record_count`` makes the manifest lie about the
    number of deletes; ``hadoop`` spells local locations as Java's HadoopFileIO does (``file:/``);
    ``equality`` labels the file an equality delete file on field 1 (as Flink writes them)."""
    if hadoop:
        deletes = {_hadoop(p): ps for p, ps in deletes.items()}
    rows = pa.table(
        [
            pa.array([p for p, ps in deletes.items() for _ in ps], pa.string()),
            pa.array([x for ps in deletes.values() for x in ps], pa.int64()),
        ],
        schema=POSITION_DELETES,
    )
    content = DataFileContent.EQUALITY_DELETES if equality else DataFileContent.POSITION_DELETES
    return delete_commit(table, rows, content, [1] if equality else None, record_count=record_count, hadoop=hadoop)


def equality_delete_commit(table: Table, keys: list[Any], field_id: int = 1) -> Any:
    """The commit request body of a snapshot of ``table`` that deletes the rows whose field
    ``field_id`` is one of ``keys``, with an equality delete file (as Flink's upserts write)."""
    field = table.schema().find_field(field_id)
    arrow = table.schema().as_arrow().field(field.name).with_metadata({"PARQUET:field_id": str(field_id)})
    rows = pa.table([pa.array(keys, arrow.type)], schema=pa.schema([arrow]))
    return delete_commit(table, rows, DataFileContent.EQUALITY_DELETES, [field_id])


def delete_commit(
    table: Table,
    rows: pa.Table,
    content: DataFileContent,
    equality_ids: list[int] | None,
    *,
    record_count: int | None = None,
    hadoop: bool = False,
) -> Any:
    """The commit request body of a snapshot of ``table`` that adds the delete file of ``rows``."""
    sink = io.BytesIO()
    pq.write_table(rows, sink)
    data = sink.getvalue()
    location = _hadoop(table.location()) if hadoop else table.location()
    name = uuid.uuid4()
    delete_path = f"{location}/data/{name}-deletes.parquet"
    with table.io.new_output(delete_path).create() as out:
        out.write(data)
    snapshot_id = random.randrange(1 << 62)
    parent = table.metadata.current_snapshot_id
    sequence = table.metadata.last_sequence_number + 1
    delete_file = DataFile.from_args(
        content=content,
        equality_ids=equality_ids,
        file_path=delete_path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=rows.num_rows if record_count is None else record_count,
        file_size_in_bytes=len(data),
        spec_id=0,
    )
    manifest_path = f"{location}/metadata/{name}-m0.avro"
    codec: AvroCompressionCodec = "deflate"
    with DeleteManifestWriter(
        table.spec(), table.schema(), table.io.new_output(manifest_path), snapshot_id, codec
    ) as writer:
        writer.add_entry(
            ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=delete_file)
        )
    manifest = writer.to_manifest_file()
    list_path = f"{location}/metadata/snap-{snapshot_id}-0-{name}.avro"
    current = table.current_snapshot()
    carried = current.manifests(table.io) if current is not None else []
    with write_manifest_list(2, table.io.new_output(list_path), snapshot_id, parent, sequence, codec) as lister:
        lister.add_manifests([manifest, *carried])
    snapshot = {
        "snapshot-id": snapshot_id,
        "parent-snapshot-id": parent,
        "sequence-number": sequence,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": list_path,
        "summary": {"operation": "delete", "added-delete-files": "1"},
        "schema-id": table.schema().schema_id,
    }
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
        ],
    }


def _hadoop(location: str) -> str:
    return location.replace("file:///", "file:/", 1)
