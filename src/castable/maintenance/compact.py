"""Compaction: rewrite small or delete-heavy data files, and coalesce tombstone files (docs/format.md section 12).

A data file is rewritten when it is smaller than ``compaction.min-file-size-bytes`` or when
at least ``compaction.delete-ratio`` of its rows are deleted. Its live rows stream through a
scan into new files of the table's target sizes, so memory stays bounded by a few row groups
(with ``sort_by``, rows are sorted within each output file, which is held in memory). The
tombstones of files that are kept are merged into one file per compaction.

On commit the change is validated against the newest base: if a rewritten file was removed,
or got new tombstones, or a coalesced tombstone disappeared, the compaction is planned and
done again on that base, so a concurrent delete is never lost and a deleted row never returns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa
from pyroaring import BitMap

from castable.commit.change import NextState
from castable.commit.conflicts import Footprint, PlannedChange
from castable.format import tombstone
from castable.format.evolution import field_id, parquet_schema
from castable.format.filelist import prune_tombstones
from castable.format.layout import new_tombstone_key
from castable.format.manifest import DataFile, Manifest, TombstoneFile
from castable.format.properties import TableProperties
from castable.format.sorting import UNSORTED
from castable.format.stats import encode_value
from castable.parquet.writer import write_data_files
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore


@dataclass
class CompactReport:
    """What a compaction rewrote and merged."""

    version: int
    files_rewritten: list[str] = field(default_factory=list)
    files_written: list[str] = field(default_factory=list)
    rows_written: int = 0
    rows_dropped: int = 0
    tombstones_coalesced: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    replans: int = 0

    def summary(self) -> dict[str, object]:
        return {
            "version": self.version,
            "files_rewritten": len(self.files_rewritten),
            "files_written": len(self.files_written),
            "rows_written": self.rows_written,
            "deleted_rows_dropped": self.rows_dropped,
            "tombstones_coalesced": self.tombstones_coalesced,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "replans": self.replans,
        }


@dataclass(frozen=True)
class CompactOptions:
    min_file_size: int
    delete_ratio: float
    sort_by: str | None = None
    coalesce_tombstones: bool = True
    only: frozenset[str] | None = None  # restrict to these data files (one group of a plan)


def candidates(snapshot: Snapshot, deletes: Mapping[str, object], options: CompactOptions) -> list[DataFile]:
    """Data files worth rewriting: small ones, and those with enough of their rows deleted."""

    def worth(f: DataFile) -> bool:
        if options.only is not None and f.path not in options.only:
            return False
        if f.size < options.min_file_size:
            return True
        if f.path not in deletes:
            return False
        live = Scan(Snapshot(snapshot.store, snapshot.manifest.restricted([f])), []).count()
        return (f.rows - live) >= options.delete_ratio * f.rows

    return [f for f in snapshot.manifest.data_files if worth(f)]


def current_layout(snapshot: Snapshot, f: DataFile) -> bool:
    """Whether ``f`` holds the columns as castable writes them now: the schema's names, types as
    stored and field ids. A file that does not (registered without ids, written before a column
    was widened, renamed or dropped, or in another timestamp unit) gains by a rewrite even alone:
    Iceberg readers may be unable to read it until it is rewritten."""
    if f.inline is not None:
        return True
    held = snapshot.footer(f).schema.to_arrow_schema()
    want = parquet_schema(snapshot.schema)
    return [(c.name, c.type, field_id(c)) for c in held] == [(c.name, c.type, field_id(c)) for c in want]


def by_partition(files: list[DataFile]) -> list[list[DataFile]]:
    """``files`` grouped by partition (spec and values), in order of first appearance: compaction
    merges files of one partition only, as each file's rows must stay in one partition."""
    groups: dict[tuple[int, tuple[object, ...]], list[DataFile]] = {}
    for f in files:
        groups.setdefault((f.spec_id, f.partition), []).append(f)
    return list(groups.values())


def worth_rewriting(
    snapshot: Snapshot, files: list[DataFile], deletes: Mapping[str, object], sort_by: str | None
) -> bool:
    """Whether rewriting the candidate files of one partition gains anything: one clean small
    file alone, in the current spec, sort order and layout, would be written again as it is."""
    if len(files) > 1 or sort_by is not None:
        return True
    f = files[0]
    m = snapshot.manifest
    current = f.spec_id == m.partitioning.default_spec_id and f.sort_order_id == m.sorting.default_order_id
    return f.path in deletes or not current or not current_layout(snapshot, f)


def plan_groups(snapshot: Snapshot, options: CompactOptions, target_size: int) -> list[list[str]]:
    """Candidate files in groups of about ``target_size`` bytes, each of one partition:
    independent units of work (each can be compacted, and committed, separately and in parallel)."""
    deletes = snapshot.deletes_for(snapshot.manifest.data_files)
    groups: list[list[DataFile]] = []
    for partition in by_partition(candidates(snapshot, deletes, options)):
        if not worth_rewriting(snapshot, partition, deletes, None):
            continue
        packed: list[list[DataFile]] = []
        for f in partition:
            if packed and sum(g.size for g in packed[-1]) + f.size <= target_size:
                packed[-1].append(f)
            else:
                packed.append([f])
        groups += [g for g in packed if worth_rewriting(snapshot, g, deletes, None)]
    return [[f.path for f in g] for g in groups]


