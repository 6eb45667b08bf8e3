"""Restore: a new version whose files are an older version's, with no data copied."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.tables import EVENTS, FILES_ONLY, events, snapshot_of

import castable
from castable.errors import InvalidInputError, VersionNotFoundError
from castable.table import Table


def history(table_uri: tuple[str, dict | None], properties: dict[str, str] | None = None) -> Table:
    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, properties=properties)
    t.append(events(0, 100))  # version 1
    t.delete("id < 50")  # version 2
    t.append(events(100, 120))  # version 3
    return t


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> Table:
    """Its appends are small: kept inline, no data file written."""
    return history(table_uri)


def test_restore_brings_back_a_version_without_copying(table: Table) -> None:
    objects = {k for k in snapshot_of(table.store) if k.startswith("data/")}
    assert table.restore(1, commit_id="undo").version == 4
    assert table.scan().to_arrow().sort_by("id") == table.scan(version=1).to_arrow().sort_by("id")
    assert {k for k in snapshot_of(table.store) if k.startswith("data/")} == objects, "no data copied"
    h = table.history(limit=1)[0]
    assert (h.operation, h.summary) == ("restore", {"restored_version": 1, "files": 1, "rows": 100})
    assert table.restore(1, commit_id="undo").version == 4, "a repeated commit_id commits nothing"
    assert table.restore(as_of=table.manifest_at(3).created_at).version == 5
    assert table.count() == 70 and table.scan(version=4).count() == 100, "later commits stay in the history"


def test_restore_after_compaction_and_gc_brings_back_inline_rows(table: Table) -> None:
    """An inline entry's rows live in its version's segments, which gc keeps while the version
    is retained: a restore across a compaction that flushed them brings them back."""
    assert any(f.inline is not None for f in table.manifest_at(1).data_files)
    table.compact(min_file_size=1 << 30)
    table.gc(orphan_grace=timedelta(0))
    assert all(f.inline is None for f in table.manifest.data_files)
    table.restore(2)
    assert table.scan().to_arrow().sort_by("id") == table.scan(version=2).to_arrow().sort_by("id")
    assert table.count() == 50


def test_restore_of_what_is_gone_is_refused(table: Table) -> None:
    table.compact(min_file_size=1 << 30)
    table.expire(retain_versions=1)
    with pytest.raises(VersionNotFoundError, match="has expired"):
        table.restore(1)
    before = snapshot_of(table.store)
    with pytest.raises(InvalidInputError, match="a version or as_of"):
        table.restore()
    assert snapshot_of(table.store) == before


def test_restore_when_files_are_gone(table_uri: tuple[str, dict | None]) -> None:
    """gc keeps every file a retained version references; a file removed behind castable's back
    (a bucket lifecycle rule, a hand) makes the restore refuse rather than commit a broken version."""
    table = history(table_uri, FILES_ONLY)
    table.compact(min_file_size=1 << 30)
    table.gc(orphan_grace=timedelta(0))
    old = table.manifest_at(2).data_files[0].path
    assert table.store.exists(old), "gc kept a retained version's file"
    table.store.delete(old)
    before = snapshot_of(table.store)
    with pytest.raises(InvalidInputError, match=f"cannot restore version 2: 1 of its files are gone \\(e.g. {old}"):
        table.restore(2)
    assert snapshot_of(table.store) == before
