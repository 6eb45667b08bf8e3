"""What one commit is made of, as values: the change an operation plans (``Change``, built into a
``NextState`` on whatever version it lands on), a transaction's staging of it, the commit's result,
and commit ids (docs/format.md section 7)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from castable.commit.conflicts import Access, check_sources, judge_base
from castable.commit.pointer import Pointer
from castable.errors import (
    InvalidInputError,
)
from castable.format.manifest import CommitInfo, DataFile, FileList, Manifest, TombstoneFile
from castable.format.partitioning import Partitioning
from castable.format.sorting import Sorting
from castable.format.times import now
from castable.store.uploads import Deferred


@dataclass(frozen=True)
class NextState:
    """What a change makes of the base it is applied to: the next version's file lists."""

    data_files: FileList[DataFile]
    tombstones: FileList[TombstoneFile]
    summary: dict[str, Any]
    source_ids: tuple[str, ...] = ()
    """Idempotency keys of the inputs the change consumed, recorded beside the commit id."""
    format_version: int | None = None
    """The format the next version is written in; ``None`` keeps the base's (see ``Table.upgrade``)."""
    schema: pa.Schema | None = None
    """The next version's schema; ``None`` keeps the base's (see ``Table.alter``)."""
    primary_key: tuple[str, ...] | None = None
    properties: dict[str, str] | None = None
    """The next version's table properties; ``None`` keeps the base's (see ``Table.set_properties``)."""
    partitioning: Partitioning | None = None
    """The next version's partition specs; ``None`` keeps the base's (see ``Table.partition_by``)."""
    sorting: Sorting | None = None
    """The next version's sort orders; ``None`` keeps the base's (see ``Table.sort_by``)."""


@dataclass(frozen=True)
class Change:
    """One operation of a commit: its name, the function that applies it to a base, and what it
    declares to the conflict model (``castable.commit.conflicts``)."""

    operation: str
    build: Callable[[Manifest], NextState]
    access: Access | None = None
    """What a transaction validates for it; ``None``: it cannot run inside a transaction."""
    across_schema: bool = False
    """Whether it stays valid on a base whose schema changed since it was planned (an append's
    files stay readable under every schema the allowed changes produce; an alter or a restore
    states the schema it commits); any other change then conflicts."""
    uploads: Deferred | None = None
    """The objects its write is still uploading (``castable.store.uploads``): the commit waits
    for them before its commit point."""


TRANSACTION = "transaction"
"""The operation a table version records when one transaction applied several changes to it."""


def stage(
    current: Manifest,
    changes: Sequence[Change],
    *,
    planned: Manifest,
    commit_id: str,
    commit_retention: int,
) -> Manifest:
    """The version after ``current`` with ``changes`` applied in order, each on the result of
    the one before, as one version (not yet written). This is where every commit rebases:
    each change re-validates itself against ``current`` (format section 8), and the conflict
    model judges what every change declares (its schema, its inputs) against ``current``."""
    judge_base(
        planned,
        current,
        operations="/".join(c.operation for c in changes),
        across_schema=all(c.across_schema for c in changes),
    )
    view, staged = current, current
    sources: tuple[str, ...] = ()
    summaries: list[dict[str, Any]] = []
    for change in changes:
        state = change.build(view)
        check_sources(view, state.source_ids)
        sources += state.source_ids
        summaries.append({"operation": change.operation, **state.summary})
        operation, summary = (
            (change.operation, state.summary) if len(changes) == 1 else (TRANSACTION, {"operations": summaries})
        )
        staged = current.next(
            commit=CommitInfo(operation, commit_id, summary),
            created_at=now(),
            data_files=state.data_files,
            tombstones=state.tombstones,
            commit_retention=commit_retention,
            source_ids=sources,
            format_version=state.format_version or staged.format_version,
            schema=staged.schema if state.schema is None else state.schema,
            primary_key=staged.primary_key if state.primary_key is None else state.primary_key,
            properties=staged.properties if state.properties is None else state.properties,
            partitioning=staged.partitioning if state.partitioning is None else state.partitioning,
            sorting=staged.sorting if state.sorting is None else state.sorting,
        )
        view = replace(staged, version=current.version)  # the next change adds to the same version
    return staged


def new_commit_id(commit_id: str | None) -> str:
    """``commit_id`` checked (a non-empty string of at most 256 characters), or a new random one."""
    if commit_id is None:
        return str(uuid.uuid4())
    if not isinstance(commit_id, str) or not commit_id or len(commit_id) > 256:
        raise InvalidInputError("commit_id must be a non-empty string of at most 256 characters")
    return commit_id


@dataclass
class CommitResult:
    """The version the change is (``version``), and the newest manifest and pointer the writer
    saw: the committed version's own, unless a retried commit's version has expired since;
    ``staged`` inside a transaction, whose manifest is then the staged one (at the base's version)."""

    version: int
    manifest: Manifest
    pointer: Pointer | None
    staged: bool = False
