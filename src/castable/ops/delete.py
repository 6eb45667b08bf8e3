"""Soft deletes: plan the cheapest tombstone entries for a predicate, and rebase them (docs/format.md section 6).

- A range of the primary key needs no data at all: one key-range entry per file whose
  manifest statistics overlap it (a file entirely inside the range is dropped from the
  manifest instead).
- So does a list of primary-key values (``id IN (...)``, up to ``MAX_KEY_POINTS``): one
  single-key range entry per value, in the files whose key statistics hold it.
- Otherwise files and row groups are pruned by statistics; a row group whose statistics prove
  every row matches is deleted whole, unread; the rest are read for the predicate's columns
  only and their matching rows recorded by position in a roaring bitmap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap

from castable.commit.change import NextState
from castable.commit.conflicts import Footprint, PlannedChange
from castable.errors import InvalidInputError
from castable.format import tombstone
from castable.format.filelist import prune_tombstones
from castable.format.layout import new_tombstone_key
from castable.format.manifest import DataFile, Manifest, TombstoneFile
from castable.format.stats import encode_value, encode_values
from castable.read.predicate import Constant, Match, Predicate
from castable.read.scan import rows_mask
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore
from castable.store.cache import LruCache
from castable.store.readahead import read_ahead
from castable.store.uploads import Deferred, upload

_KEEP = "__castable_match"
_KEY = "__castable_key"
_READAHEAD = 4
MAX_KEY_POINTS = 10_000
"""Longer key lists are planned by reading the key column: scans would pay for every entry."""
KEY_READ_RATIO = 16
"""A file with at most this many rows per listed key inside its key bounds has its key column
read, so entries name only the keys it holds."""


@dataclass
class DeletePlan:
    """What one delete changes: tombstone entries, and files left with no live row."""

    entries: list[tombstone.Entry] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)
    rows: int | None = 0

    @property
    def files(self) -> set[str]:
        return {e.file for e in self.entries}

    @property
    def is_empty(self) -> bool:
        return not self.entries and not self.removed

    @classmethod
    def merged(cls, parts: Iterable[DeletePlan]) -> DeletePlan:
        """One plan of the plans of disjoint sets of files (each file planned once)."""
        plan = cls()
        for part in parts:
            plan.entries += part.entries
            plan.removed |= part.removed
            plan.rows = None if plan.rows is None or part.rows is None else plan.rows + part.rows
        return plan


FilePlanner = Callable[[Snapshot, list[DataFile], Predicate], DeletePlan]
"""Plans the files of a delete that must be read (the statistics and the primary key decided
the rest): :func:`plan_files`, here, or ``castable.spark``'s, one Spark task per few files."""


def plan_files(snapshot: Snapshot, files: list[DataFile], predicate: Predicate) -> DeletePlan:
    """The entries deleting the rows of ``files`` that match ``predicate``, each file read here
    for the predicate's columns in the row groups its statistics leave."""
    plan = DeletePlan()
    deletes = snapshot.deletes_for(files)
    for f in files:
        _plan_file(snapshot, f, predicate, deletes.get(f.path), plan)
    return plan


def plan_delete(snapshot: Snapshot, predicate: Predicate, read_files: FilePlanner = plan_files) -> DeletePlan:
    """The tombstone entries that delete every live row matching ``predicate`` in ``snapshot``;
    the files that must be read are planned by ``read_files``."""
    plan = DeletePlan()
    if predicate == Constant(True):  # every row (an overwrite of the whole table): drop every file unread
        plan.removed = {f.path for f in snapshot.manifest.data_files}
        plan.rows = None if plan.removed else 0
        return plan
    files = snapshot.prune_files(predicate)
    pk = snapshot.manifest.primary_key
    key_range = predicate.key_range(pk[0]) if pk else None
    if key_range is not None:
        lo, hi = (None if b is None else encode_value(b) for b in key_range)
        for f in files:
            if snapshot.file_match(f, predicate) is Match.ALL:
                plan.removed.add(f.path)
            else:
                plan.entries.append(tombstone.KeyRangeDelete(f.path, lo, hi))
        plan.rows = None if plan.entries or plan.removed else 0
        return plan
    points = predicate.key_points(pk[0]) if pk else None
    if points is not None and len(points) <= MAX_KEY_POINTS:
        _plan_key_points(snapshot, files, points, plan)
        return plan
    # Files every row of which matches (by statistics or partition values: a whole partition)
    # and that no tombstone names are dropped unread, their rows counted from the manifest.
    whole = [f for f in files if not snapshot.tombstoned(f) and snapshot.file_match(f, predicate) is Match.ALL]
    dropped = {f.path for f in whole}
    plan = read_files(snapshot, [f for f in files if f.path not in dropped], predicate)
    plan.removed |= dropped
    if plan.rows is not None:
        plan.rows += sum(f.rows for f in whole)
    return plan


