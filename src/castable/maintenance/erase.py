"""Hard deletes, completed (docs/format.md section 11): what an erase reports and leaves to purge,
the check that refuses an erase no purge could complete, the purge that expires the versions
holding the erased rows, deletes the old objects and searches the objects the erase produced for
any value of those rows, and the records of an erasure in steps (its work plan, its receipt, the
erase commits of its steps). The erase itself, planned and committed as a change, is
:mod:`castable.maintenance.erasechange`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from castable.commit.log import read_manifest
from castable.commit.pointer import raise_floor
from castable.commit.written import many
from castable.errors import CorruptObjectError, ObjectLockedError, VersionNotFoundError
from castable.format import inline
from castable.format.evolution import conform_read, resolve
from castable.format.layout import (
    DATA_PREFIX,
    ERASURE_PLAN_PREFIX,
    ERASURE_PREFIX,
    ICEBERG_PREFIX,
    MANIFEST_PREFIX,
    RECEIPT_PREFIX,
    TOMBSTONE_PREFIX,
    manifest_key,
)
from castable.format.manifest import DataFile
from castable.format.segment import SEGMENT_PREFIX
from castable.format.workplans import plan_key, read_plan, write_plan
from castable.maintenance.gc import referenced_objects, retained_versions
from castable.maintenance.rowgroups import Transfer, file_columns, matching_row_groups, matching_rows, read_footer
from castable.maintenance.splice import FileErasure
from castable.maintenance.traces import find_traces, needles
from castable.read.predicate import Predicate, renamed
from castable.read.snapshot import Snapshot
from castable.store import ObjectNotFoundError, ObjectStore, PreconditionFailedError

_SOURCE = "_castable_source"
"""The column of an ``erasure/`` object naming the old object each erased row came from."""
_LOST = "castable.lost"
"""Its metadata key listing the old objects that were gone, their rows unknown, when it was made."""
ROW_PREFIXES = (DATA_PREFIX, SEGMENT_PREFIX, TOMBSTONE_PREFIX, MANIFEST_PREFIX, ERASURE_PREFIX)
"""Where a table's objects can hold row values (as rows, statistics or keys); the pointer holds
only version numbers."""


@dataclass
class PurgeReport:
    """What completing an erasure removed, and the check that no matching row survived."""

    versions_expired: list[int]
    objects_deleted: list[str]
    object_versions_deleted: int
    remaining: dict[str, int]
    traces: dict[str, list[str]] = field(default_factory=dict)
    """For each object an erase produced, where its bytes still hold a value of an erased row."""
    unchecked: list[str] = field(default_factory=list)
    """Objects an erase produced that could not be searched: the erased rows were gone (deleted
    by a purge that kept no record of them) before this purge could read them."""
    unreferenced_deleted: list[str] = field(default_factory=list)
    """Objects only the expired versions referenced (segments, tombstones, data files replaced
    earlier), deleted with every version since they can hold erased values."""
    noncurrent_deleted: int = 0
    """Noncurrent versions and delete markers deleted under the table (a versioned bucket keeps
    a copy of every object deleted or overwritten, by castable before it deleted every version,
    or by anyone else)."""
    noncurrent: list[str] = field(default_factory=list)
    """Keys under the table of which the bucket still held a noncurrent version when verified."""

    @property
    def verified(self) -> bool:
        """Whether no retained file matches, every object the erasures produced was searched
        and holds no erased value, and no noncurrent copy of any object is left."""
        return not self.remaining and not self.traces and not self.unchecked and not self.noncurrent

    def summary(self) -> dict[str, object]:
        return {
            "versions_expired": self.versions_expired,
            "objects_deleted": self.objects_deleted,
            "object_versions_deleted": self.object_versions_deleted,
            "verified": self.verified,
            "remaining_matches": self.remaining,
            "traces": self.traces,
            "unchecked": self.unchecked,
            "unreferenced_deleted": self.unreferenced_deleted,
            "noncurrent_deleted": self.noncurrent_deleted,
            "noncurrent_copies": self.noncurrent,
        }

    def described(self) -> str:
        """The purge in words: "expired versions 0-13, time travel now starts at 14; deleted 1
        data file and 34 unreferenced objects; verified: no trace"."""
        if self.versions_expired:
            first, last = self.versions_expired[0], self.versions_expired[-1]
            span = f"version {first}" if first == last else f"versions {first}-{last}"
            expired = f"expired {span}, time travel now starts at {last + 1}"
        else:
            expired = "expired no version"
        deleted = (
            f"deleted {many(len(self.objects_deleted), 'data file')} and "
            f"{many(len(self.unreferenced_deleted), 'unreferenced object')}"
        )
        if self.verified:
            return f"{expired}; {deleted}; verified: no trace"
        left = [
            f"{what} ({len(found)})"
            for what, found in (
                ("matching rows still in retained files", self.remaining),
                ("objects still holding an erased value", self.traces),
                ("objects that could not be searched", self.unchecked),
                ("noncurrent copies left", self.noncurrent),
            )
            if found
        ]
        return f"{expired}; {deleted}; not verified: {', '.join(left)}"


