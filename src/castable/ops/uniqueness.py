"""Enforced primary keys (table property ``write.primary-key.enforce``, docs/format.md section 9).

A write to such a table that adds rows (append, overwrite, add_files, an engine's commit through
the catalog) refuses keys repeated among its rows or already live, with
:class:`~castable.errors.DuplicateKeyError` naming them, and commits nothing. The check is part
of the write's build, so it is made on every version the write is built on: a key another writer
committed first is found on the version after it, however the two interleave, and a table that
began to enforce after the write was planned is enforced all the same.

Rows only appear in files a version adds, so each build after the first reads only files it has
not checked yet (all of them again if a version took tombstones away, as a restore does). The
files are pruned by the key's statistics, segment summaries and bloom filters first, so an
append of keys beyond the live ones (ids, times) reads no data file.

Upsert, merge and update keep keys unique by what they do (each replaces the live rows with
its keys, and none sets a key), so they are not checked.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from castable.commit.change import NextState
from castable.errors import DuplicateKeyError, InvalidInputError
from castable.format.manifest import DataFile, Manifest
from castable.format.nested import field_id
from castable.format.properties import PRIMARY_KEY_ENFORCE, TableProperties
from castable.read.predicate import InList
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore

_NAMED = 100
"""At most this many keys travel with the error (``DuplicateKeyError.keys``); ten are shown."""

Build = Callable[[Manifest], NextState]


def enforced(manifest: Manifest) -> bool:
    """Whether writes to this version must keep its primary key unique."""
    return bool(manifest.primary_key) and TableProperties.parse(manifest.properties).primary_key_enforce


def key_columns(manifest: Manifest) -> tuple[int | str, ...]:
    """The primary key's columns by id (by name where the schema has no ids): a rename of the
    key column keeps it the same key."""
    return tuple(field_id(manifest.schema.field(k)) or k for k in manifest.primary_key)


class KeyCheck:
    """The check of one write's keys: those of its ``own`` data files, planned on version
    ``planned``, given by ``keys`` (the key column of its rows, or ``None`` to read them from
    the files when a version first asks)."""

    def __init__(
        self,
        store: ObjectStore,
        planned: Manifest,
        own: Collection[DataFile],
        keys: pa.ChunkedArray | None = None,
    ) -> None:
        self.store = store
        self.planned_key = key_columns(planned)
        self.own = tuple(own)
        self._keys = keys
        self._distinct: pa.Array | None = None
        self._seen: set[str] = {f.path for f in self.own}
        self._tombstones: set[str] = set()

    def guard(self, build: Build) -> Build:
        """``build``, then the check of the version it builds: its keys, where its base enforces
        them, and that none is NULL, where the base has a key the write was not planned with."""

        def guarded(base: Manifest) -> NextState:
            state = build(base)
            if base.primary_key and key_columns(base) != self.planned_key:
                self._keys = None  # rows checked against another key, or none: read the new key's
                self._check_not_null(base)
            if enforced(base):
                self.check(base, state)
            return state

        return guarded

    def _check_not_null(self, base: Manifest) -> None:
        key = base.primary_key[0]
        nulls = self._own_keys(base, key).null_count
        if nulls:
            raise InvalidInputError(
                f"the table's primary key became {key!r} since the write began, and {nulls} of its rows have a NULL "
                f"{key}; nothing was committed"
            )

    def check(self, base: Manifest, state: NextState) -> None:
        """``DuplicateKeyError`` if a key of the write is repeated, or live in the version
        ``state`` makes of ``base`` outside the write's own files."""
        key = base.primary_key[0]
        keys = self._distinct_keys(base, key)
        if not len(keys):
            return
        tombstones = {t.path for t in state.tombstones}
        if not self._tombstones <= tombstones:  # rows deleted before may be live again
            self._seen = {f.path for f in self.own}
        version = replace(base, data_files=state.data_files, tombstones=state.tombstones)
        predicate = InList(key, keys)
        files = [f for f in Snapshot(self.store, version).prune_files(predicate) if f.path not in self._seen]
        if files:
            found = Scan(Snapshot(self.store, version.restricted(files)), [key], predicate).to_arrow().column(key)
            if len(found):
                raise _error(key, pc.unique(found), f"already live in version {base.version}", "of the write ")
        self._seen |= {f.path for f in files}
        self._tombstones = tombstones

    def _own_keys(self, base: Manifest, key: str) -> pa.ChunkedArray:
        """The key column of the write's rows: as given, or read from its files once."""
        if self._keys is None:
            rows = Scan(Snapshot(self.store, base.restricted(self.own, tombstones=False)), [key]).to_arrow()
            self._keys, self._distinct = rows.column(key), None
        return self._keys

    def _distinct_keys(self, base: Manifest, key: str) -> pa.Array:
        """The write's keys, each once; ``DuplicateKeyError`` if one is repeated."""
        if self._distinct is None:
            keys = self._own_keys(base, key)
            distinct = pc.unique(keys)
            if len(distinct) != len(keys):
                counts = pc.value_counts(keys)
                repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
                raise _error(key, repeated, "repeated among the write's rows", "of the write ")
            self._distinct = distinct
        return self._distinct


