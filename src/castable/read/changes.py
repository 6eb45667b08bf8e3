"""The change feed: every row change committed in a range of versions (docs/format.md section 14).

A version lists the data files it added and the tombstones it wrote, and tombstones name rows of
files that still exist, so version v's changes come from comparing manifest v with manifest v-1:
only the segments that differ are read, and only the files whose rows changed, so the cost is
that of the change, whatever the table's size. Nothing is written at commit time.

How each version reads (see :func:`plan_version`): rows live in a file v-1 listed and v does not
are deleted; rows live in a file v added are inserted; in a file both list, rows v's tombstones
delete that v-1's did not are deleted (and, after a restore, the reverse are inserted). Then the
operation labels them: compaction moves rows without changing them and gives none; an erase
carries the rows it kept into new files, so only the rows it removed are deleted; update, upsert
and merge pair a key's deleted and inserted rows as ``update_preimage`` and ``update_postimage``
(a keyless table's update pairs them in the order it read and wrote them).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from castable.errors import InvalidInputError, columns_hint
from castable.format.evolution import bare_field
from castable.format.manifest import DataFile, Manifest
from castable.format.tombstone import FileDeletes
from castable.read.predicate import And, Compare, Constant, InList, Or, Predicate
from castable.read.results import ArrowResult
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore
from castable.store.readahead import read_ahead

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
METADATA = pa.schema(
    [
        pa.field(CHANGE_TYPE, pa.string(), nullable=False),
        pa.field(COMMIT_VERSION, pa.int64(), nullable=False),
        pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
"""The columns a change row has besides the table's (Delta Lake's names)."""
INSERT, DELETE, PREIMAGE, POSTIMAGE = "insert", "delete", "update_preimage", "update_postimage"
LOCAL_READAHEAD = 2
REMOTE_READAHEAD = 16
"""Change tasks read ahead of the consumer, from a local store and from an object store."""
_PLAN_THREADS = 16
"""Versions planned, and a version's files read, at once."""

PAIRING = frozenset({"update", "upsert", "merge"})
"""Operations whose deleted and inserted rows of one key are an update of that key."""
SILENT = frozenset({"compact"})
"""Operations that move rows between files without changing any (compaction, coalescing tombstones)."""
CARRYING = frozenset({"erase"})
"""Operations that carry the rows they keep into new files: only the rows they drop are changes."""
CARRIES = "carries_rows"
"""A commit summary's flag that its new files carry rows of the files it removed (an engine's
copy-on-write rewrite through the Iceberg catalog): its changes are labelled as ``CARRYING``'s."""


@dataclass(frozen=True)
class FileChange:
    """Rows of one data file that a version changed.

    ``before`` and ``after`` are the file's deletes in versions v-1 and v (``None``: no delete,
    or the version does not list the file). A file only v-1 lists loses its live rows; one only
    v lists gains its live rows; for one both list, ``touched`` (the deletes of the tombstones v
    added, and of those it dropped) says which row groups can differ.
    """

    file: DataFile
    listed_before: bool
    listed_after: bool
    before: FileDeletes | None
    after: FileDeletes | None
    touched: tuple[FileDeletes, ...] | None = None
    undeleted: bool = False
    """Whether v dropped a tombstone of this file v-1 had (a restore): rows can come back."""

    @property
    def deletes(self) -> bool:
        """Whether the version can have deleted rows of this file."""
        return self.listed_before

    @property
    def inserts(self) -> bool:
        """Whether the version can have inserted rows of this file."""
        return not self.listed_before or self.undeleted


@dataclass(frozen=True)
class ChangeTask:
    """An independently readable part of a change scan: files of one version, and how to label
    their rows. Tasks are picklable, so a planner can hand them to other processes (Spark
    executors) that read them with :meth:`ChangeScan.read_task` on an equal scan."""

    version: int
    commit_version: int
    timestamp: datetime
    files: tuple[FileChange, ...]
    label: str | None
    """``"pairs"`` (by key), ``"in-order"`` (a keyless update), ``"carried"`` (an erase) or ``None``."""
    only: str | None = None
    """``DELETE`` or ``INSERT``: the task returns only those rows (a version's deletes come first)."""


