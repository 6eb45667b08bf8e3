"""The write operations of a table handle that change its rows, planned here and committed through
the handle: append, upsert, overwrite, update, delete, erase, add_files and replace_files
(docs/format.md sections 6 to 8). Each is a :func:`~castable.commit.handle.write_operation`,
called with the handle and the caller's ``commit_id``: it runs in a write session, which
answers a retried ``commit_id`` at once with the version it already committed as, and ends with
one :meth:`Handle.commit_change` of the session. The commits that write no data (restore, alter, set_properties,
upgrade) are :mod:`castable.ops.metadata`'s."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Literal, get_args

import pyarrow as pa
import pyarrow.compute as pc

from castable.commit.change import NextState
from castable.commit.conflicts import Access, Rows, check_sources
from castable.commit.handle import (
    Handle,
    SchemaMode,
    WriteSession,
    committed_result,
    unchanged,
    write_operation,
)
from castable.commit.written import WriteResult
from castable.errors import CommitConflictError, EmptyWriteError, InvalidInputError
from castable.format import inline
from castable.format.evolution import SchemaUpdate, columns_added, same_schema, translate_stats
from castable.format.filelist import prune_tombstones
from castable.format.manifest import DataFile, Manifest
from castable.inputs.batches import (
    DataLike,
    arrow_pieces,
    from_pandas,
    is_dataframe,
    last_of_each,
    split_column,
    unique_keys,
)
from castable.maintenance.erase import EraseReport, check_erasable
from castable.maintenance.erasechange import EraseChange, EraseMode, check_mode
from castable.ops.delete import DeleteChange, FilePlanner, engine_tombstone, plan_files
from castable.ops.register import Verify, check_files
from castable.ops.replacement import ReplaceChange, Rewrite, RewriteChange, Rewritten, check_new_files
from castable.ops.uniqueness import KeyCheck, collecting, enforced
from castable.parquet.writer import write_data_files
from castable.read.changes import CARRIES
from castable.read.expressions import Assignments
from castable.read.predicate import Constant, InList, Predicate
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.read.where import Where, parse_predicate

AddMode = Literal["append", "upsert", "overwrite"]
ADD_MODES: tuple[str, ...] = get_args(AddMode)
DELETE_OPS = ("d", "delete")
"""The operations that delete their key in a change feed (Debezium writes ``d``)."""


@write_operation(committed_result)
def append(
    t: Handle,
    w: WriteSession,
    data: DataLike,
    *,
    on_rows: Callable[[int], None] | None = None,
    source_ids: Sequence[str] = (),
    schema_mode: SchemaMode = "strict",
) -> WriteResult:
    """Append rows in one commit; what it committed (a :class:`~castable.commit.written.WriteResult`).

    ``data`` streams into Parquet files of the target size; a repeated ``commit_id``
    returns what the commit that already holds it committed, without writing anything. ``source_ids``
    name the inputs the rows come from (one per landed file, say): they are kept like commit
    ids, and an append naming a source a commit already consumed raises
    ``CommitConflictError`` and commits nothing, so two writers that picked up the same
    input never both append it.

    With ``schema_mode="merge"``, columns of ``data`` the table lacks are added to it (as
    nullable columns, in the same commit), as deltalake's ``schema_mode="merge"`` does;
    ``"strict"`` refuses them with ``SchemaMismatchError``.
    """
    sources = tuple(source_ids)
    check_sources(t.manifest, sources)
    if schema_mode not in ("strict", "merge"):
        raise InvalidInputError(f"schema_mode must be 'strict' or 'merge', not {schema_mode!r}")
    if schema_mode == "strict":
        schema, update, batches = t.schema, None, t.conforming_batches(data)
    else:
        schema, update, batches = _merging(t, data)
    first = next(batches, None)
    if first is None:
        raise EmptyWriteError("append was given no rows; nothing was committed")
    keys = _KeysSeen(t)
    files = write_files(t, w, keys.of(itertools.chain([first], batches)), on_rows, schema)
    build = partial(appended, files, sources=sources, written_with=schema)
    if update is not None:
        build = partial(_append_adding_columns, t.manifest, update, build)
    return t.commit_change("append", w, keys.check(files).guard(build), Access(), across_schema=True)


@write_operation(committed_result)
def upsert(
    t: Handle,
    w: WriteSession,
    data: DataLike,
    *,
    op_column: str | None = None,
    delete_ops: Collection[str] = DELETE_OPS,
    last_wins: bool = False,
    source_ids: Sequence[str] = (),
) -> WriteResult:
    """Insert ``data``'s rows, replacing every live row with one of their primary keys, in one
    commit; what it committed.

    The replaced rows get a key-list tombstone (no data read), so the cost is that of the new
    rows. A key may appear once in ``data``, unless ``last_wins``: then the last row of each
    key counts (a change feed lists a key's changes in order). If another writer commits rows
    with one of these keys first, the upsert replaces those too: each key keeps exactly one
    live row, the later commit's. ``data`` is held in memory to check its keys before anything
    is written. ``source_ids`` are kept as in :func:`append`.

    With ``op_column`` ``data`` is a change feed (Debezium style): that column, not part of the
    table, holds each row's operation; a row whose operation is one of ``delete_ops`` (case
    insensitive) deletes its key instead of inserting or replacing it.
    """
    key = key_for(t, "upsert")
    sources = tuple(source_ids)
    check_sources(t.manifest, sources)
    rest, ops = (data, None) if op_column is None else split_column(data, op_column)
    rows = materialize(t, rest, "upsert")
    if last_wins:
        latest = last_of_each(rows.column(key))
        rows, ops = rows.take(latest), None if ops is None else ops.take(latest)
    keys = unique_keys(rows.column(key))
    if ops is not None:
        rows = rows.filter(pc.invert(pc.fill_null(pc.is_in(ops, pa.array([o.lower() for o in delete_ops])), False)))
    files = write_files(t, w, rows.to_batches())
    replaced = InList(key, keys)
    change = ReplaceChange(
        t.store, t.manifest, replaced, files, operation="upsert", exclusive=False, sources=sources, uploads=w.uploads
    )
    access = Access(keys=(Rows(replaced, by="upsert"),))
    return t.commit_change("upsert", w, change.build, access)


@write_operation(committed_result)
def overwrite(t: Handle, w: WriteSession, data: DataLike, *, where: Where | None = None) -> WriteResult:
    """Replace every row of the table, or exactly the rows matching ``where``, with ``data`` in
    one commit; what it committed.

    With ``where`` (replace-where), every new row must match it, and a concurrent commit that
    adds rows matching it makes the overwrite fail with ``CommitConflictError`` rather than
    drop them. The replaced rows get tombstones (files entirely inside the range are dropped
    from the manifest); ``data`` may be empty, which deletes the range.
    """
    if where is None:
        replaced: Predicate = Constant(True)
        batches: Iterable[pa.RecordBatch] = t.conforming_batches(data)
    else:
        rows = materialize(t, data, "overwrite", allow_empty=True)
        replaced = parse_predicate(where, t.schema)
        check_inside(replaced, where, rows)
        batches = rows.to_batches()
    keys = _KeysSeen(t)
    files = write_files(t, w, keys.of(batches))
    change = ReplaceChange(
        t.store, t.manifest, replaced, files, operation="overwrite", exclusive=True, uploads=w.uploads
    )
    access = Access(keys=(Rows(replaced, by="overwrite"),))
    return t.commit_change("overwrite", w, keys.check(files).guard(change.build), access)


UpdateWriter = Callable[[Snapshot, Predicate, Assignments], tuple[list[DataFile], int]]
"""Reads the live rows of a version matching a predicate, sets their columns and writes them
as new data files (not committed): the files, and how many rows were updated. Here by
default; ``castable.spark`` passes one that runs as Spark tasks."""


@write_operation(committed_result)
def update(
    t: Handle,
    w: WriteSession,
    set: Mapping[str, object],
    where: Where | None = None,
    *,
    write_updated: UpdateWriter | None = None,
    read_files: FilePlanner = plan_files,
) -> WriteResult:
    """Set columns of the rows matching ``where`` (every row without it) in one commit; return
    the version.

    ``set`` maps column names to new values: SQL expressions of the row's old values
    (``"'closed'"``, ``"amount * 1.1"``, ``"CASE WHEN ... END"``, see
    :mod:`castable.read.expressions`), Arrow expressions or Python values. Only the matching rows
    are read; they get tombstones and their changed rows are appended. The primary key cannot
    be set. Nothing is committed (and the current version is returned) when no row matches.
    ``write_updated`` and ``read_files`` say where the rows are read and written.
    """
    assignments = Assignments.parse(set, t.schema, key=t.primary_key)
    selected: Predicate = Constant(True) if where is None else parse_predicate(where, t.schema)
    write = partial(_update_here, t, w) if write_updated is None else write_updated

    def produce(snapshot: Snapshot) -> Rewritten:
        files, rows = write(snapshot, selected, assignments)
        replaced = selected if rows else Constant(False)  # no live row: nothing to tombstone
        return Rewritten(replaced, files, summary={"rows_updated": rows})

    access = Access(rows=(Rows(selected, by="update"),), reads=(Rows(selected, by="update"),))
    return _commit_rewrite(t, w, "update", produce, access, read_files)


def _update_here(
    t: Handle, w: WriteSession, snapshot: Snapshot, selected: Predicate, assignments: Assignments
) -> tuple[list[DataFile], int]:
    rows = Scan(snapshot, None, selected).to_arrow()
    return _rows_as_files(t, w, assignments.apply(rows, rows)), rows.num_rows


def _rows_as_files(t: Handle, w: WriteSession, rows: pa.Table) -> list[DataFile]:
    """Rows of a rewrite as new data files, conformed to the table's schema (none for none)."""
    return write_files(t, w, t.conforming_batches(rows)) if rows.num_rows else []