def _plan_key_points(snapshot: Snapshot, files: list[DataFile], points: pa.Array, plan: DeletePlan) -> None:
    """A key-list entry per file whose key bounds hold any listed key, with the keys it may hold.

    A file with few rows for the keys its bounds hold (an upsert's output: small, and its keys
    spread over the whole key space) has its key column read instead, so only the keys it holds
    get entries: otherwise every upsert would list every key in every earlier upsert's file.
    """
    key = snapshot.manifest.primary_key[0]
    candidates: list[tuple[DataFile, pa.Array]] = []
    for f in files:
        stats = f.column_stats(key, snapshot.schema)
        inside = points
        if stats is not None and stats.has_bounds:
            inside = points.filter(pc.and_(pc.greater_equal(points, stats.min), pc.less_equal(points, stats.max)))
        if len(inside):
            candidates.append((f, inside))
    checked = [(f, inside) for f, inside in candidates if f.rows <= len(inside) * KEY_READ_RATIO]
    held = read_ahead((partial(_keys_held, snapshot, f, key, inside) for f, inside in checked), _READAHEAD)
    found = {f.path: keys for (f, _), keys in zip(checked, held, strict=True)}
    for f, inside in candidates:
        keys = [k for k in encode_values(found.get(f.path, inside)) if k is not None]
        if keys:
            plan.entries.append(tombstone.KeyPointsDelete(f.path, tuple(keys)))
    plan.rows = None if plan.entries else 0


def _keys_held(snapshot: Snapshot, f: DataFile, key: str, keys: pa.Array) -> pa.Array:
    """Which of ``keys`` the file holds (its key column read once per process: files are immutable)."""
    cache_key = (snapshot.store.uri, f.path, f.etag)
    held = _FILE_KEYS.get(cache_key)
    if held is None:
        footer = snapshot.footer(f)
        read = snapshot.read(f, footer, [key], range(footer.num_row_groups))
        held = pc.unique(read.column(key))
        _FILE_KEYS.put(cache_key, held)
    return keys.filter(pc.is_in(keys, value_set=held))


_FILE_KEYS: LruCache[tuple[str, str, str], pa.Array] = LruCache(256)
"""The distinct keys of the small files ``_plan_key_points`` reads, by (store URI, path, ETag)."""


def _plan_file(
    snapshot: Snapshot,
    f: DataFile,
    predicate: Predicate,
    deletes: tombstone.FileDeletes | None,
    plan: DeletePlan,
) -> None:
    """Entries for one file: row groups judged by statistics, the rest read (a few at a time)."""
    footer = snapshot.footer(f)
    expression = predicate.to_expression()
    candidates = set(snapshot.row_groups_matching(f, footer, predicate))
    pk = snapshot.manifest.primary_key
    dead_groups = 0
    reads: list[tuple[int, int, dict[str, pc.Expression]]] = []
    for rg in range(footer.num_row_groups):
        num_rows = footer.row_group(rg).num_rows
        if deletes is not None and rg in deletes.full_groups:
            dead_groups += 1
            continue
        if rg not in candidates:
            continue
        verdict = predicate.match(snapshot.row_group_stats(f, footer, rg).get, num_rows)
        if verdict is Match.NONE:
            continue
        projection: dict[str, pc.Expression] = {}
        if verdict is not Match.ALL:
            projection[_KEEP] = expression
        if deletes is not None and deletes.needs_keys(rg):
            projection[_KEY] = pc.field(pk[0])
        reads.append((rg, num_rows, projection))
    read = partial(_read_columns, snapshot, f, footer, snapshot.columns_for(predicate, pk[:1]))
    tables = read_ahead((partial(read, rg, p) for rg, _, p in reads), _READAHEAD)
    entries: list[tombstone.Entry] = []
    rows = 0
    for (rg, num_rows, projection), table in zip(reads, tables, strict=True):
        existing = np.zeros(num_rows, dtype=bool)
        if deletes is not None:
            keys = table.column(_KEY) if table is not None and _KEY in projection else None
            existing[deletes.deleted_rows(rg, num_rows, keys)] = True
        matched = (
            np.ones(num_rows, dtype=bool)
            if table is None or _KEEP not in projection
            else rows_mask(table.column(_KEEP))
        )
        new = matched & ~existing
        if not new.any():
            continue
        rows += int(new.sum())
        if (existing | new).all():
            dead_groups += 1
            entries.append(tombstone.RowGroupDelete(f.path, rg))
        else:
            entries.append(tombstone.RowGroupDelete(f.path, rg, BitMap(np.flatnonzero(new).tolist())))
    if dead_groups == footer.num_row_groups and entries:
        plan.removed.add(f.path)
    else:
        plan.entries.extend(entries)
    assert plan.rows is not None
    plan.rows += rows


def _read_columns(
    snapshot: Snapshot,
    f: DataFile,
    footer: pq.FileMetaData,
    needed: list[str],
    rg: int,
    projection: dict[str, pc.Expression],
) -> pa.Table | None:
    """The projected columns of one row group (reading ``needed``); ``None`` when nothing needs reading."""
    import pyarrow.dataset as ds  # imported where used: it imports pandas, when installed

    if not projection:
        return None
    return ds.dataset(snapshot.read(f, footer, needed, [rg])).to_table(columns=projection)


