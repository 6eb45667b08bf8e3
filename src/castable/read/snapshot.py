"""A snapshot: one version's files and deletes, and the pruning every read and delete shares."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property, partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from castable.errors import CorruptObjectError
from castable.format import inline, segment, tombstone
from castable.format.evolution import conform_read, resolve
from castable.format.filelist import DATA, read_all
from castable.format.manifest import DataFile, Manifest, TombstoneFile
from castable.format.segment import SegmentRef
from castable.format.stats import ColumnStats, compared_type, file_rows, row_group_stats, stat_fields, stats_from_json
from castable.parquet.footer import Footer
from castable.read import pages
from castable.read.bloom import HEADER_GUESS, BloomFilter
from castable.read.partitions import FilePartitions, judged
from castable.read.predicate import Match, Predicate, StatsColumns, StatsColumnsLookup, verdict_code
from castable.store import ObjectNotFoundError, ObjectStore, PreconditionFailedError
from castable.store.cache import LruCache

_TOMBSTONES: LruCache[tuple[str, str, str], tuple[tombstone.Entry, ...]] = LruCache(256)
"""Decoded tombstones by (store URI, path, ETag). Tombstones are immutable and read with
``If-Match``, so a later scan neither reads nor decodes them again."""
_MERGED: LruCache[tuple[str, ...], tombstone.FileDeletes] = LruCache(512)
"""Each data file's deletes merged over its tombstones, by (store URI, file, tombstones)."""


_FOOTERS: LruCache[tuple[str, str, str, int], pq.FileMetaData] = LruCache(64 << 20, weigh=lambda m: m.serialized_size)
"""Data files' footers by (store URI, path, ETag, size), at most 64 MiB of them."""
_EDITABLE: LruCache[tuple[str, str, str, int], Footer] = LruCache(256)
"""castable's editable footers of the last 256 files read page by page."""
_WHOLE: LruCache[tuple[str, str, str, int], bytes] = LruCache(64 << 20, weigh=len)
"""Small data files read whole from an object store, by the same key as their footers, at most
64 MiB of them: the footer and the rows of a small file come in one GET."""
WHOLE_FILE_BYTES = 1 << 20
"""A data file this small is read whole from an object store: a second round trip for its
rows costs S3 more time than the bytes a projection or a filter would have skipped."""
_BLOOM: LruCache[tuple[str, str, str, int, int], tuple[BloomFilter | None]] = LruCache(
    64 << 20, weigh=lambda b: 64 if b[0] is None else b[0].words.nbytes
)
"""Column chunks' bloom filters (or that a chunk has none) by (store URI, path, ETag, row group, leaf)."""
_IO_THREADS = 16
THREADED_READ_BYTES = 1 << 20
"""A native read of fewer bytes than this decodes on the calling thread: handing a small file's
columns to Arrow's threads costs more than decoding them (1 ms against 0.4 ms a file)."""


def remember_footer(store: ObjectStore, f: DataFile, metadata: pq.FileMetaData) -> None:
    """Keep the footer of data file ``f`` just read elsewhere (a file being registered is
    described from it), so that :meth:`Snapshot.footer` does not read it again."""
    _FOOTERS.put(_footer_key(store, f), metadata)


def _footer_key(store: ObjectStore, f: DataFile) -> tuple[str, str, str, int]:
    return (store.uri, f.path, f.etag or "", f.size)


def _chunk_ranges(metadata: pq.FileMetaData, rg: int, columns: list[str]) -> list[tuple[int, int]]:
    """The byte ranges of row group ``rg``'s column chunks for ``columns`` (nested leaves too)."""
    group = metadata.row_group(rg)
    ranges = []
    for i in range(group.num_columns):
        chunk = group.column(i)
        if any(chunk.path_in_schema == c or chunk.path_in_schema.startswith(f"{c}.") for c in columns):
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            ranges.append((start, start + chunk.total_compressed_size))
    return ranges