@write_operation(committed_result)
def rewrite(
    t: Handle, w: WriteSession, operation: str, derive: Callable[[Snapshot], Rewrite], access: Access
) -> WriteResult:
    """See :meth:`castable.table.Table.rewrite`."""

    def produce(snapshot: Snapshot) -> Rewritten:
        made = derive(snapshot)
        return Rewritten(made.replaced, _rows_as_files(t, w, made.rows), made.supersedes, made.summary)

    return _commit_rewrite(t, w, operation, produce, access)


@write_operation(committed_result)
def rewrite_files(
    t: Handle,
    w: WriteSession,
    operation: str,
    produce: Callable[[Snapshot], Rewritten],
    access: Access,
    *,
    read_files: FilePlanner = plan_files,
) -> WriteResult:
    """Commit what ``produce`` writes of the latest version, its files written elsewhere (Spark
    tasks); what it committed (nothing, when it changes nothing)."""
    return _commit_rewrite(t, w, operation, produce, access, read_files)


def _commit_rewrite(
    t: Handle,
    w: WriteSession,
    operation: str,
    produce: Callable[[Snapshot], Rewritten],
    access: Access,
    read_files: FilePlanner = plan_files,
) -> WriteResult:
    """Commit what ``produce`` writes of the latest version (see :class:`RewriteChange`); what
    it committed (nothing, when it changes nothing)."""
    change = RewriteChange(t.store, t.manifest, produce, operation=operation, read_files=read_files, uploads=w.uploads)
    if change.is_empty:
        for rows in access.reads:  # that nothing matched was read
            t.observe(rows)
        return unchanged(t, w, operation)
    return t.commit_change(operation, w, change.build, access)


