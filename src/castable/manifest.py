"""The manifest: the immutable, complete description of one table version (DESIGN section 3).

A manifest is UTF-8 JSON. It is written once, with ``If-None-Match: *``, and that write is the
commit. ``format_version`` lets the format grow (e.g. a second level of manifest segments);
readers refuse versions they do not know instead of misreading them.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

import pyarrow as pa

from castable.errors import CorruptObjectError
from castable.schema import schema_from_json, schema_to_json
from castable.stats import ColumnStats, stats_from_json

FORMAT_NAME = "castable"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class DataFile:
    """One immutable Parquet file of the table."""

    path: str
    size: int
    etag: str
    rows: int
    row_groups: int
    stats: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False, compare=False)
    added_version: int = 0

    def column_stats(self, name: str, schema: pa.Schema) -> ColumnStats | None:
        doc = self.stats.get(name)
        return stats_from_json({name: doc}, schema)[name] if doc is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "etag": self.etag,
            "rows": self.rows,
            "row_groups": self.row_groups,
            "stats": self.stats,
            "added_version": self.added_version,
        }

    @cached_property
    def json_text(self) -> str:
        """The compact JSON of this entry, encoded once: a commit re-encodes only new entries."""
        return _dumps(self.to_json())

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> DataFile:
        return cls(
            path=str(doc["path"]),
            size=int(doc["size"]),
            etag=str(doc["etag"]),
            rows=int(doc["rows"]),
            row_groups=int(doc["row_groups"]),
            stats=dict(doc.get("stats") or {}),
            added_version=int(doc.get("added_version", 0)),
        )


@dataclass(frozen=True)
class TombstoneFile:
    """One immutable tombstone (``.del``) file and the data files its entries name."""

    path: str
    size: int
    etag: str
    files: tuple[str, ...]
    rows: int | None = None
    added_version: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "etag": self.etag,
            "files": list(self.files),
            "rows": self.rows,
            "added_version": self.added_version,
        }

    @cached_property
    def json_text(self) -> str:
        """The compact JSON of this entry, encoded once (see :attr:`DataFile.json_text`)."""
        return _dumps(self.to_json())

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TombstoneFile:
        rows = doc.get("rows")
        return cls(
            path=str(doc["path"]),
            size=int(doc["size"]),
            etag=str(doc["etag"]),
            files=tuple(str(f) for f in doc["files"]),
            rows=None if rows is None else int(rows),
            added_version=int(doc.get("added_version", 0)),
        )


@dataclass(frozen=True)
class CommitInfo:
    """What the commit that produced a version did."""

    operation: str
    commit_id: str
    summary: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Manifest:
    """One table version. Immutable: operations derive new manifests with :func:`replace`."""

    table_uuid: str
    version: int
    previous: int | None
    created_at: datetime
    schema: pa.Schema
    primary_key: tuple[str, ...]
    properties: dict[str, str]
    commit: CommitInfo
    data_files: tuple[DataFile, ...]
    tombstones: tuple[TombstoneFile, ...]
    recent_commits: dict[str, int] = field(default_factory=dict, hash=False, compare=False)

    def next(
        self,
        *,
        commit: CommitInfo,
        created_at: datetime,
        data_files: tuple[DataFile, ...],
        tombstones: tuple[TombstoneFile, ...],
        commit_retention: int,
        source_ids: tuple[str, ...] = (),
    ) -> Manifest:
        """The manifest of the version after this one; ``source_ids`` are recorded among the
        recent commit ids, so a later write of the same source is recognised."""
        version = self.version + 1
        recent = {**self.recent_commits, commit.commit_id: version, **dict.fromkeys(source_ids, version)}
        if len(recent) > commit_retention:
            recent = dict(list(recent.items())[-commit_retention:])
        return replace(
            self,
            version=version,
            previous=self.version,
            created_at=max(created_at, self.created_at + timedelta(microseconds=1)),
            commit=commit,
            data_files=data_files,
            tombstones=tombstones,
            recent_commits=recent,
        )

    @property
    def total_rows(self) -> int:
        """Rows in the data files, before tombstones are applied."""
        return sum(f.rows for f in self.data_files)

    def to_json(self) -> bytes:
        """Compact JSON; the file lists are spliced in from each entry's cached encoding, so
        the bytes equal ``json.dumps`` of the whole document but a commit costs O(change)."""
        with _cycle_collection_paused():
            return self._encode()

    def _encode(self) -> bytes:
        doc = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "table_uuid": self.table_uuid,
            "version": self.version,
            "previous": self.previous,
            "created_at": _format_time(self.created_at),
            "schema": schema_to_json(self.schema),
            "primary_key": list(self.primary_key),
            "properties": self.properties,
            "commit": {
                "operation": self.commit.operation,
                "commit_id": self.commit.commit_id,
                "summary": self.commit.summary,
            },
        }
        files = ",".join(f.json_text for f in self.data_files)
        tombstones = ",".join(t.json_text for t in self.tombstones)
        return (
            f'{_dumps(doc)[:-1]},"data_files":[{files}],"tombstones":[{tombstones}],'
            f'"recent_commits":{_dumps(self.recent_commits)}}}'
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, *, key: str) -> Manifest:
        """Parse and validate a manifest; anything malformed raises ``CorruptObjectError``."""
        with _cycle_collection_paused():
            return cls._parse(data, key)

    @classmethod
    def _parse(cls, data: bytes, key: str) -> Manifest:
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT_NAME:
                raise ValueError("not a castable manifest")
            found = doc.get("format_version")
            if not isinstance(found, int) or isinstance(found, bool) or found < 1:
                raise ValueError(f"format_version is {found!r}, not a version number")
            if found != FORMAT_VERSION:
                raise CorruptObjectError(
                    f"format version {found} is newer than this castable reads ({FORMAT_VERSION}); upgrade castable"
                )
            commit = doc["commit"]
            previous = doc["previous"]
            manifest = cls(
                table_uuid=str(doc["table_uuid"]),
                version=int(doc["version"]),
                previous=None if previous is None else int(previous),
                created_at=_parse_time(doc["created_at"]),
                schema=schema_from_json(doc["schema"]),
                primary_key=tuple(str(c) for c in doc["primary_key"]),
                properties={str(k): str(v) for k, v in doc["properties"].items()},
                commit=CommitInfo(
                    operation=str(commit["operation"]),
                    commit_id=str(commit["commit_id"]),
                    summary=dict(commit.get("summary") or {}),
                ),
                data_files=tuple(DataFile.from_json(f) for f in doc["data_files"]),
                tombstones=tuple(TombstoneFile.from_json(t) for t in doc["tombstones"]),
                recent_commits={str(k): int(v) for k, v in doc.get("recent_commits", {}).items()},
            )
        except CorruptObjectError as e:
            raise CorruptObjectError(f"{key}: {e}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptObjectError(f"{key} is not a valid manifest: {e!r}") from None
        for name in manifest.primary_key:
            if name not in manifest.schema.names:
                raise CorruptObjectError(f"{key}: primary key column {name!r} is not in the schema")
        return manifest


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _format_time(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _parse_time(s: str) -> datetime:
    t = datetime.fromisoformat(s.replace("Z", "+00:00"))
    if t.tzinfo is None:
        raise ValueError(f"created_at {s!r} has no time zone")
    return t


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
