"""The manifest: the immutable, complete description of one table version (docs/format.md section 3).

A manifest is UTF-8 JSON. It is written once, with ``If-None-Match: *``, and that write is the
commit. ``format_version`` lets the format grow; readers refuse versions they do not know
instead of misreading them. Version 1 lists every entry inline. Version 2 lists segments
(``castable.format.segment``), each with a summary, so a commit writes only what changed
(docs/format.md section 3.1).
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pyarrow as pa

from castable.errors import CorruptObjectError
from castable.format import segment
from castable.format.entries import CommitInfo, DataFile, TombstoneFile, dumps
from castable.format.filelist import DATA, SEGMENTS, TOMBSTONES, FileList, Loader, Part
from castable.format.partitioning import Partitioning
from castable.format.schema import schema_from_json, schema_to_json
from castable.format.segment import SegmentRef
from castable.format.sorting import Sorting
from castable.format.times import format_time, parse_time
from castable.store import ObjectStore
from castable.store.readahead import beside

__all__ = ["CommitInfo", "DataFile", "FileList", "Manifest", "Membership", "RecentCommits", "TombstoneFile"]

FORMAT_NAME = "castable"
FORMAT_VERSIONS = (1, 2)
LATEST_FORMAT_VERSION = 2
INLINE_COMMITS = 64
"""Version 2 keeps this many recent commit ids in the root; older ones move to one segment."""


class RecentCommits(Mapping[str, int]):
    """Commit ids (and source ids) of recent versions, newest last: a retry of a commit that
    landed is recognised by its id. Version 1 keeps them all inline; version 2 keeps the newest
    ``INLINE_COMMITS`` in the root and the rest in one commits segment, rewritten when the root's
    share fills, so a commit writes O(1) bytes of them on average."""

    __slots__ = ("_loaded", "_older", "inline", "ref")

    def __init__(
        self,
        inline: Mapping[str, int] | None = None,
        *,
        ref: SegmentRef | None = None,
        older: Loader | dict[str, int] | None = None,
    ) -> None:
        self.inline = dict(inline or {})
        self.ref = ref
        self._older = older
        self._loaded: dict[str, int] | None = older if isinstance(older, dict) else None

    def _older_ids(self) -> dict[str, int]:
        if self._loaded is None:
            if self.ref is None or not callable(self._older):
                self._loaded = {}
            else:
                table = self._older(self.ref)
                ids, versions = table.column("commit_id").to_pylist(), table.column("version").to_pylist()
                self._loaded = dict(zip(ids, versions, strict=True))
        return self._loaded

    def __getitem__(self, key: str) -> int:
        if key in self.inline:
            return self.inline[key]
        return self._older_ids()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.inline or key in self._older_ids()

    def __iter__(self) -> Iterator[str]:
        yield from (k for k in self._older_ids() if k not in self.inline)
        yield from self.inline

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def plus(self, ids: Mapping[str, int], *, retention: int, inline_limit: int | None) -> RecentCommits:
        """These ids and ``ids`` after them, the oldest dropped beyond ``retention``; with an
        ``inline_limit``, a full root share moves into a new (pending) commits segment."""
        inline = {**self.inline, **ids}
        if inline_limit is None:
            return RecentCommits(dict(list(inline.items())[-retention:]))
        if len(inline) <= inline_limit:
            return RecentCommits(inline, ref=self.ref, older=self._older if self._loaded is None else self._loaded)
        merged = {**{k: v for k, v in self._older_ids().items() if k not in inline}, **inline}
        return RecentCommits({}, older=dict(list(merged.items())[-retention:]))

    def written(self, store: ObjectStore, created: list[str]) -> RecentCommits:
        """The same ids with a pending commits segment written (its key joins ``created``)."""
        if self.ref is not None or not self._loaded:
            return self
        table = segment.commits_table(list(self._loaded.items()))
        data = segment.encode(table, "commits")
        key = segment.new_segment_key()
        info = store.put(key, data, if_none_match=True)
        created.append(key)
        ref = SegmentRef(key, info.etag, len(data), "commits", table.num_rows, 0, 0, {})
        return RecentCommits(self.inline, ref=ref, older=self._loaded)


@dataclass(frozen=True)
class Membership:
    """The database a table belongs to (docs/format.md section 13): every write of the table
    commits through that database's log, which names this table version in ``version``."""

    database_uuid: str
    name: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"uuid": self.database_uuid, "name": self.name, "version": self.version}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Membership:
        version = doc["version"]
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise ValueError(f"database version {version!r} is not a version number")
        return cls(str(doc["uuid"]), str(doc["name"]), version)