@write_operation(committed_result)
def delete(t: Handle, w: WriteSession, predicate: Where, *, read_files: FilePlanner = plan_files) -> WriteResult:
    """See :meth:`castable.table.Table.delete`; ``read_files`` plans the files that must be
    read (``castable.spark`` passes one that reads them on the cluster)."""
    parsed = parse_predicate(predicate, t.schema)
    change = DeleteChange(t.store, parsed, t.manifest, read_files, w.uploads)
    deleted = Rows(parsed, by="delete")
    if change.plan.is_empty:
        t.observe(deleted)  # that no row matched was read
        return unchanged(t, w, "delete")
    access = Access(rows=(deleted,), reads=(deleted,))
    return t.commit_change("delete", w, change.build, access)


def _erased_before(
    t: Handle, w: WriteSession, predicate: Where, *, mode: EraseMode = "auto", files: list[str] | None = None
) -> EraseReport:
    """A retried erase's report: nothing erased now, with the predicate a purge after it needs."""
    assert w.committed_as is not None
    return EraseReport(w.committed_as, 0, [], parse_predicate(predicate, t.schema))


@write_operation(_erased_before)
def erase(
    t: Handle,
    w: WriteSession,
    predicate: Where,
    *,
    mode: EraseMode = "auto",
    files: list[str] | None = None,
) -> EraseReport:
    """See :meth:`castable.table.Table.erase` (which purges, when asked, after this commits)."""
    check_mode(mode)
    parsed = parse_predicate(predicate, t.schema)
    check_erasable(t.store)
    only = None if files is None else frozenset(files)
    change = EraseChange(t.store, parsed, t.manifest, mode, t.settings, only)
    version = t.version if change.is_empty else t.commit_change("erase", w, change.build).version
    return change.report(version)