def operations(manifest: Manifest) -> frozenset[str]:
    """The operations a version's commit ran (a transaction's, each)."""
    commit = manifest.commit
    inner = commit.summary.get("operations") if commit.operation == "transaction" else None
    if isinstance(inner, list):
        return frozenset(str(o.get("operation")) for o in inner if isinstance(o, dict))
    return frozenset({commit.operation})


def plan_version(store: ObjectStore, before: Manifest | None, after: Manifest) -> list[FileChange]:
    """The files whose rows version ``after`` changed since ``before`` (``None``: an empty table),
    with their deletes in both, files v-1 lists first: reads only the segments that differ and
    the tombstones of the files found, no data file."""
    new = Snapshot(store, after)
    if before is None:
        added: list[DataFile] = list(after.data_files)
        changes: list[FileChange] = []
    else:
        added, removed = after.data_files.diff(before.data_files)
        changes = _deleted_from(Snapshot(store, before), new, added, removed)
    if added:
        deletes = new.deletes_for(added)
        changes += [
            FileChange(f, listed_before=False, listed_after=True, before=None, after=deletes.get(f.path))
            for f in _inline_first(added)
        ]
    return changes


def _deleted_from(old: Snapshot, new: Snapshot, added: list[DataFile], removed: set[str]) -> list[FileChange]:
    """The files of version v-1 (``old``) whose rows v (``new``) changed: those it removed, and
    those its new tombstones, or the tombstones of v-1 it dropped, name."""
    before, after = old.manifest, new.manifest
    new_tombstones, gone = after.tombstones.diff(before.tombstones)
    skip = {f.path for f in added} | removed
    touched: dict[str, list[FileDeletes]] = {}
    undeleted: set[str] = set()
    for snapshot, tombstones in ((new, new_tombstones), (old, before.tombstones.named(gone) if gone else [])):
        named = snapshot.deletes_of(t for t in tombstones if set(t.files) - skip)
        for path, deletes in named.items():
            touched.setdefault(path, []).append(deletes)
        if snapshot is old:
            undeleted |= set(named)
    kept = set(touched) - skip
    if not removed and not kept:
        return []
    look = key_predicate(before.primary_key, [d for p in kept for d in touched[p]])
    if look is None:  # a delete by position: the kept files may be in any segment
        listed = before.data_files.named(removed | kept)  # a path v-1 lists that v did not remove, v lists
    else:  # by key: only files whose statistics hold a deleted key, in segments whose summaries do
        found = [f for f in old.prune_files(look) if f.path in kept] if kept else []
        listed = before.data_files.dropped(removed, after.data_files) + found
    before_deletes = old.deletes_for(listed)
    after_deletes = new.deletes_for([f for f in listed if f.path in kept])
    return [
        FileChange(
            f,
            listed_before=True,
            listed_after=f.path in kept,
            before=before_deletes.get(f.path),
            after=after_deletes.get(f.path),
            touched=tuple(touched[f.path]) if f.path in kept else None,
            undeleted=f.path in undeleted and f.path in kept,
        )
        for f in _inline_first(listed)
    ]


def key_predicate(primary_key: Sequence[str], deletes: Sequence[FileDeletes]) -> Predicate | None:
    """A predicate that every row ``deletes`` delete matches, when they delete by key alone: a
    key delete names only files whose key statistics hold one of its keys, so the files it can
    name are found by statistics (segment summaries first). ``None``: some delete by position."""
    if not primary_key or any(d.full_groups or d.positions for d in deletes):
        return None
    key = primary_key[0]
    parts: list[Predicate] = []
    for d in deletes:
        if len(d.points):
            parts.append(InList(key, d.points))
        for lo, hi in d.ranges:
            bounds = ([Compare(key, ">=", lo)] if lo.is_valid else []) + (
                [Compare(key, "<=", hi)] if hi.is_valid else []
            )
            parts.append(And(tuple(bounds)) if bounds else Constant(True))
    return Or(tuple(parts)) if parts else Constant(False)