@dataclass
class EraseReport:
    """What an erase did, and what still stands between it and complete erasure."""

    version: int
    rows_erased: int
    files: list[FileErasure]
    predicate: Predicate | None = None
    still_referenced: dict[str, list[int]] = field(default_factory=dict)
    purge: PurgeReport | None = None

    @property
    def clean_objects(self) -> list[str]:
        """New data files: they hold no trace of the erased rows."""
        return [n.path for e in self.files for n in e.new]

    @property
    def to_purge(self) -> list[str]:
        """Old data files that still hold the rows (referenced only by older versions)."""
        return [e.old.path for e in self.files]

    @property
    def transfer(self) -> Transfer:
        total = Transfer()
        for e in self.files:
            total.add(e.transfer)
        return total

    def summary(self) -> dict[str, object]:
        t = self.transfer
        return {
            "version": self.version,
            "rows_erased": self.rows_erased,
            "files_spliced": sum(e.method == "splice" for e in self.files),
            "files_rewritten": sum(e.method == "rewrite" for e in self.files),
            "bytes_downloaded": t.downloaded,
            "bytes_uploaded": t.uploaded,
            "bytes_copied": t.copied,
            "old_objects_to_purge": self.to_purge,
            "versions_still_referencing_them": sorted({v for vs in self.still_referenced.values() for v in vs}),
            **({"purge": self.purge.summary()} if self.purge else {}),
        }

    def described(self) -> str:
        """The erasure in words: what it erased and committed, then its purge's
        (:meth:`PurgeReport.described`) or which versions still hold the erased rows."""
        if not self.files:
            return f"nothing erased: no row matched (the table stays at version {self.version})"
        head = (
            f"erased {many(self.rows_erased, 'row')} from {many(len(self.files), 'data file')}, "
            f"committed as version {self.version}"
        )
        if self.purge is not None:
            return f"{head}; {self.purge.described()}"
        holding = sorted({v for vs in self.still_referenced.values() for v in vs})
        if not holding:
            return head
        span = f"version {holding[0]} holds" if len(holding) == 1 else f"versions {holding[0]}-{holding[-1]} hold"
        return f"{head}; {span} the erased rows until a purge expires them"


def check_erasable(store: ObjectStore) -> None:
    """Refuse an erase (``ObjectLockedError``) on a bucket with Object Lock, before anything is
    written: its retention would keep the old objects' versions, rows and all, after a purge."""
    if store.object_lock_enabled():
        raise ObjectLockedError(
            f"{store.uri} is in a bucket with S3 Object Lock: deleted objects keep locked versions until their "
            "retention ends, so erased rows could not be removed; erase is refused and nothing was written"
        )


def noncurrent_copies(store: ObjectStore) -> list[str]:
    """Keys under the table's row-holding prefixes with noncurrent versions (versioned buckets)."""
    return [key for prefix in ROW_PREFIXES for key in store.noncurrent_copies(prefix)]


def verify_erased(store: ObjectStore, predicate: Predicate, schema: pa.Schema) -> dict[str, int]:
    """Physical rows (tombstones ignored) still matching in any file of any retained version.
    ``predicate`` names the columns as ``schema`` does; a version that named them otherwise is
    searched under its own names, found by field id (or, before ids, by name); one without one of those columns (added
    since) holds no value of it, and is not searched."""
    import pyarrow.dataset as ds  # imported where used: it imports pandas, when installed

    remaining: dict[str, int] = {}
    checked: set[str] = set()
    for version in retained_versions(store):
        try:
            snapshot = Snapshot(store, read_manifest(store, version))
        except VersionNotFoundError:
            continue
        asked = _as_named_in(predicate, schema, snapshot.schema, version)
        if asked is None:
            continue
        expression = asked.to_expression()
        for f in snapshot.prune_files(asked):
            if f.path in checked:
                continue
            checked.add(f.path)
            footer = snapshot.footer(f)
            groups = snapshot.row_groups_matching(f, footer, asked)
            needed = snapshot.columns_for(asked)
            count = ds.dataset(snapshot.read(f, footer, needed, groups)).count_rows(filter=expression)
            if count:
                remaining[f.path] = count
    return remaining