@write_operation(committed_result)
def add_files(
    t: Handle,
    w: WriteSession,
    files: Sequence[str | DataFile],
    *,
    mode: AddMode = "append",
    where: Where | None = None,
    verify: Verify = "decode",
) -> WriteResult:
    """Register Parquet files already written under the table's ``data/`` prefix; what it committed.

    For writers that produce files themselves (Spark on EMR, other engines): each path must
    exist, lie under ``data/``, be valid Parquet with exactly the table's columns and types,
    and not already belong to the table. Every page of each path is decoded first, a row group
    at a time, so a file that does not decode is refused and nothing is committed;
    ``verify="footer"`` reads footers only, for files a trusted writer has just written (and
    the INT96 timestamp columns, if any: outside what nanoseconds hold they are refused).
    ``DataFile`` entries made by castable's writer in another process (Spark executors) keep
    their statistics and are checked by a listing of their directory (or a HEAD each) and their
    footers, unless ``verify="checked"`` says other processes did that already (the commit
    function's invocations, a slice of a long file list each: ``castable.ops.register.check_file_list``).
    With a ``commit_id`` a retried registration commits nothing twice.

    ``mode`` says what the files' rows do, as the write methods of the same names: ``append``
    (the default), ``upsert`` (replace the live rows with their primary keys: the key column
    is read to check each key appears once) or ``overwrite`` (replace the whole table, or the
    rows matching ``where``: the predicate's columns are read to check every row matches).
    """
    predicate = check_add_mode(t, mode, where)
    if not files:
        raise EmptyWriteError("add_files was given no files; nothing was committed")
    checked = check_files(t.store, files, t.schema, t.primary_key, verify)
    check_new_files(t.manifest.data_files, checked)
    if mode == "upsert":
        key = key_for(t, "upsert")
        replaced: Predicate = InList(key, unique_keys(read_files(t, checked, [key]).column(key)))
    elif predicate is not None:
        columns = predicate.columns()
        check_inside(predicate, where, read_files(t, checked, None if columns is None else sorted(columns)))
        replaced = predicate
    elif mode == "overwrite":
        replaced = Constant(True)
    else:
        build = KeyCheck(t.store, t.manifest, checked).guard(partial(appended, checked, registered=True))
        return t.commit_change("append", w, build, Access(), across_schema=True)
    change = ReplaceChange(
        t.store, t.manifest, replaced, checked, operation=mode, exclusive=mode == "overwrite", registered=True
    )
    replace_build = change.build if mode == "upsert" else KeyCheck(t.store, t.manifest, checked).guard(change.build)
    return t.commit_change(mode, w, replace_build, Access(keys=(Rows(replaced, by=mode),)))


