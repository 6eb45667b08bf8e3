"""What an Iceberg manifest says of castable's files (docs/iceberg.md): a data file's description
with its Iceberg statistics, read from its footer; a position delete file's, with the metrics Java
Iceberg writes for one; the manifest entry of either, by the version that added the file; the
writer of delete manifests pyiceberg lacks; and the descriptions a previous publication wrote,
found by location so that a file's footer is not read again. :mod:`castable.iceberg.publication`
writes the manifests of a version with these.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import (
    UnsupportedPyArrowTypeException,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
    pyarrow_to_schema,
)
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.manifest import (
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    ManifestWriterV2,
)
from pyiceberg.typedef import Record

from castable.format.evolution import FIELD_ID
from castable.format.stats import file_rows
from castable.iceberg.files import StoredFileIO
from castable.store import ObjectStore

POSITION_DELETES = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": "2147483546"}),
        pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "2147483545"}),
    ]
)


class Described:
    """The data files the manifests of the last publication describe that this version lists
    in other segments (segments merge as a table grows), by location: read on first use."""

    def __init__(self, store: ObjectStore, manifests: list[ManifestFile]) -> None:
        self.store = store
        self.manifests = manifests
        self._by_location: dict[str, IcebergDataFile] | None = None

    def get(self, location: str, size: int) -> IcebergDataFile | None:
        """The description of the file at ``location`` of ``size`` bytes, if one was published."""
        if self._by_location is None:
            io = StoredFileIO(self.store)
            self._by_location = {
                e.data_file.file_path: e.data_file for m in self.manifests for e in m.fetch_manifest_entry(io)
            }
        found = self._by_location.get(location)
        return found if found is not None and found.file_size_in_bytes == size else None


class DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files (pyiceberg writes manifests of data files only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def write_entries(writer: ManifestWriter, entries: list[ManifestEntry]) -> ManifestFile:
    """``entries`` in a manifest, all known before it is opened (pyiceberg's writer masks
    an error raised inside it with its own about an empty manifest)."""
    with writer:
        for entry in entries:
            writer.add_entry(entry)
    return writer.to_manifest_file()


def manifest_entry(added: int, parent: int, version: int, entry: IcebergDataFile) -> ManifestEntry:
    """The manifest entry, in a manifest the snapshot of ``version`` writes (its parent snapshot
    ``parent``, -1 if none), of a file castable added at version ``added``. It is ``ADDED`` there
    if no earlier snapshot holds it (versions between ``parent`` and ``version`` that could not
    be published add theirs here); a file a later manifest lists again (segments merge as a
    table grows) is ``EXISTING`` under the snapshot that added it, so incremental and changelog
    readers see each file added once. Its sequence number is ``added``, so a position delete
    applies to the files that were there when its tombstone was."""
    new = added > parent
    return ManifestEntry.from_args(
        status=ManifestEntryStatus.ADDED if new else ManifestEntryStatus.EXISTING,
        snapshot_id=version if new else added,
        sequence_number=added,
        file_sequence_number=added,
        data_file=entry,
    )


def data_file_entry(
    location: str,
    size: int,
    footer: pq.FileMetaData,
    spec_id: int = 0,
    partition: Record | None = None,
    sort_order_id: int = 0,
) -> IcebergDataFile:
    """The description of the data file at ``location``, of ``size`` bytes, with the statistics
    of its ``footer``, in partition ``partition`` of spec ``spec_id``, its rows in sort order
    ``sort_order_id`` (0: none)."""
    return IcebergDataFile.from_args(
        content=DataFileContent.DATA,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=Record() if partition is None else partition,
        file_size_in_bytes=size,
        sort_order_id=sort_order_id or None,
        spec_id=spec_id,
        equality_ids=None,
        key_metadata=None,
        **file_statistics(footer),
    )


def position_delete_entry(
    location: str, data: bytes, spec_id: int = 0, partition: Record | None = None
) -> IcebergDataFile:
    """The manifest entry of the position delete file ``data`` at ``location`` (deleting rows of
    files in partition ``partition`` of spec ``spec_id``), with the metrics Java Iceberg writes
    for one (sizes, counts, and the bounds of ``file_path`` and ``pos``)."""
    return IcebergDataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=Record() if partition is None else partition,
        file_size_in_bytes=len(data),
        **file_statistics(pq.read_metadata(pa.BufferReader(data))),
        sort_order_id=None,
        spec_id=spec_id,
        equality_ids=None,
        key_metadata=None,
    )


def file_statistics(footer: pq.FileMetaData) -> dict[str, Any]:
    """A data file's Iceberg statistics (counts, sizes, bounds by field id), from its footer and
    under its own schema: a file keeps the names and types it was written with, so its columns
    are found by the ids it carries, dropped ones too. A file with a column that has no Iceberg
    type (a dropped 16-bit float, say) gets counts and sizes only, and one without ids
    (registered from another engine) its row count only: readers then find its columns by the
    name mapping and prune it by nothing. The row count is the row groups'
    (:func:`castable.format.stats.file_rows`), where pyiceberg would take the file's own total."""
    rows = file_rows(footer)
    try:
        own = pyarrow_to_schema(footer.schema.to_arrow_schema(), format_version=2)
        plan = compute_statistics_plan(own, {})
        stats = data_file_statistics_from_parquet_metadata(footer, plan, parquet_path_to_id_mapping(own))
    except (ValueError, TypeError, UnsupportedPyArrowTypeException):
        return {**_counts(footer), "record_count": rows}
    return {**stats.to_serialized_dict(), "record_count": rows}


def _counts(footer: pq.FileMetaData) -> dict[str, dict[int, int]]:
    """Each top-level column's compressed size, values and nulls, by the field id it carries."""
    ids = {f.name: int(f.metadata[FIELD_ID]) for f in footer.schema.to_arrow_schema() if FIELD_ID in (f.metadata or {})}
    sizes: dict[int, int] = {}
    values: dict[int, int] = {}
    nulls: dict[int, int] = {}
    for rg in range(footer.num_row_groups):
        group = footer.row_group(rg)
        for c in range(group.num_columns):
            column = group.column(c)
            fid = ids.get(column.path_in_schema)
            if fid is None:
                continue
            sizes[fid] = sizes.get(fid, 0) + column.total_compressed_size
            values[fid] = values.get(fid, 0) + column.num_values
            if column.is_stats_set and column.statistics.has_null_count:
                nulls[fid] = nulls.get(fid, 0) + column.statistics.null_count
    return {"column_sizes": sizes, "value_counts": values, "null_value_counts": nulls}