def _as_named_in(predicate: Predicate, schema: pa.Schema, version: pa.Schema, number: int) -> Predicate | None:
    """``predicate`` (on ``schema``'s names) on the names of version ``number`` of schema
    ``version``, found as a read finds a file's columns (``evolution.resolve``: by field id,
    or by the name a column had then where that version has no ids); ``None`` when
    ``version`` lacks one of its columns."""
    used = predicate.columns()
    if used is None:
        return predicate
    where = resolve(version, schema, number)
    if any(where.get(c) is None for c in used):
        return None
    return renamed(predicate, {c: name for c in used if (name := where[c]) is not None})


def purge(store: ObjectStore, report: EraseReport) -> PurgeReport:
    """Expire the versions that reference erased objects, delete those objects, then verify."""
    old = {e.old.path: e.old.added_version for e in report.files}
    return purge_objects(store, old, report.version, report.predicate)


def purge_objects(store: ObjectStore, old: dict[str, int], version: int, predicate: Predicate | None) -> PurgeReport:
    """Complete erasures committed at or before ``version``: ``old`` maps each replaced data
    file to the version that added it; the versions from the oldest retained up to the last one
    that lists such a file are expired. Files the newest
    version still references (nothing matched in them) are left alone. With a ``predicate``,
    the objects the erasures produced are then searched, byte by byte, for the erased rows'
    values, read from the old objects and kept in an ``erasure/`` object before anything is
    deleted: a purge that stops half way is resumed by the next call, which searches with the
    kept values, and the object is deleted once the purge is verified."""
    retained = retained_versions(store)
    latest = read_manifest(store, retained[-1])
    live = {f.path for f in latest.data_files}
    old = {path: added for path, added in old.items() if path not in live}
    record = erasure_key(old)
    held = _inline_entries(store, {p for p in old if p.startswith(inline.INLINE_PREFIX)}, retained)
    erased = _kept_erased_rows(store, record, old, held, predicate, latest.schema) if predicate is not None else {}
    holding = [v for v in retained for added in old.values() if added <= v < version]
    # Expiry is always a prefix of the history (the floor hides every version below it), so the
    # versions before those that hold the erased objects go too rather than linger unlisted.
    versions = [v for v in retained if v <= max(holding)] if holding else []
    produced = _produced(store, [v for v in retained if v >= min(old.values(), default=version)], set(old))
    expired_objects = referenced_objects(store, versions)
    if versions:
        raise_floor(store, versions[-1] + 1, version)
    for v in versions:
        store.purge(manifest_key(v))
    # What only the expired versions referenced can hold erased values: segments (as statistics),
    # tombstones (as keys), data files an earlier compaction or erase replaced (as rows).
    still = referenced_objects(store, retained_versions(store))
    unreferenced = sorted(expired_objects - still - set(old))
    # Published Iceberg metadata names the erased files, bounds their columns and may hold
    # inline rows: it goes whole, and the next publication writes it again without them.
    unreferenced += sorted(o.key for o in store.list(ICEBERG_PREFIX))
    for path in unreferenced:
        store.purge(path)
    removed = sum(store.purge(path) for path in old)
    # No version references a noncurrent copy, and each can hold rows (erased ones among them).
    noncurrent_deleted = sum(store.delete_noncurrent(prefix) for prefix in ROW_PREFIXES)
    remaining = verify_erased(store, predicate, latest.schema) if predicate is not None else {}
    traces = {}
    lost = {path for path, rows in erased.items() if rows is None}
    unchecked = sorted(new.path for new, ancestors in produced.items() if ancestors & lost)
    for new, ancestors in produced.items():
        if new.path not in still:  # replaced since (a restore) and deleted with the versions that held it
            continue
        rows = [t for a in ancestors if (t := erased.get(a)) is not None and t.num_rows]
        if rows and (found := _traces(store, new, pa.concat_tables(rows))):
            traces[new.path] = found
    report = PurgeReport(
        versions,
        sorted(old),
        removed,
        remaining,
        traces,
        unchecked,
        unreferenced,
        noncurrent_deleted,
        noncurrent_copies(store),
    )
    if predicate is not None and report.verified:
        store.purge(record)
    return report