class DeleteChange(PlannedChange):
    """A planned delete being committed: rebuilt on each newer base, re-planned if needed.

    Its footprint is the files its entries target: if one was removed or replaced meanwhile
    (compaction, splice, another delete), the plan is redone against the new base, so no
    delete is ever dropped (see :mod:`castable.commit.conflicts`).
    """

    def __init__(
        self,
        store: ObjectStore,
        predicate: Predicate,
        base: Manifest,
        read_files: FilePlanner = plan_files,
        uploads: Deferred | None = None,
    ) -> None:
        self.store = store
        self.predicate = predicate
        self.read_files = read_files
        self.uploads = uploads
        """Where its tombstones upload (each plan's, while the commit goes on), if not at once."""
        self._plan(base)

    def _plan(self, base: Manifest) -> None:
        self.planned_on = base
        self.plan = plan_delete(Snapshot(self.store, base), self.predicate, self.read_files)
        self.tombstone = self._write_tombstone()
        self.footprint = Footprint(targets=frozenset(self.plan.files | self.plan.removed))

    def _write_tombstone(self) -> TombstoneFile | None:
        if not self.plan.entries:
            return None
        data = tombstone.encode(self.plan.entries)
        key = new_tombstone_key()
        info = upload(self.store, key, data, self.uploads)
        return TombstoneFile(key, info.size, info.etag, tuple(sorted(self.plan.files)), self.plan.rows)

    def build(self, base: Manifest) -> NextState:
        self.rebase(base, "delete")
        return self.apply(base)

    def apply(self, base: Manifest) -> NextState:
        """The next version's file lists with the current plan applied to ``base`` (rebased on it)."""
        remaining = base.data_files.without(self.plan.removed)
        tombstones = prune_tombstones(base.tombstones, remaining, self.plan.removed)
        if self.tombstone is not None:
            tombstones += (replace(self.tombstone, added_version=base.version + 1),)
        return NextState(
            data_files=remaining,
            tombstones=tombstones,
            summary={
                "rows_deleted": self.plan.rows,
                "files_removed": len(self.plan.removed),
                "files_with_tombstones": len(self.plan.files),
                "tombstone": self.tombstone.path if self.tombstone else None,
                "replans": self.replans,
            },
        )


def engine_tombstone(
    snapshot: Snapshot,
    positions: Mapping[str, Iterable[int]],
    keys: Predicate | None = None,
    uploads: Deferred | None = None,
) -> tuple[TombstoneFile | None, set[str]]:
    """One tombstone, written now, of the rows at 0-based ``positions`` of data files of
    ``snapshot`` (an Iceberg position delete) and of its live rows ``keys`` matches (an
    equality delete on the primary key, planned as :meth:`Table.delete` plans one); and the
    files the keys leave with no live row. ``InvalidInputError`` for a file the version does not
    hold or a position past its rows. Its row count is left unknown: some rows may have had a
    tombstone already. It uploads through a write's ``uploads``, if given."""
    planned = DeletePlan() if keys is None else plan_delete(snapshot, keys)
    entries = _position_entries(snapshot, positions) + planned.entries
    if not entries:
        return None, planned.removed
    key = new_tombstone_key()
    info = upload(snapshot.store, key, tombstone.encode(entries), uploads)
    targets = tuple(sorted({e.file for e in entries}))
    return TombstoneFile(key, info.size, info.etag, targets, None), planned.removed


def _position_entries(snapshot: Snapshot, positions: Mapping[str, Iterable[int]]) -> list[tombstone.Entry]:
    files = {f.path: f for f in snapshot.manifest.data_files.named(list(positions))}
    missing = sorted(set(positions) - set(files))
    if missing:
        raise InvalidInputError(f"version {snapshot.manifest.version} holds no data files {missing}")
    entries: list[tombstone.Entry] = []
    for path, wanted in sorted(positions.items()):
        f = files[path]
        sizes = [f.rows] if f.inline is not None else _row_group_rows(snapshot.footer(f))
        starts = np.cumsum([0, *sizes])
        rows = np.unique(np.fromiter(wanted, np.int64))
        if len(rows) and (rows[0] < 0 or rows[-1] >= starts[-1]):
            raise InvalidInputError(
                f"{path} has {starts[-1]} rows: positions {rows[0]}..{rows[-1]} do not all lie in it"
            )
        groups = np.searchsorted(starts, rows, side="right") - 1
        for rg in np.unique(groups):
            within = rows[groups == rg] - starts[rg]
            whole = len(within) == sizes[rg]
            entries.append(tombstone.RowGroupDelete(path, int(rg), None if whole else BitMap(within.tolist())))
    return entries


def _row_group_rows(footer: pq.FileMetaData) -> list[int]:
    return [footer.row_group(i).num_rows for i in range(footer.num_row_groups)]