class CompactChange(PlannedChange):
    """A compaction being committed: done on a base, redone on a newer one if that conflicts."""

    def __init__(self, store: ObjectStore, base: Manifest, props: TableProperties, options: CompactOptions) -> None:
        self.store = store
        self.props = props
        self.options = options
        self._plan(base)

    @property
    def is_empty(self) -> bool:
        return not self.rewritten and self.coalesced is None

    def _plan(self, base: Manifest) -> None:
        self.planned_on = base
        snapshot = Snapshot(self.store, base)
        deletes = snapshot.deletes_for(base.data_files)
        self.rewritten = [
            f
            for partition in by_partition(candidates(snapshot, deletes, self.options))
            if worth_rewriting(snapshot, partition, deletes, self.options.sort_by)
            for f in partition
        ]
        self.written: list[DataFile] = []
        self.rows_written = 0
        self.rows_dropped = 0
        if self.rewritten:
            sub = Snapshot(self.store, base.restricted(self.rewritten))
            self.written = self._write(sub, base)
            self.rows_written = sum(f.rows for f in self.written)
            self.rows_dropped = sum(f.rows for f in self.rewritten) - self.rows_written
        self.coalesced, self.merged = self._coalesce(snapshot, {f.path for f in self.rewritten})
        self.footprint = Footprint(reads=frozenset(f.path for f in self.rewritten), merges=frozenset(self.merged))

    def _write(self, sub: Snapshot, base: Manifest) -> list[DataFile]:
        """The rewritten files' live rows as new files, partition by partition, in the current spec."""
        written: list[DataFile] = []
        spec = base.partitioning.default
        order = base.sorting.default if self.options.sort_by is None else UNSORTED  # sort_by sorts the rows itself
        for partition in by_partition(list(sub.manifest.data_files)):
            rows = self._rows(Snapshot(self.store, sub.manifest.restricted(partition)))
            written += write_data_files(self.store, rows, base.schema, self.props, spec=spec, order=order)
        return written

    def _rows(self, snapshot: Snapshot) -> Iterator[pa.RecordBatch]:
        scan = Scan(snapshot)
        if self.options.sort_by is None:
            yield from scan.to_batches()
            return
        pending: list[pa.RecordBatch] = []
        size = 0
        for batch in scan.to_batches():
            pending.append(batch)
            size += batch.nbytes
            if size >= self.props.target_file_size:
                yield from self._sorted(pending)
                pending, size = [], 0
        yield from self._sorted(pending)

    def _sorted(self, batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if batches:
            yield from pa.Table.from_batches(batches).sort_by(self.options.sort_by).to_batches()

    def _coalesce(self, snapshot: Snapshot, rewritten: set[str]) -> tuple[TombstoneFile | None, list[str]]:
        """Merge the tombstones of the files that stay into one file (if there are two or more)."""
        base = snapshot.manifest
        kept = [f for f in base.data_files if f.path not in rewritten]
        live = {f.path for f in kept}
        merged = [t for t in base.tombstones if live.intersection(t.files)]
        if not self.options.coalesce_tombstones or len(merged) < 2:
            return None, []
        entries: list[tombstone.Entry] = []
        for path, d in sorted(snapshot.deletes_for(kept).items()):
            entries += [tombstone.RowGroupDelete(path, rg) for rg in sorted(d.full_groups)]
            entries += [
                tombstone.RowGroupDelete(path, rg, BitMap(b))
                for rg, b in sorted(d.positions.items())
                if rg not in d.full_groups
            ]
            entries += [
                tombstone.KeyRangeDelete(path, *(encode_value(b) if b.is_valid else None for b in bounds))
                for bounds in d.key_ranges
            ]
        key = new_tombstone_key()
        info = self.store.put(key, tombstone.encode(entries), if_none_match=True)
        rows = sum(t.rows or 0 for t in merged)
        files = tuple(sorted({e.file for e in entries}))
        return TombstoneFile(key, info.size, info.etag, files, rows), [t.path for t in merged]

    def build(self, base: Manifest) -> NextState:
        self.rebase(base, "compact")
        version = base.version + 1
        gone = {f.path for f in self.rewritten}
        remaining = base.data_files.without(gone)
        tombstones = prune_tombstones(base.tombstones.without(self.merged), remaining, gone)
        if self.coalesced is not None:
            tombstones += (replace(self.coalesced, added_version=version),)
        data_files = remaining + (replace(f, added_version=version) for f in self.written)
        return NextState(
            data_files=data_files,
            tombstones=tombstones,
            summary={
                "files_rewritten": len(self.rewritten),
                "files_written": len(self.written),
                "rows_written": self.rows_written,
                "deleted_rows_dropped": self.rows_dropped,
                "tombstones_coalesced": len(self.merged),
                "replans": self.replans,
            },
        )

    def report(self, version: int) -> CompactReport:
        return CompactReport(
            version=version,
            files_rewritten=[f.path for f in self.rewritten],
            files_written=[f.path for f in self.written],
            rows_written=self.rows_written,
            rows_dropped=self.rows_dropped,
            tombstones_coalesced=len(self.merged),
            bytes_read=sum(f.size for f in self.rewritten),
            bytes_written=sum(f.size for f in self.written),
            replans=self.replans,
        )
