"""Tombstone Lambda: soft-delete the rows matching a SQL predicate (rows invisible at once).

Event: ``{"table": "s3://bucket/prefix", "predicate": "user_id = 42", "commit_id": "..."}``, or,
for the tables of a database in one transaction (the rows vanish from every table at once),
``{"database": "s3://bucket/prefix", "tables": {"orders": "user_id = 42", ...}, "commit_id": "..."}``.
The answer lists each table with its predicate and version (``items``), for the erasure
workflow's Map over tables.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field, RootModel

import castable
from lambdas.runtime import TableUri, lambda_handler, logger, metrics, open_table, tracer

Predicate = Annotated[str, Field(min_length=1, max_length=100_000)]
CommitId = Annotated[str | None, Field(default=None, min_length=1, max_length=256)]


class TableTombstone(BaseModel):
    model_config = ConfigDict(extra="forbid")

    table: TableUri
    predicate: Predicate
    commit_id: CommitId = None


class DatabaseTombstone(BaseModel):
    model_config = ConfigDict(extra="forbid")

    database: TableUri
    tables: dict[str, Predicate] = Field(min_length=1)
    commit_id: CommitId = None


class TombstoneEvent(RootModel[TableTombstone | DatabaseTombstone]):
    pass


@lambda_handler(TombstoneEvent)
@tracer.capture_method
def handler(event: TombstoneEvent) -> dict[str, Any]:
    request = event.root
    metrics.add_metric(name="Deletes", unit=MetricUnit.Count, value=1)
    if isinstance(request, DatabaseTombstone):
        return _database(request)
    table = open_table(request.table)
    result = table.delete(request.predicate, commit_id=request.commit_id)
    version = result.version
    summary = table.manifest_at(version).commit.summary if result.committed else {}
    logger.info("deleted", extra={"version": version, "summary": summary})
    items = [{"table": request.table, "predicate": request.predicate, "version": version}]
    return {
        "table": request.table,
        "version": version,
        "committed": result.committed,
        "summary": summary,
        "items": items,
    }


def _database(request: DatabaseTombstone) -> dict[str, Any]:
    """One transaction deleting from every table; nothing is committed if no row matches."""
    db = castable.open_database(request.database)
    tx = db.transaction(commit_id=request.commit_id).begin()
    for name, predicate in request.tables.items():
        tx.table(name).delete(predicate)
    committed = bool(tx.tables_written)
    if committed:
        tx.commit()
    else:
        tx.abort()
    versions = db.snapshot().tables
    items = [
        {"table": f"{request.database.rstrip('/')}/{name}", "predicate": predicate, "version": versions[name]}
        for name, predicate in request.tables.items()
    ]
    logger.info("deleted", extra={"version": db.version, "tables": tx.tables_written})
    return {"database": request.database, "version": db.version, "committed": committed, "items": items}
