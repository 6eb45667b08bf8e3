"""Erasure Lambda: the planning, purge and verification steps of the erasure workflow.

- ``{"action": "validate", "input": <the workflow's input>}`` checks the request before anything
  runs: its commit id, the table or database and its tables, each predicate against its schema,
  and that the bucket has no Object Lock (which would keep the erased rows' versions);
- ``{"action": "preview", "input": <the workflow's input with "dry_run": true>}`` reports what
  the request would erase, writing nothing: per table, the rows its predicate matches now and
  the data files a splice would rewrite;
- ``{"action": "plan", "commit_id", "items": [{"table", "predicate"}, ...]}`` keeps the data
  files of every table that may hold matching rows in one plan object, under the tables'
  common root, and returns where it is and how many files it names: the Distributed Map over
  ``splice`` reads it item by item, so no state carries the list (Step Functions' 256 KB);
- ``{"action": "purge", "table", "predicate", "plan_uri", "version", "commit_id"}`` expires the
  versions that still reference the replaced files and deletes those objects (every version of
  them): the table's planned files and every file a splice of this ``commit_id`` replaced, so a
  re-run of an erasure that stopped after its splices finishes it; it counts the files spliced
  and the rows erased from the table's history;
- ``{"action": "verify", "table", "predicate"}`` checks every file of every retained version
  for a physically present matching row, and lists noncurrent copies left under the table.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictBool, model_validator

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
from lambdas.runtime import (
    ERASURE_COMMIT_ID_LIMIT,
    TableUri,
    lambda_handler,
    logger,
    open_table,
    plan_location,
    splice_prefix,
    tracer,
)


class Request(BaseModel):
    """What the erasure workflow is started with: one table and a predicate, or a database and a
    predicate per table, and the request's commit id."""

    model_config = ConfigDict(extra="forbid")
    commit_id: str = Field(min_length=1, max_length=ERASURE_COMMIT_ID_LIMIT)
    table: TableUri | None = None
    predicate: str | None = Field(default=None, min_length=1)
    database: TableUri | None = None
    tables: dict[str, Annotated[str, Field(min_length=1)]] | None = Field(default=None, min_length=1)
    dry_run: StrictBool = False
    """Report what would be erased (``preview``) instead of erasing it. Strictly a JSON boolean:
    the workflow's choice compares it as one, so a ``"yes"`` pydantic would read as true would
    send the request to the erasure itself."""

    @model_validator(mode="after")
    def _one_target(self) -> Request:
        if (self.table is None) == (self.database is None):
            raise ValueError("give either table and predicate, or database and tables")
        if (self.table is None) != (self.predicate is None) or (self.database is None) != (self.tables is None):
            raise ValueError("a table needs a predicate, a database its tables' predicates")
        return self


class Validate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["validate"]
    input: Request