def _inline_first(files: Sequence[DataFile]) -> list[DataFile]:
    """``files`` in the order a scan reads them: inline entries first, each group in list order."""
    return [f for f in files if f.inline is not None] + [f for f in files if f.inline is None]


def label_for(before: Manifest | None, after: Manifest) -> str | bool | None:
    """How version ``after``'s rows are labelled (see :class:`ChangeTask`); ``False``: it
    changes no row, and nothing of it need be read."""
    ops = operations(after)
    if before is None:
        return None
    if ops <= SILENT:
        return False
    if ops & CARRYING or after.commit.summary.get(CARRIES):
        return "carried"
    if ops & PAIRING:
        return "pairs" if after.primary_key else "in-order" if ops == {"update"} else None
    return None


def changes_schema(schema: pa.Schema) -> pa.Schema:
    """A change row's schema for a table of ``schema``: its columns, then the change columns."""
    clash = [n for n in METADATA.names if n in schema.names]
    if clash:
        raise InvalidInputError(
            f"the table has columns named as the change feed's {clash}; rename them to read changes"
        )
    return pa.schema(list(schema) + list(METADATA))


class ChangeScan(ArrowResult):
    """A lazy read of the row changes committed in a range of versions, oldest version first.

    ``manifests`` are the version before the range (``None`` when the range starts at version
    0), then each version of it (none: an empty range). Rows are read under the schema of
    ``snapshot`` (the range's last version), so renamed columns read under their newest name and
    columns added since read as their default. Nothing is read until a ``to_*`` method or
    ``count`` runs.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        manifests: Sequence[Manifest | None],
        columns: list[str] | None = None,
        predicate: Predicate | None = None,
        *,
        commit_versions: Sequence[int] | None = None,
    ) -> None:
        """``commit_versions`` number each version of the range as ``_commit_version`` (a
        database's versions); by default a version's own number."""
        schema = changes_schema(snapshot.schema)
        if columns is not None:
            unknown = [c for c in columns if c not in snapshot.schema.names]
            if unknown:
                raise InvalidInputError(f"unknown columns {unknown} {columns_hint(unknown, snapshot.schema.names)}")
        if not manifests:
            raise InvalidInputError("a change range needs the version before it")
        self.snapshot = snapshot
        self.manifests = list(manifests)
        self.columns = [n for n in schema.names if n not in METADATA.names] if columns is None else list(columns)
        self.predicate = predicate
        versions = [m.version for m in self.manifests[1:] if m is not None]
        self.commit_versions = list(versions if commit_versions is None else commit_versions)
        if len(self.commit_versions) != len(self.manifests) - 1:
            raise InvalidInputError("give one commit version for each version of the range")

    @property
    def versions(self) -> range:
        """The versions of the range (empty when no version was committed in a time window)."""
        before = self.manifests[0]
        first = 0 if before is None else before.version + 1
        return range(first, first + len(self.manifests) - 1)

    @property
    def schema(self) -> pa.Schema:
        """The table columns asked for, then ``_change_type``, ``_commit_version`` and ``_commit_timestamp``."""
        table = self.snapshot.schema
        return pa.schema([bare_field(table.field(c)) for c in self.columns] + list(METADATA))

    def plan_tasks(self) -> list[ChangeTask]:
        """The range as tasks, version by version: one for each file's deletes, then one for each
        file's inserts, but one a version whose rows are labelled together (an update's, an
        upsert's, a merge's, an erase's). Planning reads the segments that differ between versions
        and the tombstones of the files found, no data file."""
        versions: list[tuple[Manifest | None, Manifest, int]] = []
        for (before, after), number in zip(itertools.pairwise(self.manifests), self.commit_versions, strict=True):
            assert after is not None
            versions.append((before, after, number))
        labels = [label_for(before, after) for before, after, _ in versions]

        def plan(at: int) -> list[FileChange]:
            before, after, _ = versions[at]
            return [] if labels[at] is False else plan_version(self.snapshot.store, before, after)

        with ThreadPoolExecutor(max(1, min(_PLAN_THREADS, len(versions)))) as pool:
            planned = list(pool.map(plan, range(len(versions))))
        tasks: list[ChangeTask] = []
        for (_, after, number), label, files in zip(versions, labels, planned, strict=True):
            if not files:
                continue
            at = (after.version, number, after.created_at)
            if isinstance(label, str):
                tasks.append(ChangeTask(*at, tuple(files), label))
                continue
            tasks += [ChangeTask(*at, (f,), None, DELETE) for f in files if f.deletes]
            tasks += [ChangeTask(*at, (f,), None, INSERT) for f in files if f.inserts]
        return tasks

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The change rows in order, tasks read a few ahead on the shared reader pool (from an
        object store many: each is a round trip or two)."""
        depth = LOCAL_READAHEAD if self.snapshot.store.native_input else REMOTE_READAHEAD
        tasks = (partial(lambda t: list(self.read_task(t)), task) for task in self.plan_tasks())
        for batches in read_ahead(tasks, depth):
            yield from batches

    def count(self) -> int:
        """Change rows the scan returns."""
        return sum(b.num_rows for b in self.to_batches())

    def read_task(self, task: ChangeTask) -> Iterator[pa.RecordBatch]:
        """The labelled change rows of one task, with the scan's filter applied."""
        key = self.snapshot.manifest.primary_key
        needed = self.snapshot.columns_for(self.predicate, [*self.columns, *key[:1]])
        if len(task.files) > 1:  # a version's files, read together
            with ThreadPoolExecutor(min(_PLAN_THREADS, len(task.files))) as pool:
                read = list(pool.map(lambda change: _changed_rows(self.snapshot, change, needed), task.files))
        else:
            read = [_changed_rows(self.snapshot, change, needed) for change in task.files]
        deleted = _concat([d for d, _ in read], needed, self.snapshot.schema)
        inserted = _concat([i for _, i in read], needed, self.snapshot.schema)
        if task.only == DELETE:
            inserted = inserted.slice(0, 0)
        elif task.only == INSERT:
            deleted = deleted.slice(0, 0)
        table = _labelled(deleted, inserted, task.label, key[0] if key else None)
        table = _with_commit(table, task)
        if self.predicate is not None:
            table = table.filter(self.predicate.to_expression())
        table = table.select(self.schema.names)
        if not table.schema.equals(self.schema):
            table = table.cast(self.schema)
        yield from (b for b in table.to_batches() if b.num_rows)


def _concat(tables: list[pa.Table], columns: list[str], schema: pa.Schema) -> pa.Table:
    expected = pa.schema([schema.field(c) for c in columns])
    return pa.concat_tables(
        [t.cast(expected) if not t.schema.equals(expected) else t for t in tables] or [expected.empty_table()]
    )


def _with_commit(table: pa.Table, task: ChangeTask) -> pa.Table:
    n = table.num_rows
    table = table.append_column(METADATA.field(COMMIT_VERSION), pa.array(np.full(n, task.commit_version, np.int64)))
    stamp = pa.scalar(task.timestamp, METADATA.field(COMMIT_TIMESTAMP).type)
    return table.append_column(METADATA.field(COMMIT_TIMESTAMP), pa.repeat(stamp, n))


def _changed_rows(snapshot: Snapshot, change: FileChange, columns: list[str]) -> tuple[pa.Table, pa.Table]:
    """(rows of ``change.file`` the version deleted, rows it inserted), ``columns`` of each,
    in file order; only the row groups that can hold one are read, and of rows found by key (an
    upsert's) only the pages whose bounds hold their keys, where the file has page indexes."""
    f = change.file
    footer = snapshot.footer(f)
    key = snapshot.manifest.primary_key
    groups: list[int] = []
    deleted_masks: list[np.ndarray] = []
    inserted_masks: list[np.ndarray] = []
    pages_deleted: list[pa.Table] = []
    pages_inserted: list[pa.Table] = []
    for rg in range(footer.num_row_groups):
        n = footer.row_group(rg).num_rows
        bounds = snapshot.key_bounds(f, footer, rg)
        if change.touched is not None and not any(d.touches(rg, bounds) for d in change.touched):
            continue
        keys: list[pa.ChunkedArray] = []

        def key_column(rg: int = rg, keys: list[pa.ChunkedArray] = keys) -> pa.ChunkedArray:
            if not keys:
                keys.append(snapshot.read(f, footer, [key[0]], [rg]).column(key[0]))
            return keys[0]

        gone_before = _deleted(change.before, rg, n, bounds, key_column)
        gone_after = _deleted(change.after, rg, n, bounds, key_column)
        if not change.listed_after:
            deleted, inserted = ~gone_before, np.zeros(n, dtype=bool)
        elif not change.listed_before:
            deleted, inserted = np.zeros(n, dtype=bool), ~gone_after
        else:
            deleted, inserted = gone_after & ~gone_before, gone_before & ~gone_after
        changed = deleted | inserted
        if keys and changed.any():  # rows found by key: where page indexes allow, only their pages are read
            wanted = InList(key[0], pc.unique(keys[0].filter(pa.array(changed)).combine_chunks()))
            found = snapshot.read_matching(f, footer, columns, rg, wanted)
            if found is not None:
                table, at = found
                pages_deleted.append(table.filter(pa.array(deleted[at])))
                pages_inserted.append(table.filter(pa.array(inserted[at])))
                continue
        if changed.any():
            groups.append(rg)
            deleted_masks.append(deleted)
            inserted_masks.append(inserted)
    empty = pa.schema([snapshot.schema.field(c) for c in columns]).empty_table()
    if groups:
        rows = snapshot.read(f, footer, columns, groups)
        pages_deleted.append(rows.filter(pa.array(np.concatenate(deleted_masks))))
        pages_inserted.append(rows.filter(pa.array(np.concatenate(inserted_masks))))
    return pa.concat_tables([empty, *pages_deleted]), pa.concat_tables([empty, *pages_inserted])


def _deleted(
    deletes: FileDeletes | None,
    rg: int,
    n: int,
    bounds: tuple[object, object] | None,
    keys: Callable[[], pa.ChunkedArray],
) -> np.ndarray:
    """Rows of a row group ``deletes`` removes; ``keys()`` reads its key column, when key deletes can hit it."""
    if deletes is None:
        return np.zeros(n, dtype=bool)
    if rg in deletes.full_groups:
        return np.ones(n, dtype=bool)
    mask = deletes.position_mask(rg, n)
    if deletes.has_key_deletes and deletes.touches(rg, bounds):
        mask |= deletes.key_mask(keys())
    return mask


def _labelled(deleted: pa.Table, inserted: pa.Table, label: str | None, key: str | None) -> pa.Table:
    """The version's deleted and inserted rows with their ``_change_type``: deletes, then
    update pairs (each pre-image before its post-image), then inserts."""
    if label == "carried":
        deleted, inserted = multiset_minus(deleted, inserted), inserted.slice(0, 0)
    pre = post = deleted.slice(0, 0)
    if label == "pairs" and key is not None and deleted.num_rows and inserted.num_rows:
        d_ids, i_ids = _occurrences(deleted.column(key), inserted.column(key))
        paired = np.intersect1d(d_ids, i_ids)
        d_pair, i_pair = np.isin(d_ids, paired), np.isin(i_ids, paired)
        pre = deleted.filter(pa.array(d_pair)).take(pa.array(np.argsort(d_ids[d_pair], kind="stable")))
        post = inserted.filter(pa.array(i_pair)).take(pa.array(np.argsort(i_ids[i_pair], kind="stable")))
        deleted, inserted = deleted.filter(pa.array(~d_pair)), inserted.filter(pa.array(~i_pair))
    elif label == "in-order" and deleted.num_rows == inserted.num_rows:
        pre, post = deleted, inserted
        deleted, inserted = deleted.slice(0, 0), inserted.slice(0, 0)
    pairs = _interleaved(pre, post)
    kinds = [DELETE] * deleted.num_rows + [PREIMAGE, POSTIMAGE] * pre.num_rows + [INSERT] * inserted.num_rows
    table = pa.concat_tables([deleted, pairs, inserted])
    return table.append_column(METADATA.field(CHANGE_TYPE), pa.array(kinds, pa.string()))


def _interleaved(pre: pa.Table, post: pa.Table) -> pa.Table:
    """Rows ``pre[0], post[0], pre[1], post[1], ...``."""
    n = pre.num_rows
    order = np.empty(2 * n, dtype=np.int64)
    order[0::2], order[1::2] = np.arange(n), np.arange(n) + n
    return pa.concat_tables([pre, post]).take(pa.array(order))


def _occurrences(a: pa.ChunkedArray, b: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """An id for each value of ``a`` and of ``b``: its value and which occurrence of it this is,
    so the n-th row of a key in ``a`` and the n-th in ``b`` get the same id."""
    codes = value_codes(pa.chunked_array(a.chunks + b.chunks, a.type))
    n = len(codes)
    ranks = _ranks(codes[: len(a)]), _ranks(codes[len(a) :])
    return codes[: len(a)] * (n + 1) + ranks[0], codes[len(a) :] * (n + 1) + ranks[1]


def _ranks(codes: np.ndarray) -> np.ndarray:
    """For each element, how many equal ones come before it."""
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ordered)) + 1] if len(codes) else np.zeros(0, dtype=np.int64)
    first = np.repeat(starts, np.diff(np.r_[starts, len(codes)]))
    ranks = np.empty(len(codes), dtype=np.int64)
    ranks[order] = np.arange(len(codes)) - first
    return ranks