@write_operation(committed_result)
def replace_files(
    t: Handle,
    w: WriteSession,
    removed: Collection[str],
    added: Sequence[str | DataFile],
    *,
    operation: str,
    on_version: int,
    positions: Mapping[str, Iterable[int]] | None = None,
    keys: Predicate | None = None,
    verify: Verify = "footer",
) -> WriteResult:
    """Take whole data files out of the table, delete rows of others by position (a tombstone
    of the 0-based ``positions`` of each path) and register files written elsewhere, in one
    commit made on version ``on_version`` exactly: the change of an engine that planned it on
    that version (an Iceberg snapshot, which names the files it removed and added and its
    position deletes; ``keys``: a predicate on the primary key whose live rows are deleted too, an
    equality delete). A newer version is a ``CommitConflictError`` (the engine plans again); a
    path the version does not hold, or an added file ``add_files`` would refuse, an
    ``InvalidInputError``."""
    gone = set(removed)
    if len(gone) != len(removed):
        raise InvalidInputError("the same file is removed twice")
    if not gone and not added and not positions and keys is None:
        raise EmptyWriteError("replace_files was given no file to remove or add and no row; nothing was committed")
    _check_on(t.manifest, on_version)
    missing = gone - set(t.manifest.data_files.holding(gone))
    if missing:
        raise InvalidInputError(f"version {on_version} holds no data files {sorted(missing)}")
    files = check_files(t.store, added, t.schema, t.primary_key, verify)
    deletes, emptied = (
        engine_tombstone(t.snapshot(), positions or {}, keys, w.uploads) if positions or keys else (None, set())
    )
    gone |= emptied

    def build(base: Manifest) -> NextState:
        _check_on(base, on_version)
        check_new_files(base.data_files, files)
        remaining = base.data_files.without(gone)
        rows_removed = sum(f.rows for f in base.data_files.named(gone))
        summary: dict[str, Any] = {"files_removed": len(gone), "rows_removed": rows_removed, "files_added": len(files)}
        summary |= {"rows_added": sum(f.rows for f in files), "registered": True, CARRIES: bool(gone and files)}
        data_files = remaining + (replace(f, added_version=base.version + 1) for f in files)
        tombstones = prune_tombstones(base.tombstones, remaining, gone)
        if deletes is not None:
            tombstones += (replace(deletes, added_version=base.version + 1),)
            summary["tombstone"] = deletes.path
        return NextState(data_files, tombstones, summary)

    return t.commit_change(
        operation, w, KeyCheck(t.store, t.manifest, files).guard(build), Access()
    )  # build checks the version


def _check_on(base: Manifest, version: int) -> None:
    if base.version != version:
        raise CommitConflictError(f"the change was planned on version {version}, and the table is at {base.version}")


def check_add_mode(t: Handle, mode: str, where: Where | None = None) -> Predicate | None:
    """See :meth:`castable.table.Table.check_add_mode`."""
    if mode not in ADD_MODES:
        raise InvalidInputError(f"mode must be one of {', '.join(ADD_MODES)}, not {mode!r}")
    if where is not None and mode != "overwrite":
        raise InvalidInputError("where applies to mode='overwrite' only")
    if mode == "upsert":
        key_for(t, "upsert")
    return None if where is None else parse_predicate(where, t.schema)


def write_files(
    t: Handle,
    w: WriteSession,
    batches: Iterable[pa.RecordBatch],
    on_rows: Callable[[int], None] | None = None,
    schema: pa.Schema | None = None,
) -> list[DataFile]:
    """Rows of ``schema`` (default: the table's) as new data files of the target size (not yet
    committed); a few rows (``write.inline.max-bytes``) as one inline entry, no file written,
    while the version's inline entries stay under ``write.inline.max-total-bytes``. The last
    file uploads while the write ``w`` goes on to commit, where the store allows."""
    schema = t.schema if schema is None else schema
    rows = iter(batches)
    props = t.settings
    spec, order = t.manifest.partitioning.default, t.manifest.sorting.default
    if (
        props.inline_max_bytes
        and not spec.fields
        and inline.supported(schema, t.manifest.format_version)
        and t.manifest.data_files.inline_bytes() < props.inline_max_total_bytes
    ):
        held: list[pa.RecordBatch] = []
        size = 0
        for batch in rows:
            held.append(batch)
            size += batch.nbytes
            if size > props.inline_max_bytes:
                rows = itertools.chain(held, rows)
                break
        else:
            kept = pa.Table.from_batches(held, schema=held[0].schema) if held else None
            if kept is None or not kept.num_rows:
                return []
            if on_rows:
                on_rows(kept.num_rows)
            return [replace(inline.entry(order.sort(kept, schema), schema), sort_order_id=order.order_id)]
    return write_data_files(t.store, rows, schema, props, on_rows=on_rows, uploads=w.uploads, spec=spec, order=order)