@dataclass(frozen=True)
class Splices:
    """What the retained erase commits of one erasure in steps (their commit ids share a prefix)
    did: the data files they replaced, each with the version that added it, and the rows erased."""

    old: dict[str, int]
    rows_erased: int

    @property
    def files(self) -> int:
        return len(self.old)


def splices_of(store: ObjectStore, commit_prefix: str) -> Splices:
    """The :class:`Splices` of the retained erase commits whose commit id starts with
    ``commit_prefix``, read from the table's history: what a purge of an erasure that committed
    file by file must delete, even when a later run of it plans none of them (no longer live),
    and the counts of its receipt, however many files it touched."""
    old: dict[str, int] = {}
    rows = 0
    for v in retained_versions(store):
        try:
            manifest = read_manifest(store, v)
        except VersionNotFoundError:
            continue
        if manifest.commit.operation != "erase" or not manifest.commit.commit_id.startswith(commit_prefix):
            continue
        replaced = set(manifest.commit.summary.get("replaced", {}))
        rows += int(manifest.commit.summary.get("rows_erased") or 0)
        try:
            before = read_manifest(store, v - 1)
        except VersionNotFoundError:  # the version before has expired: so have the versions holding the files
            continue
        old.update({f.path: f.added_version for f in before.data_files if f.path in replaced})
    return Splices(old, rows)


@dataclass(frozen=True)
class PlannedFile:
    """One data file an erasure in steps splices: its table, the predicate, and its path there."""

    table: str
    predicate: str
    file: str
    added_version: int


def write_erasure_plan(store: ObjectStore, commit_id: str, files: list[PlannedFile]) -> str:
    """Keep the files erasure ``commit_id`` splices as a work plan under ``store`` (the table's
    root, or a database's); return its key."""
    return write_plan(store, ERASURE_PLAN_PREFIX, commit_id, [asdict(f) for f in files])


def read_erasure_plan(store: ObjectStore, key: str) -> list[PlannedFile]:
    """The files of the erasure plan at ``key``."""
    try:
        return [PlannedFile(**item) for item in read_plan(store, key)]
    except TypeError as e:
        raise CorruptObjectError(f"erasure plan {key} does not list planned files: {e}") from e


def write_erasure_receipt(store: ObjectStore, commit_id: str, receipt: Mapping[str, Any]) -> str:
    """Keep the receipt of erasure ``commit_id`` under the table's root, replacing an earlier
    run's; return its key. Its ``predicate`` is kept as ``predicate_sha256`` alone: a receipt
    must not hold the identifier whose rows it erased (the requester can hash it to match)."""
    kept = {k: v for k, v in receipt.items() if k != "predicate"}
    if "predicate" in receipt:
        kept["predicate_sha256"] = hashlib.sha256(str(receipt["predicate"]).encode()).hexdigest()
    key = plan_key(RECEIPT_PREFIX, commit_id)
    store.put(key, json.dumps({"commit_id": commit_id, **kept}, sort_keys=True, default=str).encode())
    return key


def erasure_key(old: dict[str, int]) -> str:
    """Where the search targets of a purge of the ``old`` objects are kept: named by those objects,
    so a retried purge of the same erasure finds them."""
    digest = hashlib.sha256("\n".join(sorted(old)).encode()).hexdigest()
    return f"{ERASURE_PREFIX}{digest}.parquet"


def _inline_entries(store: ObjectStore, paths: set[str], versions: list[int]) -> dict[str, DataFile]:
    """The inline entries named ``paths``, from the newest of ``versions`` that lists each: an
    inline entry's rows exist only in the segments that list it."""
    found: dict[str, DataFile] = {}
    for v in reversed(versions):
        if not paths - found.keys():
            break
        try:
            files = read_manifest(store, v).data_files
        except VersionNotFoundError:
            continue
        wanted = set(files.holding(paths - found.keys()))
        found.update({f.path: f for f in files if f.path in wanted})
    return found


