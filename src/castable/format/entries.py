"""The entries a manifest lists: data files, tombstone files, and what a commit did (docs/format.md section 3)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from castable.format.stats import ColumnStats, JsonValue, stats_from_json


@dataclass(frozen=True)
class DataFile:
    """One immutable Parquet file of the table, or rows kept inline in the version's metadata
    (``inline``: a small append that costs no file, read as a one-row-group file of its rows)."""

    path: str
    size: int
    etag: str
    rows: int
    row_groups: int
    stats: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False, compare=False)
    added_version: int = 0
    inline: pa.Table | None = field(default=None, hash=False, compare=False, repr=False)
    """The rows, under the field ids of the schema they were kept with, for an inline entry."""
    spec_id: int = 0
    """The partition spec the file was written with (``castable.format.partitioning``)."""
    partition: tuple[JsonValue | None, ...] = ()
    """The file's value of each field of that spec (JSON form): every row of it has these."""
    sort_order_id: int = 0
    """The sort order its rows were written in (``castable.format.sorting``; 0: none)."""

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
            **({} if self.inline is None else {"inline": _ipc_text(self.inline)}),
            **({"spec_id": self.spec_id, "partition": list(self.partition)} if self.partition else {}),
            **({"sort_order_id": self.sort_order_id} if self.sort_order_id else {}),
        }

    @cached_property
    def json_text(self) -> str:
        """The compact JSON of this entry, encoded once: a commit re-encodes only new entries."""
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> DataFile:
        inline = doc.get("inline")
        return cls(
            path=str(doc["path"]),
            size=int(doc["size"]),
            etag=str(doc["etag"]),
            rows=int(doc["rows"]),
            row_groups=int(doc["row_groups"]),
            stats=dict(doc.get("stats") or {}),
            added_version=int(doc.get("added_version", 0)),
            inline=None if inline is None else _ipc_table(str(inline)),
            spec_id=int(doc.get("spec_id", 0)),
            partition=tuple(doc.get("partition", ())),
            sort_order_id=int(doc.get("sort_order_id", 0)),
        )


def _ipc_text(table: pa.Table) -> str:
    """Inline rows as base64 text of an Arrow IPC stream (field ids kept in its schema)."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()


def _ipc_table(text: str) -> pa.Table:
    return ipc.open_stream(base64.b64decode(text)).read_all()


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
        return dumps(self.to_json())

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


def dumps(value: object) -> str:
    """Compact JSON, as every castable manifest is written."""
    return json.dumps(value, separators=(",", ":"))
