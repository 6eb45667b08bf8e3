"""The erasure workflow's steps (statemachines/erasure.asl.json, run by lambdas/erasure.py) over
the library: what a request names, checked and previewed; every table's candidate files kept
in one plan; a table's receipt; the purge of what the splices replaced; and the verification
that no copy of an erased row is left."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import castable
from castable.maintenance.erase import (
    PlannedFile,
    check_erasable,
    noncurrent_copies,
    purge_objects,
    read_erasure_plan,
    splices_of,
    verify_erased,
    write_erasure_plan,
    write_erasure_receipt,
)
from castable.read.where import parse_predicate
from castable.store import store_from_uri
from castable.table import Table


def splice_prefix(commit_id: str) -> str:
    """What the commit ids of the splices of erasure ``commit_id`` start with."""
    return f"{commit_id}/splice/"


@dataclass(frozen=True)
class Target:
    """One table an erasure request erases from: its URI, the table, the predicate."""

    uri: str
    table: Table
    predicate: str


def targets(
    table: str | None = None,
    predicate: str | None = None,
    database: str | None = None,
    tables: Mapping[str, str] | None = None,
) -> list[Target]:
    """What a request names: one table and its predicate, or a database's tables (read at one
    version) and a predicate each. A table that does not exist raises TableNotFoundError."""
    if table is not None and predicate is not None:
        return [Target(table, castable.open_table(table), predicate)]
    if database is None or tables is None:
        raise castable.InvalidInputError("give either table and predicate, or database and tables")
    snapshot = castable.open_database(database).snapshot()
    return [Target(f"{database}/{name}", snapshot.table(name), p) for name, p in tables.items()]


def validate(request: Sequence[Target]) -> int:
    """How many tables ``request`` erases from, once each predicate parses against its table's
    schema and no bucket keeps versions under Object Lock; a castable error naming the problem
    otherwise."""
    for target in request:
        parse_predicate(target.predicate, target.table.schema)
        check_erasable(target.table.store)
    return len(request)


def preview(request: Sequence[Target], commit_id: str) -> dict[str, Any]:
    """What ``request`` would erase, table by table (the rows its predicate matches now, the
    data files a splice would rewrite); nothing is written."""
    tables = []
    for target in request:
        scan = target.table.scan(filter=target.predicate)
        tables.append({"table": target.uri, "rows": scan.count(), "files": len(scan.files())})
    return {
        "dry_run": True,
        "commit_id": commit_id,
        "tables": tables,
        "rows": sum(t["rows"] for t in tables),
        "files": sum(t["files"] for t in tables),
    }


def common_root(uris: Sequence[str]) -> str:
    """The deepest folder that holds every table of ``uris``."""
    root = uris[0]
    while not all(f"{uri}/".startswith(f"{root}/") for uri in uris):
        root = root.rsplit("/", 1)[0]
    return root


def plan(items: Sequence[tuple[str, str]], commit_id: str) -> tuple[str, str, int]:
    """Keep the data files of every table of ``items`` (URI, predicate) that may hold matching
    rows in one plan object under the tables' common root; return the root, the plan's key
    under it and how many files it names."""
    files = []
    for uri, predicate in items:
        table = castable.open_table(uri)
        where = parse_predicate(predicate, table.schema)
        files += [PlannedFile(uri, predicate, f.path, f.added_version) for f in table.scan(filter=where).files()]
    root = common_root([uri for uri, _ in items])
    return root, write_erasure_plan(store_from_uri(root), commit_id, files), len(files)


def keep_receipt(table: str, commit_id: str, receipt: Mapping[str, Any]) -> str:
    """Keep ``receipt`` under the table at ``table`` and return its URI."""
    return f"{table.rstrip('/')}/{write_erasure_receipt(store_from_uri(table), commit_id, dict(receipt))}"


def purge(uri: str, predicate: str, commit_id: str, plan_uri: str, version: int) -> dict[str, Any]:
    """Expire the versions of the table at ``uri`` that still reference the replaced files and
    delete those objects (every version of them): its files in the plan at ``plan_uri`` and
    every file a splice of ``commit_id`` replaced, so a re-run of an erasure that stopped after
    its splices finishes it. Counts the files spliced and the rows erased from its history."""
    table = castable.open_table(uri)
    where = parse_predicate(predicate, table.schema)
    splices = splices_of(table.store, splice_prefix(commit_id))
    folder, _, name = plan_uri.rpartition("/")
    planned = {f.file: f.added_version for f in read_erasure_plan(store_from_uri(folder), name) if f.table == uri}
    report = purge_objects(table.store, splices.old | planned, max(version, table.refresh().version), where)
    if table.settings.publish_iceberg:  # the purge deleted the published metadata Glue names
        from castable.iceberg import publish_after_purge

        publish_after_purge(table.refresh())
    return {**report.summary(), "files_spliced": splices.files, "rows_erased": splices.rows_erased}


def verify(uri: str, predicate: str) -> dict[str, Any]:
    """Whether any file of any retained version of the table at ``uri`` still holds a matching
    row, and the noncurrent copies left under it."""
    table = castable.open_table(uri)
    remaining = verify_erased(table.store, parse_predicate(predicate, table.schema), table.schema)
    noncurrent = noncurrent_copies(table.store)
    return {
        "verified": not remaining and not noncurrent,
        "remaining_matches": remaining,
        "noncurrent_copies": noncurrent,
    }
