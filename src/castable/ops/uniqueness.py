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
from castable.errors import DuplicateKeyError
from castable.format.manifest import DataFile, Manifest
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


class KeyCheck:
    """The check of one write's keys: those of its ``own`` data files (paths), given by
    ``keys`` (the key column of its rows, or ``None`` to read them from the files when a
    version first asks)."""

    def __init__(self, store: ObjectStore, own: Collection[DataFile], keys: pa.ChunkedArray | None = None) -> None:
        self.store = store
        self.own = tuple(own)
        self._keys = keys
        self._distinct: pa.Array | None = None
        self._seen: set[str] = {f.path for f in self.own}
        self._tombstones: set[str] = set()

    def guard(self, build: Build) -> Build:
        """``build``, then the check of the version it builds, where its base enforces the key."""

        def guarded(base: Manifest) -> NextState:
            state = build(base)
            if enforced(base):
                self.check(base, state)
            return state

        return guarded

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

    def _distinct_keys(self, base: Manifest, key: str) -> pa.Array:
        """The write's keys, each once; ``DuplicateKeyError`` if one is repeated."""
        if self._distinct is None:
            keys = self._keys
            if keys is None:
                rows = Scan(Snapshot(self.store, base.restricted(self.own, tombstones=False)), [key]).to_arrow()
                keys = rows.column(key)
            distinct = pc.unique(keys)
            if len(distinct) != len(keys):
                counts = pc.value_counts(keys)
                repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
                raise _error(key, repeated, "repeated among the write's rows", "of the write ")
            self._distinct = distinct
        return self._distinct


def keeping_unique(store: ObjectStore, build: Build) -> Build:
    """``build`` of a commit that writes no row (a restore, new properties), then, where the
    version it builds enforces its key and did not hold these same rows under enforcement
    before (enforcement turned on; a restore), ``DuplicateKeyError`` if a key is live twice there.
    This reads every live key."""

    def guarded(base: Manifest) -> NextState:
        state = build(base)
        after = replace(
            base,
            data_files=state.data_files,
            tombstones=state.tombstones,
            properties=base.properties if state.properties is None else state.properties,
            primary_key=base.primary_key if state.primary_key is None else state.primary_key,
        )
        same_rows = state.data_files is base.data_files and state.tombstones is base.tombstones
        if enforced(after) and not (same_rows and enforced(base)):
            key = after.primary_key[0]
            counts = pc.value_counts(Scan(Snapshot(store, after), [key]).to_arrow().column(key))
            repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
            if len(repeated):
                raise _error(key, repeated, f"live more than once in version {base.version}", "")
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
