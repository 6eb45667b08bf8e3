"""A snapshot: one version's files and deletes, and the pruning every read and delete shares."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property

import pyarrow as pa
import pyarrow.dataset as ds

from castable import tombstone
from castable.errors import CorruptObjectError
from castable.manifest import DataFile, Manifest, TombstoneFile
from castable.predicate import Match, Predicate
from castable.stats import ColumnStats, row_group_stats
from castable.store import ObjectNotFoundError, ObjectStore, PreconditionFailedError


class _TombstoneCache:
    """Decoded tombstones by (store URI, path, ETag), least recently used evicted. Tombstones are
    immutable and read with ``If-Match``, so a later scan neither reads nor decodes them again."""

    def __init__(self, size: int) -> None:
        self._items: OrderedDict[tuple[str, str, str], tuple[tombstone.Entry, ...]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[tombstone.Entry, ...] | None:
        with self._lock:
            entries = self._items.get(key)
            if entries is not None:
                self._items.move_to_end(key)
            return entries

    def put(self, key: tuple[str, str, str], entries: tuple[tombstone.Entry, ...]) -> None:
        with self._lock:
            self._items[key] = entries
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_TOMBSTONES = _TombstoneCache(256)


_FORMAT = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True))
_IO_THREADS = 16


class Snapshot:
    """Read access to one table version."""

    def __init__(self, store: ObjectStore, manifest: Manifest) -> None:
        self.store = store
        self.manifest = manifest

    @property
    def schema(self) -> pa.Schema:
        return self.manifest.schema

    @property
    def key_type(self) -> pa.DataType | None:
        pk = self.manifest.primary_key
        return self.schema.field(pk[0]).type if pk else None

    def prune_files(self, predicate: Predicate | None) -> list[DataFile]:
        """Files whose manifest statistics do not rule the predicate out."""
        if predicate is None:
            return list(self.manifest.data_files)
        return [f for f in self.manifest.data_files if self.file_match(f, predicate) is not Match.NONE]

    def file_match(self, f: DataFile, predicate: Predicate) -> Match:
        return predicate.match(lambda c: f.column_stats(c, self.schema), f.rows)

    @cached_property
    def _tombstones_by_file(self) -> dict[str, list[TombstoneFile]]:
        index: dict[str, list[TombstoneFile]] = {}
        for t in self.manifest.tombstones:
            for f in t.files:
                index.setdefault(f, []).append(t)
        return index

    def deletes_for(self, files: Iterable[DataFile]) -> dict[str, tombstone.FileDeletes]:
        """Merged deletes of each given file that has any, reading only the tombstones needed."""
        wanted = {f.path for f in files}
        needed = {t.path: t for p in wanted for t in self._tombstones_by_file.get(p, [])}
        if not needed:
            return {}
        with ThreadPoolExecutor(min(_IO_THREADS, len(needed))) as pool:
            loaded = list(pool.map(self._read_tombstone, needed.values()))
        key_type = self.key_type
        result: dict[str, tombstone.FileDeletes] = {}
        for entries in loaded:
            for entry in entries:
                if entry.file in wanted:
                    result.setdefault(entry.file, tombstone.FileDeletes()).add(entry, key_type)
        return result

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

    def fragment(self, f: DataFile) -> ds.ParquetFileFragment:
        """The Parquet fragment of a data file, footer read and checked against the manifest."""
        try:
            source = self.store.open_input(f.path, size=f.size, etag=f.etag)
        except ObjectNotFoundError:
            raise CorruptObjectError(f"data file {f.path} of version {self.manifest.version} is missing") from None
        try:
            fragment = _FORMAT.make_fragment(source)
            fragment.ensure_complete_metadata()
        except (pa.ArrowInvalid, OSError) as e:
            raise CorruptObjectError(f"data file {f.path} is not valid Parquet: {e}") from None
        if fragment.metadata.num_rows != f.rows:
            raise CorruptObjectError(
                f"data file {f.path} has {fragment.metadata.num_rows} rows, manifest says {f.rows}"
            )
        return fragment

    def row_group_stats(self, fragment: ds.ParquetFileFragment, row_group: int) -> dict[str, ColumnStats]:
        return row_group_stats(fragment.metadata, row_group, self.schema)