def check_key_rows(store: ObjectStore, manifest: Manifest, *, unique: bool) -> None:
    """That the live rows of ``manifest`` can have its primary key: none NULL, and none twice
    if ``unique`` (``DuplicateKeyError``). This reads every live key."""
    key = manifest.primary_key[0]
    keys = Scan(Snapshot(store, manifest), [key]).to_arrow().column(key)
    if keys.null_count:
        raise InvalidInputError(
            f"{keys.null_count} live row(s) of version {manifest.version} have a NULL {key}, which a primary key "
            "never is; nothing was committed"
        )
    if unique:
        counts = pc.value_counts(keys)
        repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
        if len(repeated):
            raise _error(key, repeated, f"live more than once in version {manifest.version}", "")


def keys_kept(store: ObjectStore, build: Build) -> Build:
    """``build`` of a commit that writes no row (alter, restore, new properties), then the check
    that the version it builds can have its key: where the key is new (set, or another one),
    no live key is NULL; where the version enforces its key and did not hold these rows under
    enforcement before (enforcement turned on, a restore), none is live twice. A key cannot go
    while it is enforced."""

    def guarded(base: Manifest) -> NextState:
        state = build(base)
        after = replace(
            base,
            data_files=state.data_files,
            tombstones=state.tombstones,
            properties=base.properties if state.properties is None else state.properties,
            primary_key=base.primary_key if state.primary_key is None else state.primary_key,
            schema=base.schema if state.schema is None else state.schema,
        )
        if not after.primary_key:
            if TableProperties.parse(after.properties).primary_key_enforce:
                raise InvalidInputError(
                    f"{PRIMARY_KEY_ENFORCE} is true: set it to false before the primary key goes; nothing was committed"
                )
            return state
        same_rows = state.data_files is base.data_files and state.tombstones is base.tombstones
        new_key = key_columns(after) != key_columns(base)
        if new_key or (enforced(after) and not (same_rows and enforced(base))):
            check_key_rows(store, after, unique=enforced(after))
        return state

    return guarded


def collecting(batches: Iterable[pa.RecordBatch], key: str, into: list[pa.Array]) -> Iterator[pa.RecordBatch]:
    """``batches`` as they are, each one's ``key`` column added to ``into`` as it passes."""
    for batch in batches:
        into.append(batch.column(key))
        yield batch


def _error(key: str, keys: pa.Array, where: str, whose: str) -> DuplicateKeyError:
    values = sorted(keys.to_pylist(), key=repr)
    shown = ", ".join(map(repr, values[:10])) + (", ..." if len(values) > 10 else "")
    return DuplicateKeyError(
        f"{len(values)} key(s) {whose}are {where}: {key} {shown}; nothing was committed "
        f"(the table keeps its primary key unique: {PRIMARY_KEY_ENFORCE})",
        values[:_NAMED],
    )
