"""A version's data files or tombstones, held as segments read only when needed (docs/format.md section 3.1).

Format version 2 lists a version's entries in immutable segments (see ``castable.format.segment``).
A :class:`FileList` is that list in memory: written segments, read on first use and shared
by reference with the versions before and after, and pending ones that the commit listing
them writes. Operations derive new lists that touch only the segments they change, so a
commit costs O(change). A version-1 manifest's entries are one pending, in-memory part.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar, overload

import pyarrow as pa
import pyarrow.compute as pc

from castable.errors import CorruptObjectError
from castable.format import segment
from castable.format.entries import DataFile, TombstoneFile
from castable.format.evolution import same_schema, translate_stats
from castable.format.segment import Kind, SegmentRef
from castable.store import ObjectNotFoundError, ObjectStore, PreconditionFailedError
from castable.store.cache import LruCache

E = TypeVar("E", bound=DataFile | TombstoneFile)

SEGMENT_TARGET = 65_536
"""Entries per full segment: about 4 MB, read in a few milliseconds."""
RUN_LIMIT = 8
"""At most this many adjacent segments of one size tier; one more and they are merged."""
_TOP_TIER = (SEGMENT_TARGET // 2).bit_length() // 3
"""Segments of this tier (at least 8**5 = 32,768 entries) are never merged."""

_READ_THREADS = 16
Loader = Callable[[SegmentRef], pa.Table]


@dataclass(frozen=True)
class Codec(Generic[E]):
    """How one kind of entry converts between objects and a segment's columns."""

    kind: Kind
    to_table: Callable[[list[E], pa.Schema], pa.Table]
    from_table: Callable[[pa.Table, pa.Schema], list[E]]


DATA: Codec[DataFile] = Codec("data", segment.data_table, segment.data_files)
TOMBSTONES: Codec[TombstoneFile] = Codec("tombstone", segment.tombstone_table, segment.tombstone_files)


class Part(Generic[E]):
    """One segment: written (``ref`` set, its table read by ``load`` on first use) or pending
    (entries or a table in memory, written by the commit that lists it)."""

    __slots__ = ("_conformed", "_entries", "_entries_for", "_load", "_table", "codec", "ref")
    codec: Codec[E]
    _entries: tuple[E, ...] | None

    def __init__(
        self,
        codec: Codec[E],
        *,
        ref: SegmentRef | None = None,
        load: Loader | None = None,
        table: pa.Table | None = None,
        entries: tuple[E, ...] | None = None,
    ) -> None:
        self.codec = codec
        self.ref = ref
        self._load = load
        self._table = table
        self._entries = entries
        self._entries_for: pa.Schema | None = None
        """The schema ``_entries`` were read with from the table (``None``: given as entries)."""
        self._conformed: tuple[pa.Schema, pa.Table] | None = None

    @property
    def count(self) -> int:
        if self.ref is not None:
            return self.ref.entries
        return len(self._entries) if self._entries is not None else self._table.num_rows  # type: ignore[union-attr]

    @property
    def unread(self) -> bool:
        """A written segment not read yet."""
        return self._table is None and self._entries is None

    @property
    def columnar(self) -> bool:
        """Whether the entries are (or will be read) as columns: prune them with Arrow compute."""
        return self._entries is None or self.ref is not None

    def table(self, schema: pa.Schema) -> pa.Table:
        """The entries as columns, their statistics keyed by ``schema``'s columns (a segment
        written under an older schema is read through its columns' field ids)."""
        if self._table is None:
            if self._entries is not None:
                self._table = self.codec.to_table(list(self._entries), schema)
            else:
                assert self._load is not None and self.ref is not None
                self._table = self._load(self.ref)
        if self.codec.kind != "data":
            return self._table
        if self._conformed is None or not same_schema(self._conformed[0], schema):
            self._conformed = (schema, segment.conform(self._table, schema))
        return self._conformed[1]

    def entries(self, schema: pa.Schema) -> tuple[E, ...]:
        if self._entries is None or (self._entries_for is not None and not same_schema(self._entries_for, schema)):
            self._entries = tuple(self.codec.from_table(self.table(schema), schema))
            self._entries_for = schema
        return self._entries

    def entries_at(self, indices: pa.Array, schema: pa.Schema) -> list[E]:
        """Some entries by position, building objects only for those."""
        if self._entries is not None:
            return [self._entries[i] for i in indices.to_pylist()]
        return self.codec.from_table(self.table(schema).take(indices), schema)

    def paths(self, schema: pa.Schema) -> list[str]:
        if self._entries is not None:
            return [e.path for e in self._entries]
        return list(self.table(schema).column("path").to_pylist())