class _KeysSeen:
    """The key column of a write's rows as they stream to files, kept where the table enforces
    its key when the write starts (else a version that enforces it reads them from the files)."""

    def __init__(self, t: Handle) -> None:
        self.key = t.primary_key if enforced(t.manifest) else None
        self.store = t.store
        self.planned = t.manifest
        self.arrays: list[pa.Array] = []

    def of(self, batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        return batches if self.key is None else collecting(batches, self.key, self.arrays)

    def check(self, files: Sequence[DataFile]) -> KeyCheck:
        keys = None if self.key is None or not self.arrays else pa.chunked_array(self.arrays)
        return KeyCheck(self.store, self.planned, files, keys)


def key_for(t: Handle, operation: str) -> str:
    """The primary key ``operation`` replaces rows by; ``InvalidInputError`` if the table has none."""
    if t.primary_key is None:
        raise InvalidInputError(f"{operation} replaces rows by primary key, and {t.uri} has none; use append")
    return t.primary_key


def materialize(t: Handle, data: DataLike, operation: str, *, allow_empty: bool = False) -> pa.Table:
    """``data`` as one table of the table's schema, for checks that need every row first."""
    rows = pa.Table.from_batches(list(t.conforming_batches(data)), schema=t.schema)
    if not rows.num_rows and not allow_empty:
        raise EmptyWriteError(f"{operation} was given no rows; nothing was committed")
    return rows


def check_inside(replaced: Predicate, where: object, rows: pa.Table) -> None:
    """Refuse an overwrite whose ``rows`` (the new rows, or their predicate columns) do not
    all match ``replaced``, the parsed ``where``."""
    outside = rows.num_rows - rows.filter(replaced.to_expression()).num_rows
    if outside:
        raise InvalidInputError(
            f"{outside} of the {rows.num_rows} rows do not match {where!r}; an overwrite with "
            "where writes only rows inside it"
        )


def read_files(t: Handle, files: Sequence[DataFile], columns: list[str] | None) -> pa.Table:
    """``columns`` of files not yet committed, read as a scan reads the table's own."""
    return Scan(Snapshot(t.store, t.manifest.restricted(files, tombstones=False)), columns).to_arrow()


def appended(
    files: Sequence[DataFile],
    base: Manifest,
    *,
    sources: tuple[str, ...] = (),
    registered: bool = False,
    written_with: pa.Schema | None = None,
) -> NextState:
    """The next version of ``base`` with ``files`` appended (``sources`` consumed). Files the
    table wrote have fresh names; registered ones are checked against the version's files.
    Files ``written_with`` an older schema keep their statistics, re-keyed to ``base``'s."""
    if registered:
        check_new_files(base.data_files, files)
    old = base.schema if written_with is None else written_with
    added = tuple(
        replace(f, added_version=base.version + 1, stats=translate_stats(f.stats, old, base.schema))
        if old is not base.schema
        else replace(f, added_version=base.version + 1)
        for f in files
    )
    summary: dict[str, Any] = {
        "rows_added": sum(f.rows for f in files),
        "files_added": len(files),
        "bytes_added": sum(f.size for f in files),
    }
    if registered:
        summary["registered"] = True
    return NextState(
        data_files=base.data_files + added, tombstones=base.tombstones, summary=summary, source_ids=sources
    )


def _merging(t: Handle, data: DataLike) -> tuple[pa.Schema, SchemaUpdate[Any] | None, Iterator[pa.RecordBatch]]:
    """For ``schema_mode="merge"``: the schema with the columns the input's first piece adds,
    the update that adds them (``None`` if none), and the input conformed to that schema."""
    pieces = iter([from_pandas(data)] if is_dataframe(data) else arrow_pieces(data))
    head = next(pieces, None)
    update = None if head is None else columns_added(t.schema, head.schema)
    schema = t.schema
    if update is not None:
        schema = update.apply(schema, t.manifest.primary_key, t.version + 1)[0]
    rows = itertools.chain([] if head is None else [head], pieces)
    return schema, update, t.conforming_batches(rows, schema, fill=True)


def _append_adding_columns(
    planned: Manifest, update: SchemaUpdate[Any], append: Callable[[Manifest], NextState], base: Manifest
) -> NextState:
    """An append that adds columns (``schema_mode="merge"``): its files carry the new columns'
    ids, so a concurrent schema change makes it conflict rather than guess."""
    if not same_schema(base.schema, planned.schema):
        raise CommitConflictError(
            "append with schema_mode='merge' raced a schema change; nothing was committed: run it again"
        )
    schema, key = update.apply(base.schema, base.primary_key, base.version + 1)
    evolved = replace(
        base, schema=schema, data_files=base.data_files.evolved(schema), tombstones=base.tombstones.evolved(schema)
    )
    state = append(evolved)
    added = [args[0] for kind, args in update.changes if kind == "add"]
    return replace(state, schema=schema, primary_key=key, summary={**state.summary, "columns_added": added})
