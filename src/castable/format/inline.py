"""Small writes that cost no file: rows kept inline in the version's data segment (docs/format.md section 3.2).

A write whose new rows are few (``write.inline.max-bytes`` of Arrow data) keeps them in its data
file entry instead of a Parquet file, so the commit writes no data object and a scan reads them
with the segment that lists them, every inline entry of a version at once. Everywhere else an
inline entry reads as the Parquet file of its rows in one row group (:func:`parquet_bytes`), so
positions, deletes, erase, compaction and every other reader of data files cover it unchanged.
Compaction flushes inline rows into Parquet; a version holds at most ``write.inline.max-total-bytes``.
"""

from __future__ import annotations

import hashlib
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from castable.format.entries import DataFile
from castable.format.evolution import conform_read, file_schema, has_ids, parquet_schema, resolve, to_stored
from castable.format.layout import DATA_PREFIX
from castable.format.stats import file_stats, stats_to_json

INLINE_PREFIX = f"{DATA_PREFIX}inline/"
"""Where an inline entry's path points: no object is ever written there."""


def new_inline_key() -> str:
    return f"{INLINE_PREFIX}{uuid.uuid4()}.parquet"


def supported(schema: pa.Schema, format_version: int) -> bool:
    """Whether a table can keep rows inline: format version 2 (segments) and field ids, by
    which inline rows kept under an older schema are read under a newer one."""
    return format_version >= 2 and has_ids(schema)


def conformed(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """Inline rows (kept under any earlier schema) as ``schema``'s file columns, field ids kept:
    renamed, widened, and missing columns filled as a read of an older file fills them."""
    if rows.schema.equals(target := file_schema(schema), check_metadata=True):
        return rows
    read = conform_read(rows, resolve(rows.schema, schema, 0), schema)
    return pa.Table.from_arrays(read.columns, schema=target)


def entry(rows: pa.Table, schema: pa.Schema) -> DataFile:
    """The inline entry of ``rows`` (a table of ``schema``): statistics, size and ETag are
    those of the Parquet file a reader sees (:func:`parquet_bytes`)."""
    kept = conformed(rows, schema)
    data = parquet_bytes(kept)
    metadata = pq.read_metadata(pa.BufferReader(data))
    return DataFile(
        path=new_inline_key(),
        size=len(data),
        etag=hashlib.md5(data, usedforsecurity=False).hexdigest(),
        rows=kept.num_rows,
        row_groups=metadata.num_row_groups,
        stats=stats_to_json(file_stats(metadata, schema)),
        inline=kept,
    )


def parquet_bytes(rows: pa.Table) -> bytes:
    """Inline rows as the Parquet file they read as: one row group, field ids in its schema,
    timestamps in the unit data files hold them in."""
    sink = pa.BufferOutputStream()
    pq.write_table(
        to_stored(rows, parquet_schema(rows.schema)), sink, row_group_size=max(rows.num_rows, 1), compression="none"
    )
    return bytes(sink.getvalue().to_pybytes())
