"""The maintenance commands (compact, expire, gc, repair): thin layers over ``Table.maintenance``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any

import typer
from rich.table import Table as RichTable

from castable.cli.common import (
    AsJson,
    CommitId,
    StorageOption,
    commands,
    console,
    dumps,
    emit,
    open_table,
    spinner,
)

maintenance_app = commands()


def _print_summary(title: str, summary: Mapping[str, object], as_json: bool) -> None:
    if as_json:
        console.print(dumps(summary))
        return
    shown = RichTable("", "", title=title, show_header=False)
    for key, value in summary.items():
        shown.add_row(key, str(value))
    console.print(shown)


@maintenance_app.command()
def compact(
    uri: str,
    sort_by: Annotated[str | None, typer.Option(help="Sort rows by this column within each new file.")] = None,
    min_file_size: Annotated[int | None, typer.Option(help="Rewrite files smaller than this many bytes.")] = None,
    delete_ratio: Annotated[
        float | None, typer.Option(help="Rewrite files with at least this deleted fraction.")
    ] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Bin-pack small files, rewrite delete-heavy ones and merge tombstones."""
    table = open_table(uri, storage_option)
    with spinner("compacting", as_json):
        report = table.compact(sort_by=sort_by, min_file_size=min_file_size, delete_ratio=delete_ratio)
    _print_summary("compaction", report.summary(), as_json)


@maintenance_app.command()
def expire(
    uri: str,
    retain_versions: Annotated[int | None, typer.Option(help="Keep at least the newest N versions.")] = None,
    retain_hours: Annotated[float | None, typer.Option(help="Keep versions younger than this.")] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Delete the manifests of versions outside the retention window."""
    table = open_table(uri, storage_option)
    retain_for = None if retain_hours is None else timedelta(hours=retain_hours)
    report = table.expire(retain_versions=retain_versions, retain_for=retain_for)
    summary = {"versions_expired": len(report.versions_expired), "versions_retained": report.versions_retained}
    _print_summary("expire", summary, as_json)


@maintenance_app.command()
def gc(
    uri: str,
    grace_hours: Annotated[float | None, typer.Option(help="Only remove orphans older than this.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed.")] = False,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Remove files no retained version references, and stale multipart uploads."""
    table = open_table(uri, storage_option)
    grace = None if grace_hours is None else timedelta(hours=grace_hours)
    with spinner("collecting garbage", as_json):
        report = table.gc(orphan_grace=grace, dry_run=dry_run)
    if as_json:
        console.print(dumps({**report.summary(), "objects": report.objects}))
        return
    if dry_run:
        for key in report.objects:
            console.print(key)
    _print_summary("gc (dry run: nothing removed)" if dry_run else "gc", report.summary(), as_json)
    if report.orphans_in_grace:
        console.print(
            f"kept {report.orphans_in_grace} unreferenced object(s) younger than the grace period "
            f"({timedelta(seconds=report.orphan_grace_seconds)}): a writer may still commit them; "
            "--grace-hours sets it"
        )


@maintenance_app.command()
def repair(
    uri: str,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Make a damaged table writable again (a malformed pointer, unreadable newest versions).

    The newest readable version's files are committed as a new version; what the unreadable
    versions committed is lost. A table that is not damaged is left as it is.
    """
    table = open_table(uri, storage_option)
    damage = table.damage
    if damage is None:
        doc: dict[str, Any] = {"version": table.version, "repaired": False}
        emit(as_json, f"{table.uri} is not damaged (version {table.version}); nothing to repair", doc)
        return
    version = table.repair(commit_id=commit_id)
    doc = {"version": version, "repaired": True, "damage": damage, "summary": table.manifest.commit.summary}
    emit(as_json, f"repaired {table.uri}: version {version} ({dumps(doc['summary'])})", doc)