class FileList(Generic[E]):
    """The data files (or tombstones) of one version, in segment order. Iterating reads every
    segment; ``len`` reads none; the derivations below read only segments they change."""

    __slots__ = ("codec", "parts", "schema")
    codec: Codec[E]
    parts: tuple[Part[E], ...]

    def __init__(self, codec: Codec[E], schema: pa.Schema, parts: Iterable[Part[E]] = ()) -> None:
        self.codec = codec
        self.schema = schema
        self.parts = tuple(p for p in parts if p.count)

    @classmethod
    def of(cls, codec: Codec[E], schema: pa.Schema, entries: Iterable[E]) -> FileList[E]:
        return cls(codec, schema, [Part(codec, entries=tuple(entries))])

    def __iter__(self) -> Iterator[E]:
        read_all(self.parts, self.schema)
        for p in self.parts:
            yield from p.entries(self.schema)

    def __len__(self) -> int:
        return sum(p.count for p in self.parts)

    @overload
    def __getitem__(self, index: int) -> E: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[E, ...]: ...
    def __getitem__(self, index: int | slice) -> E | tuple[E, ...]:
        """Entries by position, as for a tuple (this reads every segment)."""
        return tuple(self)[index]

    def total(self, field: str) -> int:
        """The sum of the entries' ``rows`` or ``size`` (``bytes`` in a summary), from segment
        summaries where they have it; unknown counts (a tombstone's rows) count as 0."""
        summary = "bytes" if field == "size" else field
        total = 0
        for p in self.parts:
            known = getattr(p.ref, summary) if p.ref is not None else None
            total += known if known is not None else sum(getattr(e, field) or 0 for e in p.entries(self.schema))
        return total

    def inline_bytes(self) -> int:
        """The bytes of the inline entries (``castable.format.inline``), from segment summaries: no segment is read."""
        total = 0
        for p in self.parts:
            if p.ref is not None:
                total += p.ref.inline_bytes
            elif p._entries is not None:
                total += sum(e.size for e in p._entries if isinstance(e, DataFile) and e.inline is not None)
            elif self.codec.kind == "data":
                total += segment.inline_bytes(p.table(self.schema))
        return total

    def __bool__(self) -> bool:
        return bool(self.parts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FileList | tuple | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FileList({self.codec.kind}, {len(self)} entries in {len(self.parts)} segments)"

    def _derive(self, parts: Iterable[Part[E]]) -> FileList[E]:
        return FileList(self.codec, self.schema, parts)

    def evolved(self, schema: pa.Schema) -> FileList[E]:
        """This list under a new table schema: written segments are shared, read through their
        columns' field ids; their summaries and pending entries' statistics are re-keyed."""
        if same_schema(self.schema, schema):
            return self
        parts: list[Part[E]] = []
        for p in self.parts:
            if p.ref is not None:
                ref = dataclasses.replace(p.ref, stats=translate_stats(p.ref.stats, self.schema, schema))
                part = Part(self.codec, ref=ref, load=p._load, table=p._table)
            elif p._entries is not None and self.codec.kind == "data":
                part = Part(self.codec, entries=tuple(_restated(e, self.schema, schema) for e in p._entries))
            else:
                part = p
            parts.append(part)
        return FileList(self.codec, schema, parts)

    def __add__(self, added: Iterable[E]) -> FileList[E]:
        """This list with ``added`` after it, in a new pending segment."""
        return self._derive((*self.parts, Part(self.codec, entries=tuple(added))))

    def without(self, paths: Collection[str]) -> FileList[E]:
        """This list without the entries of ``paths``: a segment that held some is rewritten."""
        if not paths:
            return self
        gone = set(paths)
        parts: list[Part[E]] = []
        for p in self.parts:
            keep = [path not in gone for path in p.paths(self.schema)]
            if all(keep):
                parts.append(p)
            elif p._entries is not None:
                parts.append(Part(self.codec, entries=tuple(e for e, k in zip(p._entries, keep, strict=True) if k)))
            else:
                parts.append(Part(self.codec, table=p.table(self.schema).filter(pa.array(keep))))
        return self._derive(parts)

    def replacing(self, replacements: Mapping[str, Sequence[E]]) -> FileList[E]:
        """This list with each entry named in ``replacements`` replaced, in place, by its entries."""
        parts: list[Part[E]] = []
        for p in self.parts:
            if any(path in replacements for path in p.paths(self.schema)):
                entries = (n for e in p.entries(self.schema) for n in replacements.get(e.path, (e,)))
                parts.append(Part(self.codec, entries=tuple(entries)))
            else:
                parts.append(p)
        return self._derive(parts)

    def holding(self, paths: Collection[str]) -> list[str]:
        """Which of ``paths`` this list names."""
        wanted = set(paths)
        if not wanted:
            return []
        return [path for p in self.parts for path in p.paths(self.schema) if path in wanted]

    def named(self, paths: Collection[str]) -> list[E]:
        """The entries of ``paths`` this list names, building objects only for those."""
        wanted = set(paths)
        values = pa.array(sorted(wanted), pa.string())
        found: list[E] = []
        for p in self.parts:
            if p.columnar:
                hits = pc.indices_nonzero(pc.is_in(p.table(self.schema).column("path"), value_set=values))
                found += p.entries_at(hits, self.schema)
            else:
                found += [e for e in p.entries(self.schema) if e.path in wanted]
        return found

    def _differing(self, other: FileList[E]) -> tuple[list[Part[E]], list[Part[E]]]:
        """(this list's segments ``other`` does not share, ``other``'s this one does not share)."""
        theirs = {p.ref.path for p in other.parts if p.ref is not None}
        mine = {p.ref.path for p in self.parts if p.ref is not None}
        return (
            [p for p in self.parts if p.ref is None or p.ref.path not in theirs],
            [p for p in other.parts if p.ref is None or p.ref.path not in mine],
        )

    def diff(self, older: FileList[E]) -> tuple[list[E], set[str]]:
        """(entries added, paths removed) since ``older``, reading only segments that differ."""
        new, old = self._differing(older)
        before = {path for p in old for path in p.paths(older.schema)}
        added: list[E] = []
        after: set[str] = set()
        for p in new:
            paths = p.paths(self.schema)
            after.update(paths)
            fresh = [i for i, path in enumerate(paths) if path not in before]
            if fresh:
                added += p.entries_at(pa.array(fresh, pa.int64()), self.schema)
        return added, before - after

    def dropped(self, paths: Collection[str], newer: FileList[E]) -> list[E]:
        """The entries of ``paths`` (which ``newer`` no longer lists), in this list's order,
        reading only the segments ``newer`` does not share: a removed entry is in one of those."""
        wanted = set(paths)
        _, old = newer._differing(self)
        return [e for e in FileList(self.codec, self.schema, old).named(wanted)] if wanted else []

    @property
    def refs(self) -> list[SegmentRef]:
        """The written segments, in order; ``ValueError`` if one is still pending."""
        refs = [p.ref for p in self.parts]
        if None in refs:
            raise ValueError("a segment of this list has not been written")
        return refs  # type: ignore[return-value]

    def written(self, store: ObjectStore, created: list[str]) -> FileList[E]:
        """This list with adjacent small segments merged (:func:`merge_plan`) and every pending
        segment written, each as a new object (``If-None-Match``) whose key joins ``created``."""
        groups = merge_plan([p.count for p in self.parts])
        parts: list[Part[E]] = []
        for start, end in groups:
            run = self.parts[start:end]
            if len(run) == 1 and run[0].ref is not None:
                parts.append(run[0])
                continue
            tables = [p.table(self.schema) for p in run]
            table = pa.concat_tables(tables, promote_options="default").combine_chunks()
            for at in range(0, table.num_rows, SEGMENT_TARGET):
                parts.append(write_part(store, self.codec, table.slice(at, SEGMENT_TARGET), self.schema))
                created.append(parts[-1].ref.path)  # type: ignore[union-attr]
        return self._derive(parts)


def _restated(e: E, old: pa.Schema, new: pa.Schema) -> E:
    return dataclasses.replace(e, stats=translate_stats(e.stats, old, new)) if isinstance(e, DataFile) else e


KEPT_AS_WRITTEN = 1 << 20
"""Segments up to this size are kept in :data:`SEGMENTS` as they are written: the small tail
segments of appends, which the next commit merges (a catalog or a Lambda loads the table anew
for each commit, and would read them back)."""


def read_all(parts: Sequence[Part[E]], schema: pa.Schema) -> None:
    """Read the unread segments among ``parts``, in parallel (a GET each, then decoding)."""
    unread = [p for p in parts if p.unread]
    if len(unread) > 1:
        with ThreadPoolExecutor(min(_READ_THREADS, len(unread))) as pool:
            list(pool.map(lambda p: p.table(schema), unread))


def write_part(store: ObjectStore, codec: Codec[E], table: pa.Table, schema: pa.Schema) -> Part[E]:
    """Write ``table`` as a new segment; the written part keeps the table, so it is not read back."""
    data = segment.encode(table, codec.kind)
    rows, size, stats = segment.summarize(table, codec.kind, schema)
    held = segment.inline_bytes(table) if codec.kind == "data" else 0
    key = segment.new_segment_key()
    info = store.put(key, data, if_none_match=True)
    ref = SegmentRef(key, info.etag, len(data), codec.kind, table.num_rows, rows, size, stats, held)
    if len(data) <= KEPT_AS_WRITTEN:
        SEGMENTS.keep(store, ref, segment.decode(data, codec.kind, key=key))
    return Part(codec, ref=ref, table=table)


def merge_plan(counts: list[int]) -> list[tuple[int, int]]:
    """Which adjacent segments to merge: ``[start, end)`` ranges covering every segment.

    Segments fall in size tiers by powers of 8 (1-7 entries, 8-63, ...). More than
    ``RUN_LIMIT`` adjacent segments of one tier below the top merge into one, which lands in a
    higher tier and may merge again, like a counter's carries. So appends of single files
    leave at most ``RUN_LIMIT`` segments per tier, and each entry is rewritten once per tier
    on its way to a full segment: O(log) times, O(change) amortised per commit.
    """
    groups: list[list[int]] = [[c] for c in counts]
    while run := _long_run(groups):
        start, end = run
        groups[start:end] = [[c for g in groups[start:end] for c in g]]
    out, at = [], 0
    for g in groups:
        out.append((at, at + len(g)))
        at += len(g)
    return out


def _long_run(groups: list[list[int]]) -> tuple[int, int] | None:
    """The first run of more than ``RUN_LIMIT`` adjacent groups in one tier below the top."""
    i = 0
    while i < len(groups):
        tier = _tier(sum(groups[i]))
        j = i + 1
        while j < len(groups) and _tier(sum(groups[j])) == tier:
            j += 1
        if tier < _TOP_TIER and j - i > RUN_LIMIT:
            return i, j
        i = j
    return None


def _tier(entries: int) -> int:
    return min((max(entries, 1).bit_length() - 1) // 3, _TOP_TIER)


def prune_tombstones(
    tombstones: FileList[TombstoneFile], remaining: FileList[DataFile], removed: Collection[str]
) -> FileList[TombstoneFile]:
    """``tombstones`` without those that named only files no longer live, now that ``removed``
    left the data files (``remaining``). Only tombstones naming a removed file are judged."""
    gone = set(removed)
    if not gone:
        return tombstones
    touched = [t for t in tombstones if gone.intersection(t.files)]
    live = set(remaining.holding({f for t in touched for f in t.files if f not in gone}))
    return tombstones.without([t.path for t in touched if not live.intersection(t.files)])


class SegmentCache:
    """Decoded segments by (store URI, path, ETag): immutable, so each is read once per process
    while it fits in ``max_bytes`` of Arrow memory (16 full segments take about 256 MB)."""

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self._items: LruCache[tuple[str, str, str], pa.Table] = LruCache(max_bytes, lambda t: t.nbytes)

    def keep(self, store: ObjectStore, ref: SegmentRef, table: pa.Table) -> None:
        """Keep a segment this process just wrote (as it reads back)."""
        self._items.put((store.uri, ref.path, ref.etag), table)

    def loader(self, store: ObjectStore, kind: Kind) -> Loader:
        def load(ref: SegmentRef) -> pa.Table:
            key = (store.uri, ref.path, ref.etag)
            table = self._items.get(key)
            if table is None:
                try:
                    blob = store.get(ref.path, if_match=ref.etag)
                except (ObjectNotFoundError, PreconditionFailedError) as e:
                    raise CorruptObjectError(f"segment {ref.path} is missing or changed: {e}") from None
                table = segment.decode(blob.data, kind, key=ref.path)
                if table.num_rows != ref.entries:
                    raise CorruptObjectError(
                        f"segment {ref.path} has {table.num_rows} entries, its root says {ref.entries}"
                    )
                self._items.put(key, table)
            return table

        return load


SEGMENTS = SegmentCache()