class Preview(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["preview"]
    input: Request


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    table: TableUri
    predicate: str = Field(min_length=1)


class _Target(_Step):
    model_config = ConfigDict(extra="ignore")


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["plan"]
    commit_id: str = Field(min_length=1, max_length=ERASURE_COMMIT_ID_LIMIT)
    items: list[_Target] = Field(min_length=1)
    """The tables erased from and their predicates (the tombstone step's items)."""


class Purge(_Step):
    action: Literal["purge"]
    plan_uri: str = Field(pattern=r"^s3://[^/]+/.+")
    """Where Plan kept the plan."""
    version: int = Field(ge=0)
    commit_id: str = Field(min_length=1, max_length=ERASURE_COMMIT_ID_LIMIT)
    """The request's: files its earlier runs' splices replaced are purged too."""


class Verify(_Step):
    action: Literal["verify"]


class Receipt(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["receipt"]
    table: TableUri
    commit_id: str = Field(min_length=1, max_length=ERASURE_COMMIT_ID_LIMIT)
    receipt: dict[str, Any]
    """What the workflow's TableReceipt state built: kept under the table (predicate hashed)."""


class ErasureEvent(
    RootModel[Annotated[Validate | Preview | Plan | Purge | Verify | Receipt, Field(discriminator="action")]]
):
    pass


@lambda_handler(ErasureEvent)
@tracer.capture_method
def handler(event: ErasureEvent) -> dict[str, Any]:
    step = event.root
    if isinstance(step, Validate):
        return {"valid": True, "tables": _validate(step.input)}
    if isinstance(step, Preview):
        return _preview(step.input)
    if isinstance(step, Plan):
        return _plan(step)
    if isinstance(step, Receipt):
        key = write_erasure_receipt(store_from_uri(step.table), step.commit_id, step.receipt)
        return {**step.receipt, "receipt": f"{step.table.rstrip('/')}/{key}"}
    table = open_table(step.table)
    predicate = parse_predicate(step.predicate, table.schema)
    logger.append_keys(action=step.action)
    if isinstance(step, Purge):
        splices = splices_of(table.store, splice_prefix(step.commit_id))
        folder, _, name = step.plan_uri.rpartition("/")
        planned = {
            f.file: f.added_version for f in read_erasure_plan(store_from_uri(folder), name) if f.table == step.table
        }
        report = purge_objects(
            table.store, splices.old | planned, max(step.version, table.refresh().version), predicate
        )
        if table.settings.publish_iceberg:  # the purge deleted the published metadata Glue names
            from castable.iceberg import publish_after_purge

            publish_after_purge(table.refresh())
        return {**report.summary(), "files_spliced": splices.files, "rows_erased": splices.rows_erased}
    remaining = verify_erased(table.store, predicate)
    noncurrent = noncurrent_copies(table.store)
    return {
        "verified": not remaining and not noncurrent,
        "remaining_matches": remaining,
        "noncurrent_copies": noncurrent,
    }


def _plan(step: Plan) -> dict[str, Any]:
    """Plan every table's files into one object under the tables' common root."""
    files = []
    for item in step.items:
        table = open_table(item.table)
        predicate = parse_predicate(item.predicate, table.schema)
        files += [
            PlannedFile(item.table, item.predicate, f.path, f.added_version)
            for f in table.scan(filter=predicate).files()
        ]
    root = step.items[0].table
    while not all(f"{item.table}/".startswith(f"{root}/") for item in step.items):
        root = root.rsplit("/", 1)[0]
    key = write_erasure_plan(store_from_uri(root), step.commit_id, files)
    return {"files": len(files), **plan_location(root, key)}


def _preview(request: Request) -> dict[str, Any]:
    """What ``request`` would erase, table by table; nothing is written."""
    if request.table is not None and request.predicate is not None:
        targets = [(request.table, open_table(request.table), request.predicate)]
    else:
        assert request.database is not None and request.tables is not None
        snapshot = castable.open_database(request.database).snapshot()
        targets = [(f"{request.database}/{n}", snapshot.table(n), p) for n, p in request.tables.items()]
    tables = []
    for uri, table, predicate in targets:
        scan = table.scan(filter=predicate)
        tables.append({"table": uri, "rows": scan.count(), "files": len(scan.files())})
    return {
        "dry_run": True,
        "commit_id": request.commit_id,
        "tables": tables,
        "rows": sum(t["rows"] for t in tables),
        "files": sum(t["files"] for t in tables),
    }


def _validate(request: Request) -> int:
    """How many tables ``request`` erases from, once each exists and each predicate parses
    against its table's schema; a castable error naming the problem otherwise."""
    if request.table is not None and request.predicate is not None:
        table = open_table(request.table)
        parse_predicate(request.predicate, table.schema)
        check_erasable(table.store)
        return 1
    assert request.database is not None and request.tables is not None
    snapshot = castable.open_database(request.database).snapshot()
    for name, predicate in request.tables.items():
        parse_predicate(predicate, snapshot.table(name).schema)  # TableNotFoundError for a name it lacks
        check_erasable(snapshot.table(name).store)
    return len(request.tables)