def _kept_erased_rows(
    store: ObjectStore,
    record: str,
    old: dict[str, int],
    held: dict[str, DataFile],
    predicate: Predicate,
    schema: pa.Schema,
) -> dict[str, pa.Table | None]:
    """The erased rows of each old object (or inline entry, ``held``): as kept at ``record`` by
    an earlier attempt of this purge, or read now and kept there before anything is deleted (an
    object already gone, with no record, maps to ``None``: its rows cannot be searched for)."""
    try:
        kept = pq.read_table(pa.BufferReader(store.get(record).data))
    except ObjectNotFoundError:
        erased = _erased_rows(store, old, held, predicate, schema)
        tagged = [
            t.append_column(_SOURCE, pa.repeat(pa.scalar(path), t.num_rows))
            for path, t in erased.items()
            if t is not None
        ]
        kept = pa.concat_tables(tagged) if tagged else schema.append(pa.field(_SOURCE, pa.string())).empty_table()
        gone = sorted(path for path, t in erased.items() if t is None)
        sink = pa.BufferOutputStream()
        pq.write_table(kept.replace_schema_metadata({_LOST: json.dumps(gone)}), sink)
        with contextlib.suppress(PreconditionFailedError):  # a concurrent attempt kept the same rows
            store.put(record, sink.getvalue().to_pybytes(), if_none_match=True)
        return erased
    lost = set(json.loads((kept.schema.metadata or {}).get(_LOST.encode(), b"[]")))
    source = kept.column(_SOURCE)
    rows = kept.drop_columns([_SOURCE]).replace_schema_metadata(None)
    return {path: None if path in lost else rows.filter(pc.equal(source, path)) for path in old}


def _erased_rows(
    store: ObjectStore, old: dict[str, int], held: dict[str, DataFile], predicate: Predicate, schema: pa.Schema
) -> dict[str, pa.Table | None]:
    """The rows each old object (or inline entry, ``held``) holds that match ``predicate``
    (``None`` if it is already gone)."""
    out: dict[str, pa.Table | None] = {}
    for path in old:
        if (entry := held.get(path)) is not None and entry.inline is not None:
            rows = conform_read(entry.inline, resolve(entry.inline.schema, schema, 0), schema)
            out[path] = rows.filter(pa.array(matching_rows(rows, predicate.to_expression())))
            continue
        if path.startswith(inline.INLINE_PREFIX):  # no retained version lists it any more
            out[path] = None
            continue
        try:
            info = store.head(path)
        except ObjectNotFoundError:
            out[path] = None
            continue
        f = DataFile(path, info.size, info.etag, rows=0, row_groups=0, added_version=old[path])
        transfer = Transfer()
        footer = read_footer(store, f, transfer)
        where = file_columns(footer, schema, f)
        tables = [
            conform_read(t.filter(m), where, schema)
            for _, t, m in matching_row_groups(store, f, footer, predicate, schema, where, transfer)
        ]
        out[path] = pa.concat_tables(tables) if tables else schema.empty_table()
    return out


def _produced(store: ObjectStore, versions: list[int], old: set[str]) -> dict[DataFile, set[str]]:
    """The objects erase commits among ``versions`` made from ``old`` objects (directly or via
    another erase), each with the old objects it descends from; those since replaced are left out."""
    produced: dict[str, tuple[DataFile, set[str]]] = {}
    for v in versions:
        try:
            manifest = read_manifest(store, v)
        except VersionNotFoundError:
            continue
        replaced = manifest.commit.summary.get("replaced", {}) if manifest.commit.operation == "erase" else {}
        files = {f.path: f for f in manifest.data_files}
        for source, targets in replaced.items():
            ancestors = {source} | (produced.pop(source)[1] if source in produced else set())
            if ancestors & old:
                produced.update({t: (files[t], ancestors) for t in targets if t in files})
    return {f: ancestors for f, ancestors in produced.values()}


def _traces(store: ObjectStore, f: DataFile, erased: pa.Table) -> list[str]:
    """Where object ``f`` (an inline entry: the Parquet file it reads as) still holds a value of
    the ``erased`` rows."""
    try:
        if f.inline is not None:
            data = inline.parquet_bytes(f.inline)
            source: pa.NativeFile = pa.BufferReader(data)
            size = len(data)
        else:
            source, size = store.open_input(f.path, size=f.size, etag=f.etag), f.size
        wanted = needles(erased, pq.ParquetFile(source))
        return find_traces(source, size, wanted) if wanted else []
    except CorruptObjectError as e:
        return [str(e)]