def multiset_minus(rows: pa.Table, removed: pa.Table) -> pa.Table:
    """``rows`` without one equal row for each row of ``removed`` (which they must hold), the
    rest in order: what an erase dropped, given the rows of the files it replaced and those of
    their copies."""
    if not removed.num_rows:
        return rows
    codes = row_codes(pa.concat_tables([rows, removed.cast(rows.schema)]))
    mine, theirs = codes[: rows.num_rows], codes[rows.num_rows :]
    n = len(codes)
    ids = mine * (n + 1) + _ranks(mine)
    taken = theirs * (n + 1) + _ranks(theirs)
    return rows.filter(pa.array(~np.isin(ids, taken)))


def row_codes(table: pa.Table) -> np.ndarray:
    """An integer per row, equal exactly for equal rows (NULLs equal, NaNs equal)."""
    codes = np.zeros(table.num_rows, dtype=np.int64)
    for column in table.columns:
        values = value_codes(column)
        _, codes = np.unique(codes * (int(values.max(initial=0)) + 1) + values, return_inverse=True)
        codes = codes.astype(np.int64).reshape(-1)
    return codes


def value_codes(column: pa.ChunkedArray) -> np.ndarray:
    """An integer per value of a column, equal exactly for equal values (NULLs equal)."""
    t = column.type
    if pa.types.is_struct(t):  # a struct's fields, each NULL where the struct is
        array = column.combine_chunks()
        return row_codes(pa.table({str(i): f for i, f in enumerate(array.flatten())} | {"": array.is_valid()}))
    try:
        encoded = pc.dictionary_encode(column.combine_chunks(), null_encoding="encode")
        return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
        seen: dict[str, int] = {}
        return np.array([seen.setdefault(repr(v), len(seen)) for v in column.to_pylist()], dtype=np.int64)
