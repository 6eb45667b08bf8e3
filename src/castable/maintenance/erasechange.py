"""The erase itself, as a commit's change: the rows matching a predicate removed physically from
the data files holding them, each file spliced or rewritten, and the new files committed in their
place (docs/format.md section 11).

Planning reads each candidate file's footer and only the row groups its statistics cannot
rule out; a row group with a matching row is re-encoded without the matching rows and
without rows already tombstoned in it. On commit the change is rebuilt on the newest base:
deletes committed meanwhile on an erased file are translated onto the new file (folded in),
and a file replaced meanwhile (compaction, another erase) is re-planned, so nothing is lost
and no erased row comes back. What an erase reports, and the purge that completes it, are
:mod:`castable.maintenance.erase`'s.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import replace
from typing import Literal

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from castable.commit.change import NextState
from castable.commit.conflicts import Footprint, PlannedChange
from castable.errors import InvalidInputError
from castable.format import inline, tombstone
from castable.format.filelist import prune_tombstones
from castable.format.layout import new_tombstone_key
from castable.format.manifest import DataFile, Manifest, TombstoneFile
from castable.format.properties import TableProperties
from castable.format.stats import encode_value
from castable.maintenance.erase import EraseReport
from castable.maintenance.gc import retained_versions
from castable.maintenance.rowgroups import (
    Transfer,
    check_int96_file,
    doomed_rows,
    file_columns,
    matching_row_groups,
    matching_rows,
    read_footer,
)
from castable.maintenance.splice import FileErasure, RowMap, SpliceNotPossibleError, rewrite_file, splice_file
from castable.read.predicate import Predicate
from castable.read.snapshot import Snapshot
from castable.store import MIN_PART_SIZE, ObjectStore

log = logging.getLogger(__name__)

EraseMode = Literal["auto", "splice", "rewrite"]
MODES: tuple[EraseMode, ...] = ("auto", "splice", "rewrite")


def check_mode(mode: object) -> None:
    """Refuse (``InvalidInputError``) a ``mode`` that is not one of :data:`MODES`, before anything
    is read or written: the check of a table's erase and of a database's."""
    if mode not in MODES:
        raise InvalidInputError(f"mode must be one of {MODES}, not {mode!r}")


def erase_file(
    snapshot: Snapshot,
    f: DataFile,
    predicate: Predicate,
    deletes: tombstone.FileDeletes | None,
    mode: EraseMode,
    props: TableProperties,
) -> FileErasure | None:
    """Remove the rows of ``f`` matching ``predicate`` (and the tombstoned rows beside them)."""
    if f.inline is not None:
        return _erase_inline(snapshot, f, predicate, deletes)
    store, schema = snapshot.store, snapshot.schema
    transfer = Transfer()
    footer = read_footer(store, f, transfer)
    pk = snapshot.manifest.primary_key
    where = file_columns(footer, schema, f)
    key = where[pk[0]] if pk else None
    edits = {}
    removed = 0
    for rg, table, matched in matching_row_groups(store, f, footer, predicate, schema, where, transfer):
        doomed = doomed_rows(table, matched, rg, deletes, key)
        edits[rg] = (table.filter(~doomed), np.flatnonzero(~doomed))
        removed += int(matched.sum())
    if not edits:
        return None
    emptied = len(edits) == len(footer.row_groups) and all(t.num_rows == 0 for t, _ in edits.values())
    method = "rewrite" if mode == "rewrite" or emptied or (mode == "auto" and f.size < 2 * MIN_PART_SIZE) else "splice"
    if method == "splice":
        try:
            new, row_map = splice_file(store, f, footer, edits, schema, where, transfer)
        except SpliceNotPossibleError:
            if mode == "splice":
                raise
            log.info("cannot splice %s; rewriting it", f.path)
            method = "rewrite"
    if method == "rewrite":
        check_int96_file(store, f, footer, transfer)
        new, row_map = rewrite_file(store, f, footer, edits, schema, where, props, transfer)
    return FileErasure(f, new, method, removed, sorted(edits), transfer, row_map)


def _erase_inline(
    snapshot: Snapshot, f: DataFile, predicate: Predicate, deletes: tombstone.FileDeletes | None
) -> FileErasure | None:
    """Erase from an inline entry: its other live rows kept as a new inline entry (none if no
    row is left). The old rows stay only in the segments of older versions, which purge deletes."""
    assert f.inline is not None
    schema, pk = snapshot.schema, snapshot.manifest.primary_key
    rows = inline.conformed(f.inline, schema)
    matched = matching_rows(rows, predicate.to_expression())
    if not matched.any():
        return None
    doomed = doomed_rows(rows, matched, 0, deletes, pk[0] if pk else None)
    kept = rows.filter(pa.array(~doomed))
    new = [inline.entry(kept, schema)] if kept.num_rows else []
    row_map = RowMap(
        [rows.num_rows], {0: np.flatnonzero(~doomed)}, [(n.path, 0) for n in new], [kept.num_rows] * len(new)
    )
    return FileErasure(f, new, "rewrite", int(matched.sum()), [0], Transfer(), row_map)


class EraseChange(PlannedChange):
    """An erase being committed: rebuilt on every newer base, re-planned if its files were replaced
    (its footprint: the files it replaces; see :mod:`castable.commit.conflicts`)."""

    def __init__(
        self,
        store: ObjectStore,
        predicate: Predicate,
        base: Manifest,
        mode: EraseMode,
        props: TableProperties,
        only: frozenset[str] | None = None,
    ) -> None:
        self.store = store
        self.predicate = predicate
        self.mode = mode
        self.props = props
        self.only = only
        self._plan(base)

    def _plan(self, base: Manifest) -> None:
        self.planned_on = base
        snapshot = Snapshot(self.store, base)
        # A requested file replaced meanwhile (compaction, another erase) widens the erase to the
        # whole table: its rows now live in files the caller could not name.
        only = self.only if self.only is not None and set(base.data_files.holding(self.only)) == self.only else None
        files = [f for f in snapshot.prune_files(self.predicate) if only is None or f.path in only]
        deletes = snapshot.deletes_for(files)
        erasures = (erase_file(snapshot, f, self.predicate, deletes.get(f.path), self.mode, self.props) for f in files)
        self.files = [e for e in erasures if e is not None]
        # Deletes committed meanwhile on these files are carried onto the new files at build time.
        self.footprint = Footprint(targets=frozenset(e.old.path for e in self.files))

    @property
    def is_empty(self) -> bool:
        return not self.files

    def report(self, version: int) -> EraseReport:
        """What the erase did, committed as ``version`` (or nothing to do, at ``version``)."""
        if self.is_empty:
            return EraseReport(version, 0, [], self.predicate)
        rows = sum(e.rows_removed for e in self.files)
        return EraseReport(version, rows, self.files, self.predicate, still_referenced(self.store, self.files, version))

    def build(self, base: Manifest) -> NextState:
        self.rebase(base, "erase")
        replaced = {e.old.path: e for e in self.files}
        version = base.version + 1
        data_files = base.data_files.replacing(
            {path: [_as_old(n, e.old) for n in e.new] for path, e in replaced.items()}
        )
        tombstones = prune_tombstones(base.tombstones, data_files, replaced)
        carried = self._carry_deletes(Snapshot(self.store, base), replaced, version)
        if carried is not None:
            tombstones += (carried,)
        return NextState(
            data_files=data_files,
            tombstones=tombstones,
            summary={
                "rows_erased": sum(e.rows_removed for e in self.files),
                "files_replaced": len(self.files),
                "files_spliced": sum(e.method == "splice" for e in self.files),
                "carried_tombstone": carried.path if carried else None,
                "replans": self.replans,
                "replaced": {e.old.path: [n.path for n in e.new] for e in self.files},
            },
        )

    def _carry_deletes(
        self, snapshot: Snapshot, replaced: dict[str, FileErasure], version: int
    ) -> TombstoneFile | None:
        """Translate the base's deletes on replaced files onto their new files (one tombstone)."""
        old_deletes = snapshot.deletes_for(e.old for e in replaced.values())
        entries: list[tombstone.Entry] = []
        for path, deletes in old_deletes.items():
            erasure = replaced[path]
            moved: dict[tuple[str, int], BitMap] = defaultdict(BitMap)
            groups = set(deletes.full_groups) | set(deletes.positions)
            for rg in groups:
                positions = np.flatnonzero(deletes.position_mask(rg, erasure.row_map.old_rows[rg]))
                for location, new_positions in erasure.row_map.locate(rg, positions).items():
                    moved[location].update(new_positions.tolist())
            for (new_path, new_rg), bitmap in sorted(moved.items()):
                if len(bitmap):
                    entries.append(tombstone.RowGroupDelete(new_path, new_rg, bitmap))
            for lo, hi in deletes.key_ranges:
                bounds = tuple(encode_value(b) if b.is_valid else None for b in (lo, hi))
                entries += [tombstone.KeyRangeDelete(n.path, *bounds) for n in erasure.new]
        if not entries:
            return None
        key = new_tombstone_key()
        info = self.store.put(key, tombstone.encode(entries), if_none_match=True)
        rows = sum(len(e.positions) for e in entries if isinstance(e, tombstone.RowGroupDelete) and e.positions)
        return TombstoneFile(key, info.size, info.etag, tuple(sorted({e.file for e in entries})), rows, version)


def still_referenced(store: ObjectStore, erased: list[FileErasure], version: int) -> dict[str, list[int]]:
    """For each replaced file, the retained versions before ``version`` that still list it."""
    retained = retained_versions(store)
    return {e.old.path: [v for v in retained if e.old.added_version <= v < version] for e in erased}


def _as_old(new: DataFile, old: DataFile) -> DataFile:
    """A file written in place of ``old`` (some of its rows, in their order), as the version lists
    it: added when ``old`` was, in its partition and its sort order."""
    return replace(
        new,
        added_version=old.added_version,
        spec_id=old.spec_id,
        partition=old.partition,
        sort_order_id=old.sort_order_id,
    )