@dataclass(frozen=True)
class SegmentSlice:
    """Entries ``[start, stop)`` of one data segment: a unit of scan planning, done where it is read."""

    segment: str
    start: int
    stop: int


class Snapshot:
    """Read access to one table version."""

    def __init__(self, store: ObjectStore, manifest: Manifest) -> None:
        self.store = store
        self.manifest = manifest
        self._columns: dict[str, dict[str, str | None]] = {}
        self._group_stats: dict[tuple[str, int], dict[str, ColumnStats]] = {}

    @property
    def schema(self) -> pa.Schema:
        return self.manifest.schema

    @property
    def key_type(self) -> pa.DataType | None:
        pk = self.manifest.primary_key
        return self.schema.field(pk[0]).type if pk else None

    def prune_files(self, predicate: Predicate | None) -> list[DataFile]:
        """Files whose manifest statistics do not rule the predicate out. A segment whose
        summary rules it out is not read; a read one is pruned with vectorised comparisons,
        and only the files that remain become objects."""
        if predicate is None:
            return list(self.manifest.data_files)
        files: list[DataFile] = []
        parts = [
            p
            for p in self.manifest.data_files.parts
            if p.ref is None or self._summary_match(p.ref, predicate) is not Match.NONE
        ]
        read_all(parts, self.schema)
        for part in parts:
            if part.columnar:
                files += self._pruned(part.table(self.schema), predicate)
            else:
                files += [f for f in part.entries(self.schema) if self.file_match(f, predicate) is not Match.NONE]
        return files

    def _pruned(self, table: pa.Table, predicate: Predicate | None) -> list[DataFile]:
        """The entries of (some rows of) a data segment that the predicate does not rule out."""
        if predicate is not None:
            verdicts = self._judged(table, predicate)
            table = table.filter(pc.not_equal(verdicts, verdict_code(Match.NONE)))
        return DATA.from_table(table, self.schema)

    def pruning(self, predicate: Predicate | None) -> Pruning:
        """How the version's files fare against ``predicate``: how many segments their summaries
        rule out, files partition values rule out, files statistics rule out (beside those), and
        the files and bytes left to read. Every segment is read (:meth:`prune_files` reads only
        those a summary leaves)."""
        parts = self.manifest.data_files.parts
        segments = sum(
            1
            for p in parts
            if predicate is not None and p.ref is not None and self._summary_match(p.ref, predicate) is Match.NONE
        )
        read_all(parts, self.schema)
        found = Pruning(segments_skipped=segments)
        for part in parts:
            table = part.table(self.schema)
            rows = table.column("rows").combine_chunks()
            none = verdict_code(Match.NONE)
            if predicate is None:
                kept = pa.repeat(pa.scalar(True), table.num_rows)
                by_partition = pa.repeat(pa.scalar(False), table.num_rows)
            else:
                partitions = self._partitions(table)
                kept = pc.not_equal(self._judged(table, predicate), none)
                by_partition = (
                    pa.repeat(pa.scalar(False), table.num_rows)
                    if partitions is None
                    else pc.equal(judged(predicate, lambda _: None, rows, partitions), none)
                )
            found.files += table.num_rows
            found.by_partition += int(pc.sum(by_partition).as_py() or 0)
            found.by_statistics += int(pc.sum(pc.and_(pc.invert(kept), pc.invert(by_partition))).as_py() or 0)
            found.kept += int(pc.sum(kept).as_py() or 0)
            found.bytes_kept += int(pc.sum(pc.if_else(kept, table.column("size"), 0)).as_py() or 0)
        return found

    def _partitions(self, table: pa.Table) -> FilePartitions | None:
        """The spec ids and partition values of (some rows of) a data segment, in a partitioned table."""
        partitioning = self.manifest.partitioning
        if not partitioning.partitioned or segment.PARTITION not in table.column_names:
            return None
        held = table.column(segment.PARTITION).to_pylist()
        return FilePartitions(
            partitioning,
            self.schema,
            [s or 0 for s in table.column(segment.SPEC_ID).to_pylist()],
            [() if v is None else tuple(json.loads(v)) for v in held],
        )

    def _judged(self, table: pa.Table, predicate: Predicate) -> pa.Array:
        """The verdict of ``predicate`` on each file of (some rows of) a data segment, by the files'
        statistics and, in a partitioned table, their partition values."""
        stats, rows = segment_stats(table, self.schema), table.column("rows").combine_chunks()
        partitions = self._partitions(table)
        if partitions is None:
            return predicate.match_many(stats, rows)
        return judged(predicate, stats, rows, partitions)

    def segment_slices(
        self, predicate: Predicate | None, target_bytes: int, *, max_entries: int | None = None
    ) -> list[SegmentSlice] | None:
        """The version's data files as slices of its segments of about ``target_bytes`` of data
        each (0: any) and at most ``max_entries`` entries, by the segments' summaries, pruned
        by summary only: planning that reads no segment, so the reader of each slice can plan
        it (``None`` for format version 1)."""
        slices = []
        for part in self.manifest.data_files.parts:
            ref = part.ref
            if ref is None:
                return None
            if predicate is not None and self._summary_match(ref, predicate) is Match.NONE:
                continue
            by_bytes = -(-ref.bytes // target_bytes) if target_bytes > 0 else 1
            by_entries = -(-ref.entries // max_entries) if max_entries else 1
            pieces = max(1, min(ref.entries, max(by_bytes, by_entries)))
            bounds = [round(i * ref.entries / pieces) for i in range(pieces + 1)]
            slices += [SegmentSlice(ref.path, lo, hi) for lo, hi in itertools.pairwise(bounds)]
        return slices

    def slice_files(self, piece: SegmentSlice, predicate: Predicate | None) -> list[DataFile]:
        """The files of one slice (see :meth:`segment_slices`) that the predicate does not rule out."""
        for part in self.manifest.data_files.parts:
            if part.ref is not None and part.ref.path == piece.segment:
                table = part.table(self.schema).slice(piece.start, piece.stop - piece.start)
                return self._pruned(table, predicate)
        raise CorruptObjectError(f"version {self.manifest.version} lists no segment {piece.segment}")

    def _summary_match(self, ref: SegmentRef, predicate: Predicate) -> Match:
        stats = stats_from_json(ref.stats, self.schema)
        return predicate.match(stats.get, ref.rows or 0)

    def file_match(self, f: DataFile, predicate: Predicate) -> Match:
        """The verdict of ``predicate`` on one file, by its statistics and its partition values."""
        if f.partition:
            verdict = self._judged(segment.data_table([f], self.schema), predicate)[0].as_py()
            return (Match.NONE, Match.SOME, Match.ALL)[verdict]
        return predicate.match(lambda c: f.column_stats(c, self.schema), f.rows)

    @cached_property
    def _tombstones_by_file(self) -> dict[str, list[TombstoneFile]]:
        index: dict[str, list[TombstoneFile]] = {}
        for t in self.manifest.tombstones:
            for f in t.files:
                index.setdefault(f, []).append(t)
        return index

    def index_tombstones(self) -> None:
        """Read the version's list of tombstones now (a scan from an object store does this
        while it prunes files, so the two segment reads take one round trip)."""
        self._tombstones_by_file  # noqa: B018 (a cached property, read for its effect)

    def tombstoned(self, f: DataFile) -> bool:
        """Whether any tombstone of this version names ``f`` (no tombstone is read)."""
        return bool(self._tombstones_by_file.get(f.path))

    def deletes_for(self, files: Iterable[DataFile]) -> dict[str, tombstone.FileDeletes]:
        """Merged deletes of each given file that has any, reading only the tombstones needed.

        A file's merged deletes are kept for as long as the same tombstones name it, so scans
        of a version after the first merge (and sort) nothing again."""
        result: dict[str, tombstone.FileDeletes] = {}
        wanted: dict[str, tuple[str, ...]] = {}
        for f in files:
            tombstones = self._tombstones_by_file.get(f.path)
            if tombstones:
                key = (self.store.uri, f.path, *sorted(f"{t.path}@{t.etag}" for t in tombstones))
                cached = _MERGED.get(key)
                if cached is None:
                    wanted[f.path] = key
                else:
                    result[f.path] = cached
        if not wanted:
            return result
        needed = {t.path: t for p in wanted for t in self._tombstones_by_file[p]}
        with ThreadPoolExecutor(min(_IO_THREADS, len(needed))) as pool:
            loaded = list(pool.map(self._read_tombstone, needed.values()))
        key_type = self.key_type
        merged: dict[str, tombstone.FileDeletes] = {}
        for entries in loaded:
            for entry in entries:
                if entry.file in wanted:
                    merged.setdefault(entry.file, tombstone.FileDeletes()).add(entry, key_type)
        for path, deletes in merged.items():
            _MERGED.put(wanted[path], deletes)
        return result | merged

    def tombstone_deletes(self, t: TombstoneFile) -> dict[str, tombstone.FileDeletes]:
        """The deletes of one tombstone, by the file they name (not merged with the others'):
        for writers of per-tombstone delete files, such as Iceberg's position deletes."""
        return self.deletes_of([t])

    def deletes_of(self, tombstones: Iterable[TombstoneFile]) -> dict[str, tombstone.FileDeletes]:
        """The deletes of some of the version's tombstones, merged by the file they name: what
        those tombstones alone remove (a change feed's tombstones of one commit)."""
        out: dict[str, tombstone.FileDeletes] = {}
        for t in tombstones:
            for entry in self._read_tombstone(t):
                out.setdefault(entry.file, tombstone.FileDeletes()).add(entry, self.key_type)
        return out

    def _read_tombstone(self, t: TombstoneFile) -> tuple[tombstone.Entry, ...]:
        key = (self.store.uri, t.path, t.etag)
        entries = _TOMBSTONES.get(key)
        if entries is None:
            try:
                blob = self.store.get(t.path, if_match=t.etag)
            except (ObjectNotFoundError, PreconditionFailedError) as e:
                raise CorruptObjectError(f"tombstone {t.path} is missing or changed: {e}") from None
            entries = tuple(tombstone.decode(blob.data, key=t.path))
            _TOMBSTONES.put(key, entries)
        return entries

    def _key(self, f: DataFile) -> tuple[str, str, str, int]:
        return _footer_key(self.store, f)

    def _whole(self, f: DataFile) -> bytes | None:
        """The bytes of ``f`` if it is small and on an object store (read now, or earlier), or
        inline (its rows as a Parquet file)."""
        key = self._key(f)
        if f.inline is not None:
            data = _WHOLE.get(key)
            if data is None:
                data = inline.parquet_bytes(f.inline)
                _WHOLE.put(key, data)
            return data
        if self.store.native_input or f.size > WHOLE_FILE_BYTES:
            return None
        data = _WHOLE.get(key)
        if data is None:  # the store's input pins the ETag and checks every byte came
            with self.store.open_input(f.path, size=f.size, etag=f.etag) as source:
                data = source.read()
            _WHOLE.put(key, data)
        return data

    def footer(self, f: DataFile) -> pq.FileMetaData:
        """The Parquet footer of a data file, checked against the manifest. Data files are
        immutable, so a footer is read once per process (by store, path and ETag); a small one
        on an object store is read whole, its rows kept for :meth:`read`."""
        key = self._key(f)
        metadata = _FOOTERS.get(key)
        if metadata is not None:
            return metadata
        whole = self._whole(f)
        try:
            source = (
                pa.BufferReader(whole) if whole is not None else self.store.open_input(f.path, size=f.size, etag=f.etag)
            )
        except ObjectNotFoundError:
            raise CorruptObjectError(f"data file {f.path} of version {self.manifest.version} is missing") from None
        try:
            with source:
                metadata = pq.read_metadata(source)
        except (pa.ArrowInvalid, OSError) as e:
            raise CorruptObjectError(f"data file {f.path} is not valid Parquet: {e}") from None
        if file_rows(metadata) != f.rows:
            raise CorruptObjectError(f"data file {f.path} has {file_rows(metadata)} rows, manifest says {f.rows}")
        _FOOTERS.put(key, metadata)
        return metadata

    def columns_for(self, predicate: Predicate | None, columns: Iterable[str] = ()) -> list[str]:
        """``columns`` and those ``predicate`` reads (every column when that cannot be known),
        in schema order: what a read of rows to be filtered by ``predicate`` needs."""
        used = set() if predicate is None else predicate.columns()
        wanted = set(self.schema.names) if used is None else {*columns, *used}
        return [c for c in self.schema.names if c in wanted]

    def columns_of(self, f: DataFile, footer: pq.FileMetaData) -> dict[str, str | None]:
        """Which column of ``f`` holds each column of this version's schema (``None``: none does)."""
        found = self._columns.get(f.path)
        if found is None:
            found = resolve(footer.schema.to_arrow_schema(), self.schema, f.added_version)
            self._columns[f.path] = found
        return found

    def read(self, f: DataFile, footer: pq.FileMetaData, columns: list[str], row_groups: Sequence[int]) -> pa.Table:
        """``columns`` (of this version's schema) of some row groups of a data file whose
        footer is read, read now, renamed and widened as the schema evolved since ``f``.

        A native file of ``THREADED_READ_BYTES`` or more is decoded on Arrow's threads. Any other
        (S3's, over boto3) is read on this thread, its column chunks fetched up front in
        coalesced ranges: Arrow's threads keep a file and the bytes read from it until they wind
        down, after the read has returned, and one releasing them once the interpreter had
        begun to exit aborted the CLI (std::terminate)."""
        where = self.columns_of(f, footer)
        stored = self._stored(f, footer, columns)
        native = self.store.native_input
        whole = self._whole(f) if f.inline is not None else None if native else _WHOLE.get(self._key(f))
        if whole is not None:  # read whole with its footer: decoded on this thread too
            source: pa.NativeFile = pa.BufferReader(whole)
        else:
            ranges = () if native else [r for rg in row_groups for r in _chunk_ranges(footer, rg, stored)]
            source = self.store.open_input(f.path, size=f.size, etag=f.etag, ranges=ranges)
        threads = native and sum(footer.row_group(rg).total_byte_size for rg in row_groups) >= THREADED_READ_BYTES
        with source:
            file = pq.ParquetFile(source, metadata=footer, pre_buffer=False)
            table = file.read_row_groups(list(row_groups), columns=stored, use_threads=threads)
        return conform_read(table, where, pa.schema([self.schema.field(c) for c in columns]))

    def read_matching(
        self, f: DataFile, footer: pq.FileMetaData, columns: list[str], row_group: int, predicate: Predicate
    ) -> tuple[pa.Table, np.ndarray] | None:
        """The rows of a row group that ``predicate`` may match by the file's page indexes, and
        their positions in the row group, read page by page (:mod:`castable.read.pages`); ``None``
        where that cannot help: a row group of less than ``PAGE_READ_MIN_BYTES`` to read, and
        the cases of :func:`castable.read.pages.read_matching`."""
        used = predicate.columns()
        if used is None or self._whole(f) is not None:  # a small file's bytes are here already
            return None
        if self.chunk_bytes(f, footer, columns, row_group) < pages.PAGE_READ_MIN_BYTES:
            return None
        where = self.columns_of(f, footer)
        filtered = {c: (name, self.schema.field(c).type) for c in used if (name := where.get(c))}
        key = self._key(f)
        editable = _EDITABLE.get(key)
        if editable is None:
            editable = pages.file_footer(footer)
            _EDITABLE.put(key, editable)

        def fetch(ranges: list[tuple[int, int]]) -> pages.Fetched:
            native = self.store.native_input
            with self.store.open_input(f.path, size=f.size, etag=f.etag, ranges=() if native else ranges) as source:
                return {(a, b): bytes(source.read_at(b - a, a)) for a, b in ranges}

        try:
            found = pages.read_matching(
                editable, footer, row_group, self._stored(f, footer, columns), predicate, filtered, fetch
            )
        except pages.PageIndexError:  # an index this reader cannot use: the row group is read whole
            return None
        if found is None:
            return None
        table, positions = found
        return conform_read(table, where, pa.schema([self.schema.field(c) for c in columns])), positions

    def chunk_bytes(self, f: DataFile, footer: pq.FileMetaData, columns: list[str], row_group: int) -> int:
        """The stored size of the column chunks a :meth:`read` of ``columns`` fetches from a row group."""
        return sum(end - start for start, end in _chunk_ranges(footer, row_group, self._stored(f, footer, columns)))

    def _stored(self, f: DataFile, footer: pq.FileMetaData, columns: list[str]) -> list[str]:
        """The columns of ``f`` that hold ``columns`` (of this version's schema), those it has."""
        where = self.columns_of(f, footer)
        return [name for c in columns if (name := where[c]) is not None]

    def row_group_stats(self, f: DataFile, footer: pq.FileMetaData, row_group: int) -> dict[str, ColumnStats]:
        """A row group's footer statistics under this version's schema (worked out once)."""
        found = self._group_stats.get((f.path, row_group))
        if found is None:
            found = row_group_stats(footer, row_group, self.schema, self.columns_of(f, footer))
            self._group_stats[(f.path, row_group)] = found
        return found

    def key_bounds(self, f: DataFile, footer: pq.FileMetaData, row_group: int) -> tuple[object, object] | None:
        """A row group's primary-key (min, max) from its footer, when the table has a key and
        the footer bounds it: which key deletes can hit the row group."""
        pk = self.manifest.primary_key
        s = self.row_group_stats(f, footer, row_group).get(pk[0]) if pk else None
        if s is None or not s.has_bounds:
            return None
        return s.min.as_py(), s.max.as_py()  # type: ignore[union-attr]

    def deleted_positions(self, f: DataFile, footer: pq.FileMetaData, deletes: tombstone.FileDeletes) -> np.ndarray:
        """The rows of ``f`` its deletes remove, as sorted positions over the whole file (each
        row group's rows numbered on from the last's), for readers that number rows by file:
        Spark's ``_metadata.row_index``, Iceberg's position deletes. Key deletes are matched
        against the key column, read only from the row groups whose key bounds they touch."""
        sizes = [footer.row_group(rg).num_rows for rg in range(footer.num_row_groups)]
        keyed = [
            rg
            for rg in range(len(sizes))
            if rg not in deletes.full_groups
            and deletes.needs_keys(rg)
            and deletes.touches(rg, self.key_bounds(f, footer, rg))
        ]
        keys: dict[int, pa.ChunkedArray] = {}
        if keyed:
            key = self.manifest.primary_key[0]
            column = self.read(f, footer, [key], keyed).column(key)
            offsets = itertools.accumulate((sizes[rg] for rg in keyed), initial=0)
            keys = {rg: column.slice(at, sizes[rg]) for rg, at in zip(keyed, offsets, strict=False)}
        parts = []
        for rg, (start, n) in enumerate(zip(itertools.accumulate(sizes, initial=0), sizes, strict=False)):
            if rg in deletes.full_groups:
                rows = np.arange(n, dtype=np.int64)
            elif rg in keys or not deletes.needs_keys(rg):
                rows = deletes.deleted_rows(rg, n, keys.get(rg)).astype(np.int64)
            else:  # key deletes that cannot hit this row group: its positions alone
                rows = np.flatnonzero(deletes.position_mask(rg, n))
            parts.append(rows + start)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def row_groups_matching(self, f: DataFile, footer: pq.FileMetaData, predicate: Predicate | None) -> list[int]:
        """The row groups of ``f`` whose footer statistics, and bloom filters where the file
        has them for the points ``predicate`` asks for, leave room for a matching row."""
        groups = range(footer.num_row_groups)
        if predicate is None:
            return list(groups)
        return [
            rg
            for rg in groups
            if predicate.match(self.row_group_stats(f, footer, rg).get, footer.row_group(rg).num_rows) is not Match.NONE
            and not predicate.ruled_out(partial(self._lacks, f, footer, rg))
        ]

    def _lacks(self, f: DataFile, footer: pq.FileMetaData, row_group: int, column: str, values: pa.Array) -> bool:
        """Whether a row group's bloom filter of ``column`` (if it has one) holds none of ``values``.
        The filter hashes values as the file holds them: an int32 of a column widened to int64
        since, a timestamp in the unit the file stores it in."""
        bloom = self.bloom_filter(f, footer, row_group, column)
        if bloom is None:
            return False
        stored = footer.schema.to_arrow_schema().field(self.columns_of(f, footer)[column]).type
        try:
            typed = values.cast(self.schema.field(column).type).cast(stored)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # 1.5 for an integer column: no point to look up
            return False
        return bloom.lacks_all(typed)

    def bloom_filter(self, f: DataFile, footer: pq.FileMetaData, row_group: int, column: str) -> BloomFilter | None:
        """The bloom filter of ``column`` (of this version's schema) in a row group of ``f``, read
        once per process; ``None`` if the chunk has none (or one this reader cannot use)."""
        if f.inline is not None or column not in self.schema.names:  # inline rows are written without filters
            return None
        stored = self.columns_of(f, footer).get(column)
        group = footer.row_group(row_group)
        leaf = next((i for i in range(group.num_columns) if group.column(i).path_in_schema == stored), None)
        if leaf is None:
            return None
        key = (self.store.uri, f.path, f.etag or "", row_group, leaf)
        cached = _BLOOM.get(key)
        if cached is None:
            cached = (self._read_bloom(f, group.column(leaf)),)
            _BLOOM.put(key, cached)
        return cached[0]

    def _read_bloom(self, f: DataFile, chunk: pq.ColumnChunkMetaData) -> BloomFilter | None:
        start = chunk.bloom_filter_offset
        if not start or start <= 0:
            return None
        length = chunk.bloom_filter_length
        end = min(f.size, start + (length if length and length > 0 else HEADER_GUESS + (1 << 20)))
        whole = self._whole(f)
        if whole is not None:
            raw = whole[start:end]
        else:
            with self.store.open_input(f.path, size=f.size, etag=f.etag, ranges=[(start, end)]) as source:
                raw = bytes(source.read_at(end - start, start))
        try:
            return BloomFilter.decode(raw)
        except ValueError:  # another writer's filter this reader does not know: rule nothing out
            return None


@dataclass
class Pruning:
    """What :meth:`Snapshot.pruning` found: how many files each step rules out, and what is left."""

    segments_skipped: int = 0
    files: int = 0
    by_partition: int = 0
    by_statistics: int = 0
    kept: int = 0
    bytes_kept: int = 0

    def __str__(self) -> str:
        return (
            f"{self.files} files; ruled out by partition values: {self.by_partition}, by statistics: "
            f"{self.by_statistics} ({self.segments_skipped} segments skipped by their summaries); "
            f"to read: {self.kept} files, {self.bytes_kept:,} bytes"
        )


def segment_stats(table: pa.Table, schema: pa.Schema) -> StatsColumnsLookup:
    """Each column's statistics over a data segment's files, for :meth:`Predicate.match_many`."""
    stats = table.column("stats").combine_chunks()
    rows = table.num_rows
    fields = stat_fields(schema)

    def lookup(name: str) -> StatsColumns | None:
        index = stats.type.get_field_index(name)
        if index < 0 or name not in fields:
            return None
        column = stats.field(index)
        nulls = column.field("nulls")
        if column.type.get_field_index("min") < 0:
            unknown = pa.nulls(rows, compared_type(fields[name].type))
            return StatsColumns(unknown, unknown, nulls)
        return StatsColumns(column.field("min"), column.field("max"), nulls)

    return lookup