@dataclass(frozen=True)
class Manifest:
    """One table version. Immutable: operations derive new manifests with :func:`replace`.
    ``data_files`` and ``tombstones`` may be given as tuples; they are held as :class:`FileList`."""

    table_uuid: str
    version: int
    previous: int | None
    created_at: datetime
    schema: pa.Schema
    primary_key: tuple[str, ...]
    properties: dict[str, str]
    commit: CommitInfo
    data_files: FileList[DataFile] = field(hash=False)
    tombstones: FileList[TombstoneFile] = field(hash=False)
    recent_commits: RecentCommits = field(default_factory=RecentCommits, hash=False, compare=False)
    format_version: int = LATEST_FORMAT_VERSION
    database: Membership | None = None
    """Set on the tables of a database; ``None`` for a table of its own."""
    partitioning: Partitioning = field(default_factory=Partitioning)
    """The table's partition specs (none of them with fields: not partitioned)."""
    sorting: Sorting = field(default_factory=Sorting)
    """The table's sort orders (the default one: what writes and compaction follow)."""

    def __post_init__(self) -> None:
        for name, codec in (("data_files", DATA), ("tombstones", TOMBSTONES)):
            value = getattr(self, name)
            if not isinstance(value, FileList):
                object.__setattr__(self, name, FileList.of(codec, self.schema, value))
        if not isinstance(self.recent_commits, RecentCommits):
            object.__setattr__(self, "recent_commits", RecentCommits(self.recent_commits))

    def restricted(self, data_files: Iterable[DataFile], *, tombstones: bool = True) -> Manifest:
        """This version limited to some data files (and, if ``tombstones``, its deletes), to read those alone."""
        return replace(
            self,
            data_files=FileList.of(DATA, self.schema, data_files),
            tombstones=self.tombstones if tombstones else FileList(TOMBSTONES, self.schema),
        )

    def next(
        self,
        *,
        commit: CommitInfo,
        created_at: datetime,
        data_files: FileList[DataFile],
        tombstones: FileList[TombstoneFile],
        commit_retention: int,
        source_ids: tuple[str, ...] = (),
        format_version: int | None = None,
        schema: pa.Schema | None = None,
        primary_key: tuple[str, ...] | None = None,
        properties: dict[str, str] | None = None,
        partitioning: Partitioning | None = None,
        sorting: Sorting | None = None,
    ) -> Manifest:
        """The manifest of the version after this one, in ``format_version`` (default: this
        one's), ``schema`` and ``properties`` (default: this one's); ``source_ids`` are recorded
        among the recent commit ids, so a later write of the same source is recognised."""
        version = self.version + 1
        form = format_version or self.format_version
        recent = self.recent_commits.plus(
            {commit.commit_id: version, **dict.fromkeys(source_ids, version)},
            retention=commit_retention,
            inline_limit=None if form == 1 else INLINE_COMMITS,
        )
        schema = self.schema if schema is None else schema
        return replace(
            self,
            version=version,
            previous=self.version,
            created_at=max(created_at, self.created_at + timedelta(microseconds=1)),
            commit=commit,
            schema=schema,
            primary_key=self.primary_key if primary_key is None else primary_key,
            properties=self.properties if properties is None else properties,
            partitioning=self.partitioning if partitioning is None else partitioning,
            sorting=self.sorting if sorting is None else sorting,
            data_files=data_files.evolved(schema),
            tombstones=tombstones.evolved(schema),
            recent_commits=recent,
            format_version=form,
        )

    @property
    def total_rows(self) -> int:
        """Rows in the data files, before tombstones are applied (read from summaries in version 2)."""
        return self.data_files.total("rows")

    def written(self, store: ObjectStore, created: list[str] | None = None) -> Manifest:
        """This manifest with every pending segment written (version 2), ready for :meth:`to_json`;
        the keys of the segments written join ``created``, so a commit that loses can delete them."""
        if self.format_version == 1:
            return self
        created = [] if created is None else created
        data_files, tombstones = beside(
            partial(self.data_files.written, store, created), partial(self.tombstones.written, store, created)
        )  # in one round trip: an upsert or a delete writes both
        return replace(
            self,
            data_files=data_files,
            tombstones=tombstones,
            recent_commits=self.recent_commits.written(store, created),
        )

    def to_json(self) -> bytes:
        """Compact JSON. Version 1 splices in each entry's cached encoding, so the bytes equal
        ``json.dumps`` of the whole document but a commit costs O(change); version 2 lists the
        segments, which :meth:`written` must have written."""
        with _cycle_collection_paused():
            return self._encode()

    def _encode(self) -> bytes:
        doc = {
            "format": FORMAT_NAME,
            "format_version": self.format_version,
            "table_uuid": self.table_uuid,
            "version": self.version,
            "previous": self.previous,
            "created_at": format_time(self.created_at),
            "schema": schema_to_json(self.schema),
            "primary_key": list(self.primary_key),
            "properties": self.properties,
            "commit": {
                "operation": self.commit.operation,
                "commit_id": self.commit.commit_id,
                "summary": self.commit.summary,
            },
        }
        if self.database is not None:
            doc["database"] = self.database.to_json()
        if self.partitioning != Partitioning():
            doc["partitioning"] = self.partitioning.to_json()
        if self.sorting != Sorting():
            doc["sorting"] = self.sorting.to_json()
        if self.format_version >= 2:
            recent = self.recent_commits
            doc["segments"] = [r.to_json() for r in self.data_files.refs + self.tombstones.refs]
            doc["recent_commits"] = recent.inline
            doc["commits_segment"] = None if recent.ref is None else recent.ref.to_json()
            if recent._loaded and recent.ref is None:
                raise ValueError("the commits segment has not been written")
            return dumps(doc).encode()
        files = ",".join(f.json_text for f in self.data_files)
        tombstones = ",".join(t.json_text for t in self.tombstones)
        return (
            f'{dumps(doc)[:-1]},"data_files":[{files}],"tombstones":[{tombstones}],'
            f'"recent_commits":{dumps(dict(self.recent_commits))}}}'
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, *, key: str, store: ObjectStore | None = None) -> Manifest:
        """Parse and validate a manifest; anything malformed raises ``CorruptObjectError``.
        A version-2 manifest reads its segments from ``store`` when they are first needed."""
        with _cycle_collection_paused():
            return cls._parse(data, key, store)

    @classmethod
    def _parse(cls, data: bytes, key: str, store: ObjectStore | None) -> Manifest:
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT_NAME:
                raise ValueError("not a castable manifest")
            found = doc.get("format_version")
            if not isinstance(found, int) or isinstance(found, bool) or found < 1:
                raise ValueError(f"format_version is {found!r}, not a version number")
            if found not in FORMAT_VERSIONS:
                raise CorruptObjectError(
                    f"format version {found} is newer than this castable reads ({LATEST_FORMAT_VERSION}); "
                    "upgrade castable"
                )
            commit = doc["commit"]
            previous = doc["previous"]
            schema = schema_from_json(doc["schema"])
            if found == 1:
                files: dict[str, Any] = {
                    "data_files": tuple(DataFile.from_json(f) for f in doc["data_files"]),
                    "tombstones": tuple(TombstoneFile.from_json(t) for t in doc["tombstones"]),
                    "recent_commits": RecentCommits({str(k): int(v) for k, v in doc.get("recent_commits", {}).items()}),
                }
            else:
                files = _segment_lists(doc, schema, store)
            manifest = cls(
                table_uuid=str(doc["table_uuid"]),
                version=int(doc["version"]),
                previous=None if previous is None else int(previous),
                created_at=parse_time(doc["created_at"]),
                schema=schema,
                primary_key=tuple(str(c) for c in doc["primary_key"]),
                properties={str(k): str(v) for k, v in doc["properties"].items()},
                commit=CommitInfo(
                    operation=str(commit["operation"]),
                    commit_id=str(commit["commit_id"]),
                    summary=dict(commit.get("summary") or {}),
                ),
                format_version=found,
                database=None if doc.get("database") is None else Membership.from_json(doc["database"]),
                partitioning=Partitioning.from_json(doc.get("partitioning")),
                sorting=Sorting.from_json(doc.get("sorting")),
                **files,
            )
        except CorruptObjectError as e:
            raise CorruptObjectError(f"{key}: {e}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptObjectError(f"{key} is not a valid manifest: {e!r}") from None
        for name in manifest.primary_key:
            if name not in manifest.schema.names:
                raise CorruptObjectError(f"{key}: primary key column {name!r} is not in the schema")
        return manifest


def _segment_lists(doc: dict[str, Any], schema: pa.Schema, store: ObjectStore | None) -> dict[str, Any]:
    """A version-2 root's file lists and recent commits, their segments read on first use."""
    refs = [SegmentRef.from_json(r) for r in doc["segments"]]
    listed = [r.kind for r in refs if r.kind == "commits"]
    if listed:
        raise ValueError("a commits segment is listed among the file segments")
    commits = doc.get("commits_segment")
    commits_ref = None if commits is None else SegmentRef.from_json(commits)
    if commits_ref is not None and commits_ref.kind != "commits":
        raise ValueError(f"commits_segment {commits_ref.path} is a {commits_ref.kind} segment")

    def loader(kind: segment.Kind) -> Loader:
        if store is None:
            return _unreadable
        return SEGMENTS.loader(store, kind)

    return {
        "data_files": FileList(
            DATA, schema, [Part(DATA, ref=r, load=loader("data")) for r in refs if r.kind == "data"]
        ),
        "tombstones": FileList(
            TOMBSTONES,
            schema,
            [Part(TOMBSTONES, ref=r, load=loader("tombstone")) for r in refs if r.kind == "tombstone"],
        ),
        "recent_commits": RecentCommits(
            {str(k): int(v) for k, v in doc["recent_commits"].items()},
            ref=commits_ref,
            older=loader("commits") if commits_ref is not None else None,
        ),
    }


def _unreadable(ref: SegmentRef) -> pa.Table:
    raise CorruptObjectError(f"segment {ref.path} cannot be read: the manifest was parsed without its store")


@contextlib.contextmanager
def _cycle_collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused: parsing a large manifest allocates millions of
    objects that form no cycles, and the collector's passes over them were half the parse time
    (bench/results/scale.md). Reference counting still frees everything as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
