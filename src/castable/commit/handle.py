"""What operations built on a table handle need from it: the protocol the internal
:class:`~castable.table.handle.TableHandle` implements, so that writes, merges and batch writers
depend on it and not on the table module; and the session each write runs in
(:class:`WriteSession`, begun by :func:`write_operation`), which carries its commit id, whether it
is a retry, and its uploads in flight to the commit explicitly."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any, Concatenate, Literal, ParamSpec, Protocol, TypeVar

import pyarrow as pa

from castable.commit.change import CommitResult, NextState
from castable.commit.conflicts import Access, Rows
from castable.commit.written import WriteResult
from castable.errors import VersionNotFoundError
from castable.format.manifest import Manifest
from castable.format.properties import TableProperties
from castable.inputs.batches import DataLike
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.read.where import Where
from castable.store import ObjectStore
from castable.store.uploads import Deferred

SchemaMode = Literal["strict", "merge"]
"""How an append treats columns its rows bring that the table lacks: refuse them (``strict``) or
add them first (``merge``)."""


class WriteSession:
    """One write on a table handle, from its start to its commit: the checked ``commit_id``;
    ``committed_as``, the version a commit with that id already committed as if this write is a
    retry of it (which then commits nothing); and ``uploads``, the objects the write left
    uploading while it goes on to commit (``castable.store.uploads``), which the commit settles
    before its commit point. Used as a context manager: leaving it waits for those uploads."""

    def __init__(self, commit_id: str, committed_as: int | None) -> None:
        self.commit_id = commit_id
        self.committed_as = committed_as
        self.uploads = Deferred()

    def __enter__(self) -> WriteSession:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.uploads.close(failed=error is not None)


P = ParamSpec("P")
R = TypeVar("R")


def committed_result(t: Handle, w: WriteSession, *args: Any, **kwargs: Any) -> WriteResult:
    """What a retried write returns: the result its first commit recorded (its counts unknown
    if that version has expired since)."""
    assert w.committed_as is not None
    try:
        return WriteResult.of(t.manifest_at(w.committed_as), retried=True)
    except VersionNotFoundError:
        return WriteResult.unknown(w.committed_as, w.commit_id, "write")


def written(w: WriteSession, operation: str, result: CommitResult) -> WriteResult:
    """What a write that committed (or staged, in a transaction) ``result`` returns."""
    if result.staged:
        return replace(WriteResult.of(result.manifest, staged=True), version=result.version)
    if result.manifest.version != result.version:  # its commit had landed, and has expired since
        return WriteResult.unknown(result.version, w.commit_id, operation)
    return WriteResult.of(result.manifest)


def unchanged(t: Handle, w: WriteSession, operation: str) -> WriteResult:
    """What a write with nothing to commit (a delete that matched no row) returns."""
    return WriteResult(t.version, w.commit_id, operation, committed=False)


def write_operation(
    retried: Callable[..., R],
) -> Callable[[Callable[Concatenate[Handle, WriteSession, P], R]], Callable[Concatenate[Handle, str | None, P], R]]:
    """A write of a handle, given its ``commit_id`` after the handle: the decorated function
    runs inside a :class:`WriteSession` (``Handle.begin_write``) and receives it after the
    handle; a retry of a commit that already committed runs nothing and returns ``retried``
    of the handle, the session (whose ``committed_as`` is that version) and the write's arguments."""

    def decorate(
        operation: Callable[Concatenate[Handle, WriteSession, P], R],
    ) -> Callable[Concatenate[Handle, str | None, P], R]:
        def run(t: Handle, commit_id: str | None, /, *args: P.args, **kwargs: P.kwargs) -> R:
            with t.begin_write(commit_id) as session:
                if session.committed_as is not None:
                    return retried(t, session, *args, **kwargs)
                return operation(t, session, *args, **kwargs)

        run.__name__, run.__qualname__, run.__doc__ = operation.__name__, operation.__qualname__, operation.__doc__
        return run

    return decorate


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

    def begin_write(self, commit_id: str | None) -> WriteSession: ...

    def commit_change(
        self,
        operation: str,
        session: WriteSession,
        build: Callable[[Manifest], NextState],
        access: Access | None = None,
        *,
        across_schema: bool = False,
    ) -> WriteResult: ...

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
    ) -> WriteResult: ...
