"""What operations built on a table handle need from it: the protocol :class:`~castable.table.Table`
implements, so that writes, merges and batch writers depend on it and not on the table module."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

import pyarrow as pa

from castable.commit.change import CommitResult, NextState
from castable.commit.conflicts import Access, Rows
from castable.format.manifest import Manifest
from castable.format.properties import TableProperties
from castable.inputs.batches import DataLike
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.read.where import Where
from castable.store import ObjectStore

SchemaMode = Literal["strict", "merge"]
"""How an append treats columns its rows bring that the table lacks: refuse them (``strict``) or
add them first (``merge``)."""


@dataclass(frozen=True)
class WriteStart:
    """A write's checked ``commit_id``, and ``committed_as``: the version a commit with that id
    already committed as, if this write is a retry of it (which then commits nothing)."""

    commit_id: str
    committed_as: int | None


class Handle(Protocol):
    """A handle on one table at the newest version it knows, through which changes commit."""

    store: ObjectStore

    @property
    def uri(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def schema(self) -> pa.Schema: ...

    @property
    def primary_key(self) -> str | None: ...

    @property
    def manifest(self) -> Manifest: ...

    @property
    def settings(self) -> TableProperties: ...

    def snapshot(self, version: int | None = None, as_of: datetime | str | None = None) -> Snapshot: ...

    def scan(
        self,
        columns: list[str] | None = None,
        filter: Where | None = None,
        *,
        version: int | None = None,
        as_of: datetime | str | None = None,
    ) -> Scan: ...

    def manifest_at(self, version: int | None = None, as_of: datetime | str | None = None) -> Manifest: ...

    def begin_write(self, commit_id: str | None) -> WriteStart: ...

    def commit_change(
        self,
        operation: str,
        commit_id: str,
        build: Callable[[Manifest], NextState],
        access: Access | None = None,
        *,
        across_schema: bool = False,
    ) -> CommitResult: ...

    def observe(self, rows: Rows) -> None: ...

    def conforming_batches(
        self, data: DataLike, schema: pa.Schema | None = None, *, fill: bool = False
    ) -> Iterator[pa.RecordBatch]: ...

    def append(
        self,
        data: DataLike,
        *,
        commit_id: str | None = None,
        on_rows: Callable[[int], None] | None = None,
        source_ids: Sequence[str] = (),
        schema_mode: SchemaMode = "strict",
    ) -> int: ...
